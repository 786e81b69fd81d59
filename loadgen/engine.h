/* loadgen: the engine's types: per-thread statistics, a client connection
 * driven through the thread's io_uring, the client slots that own the
 * connections and the table of operations through which the engine drives
 * a client kind (viewer.c: HLS player, urls.c: URL list), and the run shared
 * by all threads. */
#ifndef HE_LG_ENGINE_H
#define HE_LG_ENGINE_H

#include "loadgen/lg.h"
#include "segment/segment.h"

#include <liburing.h>
#include <pthread.h>

typedef struct he_lg_thread he_lg_thread_t;
typedef struct he_lg_llhls he_lg_llhls_t;
typedef struct he_lg_tls he_lg_tls_t;
typedef struct ssl_ctx_st SSL_CTX;

/* ---------------------------------------------------------------- stats */

typedef enum he_lg_err {
    HE_LG_ERR_CONNECT = 0, /* connect refused, unreachable, ... */
    HE_LG_ERR_TIMEOUT,     /* no progress for --timeout */
    HE_LG_ERR_CLOSED,      /* reset or closed before the response ended */
    HE_LG_ERR_PROTOCOL,    /* a malformed response */
    HE_LG_ERR_STATUS,      /* HTTP status >= 400 */
    HE_LG_ERR_PLAYLIST,    /* a playlist that does not parse, or no such rendition */
    HE_LG_ERR_TLS,
    HE_LG_ERR_VERIFY, /* the same URL came back with different bytes */
    HE_LG_ERR_OTHER,
    HE_LG_ERR_COUNT
} he_lg_err_t;

const char *he_lg_err_name(he_lg_err_t e);

typedef struct he_lg_rend_stats {
    uint64_t segments, bytes, download_ns;
    uint64_t bandwidth; /* BANDWIDTH of the rendition with this index, first seen */
    double media_s;
} he_lg_rend_stats_t;

#define HE_LG_SECONDS 600

/* --llhls: blocking reloads, parts and how far behind the live edge */
typedef struct he_lg_ll_stats {
    uint64_t reloads;      /* blocking playlist reloads answered */
    uint64_t deltas;       /* of those, delta updates (EXT-X-SKIP) */
    uint64_t st400, st503; /* blocking reloads answered 400 / 503 */
    uint64_t parts, part_bytes;
    uint64_t hints;          /* parts fetched by their preload hint */
    uint64_t part_misses;    /* a part answered 4xx/5xx, or fallen out of the playlist */
    uint64_t not_held;       /* reloads answered without the part asked for */
    he_lg_hist_t hold_us;    /* blocking reload: request to response, any status */
    he_lg_hist_t hint_us;    /* preload hint: request to response */
    he_lg_hist_t latency_ms; /* play head behind the playlist's live edge */
} he_lg_ll_stats_t;

typedef struct he_lg_stats {
    /* read live by the main thread: updated with relaxed atomics */
    uint64_t requests; /* completed responses, any status */
    uint64_t bytes;    /* wire bytes received, heads included */
    uint64_t errors;
    uint64_t stalls;
    uint64_t active; /* viewers or connections running */
    /* read after the threads are joined */
    uint64_t body_bytes, segments, playlists;
    uint64_t stall_ns, play_ns, startups, startup_ns;
    uint64_t switches_up, switches_down;
    uint64_t connects, retries, aborted, verified;
    uint64_t err[HE_LG_ERR_COUNT];
    uint64_t status[600];
    he_lg_rend_stats_t rend[HE_LG_MAX_RENDITIONS];
    he_lg_hist_t ttfb_us, download_us;
    /* audience.c: joins and leaves (--ramp, --churn); join times from the
     * run's start; per second of the run (the last slot takes the rest) */
    uint64_t joins, leaves, first_join_ns, last_join_ns;
    uint32_t joins_per_s[HE_LG_SECONDS], requests_per_s[HE_LG_SECONDS];
    /* llhls.c (--llhls) */
    he_lg_ll_stats_t ll;
} he_lg_stats_t;

#define HE_LG_STAT_ADD(field, n) __atomic_fetch_add(&(field), (n), __ATOMIC_RELAXED)
#define HE_LG_STAT_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

