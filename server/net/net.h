/* net: the worker loop and everything that touches sockets.
 *
 *   worker.c    owns the ring: setup, submit, reap, dispatch by user_data
 *   conn.c      connection lifecycle, timers, input buffering, pipelining
 *   send.c      the one send path: a head and a body source, by send,
 *               sendmsg, send_zc, sendfile or SSL_write
 *   body.c      body sources: the memory source, and what all share
 *   listener.c  SO_REUSEPORT sockets and CPU steering
 *   probe.c     kernel feature probe
 *   tls.c       TLS contexts; tls_conn.c one TLS connection
 *
 * net knows protocols only through he_proto_t, bodies only through
 * he_body_t, and the layers above only through he_worker_hooks_t: it
 * includes nothing from http/, handler/ or control/. */
#ifndef HE_NET_H
#define HE_NET_H

#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "conf/conf.h"
#include "server/base/alog_ring.h"
#include "server/base/clock.h"
#include "server/base/features.h"
#include "server/base/stats.h"

/* Linux 6.2 uapi; liburing 2.3's copy of io_uring.h predates them */
#define HE_SEND_ZC_REPORT_USAGE (1U << 3)
#define HE_NOTIF_USAGE_ZC_COPIED (1U << 31)
/* Linux 6.12 uapi: io_uring_getevents_arg's pad is min_wait_usec */
#define HE_IORING_FEAT_MIN_TIMEOUT (1U << 15)

typedef struct he_worker he_worker_t;
typedef struct he_conn he_conn_t;
typedef struct he_server he_server_t;

/* ---------------------------------------------------------------- body sources */

/* One contiguous piece of a body: memory, or a range of a file. */
typedef struct he_body_span {
    const char *p; /* memory; NULL for a file range */
    int fd;        /* a file range: descriptor and offset */
    uint64_t file_off;
    size_t len;
    int64_t fixed_off; /* offset in registered buffer 0 (send_zc), or -1 */
    bool mapped;       /* p is a mapping of a file that may shrink (SIGBUS guard) */
    /* p stays unchanged while the source holds it and is then unmapped or
     * punched out of its memfd, never rewritten in place: the send path may
     * vmsplice it, and the kernel's page references outlive the release
     * (send.c, he_send_splice) */
    bool spliceable;
    /* p (spliceable) is also the file range fd, file_off: the send path
     * picks (send.c, he_send_pump) */
    bool file_too;
    bool cache_ram; /* p is the RAM tier's arena: its vmsplice is counted as such */
    bool file_copy; /* p is a file's copy in huge pages: counted as a file's and as a copy's */
} he_body_span_t;

/* A spliceable span at least this long goes by vmsplice; a shorter one is
 * cheaper copied along with the head in one send, or sent from its file. */
#define HE_SEND_SPLICE_MIN (64u * 1024)

typedef struct he_body he_body_t;

/* What a body is made of. The send path knows bodies only through these. */
typedef struct he_body_ops {
    /* The bytes at off (b->off <= off < b->end), at most b->end - off, into
     * *s: their length; 0 when none have arrived yet (the source calls
     * he__send_resume when they do); a negative errno when the source
     * failed (the client sees a short body). need_mem: memory only
     * (userspace TLS cannot send a file range). */
    ssize_t (*peek)(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem);
    /* n bytes at b->off went to the kernel. NULL: b->off += n. */
    void (*advance)(he_body_t *b, size_t n);
    /* The response ended, sent or not: drop what the source holds. */
    void (*release)(he_body_t *b);
    /* Sending failed on the source's side (a read error, a file that shrank:
     * -EBADMSG): the source reports and forgets it. May be NULL. */
    void (*error)(he_body_t *b, he_worker_t *w, int err);
} he_body_ops_t;

