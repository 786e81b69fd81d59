/* The origin fetch: one HTTP/1.1 request with failover, as a state machine
 * without I/O of its own. It says what to do next (socket, connect, send,
 * recv, close: he_cache_fetch_next) and consumes the result
 * (he_cache_fetch_complete); the worker turns each step into an SQE
 * (he_cache_io_prep), tests run them with blocking syscalls
 * (he_cache_fetch_run_sync); both are in fetch_io.c. One operation is in
 * flight at a time.
 *
 *   START    a pooled connection (-> REQUEST) or a new one (-> SOCKET)
 *   SOCKET   -> CONNECT -> (https) TLS handshake -> REQUEST
 *   REQUEST  the request bytes (ciphertext for https) -> SEND ... -> RECV
 *   RECV     bytes -> httpc parser -> sink, until the response is done
 *   then     the connection goes back to the pool, or CLOSE; DONE
 *
 * https runs OpenSSL on two memory BIOs: what SSL writes to the write BIO
 * goes out through the same SEND operations, what RECV gets is written
 * into the read BIO, so TLS never touches the socket and the ring stays
 * the only thing doing I/O.
 *
 * The sink sees the response head only together with the first body byte
 * (or the end of a bodiless response). Until then nothing has reached
 * the fill's waiters, so any failure can still move on to the next origin
 * cleanly; this is what "before any body byte went to waiters" means. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cache/obj.h"
#include "cache/origin.h"
#include "cache/origin_internal.h"
#include "cache/stats.h"

enum he_cache_fetch_state {
    HE_FS_START = 0,
    HE_FS_SOCKET,
    HE_FS_CONNECT,
    HE_FS_TLS,
    HE_FS_REQUEST,
    HE_FS_SEND,
    HE_FS_RECV,
    HE_FS_CLOSE,
    HE_FS_DONE
};

/* What one receive from the origin may bring. A cold segment of 1.9 MB
 * arrived in some 120 receives of 16 KiB, each parsed, copied into the
 * object and handed to every viewer waiting on it; at 256 KiB a miss
 * costs 1.3x less server CPU (docs/performance.md, "Cold misses"). It
 * is memory only while a fetch is under way (pbuf, a TLS origin's
 * plaintext, is as large). */
#define HE_FETCH_IBUF (256 * 1024)
/* A body received in place (he_fetch_room): iovecs of the sink's room per
 * receive, enough for HE_FETCH_IBUF in 16 KiB chunks none of which adjoin */
#define HE_FETCH_ROOM_IOV 17
#define HE_FETCH_OBUF 16384

struct he_cache_fetch {
    he_cache_parent_t parents[HE_CONF_MAX_ORIGINS];
    he_cache_origins_t *o;
    he_cache_stats_t *st;
    he_cache_sink_t sink;
    unsigned connect_ms, read_ms, total_ms;
    unsigned attempts_max, attempt, origin;
    bool head;
    char *target, *inm, *ims, *via;     /* via: the whole Via value to send, or NULL */
    uint8_t order[HE_CONF_MAX_ORIGINS]; /* he_cache_select_order, fixed at the start */
    uint64_t now_ms;                    /* of the last call in, for health marks */

    int state, after_send, after_close;
    he_cache_conn_t conn;
    bool reused;       /* conn came from the pool */
    bool pool_retried; /* the one retry after a dead pooled conn is spent */
    bool skip_pool;
    bool new_attempt;
    bool hs_done;   /* TLS handshake finished (always true for plain) */
    bool got_bytes; /* a response byte arrived on this connection */
    bool delivered; /* the sink saw the head: no more failover */
    he_cache_httpc_t parser;

    uint64_t attempt_deadline, op_deadline;
    he_cache_io_op_t inflight;
    bool op_expired;
    int result;
    he_cache_oerr_t cause;

    /* what SEND sends: obuf (TLS records), or for plain connections the
     * request itself in reqbuf, sized to it: a target may be as long as
     * limits.uri_bytes (up to 1 MiB) */
    const char *out;
    char *reqbuf;
    size_t olen, ooff;
    char obuf[HE_FETCH_OBUF];
    struct iovec room[HE_FETCH_ROOM_IOV];
    char ibuf[HE_FETCH_IBUF];
    char pbuf[HE_FETCH_IBUF]; /* TLS plaintext */
};