int he_lg_stats_init(he_lg_stats_t *s);
void he_lg_stats_free(he_lg_stats_t *s);
void he_lg_stats_merge(he_lg_stats_t *dst, const he_lg_stats_t *src);

/* ---------------------------------------------------------------- verify.c */

typedef struct he_lg_vent {
    uint64_t key, csum, len, count;
    bool mismatch;
} he_lg_vent_t;

typedef struct he_lg_vmap {
    he_lg_vent_t *e;
    size_t cap, n;
} he_lg_vmap_t;

uint64_t he_lg_fnv(uint64_t h, const void *p, size_t n);
#define HE_LG_FNV_INIT 0xcbf29ce484222325ull
/* Records a body's checksum under key; false if key had other bytes before. */
bool he_lg_vmap_add(he_lg_vmap_t *m, uint64_t key, uint64_t csum, uint64_t len, uint64_t count);
/* Folds src into dst; returns how many keys disagree between the two. */
size_t he_lg_vmap_merge(he_lg_vmap_t *dst, const he_lg_vmap_t *src);
size_t he_lg_vmap_mismatches(const he_lg_vmap_t *m);
void he_lg_vmap_free(he_lg_vmap_t *m);

/* ---------------------------------------------------------------- conn.c */

enum he_lg_op {
    HE_LG_OP_CONNECT = 1,
    HE_LG_OP_SEND,
    HE_LG_OP_RECV_HDR,   /* into the connection's own head buffer */
    HE_LG_OP_RECV_TRUNC, /* MSG_TRUNC: payload dropped in the kernel */
    HE_LG_OP_RECV_BUF,   /* into a provided buffer */
    HE_LG_OP_TLS_SEND,
    HE_LG_OP_TLS_RECV,
    HE_LG_OP_TIMER, /* a viewer's pacing timer */
    HE_LG_OP_TICK,  /* the thread's 100 ms housekeeping */
    HE_LG_OP_CANCEL
};

enum he_lg_conn_state {
    HE_LG_CONN_CLOSED = 0, /* no socket */
    HE_LG_CONN_IDLE,       /* connected, no request */
    HE_LG_CONN_CONNECTING,
    HE_LG_CONN_HANDSHAKE,
    HE_LG_CONN_HEAD, /* request sent or being sent, waiting for the head */
    HE_LG_CONN_BODY,
    HE_LG_CONN_CLOSING /* waiting for in-flight operations to end */
};

#define HE_LG_HDR_CAP 4096
#define HE_LG_REQ_CAP 2560
#define HE_LG_BODY_MAX (16u << 20) /* kept bodies (playlists) */

typedef struct he_lg_result {
    int err;    /* -1, or the he_lg_err_t that failed the request */
    int status; /* HTTP status, 0 if none arrived */
    uint64_t body_bytes, wire_bytes;
    uint64_t ttfb_ns, total_ns;
    const char *body; /* when asked to keep it */
    size_t body_len;
} he_lg_result_t;

typedef struct he_lg_conn {
    he_lg_thread_t *th;
    uint32_t slot, gen;
    int fd, ep, state, inflight;
    bool pending;   /* a request waits for the close to finish */
    bool want_body; /* keep the body (playlists) */
    bool retried;   /* resent once after a stale keep-alive connection */
    bool failed;
    unsigned reqs; /* requests on this TCP connection */
    uint64_t key, csum;
    uint64_t t_start, t_first, last_io;
    uint64_t wire;
    uint32_t req_len, req_sent, hlen;
    he_lg_http_head_t head;
    he_lg_body_t body;
    char *bodybuf;
    size_t bodylen, bodycap;
    he_lg_tls_t *tls;
    /* --http2 (h2.c): the session, the request's stream, its outcome (1
     * ended, -1 reset), what mem_send gave that is not sent yet, and the
     * receive kept posted on a plain connection */
    void *h2;
    int32_t h2_stream;
    int h2_done;
    const char *h2_pend;
    size_t h2_pend_len;
    bool h2_rx_busy;
    int64_t h2_range_off, h2_range_len;
    char h2_target[HE_LG_URL_MAX];
    uint32_t tls_tx_off, tls_tx_len;
    bool tls_tx_busy, tls_rx_busy;
    char req[HE_LG_REQ_CAP];
    char hdr[HE_LG_HDR_CAP];
} he_lg_conn_t;

