/* server: internal structures shared by the data-path files.
 *
 *   worker.c    owns the ring: setup, submit, reap, dispatch by user_data
 *   conn.c      connection lifecycle, timers, input buffering
 *   http1.c     llhttp glue -> he_req_t (protocol-neutral request)
 *   respond.c   routing, headers, body source (memory or file)
 *   fcache.c    per-worker cache of open files, stat results, small bodies
 *   listener.c  SO_REUSEPORT sockets and CPU steering
 *   probe.c     kernel feature probe
 *
 * The control thread (control*.c, admin.c, metrics.c, accesslog.c) talks to
 * workers only through the atomics marked below and the wake eventfd.
 */
#ifndef HE_SERVER_H
#define HE_SERVER_H

#include <liburing.h>
#include <llhttp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "conf/conf.h"
#include "segment/segment.h"
#include "server/base/alog_ring.h"
#include "server/base/features.h"
#include "server/base/stats.h"

/* ================================================================
 * public API for the control thread
 *
 * control/ knows a server (one generation of workers) only through the
 * declarations in this section and he_server_start, he_server_drain,
 * he_server_retire, he_server_publish_conf, he_server_exited,
 * he_server_wait and he_server_cpus_allowed (server.c, at the end). It
 * never reads the fields of he_server_t or he_worker_t: they are the data
 * path's and change with it. Implemented in server/server_view.c.
 * ================================================================ */

typedef struct he_server he_server_t;

/* Allocates a generation for conf and initialises it (he_server_init:
 * sockets bound, nothing running). 0, or -errno with err set and *out
 * NULL. */
int he_server_new(he_server_t **out, he_conf_t *conf, char *err, size_t errlen);
/* he_server_free and the memory: after he_server_wait (or a failed start
 * followed by drain and wait). NULL is ignored. */
void he_server_delete(he_server_t *s);
/* The configuration the generation was last given (start or publish). */
const he_conf_t *he_server_conf(const he_server_t *s);
unsigned he_server_nworkers(const he_server_t *s);

/* One worker, as read at the call (the atomics loaded once). */
typedef struct he_server_worker_view {
    unsigned id;
    int cpu;                 /* pinned to, -1 = not pinned */
    int tid;                 /* kernel thread id; 0 until the thread runs */
    bool running;            /* its thread was started and not yet joined */
    bool exited;             /* the thread left its loop and freed its ring */
    unsigned conf_ack;       /* configuration generation it serves */
    const he_stats_t *stats; /* its live counters: the worker keeps writing */
} he_server_worker_view_t;

/* k < he_server_nworkers(s). */
void he_server_worker_view(const he_server_t *s, unsigned k, he_server_worker_view_t *out);

/* Worker k's access log ring (the control thread is its consumer). */
he_alog_ring_t *he_server_alog_ring(const he_server_t *s, unsigned k);
/* The uv_async_t producers wake when a ring fills up; before start. */
void he_server_set_alog_notify(he_server_t *s, void *uv_async);
/* Whether workers record requests: a log is open. */
void he_server_set_alog_enabled(he_server_t *s, bool on);

/* Listen addresses: conf->listen, then conf->tls_listen. Each has one
 * SO_REUSEPORT socket per worker. */
unsigned he_server_nlisteners(const he_server_t *s);
const char *he_server_listener_text(const he_server_t *s, unsigned li);
int he_server_listener_fd(const he_server_t *s, unsigned li, unsigned k);
/* The control thread is about to shut the listeners (a reload's
 * hand-over): an accept that fails then is not re-armed. */
void he_server_set_retiring(he_server_t *s);

const he_features_t *he_server_features(const he_server_t *s);

/* The TLS configuration and counters as JSON ({"enabled":false} without
 * TLS), with totals (NULL: the generation's own). Its length, or
 * -ENOBUFS when cap was too small (buf then holds a cut string). */
int he_server_tls_describe(const he_server_t *s, const he_stats_t *totals, char *buf, size_t cap);
/* Certificates from conf for new handshakes; 0 without TLS, or -errno
 * with err set (the certificates in use stay). */
int he_server_tls_reload(he_server_t *s, const he_conf_t *conf, char *err, size_t errlen);