static const he_cache_parent_t *he_fetch_parents(const he_cache_origins_t *o,
                                                 he_cache_parent_t *out)
{
    for (unsigned i = 0; i < o->n; i++)
        out[i] = o->org[i].parent;
    return out;
}

static char *he_fetch_dup(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

he_cache_fetch_t *he_cache_fetch_new(he_cache_origins_t *o, const he_conf_t *conf,
                                     const he_cache_fetch_req_t *req, const he_cache_sink_t *sink,
                                     uint64_t now_ms, he_cache_stats_t *st)
{
    he_cache_fetch_t *f;
    (void)now_ms;
    if (!o || !o->n || !req->path || req->path[0] != '/') return NULL;
    f = calloc(1, sizeof(*f));
    if (!f) return NULL;
    f->o = o;
    f->st = st;
    f->sink = *sink;
    f->connect_ms = conf->origin_connect_timeout_ms;
    f->read_ms = conf->origin_read_timeout_ms;
    f->total_ms = conf->origin_total_timeout_ms;
    f->attempts_max = 1 + conf->origin_retries;
    f->head = req->head;
    f->now_ms = now_ms;
    he_cache_select_order(he_fetch_parents(o, f->parents), o->n, o->select, req->select_hash,
                          o->health, now_ms, f->order);
    f->origin = f->order[0];
    if (o->via[0] || (req->via_in && *req->via_in)) {
        size_t a = req->via_in ? strlen(req->via_in) : 0, b = strlen(o->via);
        if ((f->via = malloc(a + b + 3))) {
            /* a Via with CR or LF would end the request head: never forwarded */
            if (a && strpbrk(req->via_in, "\r\n")) a = 0;
            if (a) memcpy(f->via, req->via_in, a); /* via_in may be NULL when a is 0 */
            if (a && b) memcpy(f->via + a, ", ", 2), a += 2;
            memcpy(f->via + a, o->via, b + 1);
            if (!f->via[0]) {
                free(f->via);
                f->via = NULL;
            }
        }
    }
    f->target = strdup(req->path);
    f->inm = he_fetch_dup(req->inm);
    f->ims = he_fetch_dup(req->ims);
    f->conn.fd = -1;
    f->new_attempt = true;
    f->state = HE_FS_START;
    if (!f->target || ((o->via[0] || (req->via_in && *req->via_in)) && !f->via) ||
        (req->inm && *req->inm && !f->inm) || (req->ims && *req->ims && !f->ims)) {
        he_cache_fetch_free(f);
        return NULL;
    }
    return f;
}

const char *he_cache_fetch_target(const he_cache_fetch_t *f)
{
    return f->target;
}

void he_cache_fetch_free(he_cache_fetch_t *f)
{
    if (!f) return;
    he_cache_conn_close(&f->conn);
    free(f->reqbuf);
    free(f->target);
    free(f->inm);
    free(f->ims);
    free(f->via);
    free(f);
}

void he_cache_fetch_req_validators(he_cache_fetch_req_t *req, const he_cache_obj_t *stale)
{
    const he_cache_meta_t *m = he_cache_obj_meta(stale);
    req->inm = m->etag[0] ? m->etag : NULL;
    req->ims = m->last_modified[0] ? m->last_modified : NULL;
}

/* ---------------------------------------------------------------- outcomes */

/* Drops the connection: TLS state now, the socket through a CLOSE op. */
static void he_fetch_drop(he_cache_fetch_t *f)
{
    if (f->conn.tls) SSL_free(f->conn.tls);
    f->conn.tls = NULL;
    f->state = f->conn.fd >= 0 ? HE_FS_CLOSE : f->after_close;
}

/* A failure of the current attempt: the next origin if nothing reached the
 * sink and attempts are left, else the end. */
static void he_fetch_fail(he_cache_fetch_t *f, int err, he_cache_oerr_t cause)
{
    if (f->st) {
        f->st->origin_errors[cause]++;
        if (f->origin < HE_CONF_MAX_ORIGINS) f->st->parent_errors[f->origin]++;
    }
    ERR_clear_error();
    /* the parent's fault, not the response's: skipped by every worker for
     * origin.down_time (a truncated body or a protocol error is not) */
    if (cause == HE_CACHE_OERR_CONNECT || cause == HE_CACHE_OERR_TIMEOUT_CONNECT ||
        cause == HE_CACHE_OERR_TIMEOUT_READ || cause == HE_CACHE_OERR_TIMEOUT_TOTAL ||
        cause == HE_CACHE_OERR_STATUS_5XX) {
        if (he_cache_health_fail(f->o->health, f->origin, f->now_ms) && f->st)
            f->st->parent_marked_down++;
    }
    /* a 5xx is an answer, cheap to retry: even with origin.retries 0 the
     * fill's waiters get one more try on another origin when there is one,
     * rather than all failing together on one parent's error */
    if (cause == HE_CACHE_OERR_STATUS_5XX && f->attempts_max == 1 && f->o->n > 1)
        f->attempts_max = 2;
    if (!f->delivered && f->attempt + 1 < f->attempts_max) {
        f->attempt++;
        f->origin = f->order[f->attempt % f->o->n];
        f->new_attempt = true;
        f->skip_pool = f->pool_retried = false;
        if (f->st) f->st->origin_failovers++;
        f->after_close = HE_FS_START;
    } else {
        f->result = err < 0 ? err : -EIO;
        f->cause = cause;
        f->after_close = HE_FS_DONE;
    }
    he_fetch_drop(f);
}

/* The sink refused (out of memory, say): not the origin's fault. */
static void he_fetch_abort(he_cache_fetch_t *f, int err)
{
    f->result = err;
    f->cause = HE_CACHE_OERR_IO;
    f->after_close = HE_FS_DONE;
    he_fetch_drop(f);
}

/* A pooled connection the origin had closed: once, a fresh one. */
static bool he_fetch_dead_pooled(he_cache_fetch_t *f)
{
    if (!f->reused || f->got_bytes || f->pool_retried) return false;
    f->pool_retried = f->skip_pool = true;
    f->after_close = HE_FS_START;
    he_fetch_drop(f);
    return true;
}

static int he_fetch_deliver_head(he_cache_fetch_t *f)
{
    int rc;
    if (f->delivered) return 0;
    f->delivered = true;
    he_cache_health_ok(f->o->health, f->origin);
    rc = f->sink.headers ? f->sink.headers(f->sink.ctx, &f->parser.resp) : 0;
    if (rc < 0) he_fetch_abort(f, rc);
    return rc;
}

static void he_fetch_finish(he_cache_fetch_t *f, bool leftover, uint64_t now_ms)
{
    SSL *s = f->conn.tls;
    if (he_fetch_deliver_head(f) < 0) return;
    f->result = 0;
    if (f->parser.resp.keepalive && !leftover && f->o->pool_max &&
        (!s || (SSL_pending(s) == 0 && BIO_ctrl_pending(SSL_get_rbio(s)) == 0))) {
        he_cache_pool_put(f->o, f->origin, &f->conn, now_ms);
        f->state = HE_FS_DONE;
        return;
    }
    f->after_close = HE_FS_DONE;
    he_fetch_drop(f);
}

/* Plaintext from the origin. 1: the response is complete (state set),
 * 0: want more, -1: failed (state set). */
static int he_fetch_feed(he_cache_fetch_t *f, const char *d, size_t n, uint64_t now_ms)
{
    if (n) f->got_bytes = true;
    for (;;) {
        size_t used, bl;
        const char *b;
        int ev = he_cache_httpc_parse(&f->parser, d, n, &used, &b, &bl);
        if (ev < 0) {
            he_fetch_fail(f, ev, f->delivered ? HE_CACHE_OERR_TRUNCATED : HE_CACHE_OERR_PROTOCOL);
            return -1;
        }
        d += used;
        n -= used;
        switch (ev) {
        case HE_CACHE_HTTPC_MORE:
            return 0;
        case HE_CACHE_HTTPC_HEADERS:
            if (f->parser.resp.status >= 500) {
                he_fetch_fail(f, -EREMOTEIO, HE_CACHE_OERR_STATUS_5XX);
                return -1;
            }
            break;
        case HE_CACHE_HTTPC_BODY:
            if (he_fetch_deliver_head(f) < 0) return -1;
            if (bl && f->sink.body) {
                int rc = f->sink.body(f->sink.ctx, b, bl);
                if (rc < 0) {
                    he_fetch_abort(f, rc);
                    return -1;
                }
            }
            break;
        case HE_CACHE_HTTPC_DONE:
            he_fetch_finish(f, n > 0, now_ms);
            return 1;
        }
    }
}

/* Room in the sink for the next body bytes, to receive them in place:
 * the copy from the buffer into the object was a fifth of a cold miss's
 * CPU at first (docs/performance.md, "Cold misses"). Only for a plain
 * connection whose head the sink has seen, with a Content-Length or
 * until-close body: a chunked one keeps to the buffer, where its framing
 * is checked as it passes. At most the rest of the body, so no byte of
 * whatever follows lands in the sink. The iovec count, 0 for the buffer. */
static unsigned he_fetch_room(he_cache_fetch_t *f)
{
    uint64_t left;
    if (f->conn.tls || !f->delivered || !f->sink.space || !f->sink.placed || f->parser.resp.chunked)
        return 0;
    left = he_cache_httpc_payload_left(&f->parser);
    if (left == 0) return 0;
    if (left > HE_FETCH_IBUF) left = HE_FETCH_IBUF;
    return f->sink.space(f->sink.ctx, f->room, HE_FETCH_ROOM_IOV, (size_t)left);
}

/* n body bytes arrived in the room he_fetch_room found */
static void he_fetch_placed(he_cache_fetch_t *f, size_t n, uint64_t now_ms)
{
    int rc;
    f->got_bytes = true;
    he_cache_httpc_payload_taken(&f->parser, n);
    if ((rc = f->sink.placed(f->sink.ctx, n)) < 0) {
        he_fetch_abort(f, rc);
        return;
    }
    he_fetch_feed(f, f->ibuf, 0, now_ms); /* the end, if they ended the body */
}

/* ---------------------------------------------------------------- TLS */

static int he_fetch_tls_start(he_cache_fetch_t *f)
{
    const he_cache_origin_t *org = &f->o->org[f->origin];
    SSL *s = SSL_new(f->o->ssl_ctx);
    BIO *r = BIO_new(BIO_s_mem()), *w = BIO_new(BIO_s_mem());
    if (!s || !r || !w) goto fail;
    BIO_set_mem_eof_return(r, -1); /* empty means "not yet", not EOF */
    BIO_set_mem_eof_return(w, -1);
    SSL_set_bio(s, r, w);
    r = w = NULL;
    SSL_set_connect_state(s);
    if (org->host_is_ip) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), org->host) != 1) goto fail;
    } else if (SSL_set_tlsext_host_name(s, org->host) != 1 || SSL_set1_host(s, org->host) != 1) {
        goto fail;
    }
    f->conn.tls = s;
    return 0;