void he_lg_conn_init(he_lg_conn_t *c, he_lg_thread_t *th, uint32_t slot);
void he_lg_conn_destroy(he_lg_conn_t *c);
/* Starts GET target on endpoint ep, reusing the connection if it is open to
 * ep. range_len >= 0 adds a Range header. The result comes to the thread's
 * owner callback. -ENAMETOOLONG if the request does not fit. */
int he_lg_conn_request(he_lg_conn_t *c, int ep, const char *target, int64_t range_off,
                       int64_t range_len, bool want_body, uint64_t key);
void he_lg_conn_on_cqe(he_lg_conn_t *c, unsigned op, uint32_t gen, int res, unsigned flags);
/* Fails a request that made no progress for timeout_ns. */
void he_lg_conn_check_timeout(he_lg_conn_t *c, uint64_t now, uint64_t timeout_ns);
/* Cancels whatever is in flight without telling the owner (end of run). */
void he_lg_conn_abort(he_lg_conn_t *c);
bool he_lg_conn_busy(const he_lg_conn_t *c);

/* Payload bytes of the response: kept (playlists) or checksummed (--verify). */
void he_lg_conn_body_bytes(he_lg_conn_t *c, const char *p, size_t n);

/* ---------------------------------------------------------------- h2.c */

int he_lg_h2_open(he_lg_conn_t *c);
void he_lg_h2_free(he_lg_conn_t *c);
/* Submits GET target (a Range when range_len > 0) as a new stream. */
int he_lg_h2_request(he_lg_conn_t *c, const char *target, int64_t range_off, int64_t range_len);
/* Bytes from the server; c->h2_done tells when the stream ended. */
int he_lg_h2_feed(he_lg_conn_t *c, const char *p, size_t n);
/* Bytes to send (preface, SETTINGS, requests, WINDOW_UPDATE ...): up to cap. */
size_t he_lg_h2_take(he_lg_conn_t *c, char *out, size_t cap);
bool he_lg_h2_alive(const he_lg_conn_t *c);

/* ---------------------------------------------------------------- tls.c */

/* h2: ALPN offers h2 alone (--http2). */
int he_lg_tls_ctx_new(SSL_CTX **ctx, bool insecure, bool h2);
/* The protocol ALPN chose is h2. */
bool he_lg_tls_is_h2(const he_lg_tls_t *t);
void he_lg_tls_ctx_free(SSL_CTX *ctx);
int he_lg_tls_new(he_lg_tls_t **t, SSL_CTX *ctx, const char *sni);
void he_lg_tls_free(he_lg_tls_t *t);
/* 0 when the handshake is done, HE_LG_AGAIN when it needs the peer, <0 error */
int he_lg_tls_handshake(he_lg_tls_t *t);
/* Ciphertext from the network. */
int he_lg_tls_feed(he_lg_tls_t *t, const char *p, size_t n);
/* Ciphertext to send: up to cap bytes into out; 0 when none. */
size_t he_lg_tls_take(he_lg_tls_t *t, char *out, size_t cap);
int he_lg_tls_write(he_lg_tls_t *t, const char *p, size_t n);
/* Plaintext: n > 0, 0 when more ciphertext is needed, -EPIPE at close_notify. */
int he_lg_tls_read(he_lg_tls_t *t, char *out, size_t cap);
char *he_lg_tls_rxbuf(he_lg_tls_t *t, size_t *cap);
char *he_lg_tls_txbuf(he_lg_tls_t *t, size_t *cap);

/* ---------------------------------------------------------------- viewer.c, urls.c */

/* What a viewer is doing (urls-mode clients use IDLE, SEGMENT and DONE). */
enum he_lg_viewer_stage {
    HE_LG_V_IDLE = 0,
    HE_LG_V_MASTER,
    HE_LG_V_MEDIA,
    HE_LG_V_SEGMENT,
    HE_LG_V_BACKOFF, /* after an error: retry in a while */
    HE_LG_V_DONE,
    HE_LG_V_LL_RELOAD, /* --llhls: a blocking playlist reload */
    HE_LG_V_LL_PART    /* --llhls: a part or a preload hint */
};