/* Whether the process has an edge cache (origin.urls). */
bool he_server_cache_enabled(void);
/* Removes target's entries from both cache tiers, its key made as s's
 * workers make it: how many went, -ENODEV when s has no cache, -EINVAL
 * for a target that makes no key, -ENOMEM. */
int he_server_purge(he_server_t *s, const char *target, size_t len);

/* The reason phrase the server answers status with. */
const char *he_server_http_reason(int status);

/* ================================================================
 * end of the public API; the data path's internals follow
 * ================================================================ */

/* ---------------------------------------------------------------- features */

/* Linux 6.2 uapi; liburing 2.3's copy of io_uring.h predates them */
#define HE_SEND_ZC_REPORT_USAGE (1U << 3)
#define HE_NOTIF_USAGE_ZC_COPIED (1U << 31)

/* Probes the kernel once at start-up. HE_DISABLE_FEATURES (comma list of
 * he_features_t's field names) forces fallbacks, so tests cover every path. */
void he_features_probe(he_features_t *f);

/* ---------------------------------------------------------------- file cache */

typedef struct he_file {
    struct he_file *hnext;         /* hash chain */
    struct he_file *lprev, *lnext; /* LRU */
    char *path;                    /* normalized, relative to root */
    uint32_t hash;
    uint32_t refs; /* responses using it; evicted entries close when 0 */
    bool cached;   /* still in the table */
    int fd;        /* -1 for a negative entry */
    int err;       /* negative errno for a negative entry (-ENOENT, ...) */
    uint64_t size;
    time_t mtime;
    long mtime_ns; /* rewrites in place within one second differ only here */
    ino_t ino;
    dev_t dev;
    uint64_t validated_ms; /* monotonic ms of the last stat */
    he_seg_type_t type;
    he_seg_kind_t kind;
    char etag[48]; /* nginx's "mtime-size", then "-nanoseconds" when nonzero */
    uint8_t etag_len;
    char last_modified[30]; /* IMF-fixdate of mtime, formatted once */
    char *body;             /* whole body in memory for small playlists/keys, or NULL */
    char *map;              /* whole file mapped read-only (userspace TLS sends from it), or NULL */
    bool ssd; /* an SSD-tier object (respond_cache.c): its disk errors go to the store */
} he_file_t;

typedef struct he_fcache he_fcache_t;

he_fcache_t *he_fcache_new(int root_fd, unsigned entries, unsigned valid_ms, bool beneath);
void he_fcache_free(he_fcache_t *fc);
/* Looks up (opening or revalidating as needed) a normalized path. Returns
 * an entry with a reference held, or NULL with *err set (-ENOENT, -EACCES,
 * -ELOOP for a symlink escaping root, -EISDIR, -ENOMEM). */
he_file_t *he_fcache_get(he_fcache_t *fc, const char *path, size_t len, uint64_t now_ms, int *err,
                         bool *hit);
void he_fcache_put(he_fcache_t *fc, he_file_t *f);
/* The file's bytes mapped read-only, mapped on first use and unmapped with
 * the entry; NULL for an empty file or when mmap fails (*err set). */
const char *he_fcache_map(he_fcache_t *fc, he_file_t *f, int *err);
/* Takes f out of the table (it is destroyed when its last user puts it):
 * for an entry whose file changed in a way revalidation cannot see yet. */
void he_fcache_invalidate(he_fcache_t *fc, he_file_t *f);

/* ---------------------------------------------------------------- requests */

#define HE_HDR_SMALL 128

typedef struct he_req {
    uint8_t method; /* llhttp_method_t */
    uint8_t http_major, http_minor;
    bool keepalive;
    bool has_body;
    uint32_t url_len;
    uint32_t header_bytes; /* request line + header bytes seen so far */
    uint8_t too_long;      /* 414 or 431 pending */
    int8_t cur_hdr;        /* which header the current value belongs to */
    char field[32];
    uint8_t field_len;
    uint8_t field_overflow;
    bool value_more;   /* the current header line's value already has bytes */
    uint8_t host_seen; /* Host lines, counted up to 2 */
    uint8_t hdr_cut;   /* 1 << HE_HDR_x: that value was cut to its buffer */
    /* interesting headers; a value cut to its buffer is dropped when the
     * headers are complete (a cut Range or If-Range drops the range), so
     * a cut can only turn a conditional or range request into a full 200 */
    char range[HE_HDR_SMALL];
    char inm[256];
    char ims[40];
    char im[256];
    char ius[40];
    char if_range[HE_HDR_SMALL];
    uint16_t range_len, inm_len, ims_len, im_len, ius_len, if_range_len;
    uint8_t has_origin;
    uint64_t t_start_ns; /* first byte of the request seen */
} he_req_t;