fail:
    BIO_free(r);
    BIO_free(w);
    SSL_free(s);
    return -ENOMEM;
}

/* Moves ciphertext waiting in the write BIO to obuf. True if there was some. */
static bool he_fetch_tls_pull(he_cache_fetch_t *f)
{
    BIO *w = SSL_get_wbio(f->conn.tls);
    int n;
    if (BIO_ctrl_pending(w) == 0) return false;
    n = BIO_read(w, f->obuf, sizeof(f->obuf));
    if (n <= 0) return false;
    f->out = f->obuf;
    f->olen = (size_t)n;
    f->ooff = 0;
    return true;
}

/* Ciphertext received: decrypt and feed what is there. */
static void he_fetch_tls_recv(he_cache_fetch_t *f, const char *d, size_t n, uint64_t now_ms)
{
    SSL *s = f->conn.tls;
    if (BIO_write(SSL_get_rbio(s), d, (int)n) != (int)n) {
        he_fetch_fail(f, -ENOMEM, HE_CACHE_OERR_TLS);
        return;
    }
    if (!f->hs_done) {
        f->state = HE_FS_TLS;
        return;
    }
    for (;;) {
        int r = SSL_read(s, f->pbuf, sizeof(f->pbuf));
        if (r > 0) {
            if (he_fetch_feed(f, f->pbuf, (size_t)r, now_ms) != 0) return;
            continue;
        }
        int e = SSL_get_error(s, r);
        if (e == SSL_ERROR_WANT_READ) break;
        if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify */
            if (he_cache_httpc_eof(&f->parser) == HE_CACHE_HTTPC_DONE)
                he_fetch_finish(f, true, now_ms);
            else if (!he_fetch_dead_pooled(f))
                he_fetch_fail(f, -EPIPE, f->got_bytes ? HE_CACHE_OERR_TRUNCATED : HE_CACHE_OERR_IO);
            return;
        }
        he_fetch_fail(f, -EPROTO, HE_CACHE_OERR_TLS);
        return;
    }
    /* key updates and the like want to be answered */
    if (he_fetch_tls_pull(f)) {
        f->after_send = HE_FS_RECV;
        f->state = HE_FS_SEND;
    }
}

