/* cache: freshness of stored responses (fresh.c). */
#ifndef HE_CACHE_FRESH_H
#define HE_CACHE_FRESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"
#include "segment/segment.h"

typedef struct he_cache_fresh {
    int64_t stored_ms;  /* wall clock when the response arrived */
    int64_t expires_ms; /* fresh strictly before this */
    uint32_t swr_ms;    /* stale-while-revalidate window after expires_ms */
    uint32_t sie_ms;    /* stale-if-error window after expires_ms */
} he_cache_fresh_t;

typedef enum he_cache_freshness {
    HE_CACHE_FRESH = 0,
    HE_CACHE_STALE_REVALIDATE, /* serve it, refresh in the background */
    HE_CACHE_STALE_IF_ERROR,   /* serve it only if the origin fails */
    HE_CACHE_EXPIRED           /* do not serve without revalidating */
} he_cache_freshness_t;

/* The Cache-Control directives the cache acts on, merged over every
 * Cache-Control field line of a response. All zero: none given. */
typedef struct he_cache_cc {
    bool no_store, no_cache, private_, must_revalidate; /* or proxy-revalidate */
    bool max_age_set, s_maxage_set, swr_set, sie_set;
    int64_t max_age, s_maxage, swr, sie; /* seconds, when _set */
} he_cache_cc_t;

/* Adds the directives of one Cache-Control field value (n bytes). A
 * directive given more than once keeps its smallest value; a malformed
 * max-age or s-maxage counts as 0 (stale, RFC 9111 4.2.1). */
void he_cache_cc_parse(he_cache_cc_t *cc, const char *v, size_t n);

/* The response head a decision is made on (cache/origin.h). */
typedef struct he_cache_http_resp he_cache_http_resp_t;

/* Decides whether a response may be stored and for how long. kind is the
 * response's kind (he_seg_kind_of with the body head for m3u8); for media
 * playlists the body is parsed (he_seg_playlist_parse) to bound a live
 * playlist's lifetime by cache_live_fraction_pct of its target duration.
 * Returns true (storable, *out filled) or false (no-store, private,
 * Set-Cookie, Vary: *, an uncacheable status,
 * a 404 without negative caching or that the origin gives no lifetime). */
bool he_cache_fresh_compute(const he_conf_t *conf, he_seg_kind_t kind,
                            const he_cache_http_resp_t *r, const char *body, size_t body_len,
                            int64_t wall_ms, he_cache_fresh_t *out);
he_cache_freshness_t he_cache_fresh_state(const he_cache_fresh_t *f, int64_t wall_ms);
const char *he_cache_freshness_name(he_cache_freshness_t s);
/* IMF-fixdate, RFC 850 and asctime dates -> Unix ms. 0 or -EINVAL. */
int he_cache_http_date_parse(const char *s, size_t n, int64_t *ms);

#endif