enum {
    HE_HDR_NONE = -1,
    HE_HDR_RANGE = 0,
    HE_HDR_INM,
    HE_HDR_IMS,
    HE_HDR_IM,
    HE_HDR_IUS,
    HE_HDR_IF_RANGE,
    HE_HDR_ORIGIN,
    HE_HDR_HOST,
    HE_HDR_COUNT
};

/* ---------------------------------------------------------------- connections */

enum he_timer_list {
    HE_TIMER_NONE = 0,
    HE_TIMER_HEADER,
    HE_TIMER_KEEPALIVE,
    HE_TIMER_SEND,
    HE_TIMER_TLS, /* accept -> TLS handshake done (conf tls_handshake_timeout_ms) */
    HE_TIMER_COUNT
};

enum he_body_kind { HE_BODY_NONE = 0, HE_BODY_MEM, HE_BODY_FILE };

#define HE_CONN_HDR_CAP 1536
#define HE_CONN_IN_MAX (64 * 1024)
#define HE_CONN_RBUF 4096

typedef struct he_conn {
    uint32_t gen;
    uint32_t slot;
    int fd;
    uint16_t inflight; /* ring operations that still reference this conn */
    bool in_use;
    bool recv_armed;
    bool busy;           /* a request is being answered */
    bool closing;        /* close requested; freed when inflight == 0 */
    bool close_after;    /* close once the current response is sent */
    bool fixed;          /* registered in the fixed file table at index slot */
    bool peer_eof;       /* no more requests: close once the buffered ones are answered */
    bool recv_multishot; /* the armed recv is multishot: pausing it takes a cancel */
    bool recv_cancel;    /* input is full and that cancel is on its way */
    uint8_t timer;       /* enum he_timer_list */
    struct he_conn *tprev, *tnext;
    uint64_t deadline_ms;

    llhttp_t parser;
    he_req_t req;
    char *url; /* request-target, url_cap bytes in the worker's slab */

    /* bytes received while busy, or left over after a pipelined request;
     * reading pauses while HE_CONN_IN_MAX of them wait */
    char *in;
    uint32_t in_len, in_off, in_cap;
    char *rbuf;      /* receive buffer when there is no provided-buffer ring */
    bool in_process; /* parsing buffered input: response_done must not recurse */

    /* response */
    char *hdr; /* HE_CONN_HDR_CAP bytes in the worker's slab */
    uint32_t hdr_len, hdr_sent;
    uint16_t head_len; /* the header alone (hdr may carry a small body after it) */
    uint8_t body_kind;
    he_file_t *file;
    uint64_t body_off, body_end; /* [off, end) still to send */
    int status;
    uint64_t bytes_sent;
    uint64_t t_first_byte_ns;
    struct iovec iov[2];
    struct msghdr msg;

    struct sockaddr_storage peer;
    struct he_tls_conn *tls; /* NULL on plain connections; server/tls.h */
    uint8_t cache_st;        /* enum he_cache_st (server/cache_glue.h): access log cache field */
    bool cache_skip;         /* origin-first fell back to root: do not ask the cache again */
    bool cache_busy;         /* the response is the cache's (server/respond_cache.c) */
} he_conn_t;

/* ---------------------------------------------------------------- workers */

typedef struct he_server he_server_t;
typedef struct he_alog_ring he_alog_ring_t; /* server/accesslog.h */

typedef struct he_listener {
    int fd;
    bool armed;
    unsigned index; /* he__listener_conf(server, index) */
    bool tls;       /* from conf->tls_listen: accepted connections speak TLS */
    bool paused;    /* out of descriptors or memory: re-armed at the next tick or close */
} he_listener_t;

