/* cache: parent selection (select.c): the order in which a fetch tries
 * the origins, and each origin's health, shared by every worker.
 *
 * Health is one process-wide table per worker generation, written only
 * when an origin fails (a compare-exchange on its "down until" time) and
 * read with relaxed atomic loads when a fetch starts: no lock, and no
 * shared write on the hot path while the origins answer. */
#ifndef HE_CACHE_SELECT_H
#define HE_CACHE_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "conf/conf.h"

typedef struct he_cache_health he_cache_health_t;

/* n origins, each skipped for down_ms after a failure (0: never). NULL on
 * -ENOMEM. */
he_cache_health_t *he_cache_health_new(unsigned n, unsigned down_ms);
void he_cache_health_free(he_cache_health_t *h);
/* Not marked down at now_ms (monotonic ms, the workers' clock). */
bool he_cache_health_up(const he_cache_health_t *h, unsigned i, uint64_t now_ms);
/* Origin i failed (connect error, timeout, 5xx): down until now + down_ms,
 * unless it already is. True if this call marked it down. */
bool he_cache_health_fail(he_cache_health_t *h, unsigned i, uint64_t now_ms);
/* Origin i answered: up again at once if it was down (one load when it
 * was not). */
void he_cache_health_ok(he_cache_health_t *h, unsigned i);

/* One origin's state, for /metrics and /stats. */
typedef struct he_cache_health_view {
    bool up;
    uint64_t down_left_ms; /* 0 when up */
    uint64_t marked_down;  /* times it went down */
} he_cache_health_view_t;
void he_cache_health_get(const he_cache_health_t *h, unsigned i, uint64_t now_ms,
                         he_cache_health_view_t *out);
unsigned he_cache_health_count(const he_cache_health_t *h);

/* What the selection needs to know of an origin. */
typedef struct he_cache_parent {
    uint64_t id;     /* he_cache_select_id of its URL: the same on every box */
    unsigned weight; /* 1.. */
} he_cache_parent_t;

/* The hash of an origin's URL as configured (without its weight). */
uint64_t he_cache_select_id(const char *url, size_t len);
/* The hash of a key's path (he_cache_key_t.s[0..path_len)): no query, so
 * every variant of one object (tokens, _HLS_ parameters) goes to one
 * parent. */
uint64_t he_cache_select_key(const char *path, size_t len);

/* Fills order[0..n) with every origin index, best first: for
 * HE_CONF_SELECT_HASH by weighted rendezvous score of (key, parent), for
 * ORDERED by index; origins that are up come before those that are down,
 * each group keeping that order (so a down parent's keys go to the next
 * parent in hash order and nobody else's move). h may be NULL (all up). */
void he_cache_select_order(const he_cache_parent_t *p, unsigned n, unsigned mode, uint64_t key_hash,
                           const he_cache_health_t *h, uint64_t now_ms, uint8_t *order);

#endif