struct he_body {
    const he_body_ops_t *ops; /* NULL: no body */
    void *ctx;                /* the source's own object */
    uint64_t off, end;        /* bytes [off, end) still to send */
    const char *mem;          /* the memory source's bytes (he__body_mem) */
    void (*done)(void *ctx);  /* the memory source's release */
    const char *name;         /* for log lines: the path or key */
};

/* A body of len bytes at p that outlives the response (a cached small file
 * or object holds it); release calls done(ctx), which may be NULL. */
void he__body_mem(he_body_t *b, const char *p, size_t len, void (*done)(void *ctx), void *ctx);
/* Drops whatever b holds; b has no body afterwards. */
void he__body_release(he_body_t *b);
void he__body_advance(he_body_t *b, size_t n);
static inline bool he__body_left(const he_body_t *b)
{
    return b->ops && b->off < b->end;
}

/* ---------------------------------------------------------------- protocols */

/* A protocol on a connection (HTTP/1.1, HTTP/2). net calls these and never
 * names the protocol's files. A connection starts on the server's first
 * protocol (he_server_t.proto) and may switch once, to proto_h2, when the
 * TLS handshake chose h2 (ALPN) or the first bytes are h2c's preface.
 *
 * Two ways to send. A protocol without pull (HTTP/1.1) starts each response
 * itself (he__send_start) and hears of its end in sent(). A protocol with
 * pull (HTTP/2) multiplexes: whenever the send path is idle it asks pull()
 * for the next unit (frame bytes in c->hdr, and maybe a range of one
 * stream's body in c->body, lent: c->body_lent), hears of each unit's end
 * in sent(), and calls he__send_kick when it has something new. */
typedef struct he_proto {
    const char *name;
    /* Bytes of per-connection state the protocol wants (he_conn_t.proto),
     * from the configuration the worker starts with. */
    size_t (*conn_size)(const he_conf_t *conf);
    /* A new connection (on TLS listeners before the handshake). */
    void (*open)(he_worker_t *w, he_conn_t *c);
    /* Received bytes: how many it consumed; *ready when that completed a
     * request. What it leaves is buffered and offered again later. */
    size_t (*data)(he_worker_t *w, he_conn_t *c, const char *p, size_t n, bool *ready);
    /* Answers the request data() completed (c->busy is set, leftover input
     * is buffered): the response may end on this stack. */
    void (*request)(he_worker_t *w, he_conn_t *c);
    /* The peer sent EOF: nothing more will arrive. */
    void (*eof)(he_worker_t *w, he_conn_t *c);
    /* A drain began and c has no response under way: close it (hard) or
     * have its next response announce the close (soft). */
    void (*idle)(he_worker_t *w, he_conn_t *c, bool hard);
    /* The last byte of the response (with pull: of the unit) went to the
     * kernel, and every zero-copy notification came back: account for it
     * and move on. */
    void (*sent)(he_worker_t *w, he_conn_t *c);
    /* May be NULL. The send path is idle: true when it put the next unit
     * into c->hdr[0, hdr_len) and c->body. With pull the protocol also owns
     * the connection's timers (send progress does not move them). */
    bool (*pull)(he_worker_t *w, he_conn_t *c);
    /* May be NULL. c is being freed (nothing of it is in flight). */
    void (*dispose)(he_worker_t *w, he_conn_t *c);
    /* May be NULL. Timer list (enum he_timer_list) of c ran out: true when
     * the protocol deals with it (and set c's next timer), false to close. */
    bool (*expire)(he_worker_t *w, he_conn_t *c, int list);
} he_proto_t;

/* ---------------------------------------------------------------- worker hooks */

/* What the layers above hang on a worker (the file handler's open-file
 * cache, the edge cache's fills and origin jobs). Called in order of
 * registration; any entry may be NULL. */
#define HE_WORKER_HOOKS_MAX 4