typedef struct he_worker {
    he_stats_t stats; /* first: its own cache lines */
    he_server_t *server;
    unsigned id;
    int cpu;  /* -1 = not pinned */
    int node; /* NUMA node, -1 unknown */
    pthread_t thread;
    struct io_uring ring;
    bool ring_ok;
    bool fixed_files; /* this ring's sparse file table is registered */
    int wake_fd;      /* eventfd: messages from the control side */
    uint64_t wake_val;

    he_listener_t listeners[2 * HE_CONF_MAX_LISTEN]; /* plain, then TLS */
    unsigned nlisteners;
    bool accept_paused; /* some listener is paused */

    he_conn_t *conns;
    uint32_t conn_cap;
    uint32_t nconns;
    uint32_t *free_slots;
    uint32_t nfree;
    char *hdr_slab;
    char *url_slab;
    uint32_t url_cap;

    struct io_uring_buf_ring *br;
    char *bufs;
    unsigned nbufs, buf_size, buf_pending;
    bool recv_rearm_needed;

    he_conn_t *timers[HE_TIMER_COUNT][2]; /* head, tail */
    struct __kernel_timespec tick_ts;

    he_fcache_t *fcache;
    const he_conf_t *conf; /* the generation this worker serves */
    uint64_t now_ms;
    char date[30]; /* IMF-fixdate, refreshed every tick */
    time_t date_sec;

    bool draining;   /* shutdown: idle connections close now */
    bool soft_drain; /* retired by a reload: each connection gets one more
                      * response, announced with Connection: close */
    bool stop;
    bool stats_off; /* HE_STATS_DISABLE=1: no latency histograms (cost measurement) */
    uint64_t drain_deadline_ms;
    uint64_t stop_deadline_ms; /* waiting for promotions' reads before stopping */
    int startup_err;
    atomic_int ready; /* 1 started, -1 failed */

    /* Control thread -> worker. conf_next is the newest configuration for
     * this worker; the worker switches w->conf between completions when
     * woken and stores the generation it now serves in conf_ack. Between
     * its load of conf_next and that store a newer one may be published,
     * so the control thread frees only configurations older than every
     * live worker's conf_ack (control_reload.c). */
    _Atomic(const he_conf_t *) conf_next;
    atomic_uint conf_ack;
    /* Worker -> control thread. */
    atomic_int exited;       /* the thread has left its loop and freed its ring */
    atomic_int tid;          /* for per-thread CPU time in /proc/self/task */
    he_alog_ring_t *alog;    /* access log records; the control thread drains it */
    struct he_wcache *cache; /* origins, fills, SSD writes; NULL without origin.urls */
} he_worker_t;

struct he_server {
    he_conf_t *conf;
    he_features_t features;
    he_worker_t *workers;
    unsigned nworkers;
    int root_fd;
    /* listen sockets: [listen index][worker]; indexes 0..nlisten-1 are
     * conf->listen then conf->tls_listen (the last nlisten_tls) */
    int *listen_fds;
    unsigned nlisten, nlisten_tls;
    struct he_tls *tls;      /* TLS contexts when tls_listen is set; server/tls.h */
    atomic_int draining;     /* he_server_drain: stop, closing idle connections */
    atomic_int soft_drain;   /* he_server_retire: a reload replaced this generation */
    atomic_int retiring;     /* listeners are being shut by the control thread:
                              * an accept that fails is not re-armed */
    void *alog_notify;       /* uv_async_t of the control thread, or NULL */
    struct he_scache *cache; /* resolved origins + the shared tiers; server/cache_glue.c */
};

/* ---------------------------------------------------------------- user_data */

enum he_op {
    HE_OP_NONE = 0,
    HE_OP_ACCEPT,
    HE_OP_RECV,
    HE_OP_SEND,
    HE_OP_POLLOUT,
    HE_OP_FILES_UPDATE,
    HE_OP_CANCEL,
    HE_OP_TICK,
    HE_OP_WAKE,
    HE_OP_TLS_POLL, /* TLS connection: readiness for SSL_do_handshake / SSL_read */
    HE_OP_CSEND,    /* cache body send / send_zc (+ its notification) / POLLOUT: respond_cache.c */
    HE_OP_ORIGIN,   /* slot = job: origin fetch, SSD write or unlink op; origin_io.c */
};

