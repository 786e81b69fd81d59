/* The edge cache in the data path: the glue between the server (worker
 * rings, connections, responses) and cache/ (tiers, fills, origin client).
 *
 *   cache_glue.c     start-up and teardown: the process-wide RAM and SSD
 *                    tiers (shared by every worker generation), resolved
 *                    origins per generation, per-worker objects, PURGE
 *   respond_cache.c  answering from RAM and SSD: the body sources
 *   cache_fill.c     misses: fills and their waiters
 *   origin_io.c      origin fetches, SSD writes and unlinks on the ring
 *   control/metrics_cache.c renders their counters (hlsedge_cache_* in
 *                    /metrics, "cache" in /stats) from the workers' stats
 *
 * Without origin.urls none of this exists (no cache worker hooks) and the
 * server behaves exactly as a file server. */
#ifndef HE_CACHE_GLUE_H
#define HE_CACHE_GLUE_H

#include "cache/cache.h"
#include "server/base/alog_ring.h"
#include "server/handler/handler.h"

/* One worker generation's view: its configuration snapshot (cache keys
 * cannot change without a new generation, so the snapshot is exact and
 * outlives live reloads that free the original), resolved origins, and
 * the shared tiers. */
typedef struct he_scache {
    he_conf_t conf;
    he_cache_health_t *health; /* the origins' health, shared by the generation's workers */
    char via[112];             /* "1.1 hlsedge-<hostname>" */
    he_cache_origin_t origins[HE_CONF_MAX_ORIGINS];
    unsigned norigins;
    he_cache_ram_t *ram;
    he_cache_store_t *store;
} he_scache_t;

/* The cache's side of a response (respond_cache.c), per request: the fill
 * it joined and the object or SSD file its body comes from. An HTTP/1.x
 * request's is its connection slot's (he_wcache_t.cc); an HTTP/2 stream's
 * is its own, allocated when the cache first answers it and freed with the
 * stream, since one connection has many requests under way and a fill's
 * waiters may be streams of many connections (he__rc_attach). */
typedef struct he_cconn {
    he_cache_waiter_t waiter; /* joined fill, while waiting or streaming; ctx: req */
    he_cache_obj_t *obj;      /* what the body comes from (ref held) */
    he_req_t *req;            /* the request answered */
    int ssd_fd;     /* an SSD hit: the file, its mapping (userspace TLS) */
    char *ssd_path; /* non-NULL while ssd_fd is open */
    char *ssd_map;
    uint64_t ssd_size;
    bool active;     /* this connection's response is the cache's */
    bool waiting;    /* joined a fill, no head yet */
    bool await_done; /* no Content-Length from the origin: head at DONE */
    bool failed;     /* the fill failed after the head: close when caught up */
    bool fixed_buf;  /* the object's chunks are in registered buffer 0 */
    bool sendfile;   /* the body leaves as ranges of the arena's memfd */
    bool splice;     /* ... described as its mapping too (cache.ram_splice) */
    char ttl[48];    /* an LL-HLS Cache-Control line the head points to */
} he_cconn_t;

/* A ring job that is not a connection (origin_io.c). */
enum { HE_OJOB_FREE = 0, HE_OJOB_FETCH, HE_OJOB_SWRITE, HE_OJOB_UNLINK, HE_OJOB_PROMOTE };

typedef struct he_ojob {
    uint32_t gen;
    uint8_t type;
    bool inflight;
    bool cancel_sent;
    bool parked; /* an SSD write that found the SQ full: driven again at the tick */
    he_cache_fetch_t *fetch;
    he_cache_fill_t *fill;
    he_cache_swrite_t *sw;
    /* a promotion: an SSD object read into a RAM object */
    he_cache_obj_t *obj;
    int fd;
    uint64_t off, left; /* file offset of the next read, bytes still to read */
    uint64_t epoch;     /* RAM epoch before the SSD lookup: a purge since drops it */
    struct iovec *iov;
} he_ojob_t;

typedef struct he_wcache {
    he_scache_t *sc;
    const he_conf_t *conf; /* &sc->conf */
    he_cache_origins_t *origins;
    he_cache_fills_t *fills;
    he_cache_prefetch_t *pf;
    he_cache_ram_t *ram;
    he_cache_store_t *store;
    he_cache_stats_t *st; /* &w->stats.cache */
    int node;             /* RAM tier partition of this worker */
    bool fixed_buf;       /* the node arena is registered as fixed buffer 0 */
    bool arena_sendfile;  /* the node arena is a memfd: hits by sendfile */
    bool arena_huge;      /* the node arena is anonymous huge pages: hits by vmsplice */
    int64_t wall_off_ms;  /* wall clock - monotonic clock, refreshed per tick */
    he_cconn_t *cc;       /* per connection slot: HTTP/1.x requests' */
    size_t cc_bytes;
    he_ojob_t *jobs;
    uint32_t *free_jobs;
    uint32_t njobs, nfree_jobs;
    bool unlink_busy;
    struct he_llups *llups; /* LL-HLS playlists kept current upstream (llhls_origin.c) */
    bool writes_left;     /* SSD writes still queued after a pull */
    uint64_t writes_mark; /* store purges before the queued objects were published */
} he_wcache_t;