typedef struct he_worker_hooks {
    const char *name;
    int (*setup)(he_worker_t *w); /* on the worker thread, ring ready; < 0 fails start-up */
    void (*tick)(he_worker_t *w); /* every HE_TICK_MS */
    void (*job)(he_worker_t *w, struct io_uring_cqe *cqe); /* a completion of HE_OP_JOB */
    /* The worker is about to stop: operations still in flight that must be
     * reaped first (0: may stop). */
    unsigned (*quiesce)(he_worker_t *w);
    void (*cleanup)(he_worker_t *w);                    /* after the ring is gone */
    void (*conn_dispose)(he_worker_t *w, he_conn_t *c); /* c is being freed */
    /* A completion of an operation the hook submitted with user_data from
     * he__worker_hook_ud (a watch on a descriptor of its own: inotify). */
    void (*op)(he_worker_t *w, struct io_uring_cqe *cqe);
} he_worker_hooks_t;

/* ---------------------------------------------------------------- connections */

enum he_timer_list {
    HE_TIMER_NONE = 0,
    HE_TIMER_HEADER,
    HE_TIMER_KEEPALIVE,
    HE_TIMER_SEND,
    HE_TIMER_TLS,    /* accept -> TLS handshake done (conf tls_handshake_timeout_ms) */
    HE_TIMER_LINGER, /* half-closed, the tail still queued (timeouts.send per progress) */
    HE_TIMER_H2_IDLE,  /* HTTP/2, no stream open (conf http2_idle_timeout_ms) */
    HE_TIMER_H2_STALL, /* HTTP/2, streams open and no DATA moved (http2_stall_timeout_ms) */
    HE_TIMER_COUNT
};

#define HE_CONN_HDR_CAP 1536
#define HE_CONN_IN_MAX (64 * 1024)
#define HE_CONN_RBUF 4096
#define HE_SEND_IOV 16

struct he_conn {
    uint32_t gen;
    uint32_t slot;
    int fd;
    uint16_t inflight; /* ring operations that still reference this conn */
    bool in_use;
    bool recv_armed;
    bool busy;           /* a request is being answered: input waits */
    bool closing;        /* close requested; freed when inflight == 0 */
    bool close_after;    /* close once the current response is sent */
    bool fixed;          /* registered in the fixed file table at index slot */
    bool peer_eof;       /* no more requests: close once the buffered ones are answered */
    bool recv_multishot; /* the armed recv is multishot: pausing it takes a cancel */
    bool recv_cancel;    /* input is full and that cancel is on its way */
    bool lingering;      /* half-closed after the last response: input is dropped */
    uint8_t timer;       /* enum he_timer_list */
    uint32_t linger_outq; /* bytes the kernel still held at the last linger check */
    struct he_conn *tprev, *tnext;
    uint64_t deadline_ms;

    const struct he_proto *protocol; /* what c speaks: w->proto, or the server's proto_h2 */
    void *proto; /* the protocol's per-connection state (he_proto_t.conn_size) */

    /* bytes received while busy, or left over after a pipelined request;
     * reading pauses while HE_CONN_IN_MAX of them wait */
    char *in;
    uint32_t in_len, in_off, in_cap;
    char *rbuf;      /* receive buffer when there is no provided-buffer ring */
    bool in_process; /* parsing buffered input: a response ending must not recurse */

    /* the response being sent (send.c): the head, then the body source */
    char *hdr; /* HE_CONN_HDR_CAP bytes in the worker's slab */
    uint32_t hdr_len, hdr_sent;
    he_body_t body;
    uint64_t bytes_sent;
    uint64_t t_first_byte_ns;
    bool sending;        /* a response is being sent */
    bool send_wait;      /* the body source has nothing yet: he__send_resume */
    bool send_failed;    /* the body source failed: close once what is queued went */
    bool finish_wait;    /* all sent; waiting for zero-copy notifications */
    bool zc_copies;      /* the kernel copied a zero-copy send here: plain sends */
    bool corked;         /* TCP_CORK is on for a file body (send.cork) */
    bool body_lent;      /* c->body is a range of a body the protocol keeps (an h2
                          * stream's): the send path never releases it */
    bool send_kick;      /* he__send_kick's loop is running: a unit ending goes back to it */
    bool close_drained;  /* the protocol is done: close once gathered TLS records went */
    uint8_t send_op;     /* enum he_send_op in flight (one at a time) */
    uint32_t zc_pending; /* send_zc notifications not yet reaped */
    uint32_t zc_nosend;  /* of those, sends that sent nothing */
    struct he_pipe *splice_pipe; /* vmspliced bytes not yet in the socket (send.c) */
    uint32_t splice_len;         /* how many */
    struct iovec iov[HE_SEND_IOV];
    struct msghdr msg;

