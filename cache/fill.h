/* cache: coalesced fills and their waiters (fill.c). */
#ifndef HE_CACHE_FILL_H
#define HE_CACHE_FILL_H

#include <stdbool.h>
#include <stdint.h>

#include "cache/key.h"
#include "cache/obj.h"
#include "cache/origin.h"
#include "cache/stats.h"
#include "cache/store.h"
#include "conf/conf.h"

typedef struct he_cache_fills he_cache_fills_t;
typedef struct he_cache_fill he_cache_fill_t;
typedef struct he_cache_waiter he_cache_waiter_t;

typedef enum he_cache_fill_ev {
    HE_CACHE_FILL_EV_HEADERS = 1, /* he_cache_fill_status/obj are set */
    HE_CACHE_FILL_EV_DATA,        /* more bytes in the object */
    HE_CACHE_FILL_EV_DONE,        /* all bytes are there */
    HE_CACHE_FILL_EV_ERROR        /* failed: end the response (close if midway) */
} he_cache_fill_ev_t;

/* A client waiting on a fill; embedded in the connection. The callback
 * runs on the fill's worker; the waiter reads the fill's object from its
 * own offset up to he_cache_obj_len (read-while-fill). */
struct he_cache_waiter {
    he_cache_fill_t *fill;
    he_cache_waiter_t *prev, *next;
    void (*notify)(he_cache_waiter_t *w, he_cache_fill_ev_t ev);
    void *ctx;
};

typedef struct he_cache_fills_opts {
    const he_conf_t *conf;
    he_cache_ram_t *ram; /* may be NULL */
    int node;
    he_cache_store_t *store; /* may be NULL */
    he_cache_stats_t *stats;
} he_cache_fills_opts_t;

/* One table per worker: each worker coalesces its own clients. */
he_cache_fills_t *he_cache_fills_new(const he_cache_fills_opts_t *o);
void he_cache_fills_free(he_cache_fills_t *fs); /* no fill may be active */
/* Joins the fill for key, or starts one (*created: the caller starts the
 * origin fetch with he_cache_fill_sink as its sink). w may be NULL (a
 * prefetch). stale, if not NULL, is an expired or stale object being
 * revalidated: a 304 refreshes and serves it, a failure inside its
 * stale-if-error window serves it too. Returns NULL on -ENOMEM. */
he_cache_fill_t *he_cache_fill_join(he_cache_fills_t *fs, const he_cache_key_t *key,
                                    he_cache_waiter_t *w, he_cache_obj_t *stale, bool prefetch,
                                    bool *created);
he_cache_fill_t *he_cache_fill_find(he_cache_fills_t *fs, const he_cache_key_t *key);
unsigned he_cache_fills_active(const he_cache_fills_t *fs);
/* A waiter leaves early (its client went away). */
void he_cache_fill_leave(he_cache_waiter_t *w);
/* The sink the origin fetch feeds. */
he_cache_sink_t he_cache_fill_sink(he_cache_fill_t *f);
/* The fetch ended: res 0 publishes (RAM if admitted and small enough, SSD
 * via he_cache_fills_next_write), res < 0 fails (waiters get ERROR, no
 * entry is left). Either way the fill leaves the table. */
void he_cache_fill_end(he_cache_fill_t *f, int res, he_cache_oerr_t cause, int64_t wall_ms);
/* After HEADERS: the status to answer and the object to stream from (the
 * waiter takes its own reference if it keeps it past the notification). */
int he_cache_fill_status(const he_cache_fill_t *f);
he_cache_obj_t *he_cache_fill_obj(const he_cache_fill_t *f);
const he_cache_key_t *he_cache_fill_key(const he_cache_fill_t *f); /* what it fills */
bool he_cache_fill_stale(const he_cache_fill_t *f); /* answering from a stale object */
/* Hit-for-miss. After HEADERS: whether waiter w may take this answer. The
 * request that started the fill may; others unless the response is one
 * viewer's (401, 403, 407, private, Set-Cookie; never stored): such an
 * answer is not meant for requests that differ in what the key leaves out
 * (a token). The first false takes the fill out of the table, so later
 * requests do not join. */
bool he_cache_fill_shared(he_cache_fill_t *f, const he_cache_waiter_t *w);
/* Moves w from its fill to a new fill of the same key that is w's alone
 * (no other request joins it; it publishes like any fill): start its
 * fetch as for a created one, with w's own target. NULL on -ENOMEM (w has
 * left its fill). A callback may call it for its own waiter. */
he_cache_fill_t *he_cache_fill_alone(he_cache_waiter_t *w);
/* The origin's response head (Content-Length, Content-Type, ETag ...),
 * valid from HEADERS on; for a stale answer use the object's meta. */
const he_cache_http_resp_t *he_cache_fill_resp(const he_cache_fill_t *f);
/* SSD writes queued by finished fills, for the ring to drive. */
he_cache_swrite_t *he_cache_fills_next_write(he_cache_fills_t *fs);
/* Objects queued for SSD writes that he_cache_fills_next_write has not
 * handed out yet. */
unsigned he_cache_fills_pending_writes(const he_cache_fills_t *fs);

#endif