/* ---------------------------------------------------------------- steps */

static uint64_t he_fetch_min_deadline(uint64_t a, uint64_t b)
{
    return a && (!b || a < b) ? a : b;
}

/* The request bytes for the current origin, in a buffer of their own
 * (*out, to free): the target is sent whole, however long. */
static int he_fetch_build(he_cache_fetch_t *f, char **out)
{
    const he_cache_origin_t *org = &f->o->org[f->origin];
    size_t pcap = strlen(org->base) + strlen(f->target) + 1, cap;
    char *path = malloc(pcap), *req = NULL;
    int n;

    *out = NULL;
    if (!path) return -ENOMEM;
    n = he_cache_origin_path(org, f->target, path, pcap);
    /* the head's other lines are short; grown if they are not */
    cap = (size_t)(n > 0 ? n : 0) + strlen(org->authority) + (f->inm ? strlen(f->inm) : 0) +
          (f->via ? strlen(f->via) : 0) + (f->ims ? strlen(f->ims) : 0) + 512;
    while (n >= 0) {
        if (!(req = malloc(cap))) {
            n = -ENOMEM;
            break;
        }
        n = he_cache_httpc_request_via(req, cap, f->head ? "HEAD" : "GET", org->authority, path,
                                       f->inm, f->ims, f->via);
        if (n != -ENOSPC || cap > (64u << 20)) break;
        free(req);
        req = NULL;
        cap *= 2;
    }
    free(path);
    if (n < 0) {
        free(req);
        return n;
    }
    *out = req;
    return n;
}