static inline uint64_t he__ud(enum he_op op, uint32_t slot, uint32_t gen)
{
    return (uint64_t)op | ((uint64_t)(slot & 0xffffff) << 8) | ((uint64_t)gen << 32);
}
static inline enum he_op he__ud_op(uint64_t ud)
{
    return (enum he_op)(ud & 0xff);
}
static inline uint32_t he__ud_slot(uint64_t ud)
{
    return (uint32_t)((ud >> 8) & 0xffffff);
}
static inline uint32_t he__ud_gen(uint64_t ud)
{
    return (uint32_t)(ud >> 32);
}

/* worker.c */
struct io_uring_sqe *he__worker_sqe(he_worker_t *w);
void he__worker_sqe_conn(he_worker_t *w, struct io_uring_sqe *sqe, he_conn_t *c, enum he_op op);
uint64_t he__now_ns(void);
extern __thread uint64_t he__batch_ns; /* he__now_ns() when this batch was reaped */
void *he__worker_main(void *arg);
void he__worker_wake(he_worker_t *w);
/* Re-arms accepts paused for want of descriptors (one was just freed). */
void he__worker_accept_resume(he_worker_t *w);

/* conn.c */
/* tls: accepted on a TLS listener; the handshake starts before any recv. */
he_conn_t *he__conn_new(he_worker_t *w, int fd, const struct sockaddr_storage *peer, bool tls);
void he__conn_close(he_worker_t *w, he_conn_t *c);
void he__conn_op_done(he_worker_t *w, he_conn_t *c);
void he__conn_arm_recv(he_worker_t *w, he_conn_t *c);
void he__conn_on_data(he_worker_t *w, he_conn_t *c, const char *data, size_t len);
/* The peer sent EOF: requests already received are answered, then it closes. */
void he__conn_peer_eof(he_worker_t *w, he_conn_t *c);
/* HE_CONN_IN_MAX bytes wait unparsed: reading pauses until they are answered. */
bool he__conn_in_full(const he_conn_t *c);
void he__conn_timer_set(he_worker_t *w, he_conn_t *c, enum he_timer_list list);
void he__conn_timers_expire(he_worker_t *w);
/* After a live reload: no deadline lies past now + its list's new timeout. */
void he__conn_timers_reconf(he_worker_t *w);
void he__conn_response_done(he_worker_t *w, he_conn_t *c);

/* http1.c */
void he__http1_init(he_conn_t *c);
/* Parses data; returns bytes consumed. Stops after a complete request
 * (*req_ready set) or on error (*err set to the status to answer, 400,
 * 414 or 431). */
size_t he__http1_parse(he_worker_t *w, he_conn_t *c, const char *data, size_t len, bool *req_ready,
                       int *err);
void he__http1_next(he_conn_t *c);

/* respond.c */
void he__respond(he_worker_t *w, he_conn_t *c);
void he__respond_error(he_worker_t *w, he_conn_t *c, int status);
void he__respond_continue(he_worker_t *w, he_conn_t *c, int res);
void he__respond_pollout(he_worker_t *w, he_conn_t *c, int res);
void he__worker_refresh_date(he_worker_t *w);

/* listener.c */
int he__listeners_open(he_server_t *s, char *err, size_t errlen);
void he__listeners_close(he_server_t *s);
/* The address of listen index li (plain or TLS, see he_server_t). */
const he_conf_listen_t *he__listener_conf(const he_server_t *s, unsigned li, bool *tls);

/* server.c */
int he_server_init(he_server_t *s, he_conf_t *conf, char *err, size_t errlen);
/* The CPUs the process may run on, as they were before the control thread
 * pinned itself (its first call is in the first he_server_init). */
void he_server_cpus_allowed(cpu_set_t *set);
int he_server_start(he_server_t *s, char *err, size_t errlen);
void he_server_drain(he_server_t *s);
/* Drains a generation replaced by a reload: connections stay open until
 * their next response (sent with Connection: close) or the drain timeout.
 * Call after its listeners stopped accepting. */
void he_server_retire(he_server_t *s);
/* Publishes a new configuration that needs no new sockets or threads. */
void he_server_publish_conf(he_server_t *s, he_conf_t *conf);
/* True once every worker thread has returned (he_server_wait won't block). */
bool he_server_exited(const he_server_t *s);
void he_server_wait(he_server_t *s);
void he_server_free(he_server_t *s);

#endif