    struct sockaddr_storage peer;
    struct he_tls_conn *tls; /* NULL on plain connections; server/net/tls.h */
};

/* ---------------------------------------------------------------- workers */

typedef struct he_listener {
    int fd;
    bool armed;
    unsigned index; /* he__listener_conf(server, index) */
    bool tls;       /* from conf->tls_listen: accepted connections speak TLS */
    bool paused;    /* out of descriptors or memory: re-armed at the next tick or close */
    bool cancel_sent; /* a drain's cancel of the armed accept is queued */
} he_listener_t;

struct he_worker {
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
    /* the SQ was full and io_uring_submit failed (he__worker_sqe NULL):
     * what could not be armed is armed again after the next batch */
    bool tick_lost, wake_lost, drain_cancel_lost;

    he_conn_t *conns;
    uint32_t conn_cap;
    uint32_t nconns;
    uint32_t *free_slots;
    uint32_t nfree;
    char *hdr_slab;
    char *proto_slab;
    size_t proto_size; /* per connection */

    struct io_uring_buf_ring *br;
    char *bufs;
    unsigned nbufs, buf_size, buf_pending;

    he_conn_t *timers[HE_TIMER_COUNT][2]; /* head, tail */
    struct __kernel_timespec tick_ts;

    const he_proto_t *proto;
    /* the layers above: their hooks and their per-worker state */
    void *hook_data[HE_WORKER_HOOKS_MAX];

    /* the send path's zero-copy state (send.c) */
    bool zc;         /* send_zc from registered buffer 0 is possible */
    bool zc_usage;   /* notifications report whether the kernel copied */
    uint64_t zc_min; /* spans at least this long go zero-copy */
    bool zc_adapt;   /* stop zero-copy on a connection once the kernel copied */
    struct he_pipe *pipes; /* idle pipes of the vmsplice path (send.c) */
    unsigned npipes, pipes_busy; /* idle, and held by connections */
    uint64_t pipe_pages;         /* the sizes of both, in pages */

    const he_conf_t *conf; /* the generation this worker serves */
    uint64_t now_ms;
    char date[30]; /* IMF-fixdate for Date: headers, kept by http/'s worker hook */
    time_t date_sec;

    bool draining;   /* shutdown: idle connections close now */
    bool soft_drain; /* retired by a reload: each connection gets one more
                      * response, announced with Connection: close */
    bool stop;
    bool exiting;   /* cleanup: completions change nothing any more */
    bool stats_off; /* no latency histograms (cost measurement) */
    uint64_t drain_deadline_ms;
    /* bodies' POLLOUT completions left by a spent slice (worker_turns.c),
     * a ring of conn_cap */
    struct he_worker_turn *turns;
    uint32_t turns_head, turns_len;
    uint64_t stop_deadline_ms; /* waiting for hooks' operations before stopping */
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
    atomic_int exited;    /* the thread has left its loop and freed its ring */
    atomic_int tid;       /* for per-thread CPU time in /proc/self/task */
    he_alog_ring_t *alog; /* access log records; the control thread drains it */
};

