/* cache: the origin client: the response head, its parser (httpc.c),
 * origins and their keep-alive pools (origin.c, pool.c) and the fetch
 * (fetch.c, fetch_io.c). */
#ifndef HE_CACHE_ORIGIN_H
#define HE_CACHE_ORIGIN_H

#include <liburing.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "cache/fresh.h"
#include "cache/obj.h"
#include "cache/select.h"
#include "cache/stats.h"
#include "conf/conf.h"
#include "segment/httpresp.h"

/* Response head fields the cache needs (filled by the origin parser). */
typedef struct he_cache_http_resp {
    int status;
    int64_t content_length; /* -1 when absent */
    bool chunked;
    bool keepalive;
    bool no_body;  /* 1xx/204/304 or a HEAD request */
    int64_t age_s; /* Age, -1 when absent */
    char content_type[96];
    char etag[96];
    char last_modified[40];
    char date[40];
    char expires[40];
    /* "" for identity: we ask for identity, but stores (S3, GCS) answer
     * with the encoding an object was stored with */
    char content_encoding[32];
    he_cache_cc_t cc;
    /* never stored: a Set-Cookie is one viewer's; Vary: * never matches
     * (a Vary on fields is fine: no viewer's header goes to the origin) */
    bool set_cookie;
    bool vary; /* Vary: * */
} he_cache_http_resp_t;

/* The origin response parser: segment/httpresp.h (llhttp) with the head
 * fields the cache reads (httpc.c). */
typedef enum he_cache_httpc_ev {
    HE_CACHE_HTTPC_MORE = HE_HTTPRESP_MORE,       /* all input used, need more */
    HE_CACHE_HTTPC_HEADERS = HE_HTTPRESP_HEADERS, /* the head is parsed: see p->resp */
    HE_CACHE_HTTPC_BODY = HE_HTTPRESP_BODY,       /* *body, *body_len hold payload bytes */
    HE_CACHE_HTTPC_DONE = HE_HTTPRESP_DONE        /* the response is complete */
} he_cache_httpc_ev_t;

#define HE_CACHE_HTTPC_HEAD_MAX HE_HTTPRESP_HEAD_MAX

typedef struct he_cache_httpc {
    he_cache_http_resp_t resp;
    he_httpresp_t hr;
    char value[HE_HTTPRESP_LINE_MAX + 1]; /* the field value being read */
} he_cache_httpc_t;

void he_cache_httpc_init(he_cache_httpc_t *p, bool head_request);
/* Consumes up to len bytes (*used reports how many) and returns the next
 * event, or -EPROTO (malformed), -E2BIG (head too large). A header line
 * longer than HE_HTTPRESP_LINE_MAX is skipped if the parser does not read
 * that field, else -EPROTO (a framing or caching header must be read
 * whole). */
int he_cache_httpc_parse(he_cache_httpc_t *p, const char *data, size_t len, size_t *used,
                         const char **body, size_t *body_len);
/* The peer closed: DONE if the body ends at close, else -EPIPE. */
int he_cache_httpc_eof(he_cache_httpc_t *p);
/* Bytes of a body in progress that are payload only (the rest of a
 * Content-Length body or chunk, UINT64_MAX until close, else 0), and
 * accounting for n of them received elsewhere (he_httpresp_skip). */
uint64_t he_cache_httpc_payload_left(const he_cache_httpc_t *p);
void he_cache_httpc_payload_taken(he_cache_httpc_t *p, uint64_t n);
/* Writes "GET <path> HTTP/1.1" with Host, conditional validators (either
 * may be NULL or ""), keep-alive. Returns the length or -ENOSPC. */
int he_cache_httpc_request(char *out, size_t cap, const char *host, const char *path,
                           const char *inm, const char *ims);

/* Same with any method ("GET", "HEAD"). */
int he_cache_httpc_request_method(char *out, size_t cap, const char *method, const char *host,
                                  const char *path, const char *inm, const char *ims);
/* Same with a Via field (NULL or "": none). */
int he_cache_httpc_request_via(char *out, size_t cap, const char *method, const char *host,
                               const char *path, const char *inm, const char *ims, const char *via);