typedef struct he_lg_viewer {
    he_lg_conn_t *conn;
    int url;   /* index in cfg->urls */
    int stage; /* what the current request is */
    he_seg_playlist_t master, media;
    bool have_master, have_media;
    char master_url[HE_LG_URL_MAX];
    char media_url[HE_LG_URL_MAX];
    int rend;      /* current variant */
    int next_rend; /* switch pending: fetch its playlist */
    uint64_t bw[HE_LG_MAX_RENDITIONS];
    size_t nbw;
    uint64_t next_seq; /* media sequence number of the next segment */
    bool live, started;
    double seg_dur; /* of the segment in flight */
    int seg_rend;
    /* the player (real time) */
    bool playing, stalled;
    double buffered_s; /* media ahead of the play head at last_ns */
    uint64_t last_ns, stall_start_ns, session_ns, next_poll_ns;
    he_lg_abr_t abr;
    struct __kernel_timespec ts;
    bool timer_armed;
    uint32_t timer_gen;
    uint64_t urls_next; /* urls mode: position in the list */
    /* audience.c: waiting for the first join, away between sessions, and
     * when this session ends (0: never) */
    bool joining, away;
    uint64_t leave_ns;
    he_lg_llhls_t *ll; /* --llhls: llhls.c's state, NULL until needed */
} he_lg_viewer_t;

/* viewer.c, for llhls.c: a request of the viewer, a failure (counted,
 * then a backoff), its next step, and the player model */
bool he__lg_viewer_fetch(he_lg_viewer_t *v, const char *url, int64_t roff, int64_t rlen, int stage);
void he__lg_viewer_error(he_lg_viewer_t *v, he_lg_err_t kind);
void he__lg_viewer_schedule(he_lg_viewer_t *v);
void he__lg_player_advance(he_lg_viewer_t *v, uint64_t now);
void he__lg_player_segment(he_lg_viewer_t *v, uint64_t now, double dur);

/* ---------------------------------------------------------------- llhls.c */

/* The viewer holds an LL playlist: its steps go through llhls.c. */
bool he_lg_llhls_active(const he_lg_viewer_t *v);
/* A playlist for the viewer: kept as its LL view; false (error counted)
 * when it does not parse or lists no parts. */
bool he_lg_llhls_on_playlist(he_lg_viewer_t *v, const he_lg_result_t *r);
/* The next request: a part, the preload hint or a blocking reload. */
void he_lg_llhls_schedule(he_lg_viewer_t *v);
/* The end of an HE_LG_V_LL_RELOAD or HE_LG_V_LL_PART request. */
void he_lg_llhls_on_result(he_lg_viewer_t *v, int stage, const he_lg_result_t *r);
/* Forgets the LL state (a new session, the end). */
void he_lg_llhls_reset(he_lg_viewer_t *v);

/* ---------------------------------------------------------------- audience.c */

/* The slot's first join: now, staggered, or at its place in --ramp. */
void he_lg_audience_start(he_lg_viewer_t *v, unsigned i);
/* A timer of a slot that is joining or away: it joins. False otherwise. */
bool he_lg_audience_on_timer(he_lg_viewer_t *v);
/* Between requests: when the session is over (--churn) the client leaves
 * and true is returned; the caller does nothing more. */
bool he_lg_audience_leave_due(he_lg_viewer_t *v);
/* The end of the run for the slot (ops->finish unless it is not joined). */
void he_lg_audience_finish(he_lg_viewer_t *v);
void he_lg_audience_count_request(he_lg_thread_t *th);

/* What the engine and the connection code know of a client kind: each
 * kind is one table, so a new kind needs no change to engine.c or conn.c.
 * Every entry runs on the slot's thread; all but free are required. */
typedef struct he_lg_client_ops {
    const char *noun; /* plural, for the live line: "viewers" */
    bool stagger;     /* spread the first starts of many clients over a second */
    /* First request of the slot (zeroed, v->conn set). A staggered slot
     * starts through on_timer instead, with stage still HE_LG_V_IDLE. */
    void (*start)(he_lg_viewer_t *v);
    /* The request on v->conn ended: a response, or r->err set for a failed
     * connect, a timeout, a close, a bad response (already counted). */
    void (*on_result)(he_lg_viewer_t *v, const he_lg_result_t *r);
    /* The timer of he_lg_timer_arm fired while the run goes on. */
    void (*on_timer)(he_lg_viewer_t *v);
    /* The run is over for this slot: settle its statistics, leave
     * stats.active, set stage HE_LG_V_DONE; a no-op once done (the engine
     * calls it for every slot at the end, done or not). */
    void (*finish)(he_lg_viewer_t *v);
    /* Releases what the slot holds (the thread is ending); NULL: nothing. */
    void (*free)(he_lg_viewer_t *v);
    /* The client leaves between requests (--churn): settle its statistics
     * and forget its session; start then begins a new one. NULL: nothing. */
    void (*leave)(he_lg_viewer_t *v);
} he_lg_client_ops_t;