static int he_fetch_request(he_cache_fetch_t *f)
{
    char *req;
    int n = he_fetch_build(f, &req);
    if (n < 0) return n;
    he_cache_httpc_init(&f->parser, f->head);
    f->got_bytes = false;
    if (f->st) {
        f->st->origin_requests++;
        if (f->origin < HE_CONF_MAX_ORIGINS) f->st->parent_requests[f->origin]++;
        if (f->reused) f->st->origin_reused++;
    }
    free(f->reqbuf); /* a retry's: the last request went (or failed) */
    f->reqbuf = NULL;
    if (f->conn.tls) {
        /* the write BIO takes all of it; SEND drains it obuf by obuf */
        bool ok = SSL_write(f->conn.tls, req, n) == n;
        free(req);
        if (!ok || !he_fetch_tls_pull(f)) return -EPROTO;
    } else {
        f->reqbuf = req;
        f->out = req;
        f->olen = (size_t)n;
        f->ooff = 0;
    }
    f->after_send = HE_FS_RECV;
    f->state = HE_FS_SEND;
    return 0;
}

he_cache_io_op_t he_cache_fetch_next(he_cache_fetch_t *f, uint64_t now_ms, he_cache_io_t *io)
{
    const he_cache_origin_t *org;
    int rc;
    f->now_ms = now_ms;
    memset(io, 0, sizeof(*io));
    io->fd = -1;
    for (;;) {
        org = &f->o->org[f->origin];
        if (f->state != HE_FS_DONE && f->state != HE_FS_CLOSE && f->state != HE_FS_START &&
            now_ms >= f->attempt_deadline) {
            he_fetch_fail(f, -ETIMEDOUT, HE_CACHE_OERR_TIMEOUT_TOTAL);
            continue;
        }
        switch (f->state) {
        case HE_FS_START:
            if (f->new_attempt) {
                f->attempt_deadline = now_ms + f->total_ms;
                f->new_attempt = false;
            }
            f->got_bytes = false;
            if (!f->skip_pool && he_cache_pool_get(f->o, f->origin, now_ms, &f->conn)) {
                f->reused = f->hs_done = true;
                f->state = HE_FS_REQUEST;
                continue;
            }
            f->reused = false;
            f->state = HE_FS_SOCKET;
            continue;
        case HE_FS_SOCKET:
            io->op = HE_CACHE_IO_SOCKET;
            io->family = org->addr.ss_family;
            break;
        case HE_FS_CONNECT:
            io->op = HE_CACHE_IO_CONNECT;
            io->fd = f->conn.fd;
            io->addr = (const struct sockaddr *)&org->addr;
            io->addrlen = org->addrlen;
            io->deadline_ms = he_fetch_min_deadline(now_ms + f->connect_ms, f->attempt_deadline);
            break;
        case HE_FS_TLS: {
            int r = SSL_do_handshake(f->conn.tls), e;
            if (r == 1) {
                f->hs_done = true;
                f->state = HE_FS_REQUEST;
                continue;
            }
            e = SSL_get_error(f->conn.tls, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                he_fetch_fail(f, -EPROTO, HE_CACHE_OERR_TLS);
                continue;
            }
            if (he_fetch_tls_pull(f)) {
                f->after_send = HE_FS_TLS;
                f->state = HE_FS_SEND;
            } else {
                f->state = HE_FS_RECV;
            }
            continue;
        }
        case HE_FS_REQUEST:
            if ((rc = he_fetch_request(f)) < 0) {
                /* our own request cannot be built: no origin will do better */
                f->attempt = f->attempts_max;
                he_fetch_fail(f, rc, HE_CACHE_OERR_PROTOCOL);
            }
            continue;
        case HE_FS_SEND:
            if (f->ooff == f->olen) {
                if (f->conn.tls && he_fetch_tls_pull(f)) continue;
                if (f->out == f->reqbuf) {
                    free(f->reqbuf);
                    f->reqbuf = NULL;
                    f->out = NULL;
                }
                f->state = f->after_send;
                continue;
            }
            io->op = HE_CACHE_IO_SEND;
            io->fd = f->conn.fd;
            io->buf = (char *)f->out + f->ooff;
            io->len = f->olen - f->ooff;
            io->deadline_ms = he_fetch_min_deadline(now_ms + f->read_ms, f->attempt_deadline);
            break;
        case HE_FS_RECV:
            io->op = HE_CACHE_IO_RECV;
            io->fd = f->conn.fd;
            io->buf = f->ibuf;
            io->len = sizeof(f->ibuf);
            if ((io->iovcnt = he_fetch_room(f)) > 0) {
                io->op = HE_CACHE_IO_READV;
                io->iov = f->room;
            }
            io->deadline_ms = he_fetch_min_deadline(now_ms + f->read_ms, f->attempt_deadline);
            break;
        case HE_FS_CLOSE:
            io->op = HE_CACHE_IO_CLOSE;
            io->fd = f->conn.fd;
            break;
        default:
            io->op = HE_CACHE_IO_DONE;
            return io->op;
        }
        f->inflight = io->op;
        f->op_deadline = io->deadline_ms;
        f->op_expired = false;
        return io->op;
    }
}