/* ---- origins (origin.c, pool.c)
 *
 * Start-up or reload, on the control thread (blocking, may resolve DNS):
 *     he_cache_origin_t list[HE_CONF_MAX_ORIGINS];
 *     int n = he_cache_origins_resolve(conf, list, err, sizeof(err));
 * then per worker (loads the CA store if any origin is https):
 *     he_cache_origins_opts_t oo = {.conf = conf, .origins = list, .norigins = n};
 *     he_cache_origins_new(&worker->origins, &oo, err, sizeof(err));
 * Names are resolved only there (getaddrinfo, first address); nothing on
 * the ring ever resolves. A reload resolves again and gives each worker a
 * new he_cache_origins_t; the worker frees the old one once no fetch uses
 * it (fetches point at it). */

/* One origin base URL, parsed and resolved: plain data, copy it freely. */
typedef struct he_cache_origin {
    bool tls;        /* https */
    bool host_is_ip; /* a literal: no SNI, the certificate must name the IP */
    uint16_t port;
    char host[256];      /* name or address, without brackets */
    char authority[272]; /* Host header: "host", "host:port", "[v6]:port" */
    char base[512];      /* path prefix without a trailing '/'; "" for none */
    struct sockaddr_storage addr;
    socklen_t addrlen;        /* 0: not resolved (a name, he_cache_origin_parse only) */
    he_cache_parent_t parent; /* weight (" weight=N", else 1) and id for origin.select: hash */
} he_cache_origin_t;

/* Parses "http[s]://host[:port][/prefix]" (IPv6 as [addr]), optionally
 * followed by " weight=N"; numeric hosts get their address, names are left
 * unresolved. 0 or -EINVAL (err set). */
int he_cache_origin_parse(const char *url, he_cache_origin_t *o, char *err, size_t errlen);
/* Parses and resolves conf->origin_urls in order (getaddrinfo for names:
 * control thread only). Returns the count, or -EINVAL / -EHOSTUNREACH
 * with err naming the URL. */
int he_cache_origins_resolve(const he_conf_t *conf, he_cache_origin_t *out, char *err,
                             size_t errlen);
/* Joins the origin's base and an origin-form target: "/vod" + "/a.ts?x"
 * -> "/vod/a.ts?x". Length or -ENAMETOOLONG / -EINVAL. */
int he_cache_origin_path(const he_cache_origin_t *o, const char *target, char *out, size_t cap);

/* A worker's view of the origins: the resolved list, its keep-alive pools
 * and its TLS context. Used by one thread only. */
typedef struct he_cache_origins he_cache_origins_t;

typedef struct he_cache_origins_opts {
    const he_conf_t *conf;            /* origin_pool: idle connections kept per origin */
    const he_cache_origin_t *origins; /* he_cache_origins_resolve's output */
    unsigned norigins;
    const char *tls_ca_file; /* NULL: the system store; tests: a private CA (PEM) */
    /* shared by the workers of a generation (select.h); NULL: one of its
     * own, made from conf (origin.down_time) */
    he_cache_health_t *health;
    /* sent to the origins as "Via: <via>" after the request's own Via;
     * NULL or "": none */
    const char *via;
} he_cache_origins_opts_t;

int he_cache_origins_new(he_cache_origins_t **out, const he_cache_origins_opts_t *opts, char *err,
                         size_t errlen);
void he_cache_origins_free(he_cache_origins_t *o); /* closes pooled fds */
unsigned he_cache_origins_count(const he_cache_origins_t *o);
const he_cache_origin_t *he_cache_origins_get(const he_cache_origins_t *o, unsigned i);
/* The health table the fetches read and mark (shared or its own). */
he_cache_health_t *he_cache_origins_health(const he_cache_origins_t *o);

/* A connection to an origin: the socket and, for https, its TLS state
 * (an SSL * with memory BIOs). */
typedef struct he_cache_conn {
    int fd;
    void *tls; /* SSL *, or NULL */
    uint64_t idle_since_ms;
} he_cache_conn_t;