extern const he_lg_client_ops_t he_lg_viewer_ops;
extern const he_lg_client_ops_t he_lg_urls_ops;

/* ---------------------------------------------------------------- engine.c, run.c */

typedef struct he_lg_run {
    const he_lg_config_t *cfg;
    /* the client kind, chosen from cfg->mode */
    const he_lg_client_ops_t *ops;
    unsigned clients; /* viewers or connections in this run */
    he_lg_pick_t pop; /* over cfg->urls */
    he_lg_pick_t mix; /* rendition mix */
    int *url_ep;      /* endpoint of each cfg->urls[i] */
    char **url_target;
    SSL_CTX *ssl_ctx;
    uint64_t start_ns, end_ns; /* end_ns 0: no time bound */
    uint64_t issued;           /* requests started, all threads (atomic) */
    int stop;                  /* atomic: finish up */
    he_lg_thread_t *threads;
    unsigned nthreads;
} he_lg_run_t;

struct he_lg_thread {
    he_lg_run_t *run;
    const he_lg_config_t *cfg;
    unsigned id;
    int cpu;
    struct io_uring ring;
    bool ring_ok;
    struct io_uring_buf_ring *br;
    char *bufs;
    unsigned nbufs, bufsz;
    size_t br_size;
    he_lg_conn_t *conns;
    he_lg_viewer_t *viewers;
    unsigned n;
    uint64_t now;
    bool stopping;
    uint64_t stop_deadline;
    char *scratch; /* recv target for MSG_TRUNC and for TLS plaintext */
    size_t scratch_cap;
    he_lg_rng_t rng;
    he_lg_stats_t stats;
    he_lg_vmap_t vmap;
    struct __kernel_timespec tick_ts;
    pthread_t tid;
    int rc;
};

#define HE_LG_BUF_GROUP 1
#define HE_LG_TRUNC_MAX (4u << 20) /* per recv, so the live line moves */

static inline uint64_t he_lg_ud(unsigned op, uint32_t gen, uint32_t slot)
{
    return (uint64_t)op | ((uint64_t)(gen & 0xffffff) << 8) | ((uint64_t)slot << 32);
}

uint64_t he_lg_now_ns(void);
struct io_uring_sqe *he_lg_sqe(he_lg_thread_t *th);
/* Claims one request from the run's budget; false once the run is ending. */
bool he_lg_take_request(he_lg_thread_t *th);
void he_lg_buf_recycle(he_lg_thread_t *th, unsigned bid);
/* Hands a connection's result to the client of its slot. */
void he_lg_on_result(he_lg_conn_t *c, const he_lg_result_t *r);
void he_lg_timer_arm(he_lg_viewer_t *v, uint64_t at_ns);
void *he_lg_thread_main(void *arg);

void he_lg_run_interrupt(int sig);
/* Runs once with `clients` viewers or connections; stats summed into out. */
int he_lg_run(const he_lg_config_t *cfg, unsigned clients, he_lg_stats_t *out, double *elapsed_s,
              size_t *verify_mismatches);

/* ---------------------------------------------------------------- report.c */

typedef struct he_lg_summary {
    const he_lg_config_t *cfg;
    unsigned clients, threads;
    double elapsed_s;
    const he_lg_stats_t *s;
    size_t verify_mismatches;
} he_lg_summary_t;

void he_lg_report_text(FILE *f, const he_lg_summary_t *sum);
void he_lg_report_json(FILE *f, const he_lg_summary_t *sum);
void he_lg_report_sweep(FILE *f, const he_lg_config_t *cfg, const he_lg_sweep_point_t *pts,
                        size_t n, int best);

#endif