/* One generation of workers and their listeners. */
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
    struct he_tls *tls;    /* TLS contexts when tls_listen is set; server/net/tls.h */
    atomic_int draining;   /* he_server_drain: stop, closing idle connections */
    atomic_int soft_drain; /* he_server_retire: a reload replaced this generation */
    /* timeouts.drain of the configuration in force when the drain began,
     * which a retired generation's own copy may predate (0: its own) */
    atomic_uint drain_ms;
    atomic_int retiring;   /* listeners are being shut by the control thread:
                            * an accept that fails is not re-armed */
    void *alog_notify;     /* uv_async_t of the control thread, or NULL */

    const he_proto_t *proto;    /* what connections speak */
    const he_proto_t *proto_h2; /* HTTP/2, when the configuration allows it; else NULL */
    const he_worker_hooks_t *hooks[HE_WORKER_HOOKS_MAX];
    unsigned nhooks;
    void *handlers; /* handler/'s router for this generation */
    void *cache;    /* the edge cache's state for this generation (handler/), or NULL */
};

/* ---------------------------------------------------------------- user_data */

enum he_op {
    HE_OP_NONE = 0,
    HE_OP_ACCEPT,
    HE_OP_RECV,
    HE_OP_SEND, /* send, sendmsg, send_zc (+ its notification), of send.c */
    HE_OP_POLLOUT,
    HE_OP_FILES_UPDATE,
    HE_OP_CANCEL,
    HE_OP_TICK,
    HE_OP_WAKE,
    HE_OP_TLS_POLL, /* TLS connection: readiness for SSL_do_handshake / SSL_read */
    HE_OP_JOB,      /* slot = a hook's job (origin fetch, SSD write ...): hooks' job() */
    HE_OP_HOOK,     /* slot = a hook's index (he__worker_hook_ud): that hook's op() */
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

#define HE_TICK_MS 100

/* probe.c: the kernel's features, for each generation (conf's
 * features.disable forces fallbacks, so tests cover every path). */
void he_features_probe(he_features_t *f, const he_conf_t *conf);

/* worker.c */
/* A submission queue entry; NULL only when the ring cannot take one even
 * after submitting what is queued (the caller fails the operation). */
struct io_uring_sqe *he__worker_sqe(he_worker_t *w);
void he__worker_sqe_conn(he_worker_t *w, struct io_uring_sqe *sqe, he_conn_t *c, enum he_op op);
void *he__worker_main(void *arg);
/* The live connection a completion is for, or NULL (a freed incarnation). */
he_conn_t *he__worker_conn(he_worker_t *w, uint64_t ud);
/* worker_turns.c: bodies' turns run in slices of ring.slice_us */
int he__turns_init(he_worker_t *w);
void he__turns_free(he_worker_t *w);
/* The end of a slice begun at start_ns; UINT64_MAX when slices are off. */
uint64_t he__turns_until(const he_worker_t *w, uint64_t start_ns);
/* True when the completion (a body's POLLOUT) waits for a later turn:
 * the slice is spent, or earlier ones wait. */
bool he__turns_defer(he_worker_t *w, const struct io_uring_cqe *cqe, uint64_t until);
/* Runs waiting turns, in order, until the slice ends (one at least). */
void he__turns_run(he_worker_t *w, uint64_t until);
/* user_data for an operation of hook h whose completion goes to h->op;
 * tag is the hook's own (its generation of the operation). */
uint64_t he__worker_hook_ud(const he_worker_t *w, const he_worker_hooks_t *h, uint32_t tag);
void he__worker_wake(he_worker_t *w);
/* conf's ring.batch_wait_us where s's kernel has the min timeout, else 0:
 * how a worker waits (worker.c) and how the logs say it (server.c). */
unsigned he__batch_wait_us(const he_server_t *s, const he_conf_t *conf);
/* Re-arms accepts paused for want of descriptors (one was just freed). */
void he__worker_accept_resume(he_worker_t *w);

/* conn.c */
/* c speaks p from now on (ALPN chose h2, or h2c's preface came): p's open(). */
void he__conn_switch(he_worker_t *w, he_conn_t *c, const he_proto_t *p);
/* tls: accepted on a TLS listener; the handshake starts before any recv. */
he_conn_t *he__conn_new(he_worker_t *w, int fd, const struct sockaddr_storage *peer, bool tls);
void he__conn_close(he_worker_t *w, he_conn_t *c);
/* The end after a last response (Connection: close, a drain): half-closes
 * first while the kernel still holds bytes of it, see conn.c */
void he__conn_close_graceful(he_worker_t *w, he_conn_t *c);
/* The protocol is done with c, whose last units may still wait as
 * gathered TLS records (a pulling protocol's, tls_conn.c): they go first,
 * under timeouts.send, then c closes. Without any, he__conn_close. */
void he__conn_close_drained(he_worker_t *w, he_conn_t *c);
void he__conn_op_done(he_worker_t *w, he_conn_t *c);
void he__conn_arm_recv(he_worker_t *w, he_conn_t *c);
/* The most unparsed input a connection may hold before it is closed (see
 * conn.c); TLS holds its ciphertext to the same bound. */
size_t he__conn_in_hard_max(const he_worker_t *w);
void he__conn_on_data(he_worker_t *w, he_conn_t *c, const char *data, size_t len);
/* The peer sent EOF: requests already received are answered, then it closes. */
void he__conn_peer_eof(he_worker_t *w, he_conn_t *c);
/* After EOF, once nothing is being answered: closes c (true) or not. */
bool he__conn_close_if_done(he_worker_t *w, he_conn_t *c);
/* HE_CONN_IN_MAX bytes wait unparsed: reading pauses until they are answered. */
bool he__conn_in_full(const he_conn_t *c);
void he__conn_timer_set(he_worker_t *w, he_conn_t *c, enum he_timer_list list);
void he__conn_timers_expire(he_worker_t *w);
/* After a live reload: no deadline lies past now + its list's new timeout. */
void he__conn_timers_reconf(he_worker_t *w);
/* The protocol finished a request: close if asked to, else read and parse on. */
void he__conn_request_done(he_worker_t *w, he_conn_t *c);

/* send.c */
/* Sends c->hdr[0, hdr_len) and then c->body; when all of it went to the
 * kernel the protocol's sent() runs (on this stack or a later completion). */
void he__send_start(he_worker_t *w, he_conn_t *c);
/* A protocol with pull has something new to send: while the send path is
 * idle, its units are pulled and sent (bounded per call; a POLLOUT takes
 * the next turn). Safe to call at any time except from inside pull(). */
void he__send_kick(he_worker_t *w, he_conn_t *c);
/* The same from a completion of its own (a no-op on the ring), for callers
 * deep in a handler's stack, where a unit ending must not free what they
 * still hold (an h2 stream). Nothing when a unit is under way: its end
 * pulls the next. */
void he__send_kick_later(he_worker_t *w, he_conn_t *c);
/* The body source has more bytes (a fill's DATA) or failed: send on. */
void he__send_resume(he_worker_t *w, he_conn_t *c);
void he__send_on_cqe(he_worker_t *w, he_conn_t *c, struct io_uring_cqe *cqe);
void he__send_on_pollout(he_worker_t *w, he_conn_t *c, int res);
/* c is being freed: the body source is released. */
void he__send_dispose(he_worker_t *w, he_conn_t *c);
/* The worker ends: its idle pipes go. */
void he__send_worker_cleanup(he_worker_t *w);
/* True for an errno a read of a file can give (EIO, EBADMSG, ...). */
bool he__disk_errno(int err);
/* sendfile of fd at off failed with err: the file's read error to report,
 * or 0 when the socket failed (see send.c). */
int he__send_file_error(int fd, uint64_t off, int err);

/* listener.c */
int he__listeners_open(he_server_t *s, char *err, size_t errlen);
void he__listeners_close(he_server_t *s);
/* The address of listen index li (plain or TLS, see he_server_t). */
const he_conf_listen_t *he__listener_conf(const he_server_t *s, unsigned li, bool *tls);

#endif