/* The keep-alive pool: the most recently used idle connection to origin
 * i (checked with a non-blocking MSG_PEEK: one the origin closed is
 * dropped), or false. */
bool he_cache_pool_get(he_cache_origins_t *o, unsigned i, uint64_t now_ms, he_cache_conn_t *c);
/* Returns a connection: kept, or closed here (close(2)) if the pool is full. */
void he_cache_pool_put(he_cache_origins_t *o, unsigned i, he_cache_conn_t *c, uint64_t now_ms);
/* Closes connections idle for longer than idle_ms. */
void he_cache_pool_expire(he_cache_origins_t *o, uint64_t now_ms, uint64_t idle_ms);
unsigned he_cache_pool_idle(const he_cache_origins_t *o, unsigned i);
/* Closes a connection that is not pooled (frees its TLS state). */
void he_cache_conn_close(he_cache_conn_t *c);

/* ---- the fetch: one origin request, as a state machine without I/O */

/* What an origin fetch wants done next. */
typedef enum he_cache_io_op {
    HE_CACHE_IO_NONE = 0,
    HE_CACHE_IO_SOCKET,  /* socket(family, SOCK_STREAM|NONBLOCK|CLOEXEC): res = fd */
    HE_CACHE_IO_CONNECT, /* connect(fd, addr) */
    HE_CACHE_IO_SEND,    /* send(fd, buf, len, MSG_NOSIGNAL) */
    HE_CACHE_IO_RECV,    /* recv(fd, buf, len, 0) */
    HE_CACHE_IO_READV,   /* readv(fd, iov, iovcnt): body bytes received in place */
    HE_CACHE_IO_CLOSE,   /* close(fd); res ignored */
    HE_CACHE_IO_DONE     /* finished: see he_cache_fetch_result */
} he_cache_io_op_t;

typedef struct he_cache_io {
    he_cache_io_op_t op;
    int fd;
    int family;
    const struct sockaddr *addr; /* valid until the op completes */
    socklen_t addrlen;
    void *buf; /* owned by the fetch: valid until the op completes */
    size_t len;
    const struct iovec *iov; /* READV: the sink's room, valid until the op completes */
    unsigned iovcnt;
    uint64_t deadline_ms; /* monotonic; 0 = none. Past it, cancel the op */
} he_cache_io_t;

/* Prepares io on an SQE (IORING_OP_SOCKET needs kernel 5.19; the caller
 * may run socket() itself and complete with its result). The caller sets
 * user_data and, for a deadline, links an IORING_OP_LINK_TIMEOUT of
 * deadline_ms - now (the op then completes with -ECANCELED), or runs its
 * own timer and asks he_cache_fetch_expired. */
void he_cache_io_prep(const he_cache_io_t *io, struct io_uring_sqe *sqe);
/* Runs io with plain syscalls, waiting (poll) at most until deadline_ms
 * as measured by now_ms: -ETIME past it. For tests and tools. */
int he_cache_io_run_sync(const he_cache_io_t *io, uint64_t now_ms);

/* Where an origin fetch delivers what it receives (the fill). headers
 * comes with the first body byte, or with the end of a response without
 * body, never earlier: until then a failure can still move to the next
 * origin without the sink having seen anything. */
typedef struct he_cache_sink {
    void *ctx;
    /* 0 to go on, negative to abort (the fetch then closes) */
    int (*headers)(void *ctx, const he_cache_http_resp_t *r);
    int (*body)(void *ctx, const char *p, size_t n);
    /* Optional, for a body to be received in place instead of through the
     * fetch's buffer and body: up to max iovecs of room at the end of what
     * the sink holds, for at most want more bytes; their count, 0 when it
     * has none. placed: the next n bytes were received into that room, in
     * order; 0 or negative as body. */
    unsigned (*space)(void *ctx, struct iovec *iov, unsigned max, size_t want);
    int (*placed)(void *ctx, size_t n);
} he_cache_sink_t;

typedef struct he_cache_fetch he_cache_fetch_t;