static bool he_fetch_timed_out(he_cache_fetch_t *f, int res, uint64_t now_ms)
{
    if (res == -ETIME || res == -ETIMEDOUT) return true;
    return res == -ECANCELED && (f->op_expired || (f->op_deadline && now_ms >= f->op_deadline));
}

static void he_fetch_timeout(he_cache_fetch_t *f, he_cache_io_op_t op, uint64_t now_ms)
{
    he_cache_oerr_t c = now_ms >= f->attempt_deadline ? HE_CACHE_OERR_TIMEOUT_TOTAL
                        : op == HE_CACHE_IO_CONNECT   ? HE_CACHE_OERR_TIMEOUT_CONNECT
                                                      : HE_CACHE_OERR_TIMEOUT_READ;
    he_fetch_fail(f, -ETIMEDOUT, c);
}

void he_cache_fetch_complete(he_cache_fetch_t *f, int res, uint64_t now_ms)
{
    he_cache_io_op_t op = f->inflight;
    f->inflight = HE_CACHE_IO_NONE;
    f->now_ms = now_ms;
    switch (op) {
    case HE_CACHE_IO_SOCKET:
        if (res < 0) {
            he_fetch_fail(f, res, HE_CACHE_OERR_CONNECT);
            break;
        }
        f->conn.fd = res;
        f->conn.tls = NULL;
        f->state = HE_FS_CONNECT;
        break;
    case HE_CACHE_IO_CONNECT:
        if (res < 0) {
            if (he_fetch_timed_out(f, res, now_ms))
                he_fetch_timeout(f, op, now_ms);
            else
                he_fetch_fail(f, res, HE_CACHE_OERR_CONNECT);
            break;
        }
        if (f->o->org[f->origin].tls) {
            if (he_fetch_tls_start(f) < 0) {
                he_fetch_fail(f, -ENOMEM, HE_CACHE_OERR_TLS);
                break;
            }
            f->hs_done = false;
            f->state = HE_FS_TLS;
        } else {
            f->hs_done = true;
            f->state = HE_FS_REQUEST;
        }
        break;
    case HE_CACHE_IO_SEND:
        if (res < 0) {
            if (he_fetch_timed_out(f, res, now_ms))
                he_fetch_timeout(f, op, now_ms);
            else if ((res == -EPIPE || res == -ECONNRESET) && he_fetch_dead_pooled(f))
                ;
            else
                he_fetch_fail(f, res, f->hs_done ? HE_CACHE_OERR_IO : HE_CACHE_OERR_TLS);
            break;
        }
        f->ooff += (size_t)res;
        break;
    case HE_CACHE_IO_RECV:
    case HE_CACHE_IO_READV:
        if (res < 0) {
            if (he_fetch_timed_out(f, res, now_ms))
                he_fetch_timeout(f, op, now_ms);
            else if (res == -ECONNRESET && he_fetch_dead_pooled(f))
                ;
            else
                he_fetch_fail(f, res, f->hs_done ? HE_CACHE_OERR_IO : HE_CACHE_OERR_TLS);
            break;
        }
        if (res == 0) {
            if (!f->hs_done)
                he_fetch_fail(f, -ECONNRESET, HE_CACHE_OERR_TLS);
            else if (he_cache_httpc_eof(&f->parser) == HE_CACHE_HTTPC_DONE)
                he_fetch_finish(f, true, now_ms); /* read-until-close body */
            else if (!he_fetch_dead_pooled(f))
                he_fetch_fail(f, -EPIPE, f->got_bytes ? HE_CACHE_OERR_TRUNCATED : HE_CACHE_OERR_IO);
            break;
        }
        if (op == HE_CACHE_IO_READV)
            he_fetch_placed(f, (size_t)res, now_ms);
        else if (f->conn.tls)
            he_fetch_tls_recv(f, f->ibuf, (size_t)res, now_ms);
        else
            he_fetch_feed(f, f->ibuf, (size_t)res, now_ms);
        break;
    case HE_CACHE_IO_CLOSE:
        f->conn.fd = -1;
        f->state = f->after_close;
        break;
    default:
        break;
    }
}

bool he_cache_fetch_expired(he_cache_fetch_t *f, uint64_t now_ms)
{
    if (f->inflight == HE_CACHE_IO_NONE || !f->op_deadline || now_ms < f->op_deadline) return false;
    f->op_expired = true;
    return true;
}

uint64_t he_cache_fetch_deadline(const he_cache_fetch_t *f)
{
    return f->inflight != HE_CACHE_IO_NONE ? f->op_deadline : 0;
}

int he_cache_fetch_result(const he_cache_fetch_t *f, he_cache_oerr_t *cause)
{
    if (cause) *cause = f->cause;
    return f->state == HE_FS_DONE ? f->result : -EINPROGRESS;
}

unsigned he_cache_fetch_origin(const he_cache_fetch_t *f)
{
    return f->origin;
}