/* The worker running on this thread (fill callbacks carry no worker). */
extern __thread he_worker_t *he__cache_w;

static inline he_wcache_t *he__wcache(const he_worker_t *w)
{
    return w->hook_data[HE_HOOK_CACHE];
}

/* r's cache state (he__rc_attach made it). */
static inline he_cconn_t *he__rc_cc(he_worker_t *w, he_req_t *r)
{
    (void)w;
    return r->hctx;
}
/* Gives r its cache state if it has none; false when out of memory. */
bool he__rc_attach(he_worker_t *w, he_req_t *r);

static inline int64_t he__cache_wall_ms(const he_worker_t *w)
{
    return (int64_t)(he__batch_ns / 1000000) + he__wcache(w)->wall_off_ms;
}

/* cache_glue.c: the worker hooks' entries */
int he__cache_worker_setup(he_worker_t *w);
void he__cache_worker_cleanup(he_worker_t *w); /* after the ring is gone */
void he__cache_tick(he_worker_t *w);

/* respond_cache.c */
void he__rc_release_cc(he_cconn_t *cc);
void he__rc_head(he_worker_t *w, he_req_t *r, const he_cache_key_t *key, he_http_head_t *h,
                 int status, const he_cache_meta_t *m, he_seg_type_t type, uint64_t clen);
void he__rc_send_obj(he_worker_t *w, he_req_t *r, const he_http_head_t *h, uint64_t off,
                     uint64_t end);
void he__rc_serve_obj(he_worker_t *w, he_req_t *r, he_cache_obj_t *o, uint8_t cst);
bool he__rc_serve_ssd(he_worker_t *w, he_req_t *r, const he_cache_key_t *key,
                      const he_cache_store_hit_t *hit, uint8_t cst, bool promote, uint64_t epoch);

/* cache_fill.c */
void he__rc_join(he_worker_t *w, he_req_t *r, const he_cache_key_t *key, he_cache_obj_t *stale);
/* Age from when the response was generated (RFC 9111 4.2.3), wall ms. */
void he__rc_age(he_http_head_t *h, int64_t stored_ms, int64_t wall_ms);
void he__rc_refresh(he_worker_t *w, he_req_t *r, const he_cache_key_t *key, he_cache_obj_t *stale);

/* llhls_origin.c: LL-HLS blocking reloads in front of an origin. True
 * when r (a playlist request with _HLS_msn or _HLS_part) was answered or
 * is held; false for the cache path. */
bool he__llup_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len);
/* A playlist request without directives (key: its cache key) for a
 * playlist whose copy is current (a blocking reload in flight, or less
 * than TD/2 old): answered from the copy, which is newer than any stored
 * answer, so viewers that join do not go to the origin (true). */
bool he__llup_plain(he_worker_t *w, he_req_t *r, const he_cache_key_t *key);
void he__llup_tick(he_worker_t *w);
/* Appendix B.1's Cache-Control for a cache answer beside an LL playlist
 * that came from the origin (in its target durations: playlists TD/2,
 * parts and segments 6 TD, errors 1 TD), seconds; 0 for others. */
unsigned he__llup_ttl(he_worker_t *w, const he_cache_key_t *key, int status, he_seg_type_t type);
void he__llup_cleanup(he_worker_t *w); /* after he__oio_cleanup */

/* origin_io.c */
/* via_in: the Via of the request the fill is for, forwarded (NULL: none) */
int he__oio_fetch_start(he_worker_t *w, he_cache_fill_t *f, const char *target,
                        he_cache_obj_t *stale, const char *via_in);
void he__oio_on_cqe(he_worker_t *w, struct io_uring_cqe *cqe);
void he__oio_tick(he_worker_t *w);
void he__oio_pull_writes(he_worker_t *w);
void he__oio_cleanup(he_worker_t *w);
/* The worker is about to stop: cancels each promotion's read (once) and
 * returns how many are still in flight; stop when 0 (see worker.c). */
unsigned he__oio_quiesce(he_worker_t *w);
/* A segment was served from the cache: fill the next ones. */
void he__oio_prefetch(he_worker_t *w, const he_cache_key_t *key);
/* An SSD hit worth keeping in RAM: reads the file's body (fd is dup'ed)
 * into a RAM object on the ring and publishes it unless a copy is in RAM
 * by then or a purge began after epoch (he_cache_ram_epoch, read before
 * the SSD lookup). */
void he__oio_promote(he_worker_t *w, const he_cache_key_t *key, const he_cache_store_hit_t *hit,
                     int fd, uint64_t epoch);

#endif