typedef struct he_cache_fetch_req {
    const char *path; /* origin-form target below the origin's base, "/a/b.ts?x=1" */
    const char *inm;  /* If-None-Match or NULL */
    const char *ims;  /* If-Modified-Since or NULL */
    bool head;        /* HEAD instead of GET */
    /* origin.select: hash: the hash of the cache key's path
     * (he_cache_select_key); ignored by ordered */
    uint64_t select_hash;
    /* the Via of the request the fill is for (NULL: none): forwarded with
     * ours appended, so a loop through several boxes is seen by each */
    const char *via_in;
} he_cache_fetch_req_t;

/* Sets inm/ims from a stale object being revalidated (its ETag and
 * Last-Modified; they point into the object's meta). */
void he_cache_fetch_req_validators(he_cache_fetch_req_t *req, const he_cache_obj_t *stale);

/* One origin request with failover: the origins are ordered once, when
 * the fetch starts (he_cache_select_order: origin.select, health), and
 * attempt k goes to the k-th of them (mod n), up to 1 + origin_retries
 * attempts; a 5xx on the first attempt always gets one more on another
 * origin when there is one, even with origin_retries 0, so one parent's
 * error does not fail every waiter of a fill. A connect failure, a timeout or a 5xx marks the
 * origin down (origin.down_time) for every worker; an answer marks it up. A connect error or
 * timeout, a reset, a malformed head, a 5xx or a read/total timeout before the sink saw anything
 * moves to the next origin; after that the fetch ends. A 5xx on the last attempt ends the fetch
 * with an error (cause STATUS_5XX), so the fill can serve stale-if-error. A pooled connection that
 * turns out dead (send fails, or EOF/reset before any response byte) is retried once on a fresh
 * connection without counting as an attempt. Timeouts: connect (per connect), read (per send/recv),
 * total (per attempt, the whole response). Every failure is counted once in st->origin_errors by
 * cause. req's strings are copied. NULL on -ENOMEM or -ENAMETOOLONG. */
he_cache_fetch_t *he_cache_fetch_new(he_cache_origins_t *o, const he_conf_t *conf,
                                     const he_cache_fetch_req_t *req, const he_cache_sink_t *sink,
                                     uint64_t now_ms, he_cache_stats_t *st);
/* The next operation to run (fills io), or HE_CACHE_IO_DONE. One
 * operation is in flight at a time: call _complete before the next _next. */
he_cache_io_op_t he_cache_fetch_next(he_cache_fetch_t *f, uint64_t now_ms, he_cache_io_t *io);
/* The result of the operation returned by the last _next. -ECANCELED
 * after its deadline (or after _expired said true) and -ETIME count as a
 * timeout. */
void he_cache_fetch_complete(he_cache_fetch_t *f, int res, uint64_t now_ms);
/* Called by the caller's timer: true if the in-flight op's deadline passed
 * (cancel it; its completion then counts as a timeout). */
bool he_cache_fetch_expired(he_cache_fetch_t *f, uint64_t now_ms);
/* The deadline of the op in flight (0 = none), for the caller's timer. */
uint64_t he_cache_fetch_deadline(const he_cache_fetch_t *f);
/* After DONE: 0 success (the sink saw the whole response), or -errno with
 * *cause set (cause may be NULL). */
int he_cache_fetch_result(const he_cache_fetch_t *f, he_cache_oerr_t *cause);
/* The origin index that answered (or was tried last). */
unsigned he_cache_fetch_origin(const he_cache_fetch_t *f);
/* The request-target it was made with (req->path); the fetch keeps it. */
const char *he_cache_fetch_target(const he_cache_fetch_t *f);
/* Only with no operation in flight (after DONE, or after the in-flight
 * op's completion was fed back): closes its connection with close(2). */
void he_cache_fetch_free(he_cache_fetch_t *f);
/* Drives a fetch to the end with blocking syscalls (tests, tools); clock_ms
 * is the monotonic clock (NULL: CLOCK_MONOTONIC). Returns the result. */
int he_cache_fetch_run_sync(he_cache_fetch_t *f, uint64_t (*clock_ms)(void));

#endif
