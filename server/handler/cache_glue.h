/* The edge cache in the data path: the glue between the server (worker
 * rings, connections, responses) and cache/ (tiers, fills, origin client).
 *
 *   cache_glue.c     start-up and teardown: the process-wide RAM and SSD
 *                    tiers (shared by every worker generation), resolved
 *                    origins per generation, per-worker objects, PURGE
 *   respond_cache.c  answering from RAM, SSD and fills (waiters)
 *   origin_io.c      origin fetches, SSD writes and unlinks on the ring
 *   metrics_cache.c  hlsedge_cache_* in /metrics, "cache" in /stats
 *
 * Without origin.urls none of this exists (w->cache == NULL) and the server
 * behaves exactly as a file server. */
#ifndef HE_CACHE_GLUE_H
#define HE_CACHE_GLUE_H

#include "cache/cache.h"
#include "server/base/alog_ring.h"
#include "server/server.h"

/* One worker generation's view: its configuration snapshot (cache keys
 * cannot change without a new generation, so the snapshot is exact and
 * outlives live reloads that free the original), resolved origins, and
 * the shared tiers. */
typedef struct he_scache {
    he_conf_t conf;
    he_cache_origin_t origins[HE_CONF_MAX_ORIGINS];
    unsigned norigins;
    he_cache_ram_t *ram;
    he_cache_store_t *store;
} he_scache_t;

/* One body being sent from a RAM object (respond_cache.c), per slot. */
#define HE_CC_IOV 16

typedef struct he_cconn {
    he_cache_waiter_t waiter; /* joined fill, while waiting or streaming */
    he_cache_obj_t *obj;      /* what the body comes from (ref held) */
    uint64_t off, end;        /* object bytes [off, end) still to send */
    uint32_t zc_pending;      /* send_zc notifications not yet reaped */
    uint32_t zc_nosend;       /* of those, sends that sent nothing (res <= 0) */
    uint8_t op;               /* the op in flight on the ring (one at a time) */
    bool active;              /* this connection's response is the cache's */
    bool waiting;             /* joined a fill, no head yet */
    bool await_done;          /* no Content-Length from the origin: head at DONE */
    bool head_only;           /* HEAD or 304: no body */
    bool failed;              /* the fill failed after the head: close when caught up */
    bool finish_wait;         /* everything sent; waiting for notifications */
    bool copy_mode;           /* userspace TLS: send a copy once complete */
    bool prefetch_after;      /* a segment: prefetch the next ones when served */
    bool zc_copies;           /* the kernel copied a zero-copy send on this
                               * connection: plain sends until it closes */
    struct iovec iov[HE_CC_IOV];
    struct msghdr msg;
} he_cconn_t;

/* A ring job that is not a connection (origin_io.c). */
enum { HE_OJOB_FREE = 0, HE_OJOB_FETCH, HE_OJOB_SWRITE, HE_OJOB_UNLINK, HE_OJOB_PROMOTE };

typedef struct he_ojob {
    uint32_t gen;
    uint8_t type;
    bool inflight;
    bool cancel_sent;
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
    bool zc;              /* send_zc available */
    bool zc_usage;        /* notifications report whether the kernel copied */
    bool exiting;         /* cleanup: notifications change nothing */
    int64_t wall_off_ms;  /* wall clock - monotonic clock, refreshed per tick */
    he_cconn_t *cc;       /* per connection slot */
    size_t cc_bytes;
    he_ojob_t *jobs;
    uint32_t *free_jobs;
    uint32_t njobs, nfree_jobs;
    bool unlink_busy;
    bool writes_left;     /* SSD writes still queued after a pull */
    uint64_t writes_mark; /* store purges before the queued objects were published */
} he_wcache_t;

/* The worker running on this thread (fill callbacks carry no worker). */
extern __thread he_worker_t *he__cache_w;

static inline int64_t he__cache_wall_ms(const he_worker_t *w)
{
    return (int64_t)(he__batch_ns / 1000000) + w->cache->wall_off_ms;
}

/* cache_glue.c */
int he__cache_server_init(he_server_t *s, char *err, size_t errlen);
void he__cache_server_free(he_server_t *s);
int he__cache_worker_setup(he_worker_t *w);
void he__cache_worker_cleanup(he_worker_t *w); /* after the ring is gone */
void he__cache_tick(he_worker_t *w);
bool he__cache_enabled(void);
/* Removes target's key from both tiers; how many entries went. */
int he__cache_purge(const he_conf_t *conf, const char *target, size_t len);

/* respond_cache.c */
/* Answers c's request from the cache or the origin. false: not the
 * cache's (no key): the caller answers as it would without a cache. */
bool he__rcache_respond(he_worker_t *w, he_conn_t *c);
void he__rcache_on_cqe(he_worker_t *w, he_conn_t *c, struct io_uring_cqe *cqe);
void he__rcache_conn_free(he_worker_t *w, he_conn_t *c);
void he__rcache_purge(he_worker_t *w, he_conn_t *c);
/* Sending c's SSD-tier file failed on the file's side (a read error, or a
 * file that shrank: -EBADMSG): the store counts it, logs it once per cause
 * and drops the entry, so the next request refills from the origin. */
void he__rcache_file_error(he_worker_t *w, he_conn_t *c, int err);
/* True for an errno a read of the file can give (EIO, EBADMSG, ...). */
bool he__rcache_disk_errno(int err);
/* sendfile of fd at off failed with err: the error to report as the
 * file's, or 0 when it was the socket's. The errno alone cannot tell: a
 * kTLS socket that received a corrupt record fails the next send with
 * EBADMSG, which any client can cause. */
int he__rcache_sendfile_disk_error(int fd, uint64_t off, int err);

/* origin_io.c */
int he__oio_fetch_start(he_worker_t *w, he_cache_fill_t *f, const char *target,
                        he_cache_obj_t *stale);
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

/* respond.c */
void he__respond_finish(he_worker_t *w, he_conn_t *c);
void he__respond_send(he_worker_t *w, he_conn_t *c);

#endif
