/* loadgen: one client connection driven through its thread's io_uring:
 * connect, send a GET, receive the head into a small buffer, then the body:
 * dropped in the kernel with MSG_TRUNC when nobody needs the bytes, read into
 * provided buffers when they must be seen (--verify, --no-trunc), into the
 * head buffer when kept (playlists), or through OpenSSL for https.
 *
 * --http2: the request is a stream of the connection's HTTP/2 session
 * (h2.c); what arrives goes to nghttp2 and what it wants sent goes out
 * through the same send (or OpenSSL), with one receive kept posted.
 *
 * Lifetime: at most one send and one receive are in flight; a connection
 * that fails or ends is closed only after everything in flight has
 * completed (cancel, then wait), and completions from an earlier socket are
 * recognised by the generation in their user_data and dropped. */
#include "loadgen/engine.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { HE_LG_STEP_MORE, HE_LG_STEP_DONE, HE_LG_STEP_BAD } he_lg_step_t;

static void he_lg_conn_post_body_recv(he_lg_conn_t *c);
static void he_lg_conn_sink(void *ctx, const char *p, size_t n);
static void he_lg_conn_h2_flush(he_lg_conn_t *c);
static void he_lg_conn_tls_pump(he_lg_conn_t *c);
static void he_lg_conn_start_connect(he_lg_conn_t *c);

void he_lg_conn_init(he_lg_conn_t *c, he_lg_thread_t *th, uint32_t slot)
{
    memset(c, 0, sizeof(*c));
    c->th = th;
    c->slot = slot;
    c->fd = -1;
    c->ep = -1;
    c->state = HE_LG_CONN_CLOSED;
}

void he_lg_conn_destroy(he_lg_conn_t *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    he_lg_tls_free(c->tls);
    c->tls = NULL;
    he_lg_h2_free(c);
    free(c->bodybuf);
    c->bodybuf = NULL;
}

bool he_lg_conn_busy(const he_lg_conn_t *c)
{
    return c->inflight > 0 || c->pending ||
           (c->state != HE_LG_CONN_CLOSED && c->state != HE_LG_CONN_IDLE);
}

static void he_lg_conn_close_now(he_lg_conn_t *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    he_lg_tls_free(c->tls);
    c->tls = NULL;
    he_lg_h2_free(c);
    c->h2_rx_busy = false;
    if (c->th->cfg->http2) c->req_len = c->req_sent = 0; /* the session's buffer */
    c->state = HE_LG_CONN_CLOSED;
    c->gen++;
}

static void he_lg_conn_finish_close(he_lg_conn_t *c)
{
    he_lg_conn_close_now(c);
    if (c->pending) {
        c->pending = false;
        he_lg_conn_start_connect(c);
    }
}

/* Ends the socket; operations still in flight complete (cancelled) first. */
static void he_lg_conn_close(he_lg_conn_t *c)
{
    if (c->inflight == 0) {
        he_lg_conn_close_now(c);
        return;
    }
    c->gen++; /* what is in flight now belongs to the old socket */
    c->state = HE_LG_CONN_CLOSING;
    struct io_uring_sqe *sqe = he_lg_sqe(c->th);
    io_uring_prep_cancel_fd(sqe, c->fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_CANCEL, 0, c->slot));
    shutdown(c->fd, SHUT_RDWR);
}

static void he_lg_conn_account_err(he_lg_conn_t *c, he_lg_err_t kind)
{
    he_lg_stats_t *s = &c->th->stats;
    s->err[kind]++;
    HE_LG_STAT_ADD(s->errors, 1);
}

static void he_lg_conn_fail(he_lg_conn_t *c, he_lg_err_t kind)
{
    he_lg_result_t r = {.err = (int)kind, .status = c->head.status, .wire_bytes = c->wire};
    r.total_ns = c->th->now - c->t_start;
    he_lg_conn_account_err(c, kind);
    c->pending = false;
    he_lg_conn_close(c);
    he_lg_on_result(c, &r);
}

/* A keep-alive connection the server had closed: resend once on a new one. */
static bool he_lg_conn_retry(he_lg_conn_t *c)
{
    if (c->retried || c->reqs < 2 || c->hlen || c->wire) return false;
    c->retried = true;
    c->th->stats.retries++;
    c->pending = true;
    he_lg_conn_close(c);
    if (c->state == HE_LG_CONN_CLOSED) {
        c->pending = false;
        he_lg_conn_start_connect(c);
    }
    return true;
}

void he_lg_conn_body_bytes(he_lg_conn_t *c, const char *p, size_t n)
{
    if (c->want_body || c->th->cfg->verify) he_lg_conn_sink(c, p, n);
}

static void he_lg_conn_sink(void *ctx, const char *p, size_t n)
{
    he_lg_conn_t *c = ctx;
    if (c->want_body) {
        if (c->bodylen + n > c->bodycap) {
            size_t cap = c->bodycap ? c->bodycap : 16384;
            while (cap < c->bodylen + n)
                cap *= 2;
            if (cap > HE_LG_BODY_MAX) cap = HE_LG_BODY_MAX;
            char *nb = cap > c->bodycap ? realloc(c->bodybuf, cap) : NULL;
            if (nb) {
                c->bodybuf = nb;
                c->bodycap = cap;
            }
        }
        size_t k = c->bodycap - c->bodylen < n ? c->bodycap - c->bodylen : n;
        if (k) memcpy(c->bodybuf + c->bodylen, p, k);
        c->bodylen += k;
    }
    if (c->th->cfg->verify) c->csum = he_lg_fnv(c->csum, p, n);
}

static void he_lg_conn_complete(he_lg_conn_t *c)
{
    he_lg_thread_t *th = c->th;
    he_lg_stats_t *s = &th->stats;
    he_lg_result_t r = {.err = -1, .status = c->head.status};
    r.body_bytes = c->body.payload;
    r.wire_bytes = c->wire;
    r.ttfb_ns = (c->t_first ? c->t_first : th->now) - c->t_start;
    r.total_ns = th->now - c->t_start;
    if (c->want_body) {
        r.body = c->bodybuf;
        r.body_len = c->bodylen;
    }
    s->status[c->head.status < 600 ? c->head.status : 0]++;
    s->body_bytes += r.body_bytes;
    HE_LG_STAT_ADD(s->requests, 1);
    he_lg_hist_record(&s->ttfb_us, r.ttfb_ns / 1000);
    if (c->head.status >= 400) {
        r.err = HE_LG_ERR_STATUS;
        he_lg_conn_account_err(c, HE_LG_ERR_STATUS);
    } else if (th->cfg->verify && c->head.status < 300) {
        s->verified++;
        if (!he_lg_vmap_add(&th->vmap, c->key, c->csum, r.body_bytes, 1)) {
            r.err = HE_LG_ERR_VERIFY;
            he_lg_conn_account_err(c, HE_LG_ERR_VERIFY);
        }
    }
    bool keep = c->head.keep_alive && c->body.mode != HE_LG_BODY_EOF && c->inflight == 0;
    if (c->tls && c->tls_tx_busy) keep = false;
    if (c->h2) keep = he_lg_h2_alive(c); /* the receive stays posted */
    if (keep)
        c->state = HE_LG_CONN_IDLE;
    else
        he_lg_conn_close(c);
    he_lg_on_result(c, &r);
}

/* Parses the head in c->hdr. On BODY the bytes after the head are fed. */
static he_lg_step_t he_lg_conn_body_step(he_lg_conn_t *c, const char *p, size_t n)
{
    he_lg_sink_fn sink = c->want_body || c->th->cfg->verify ? he_lg_conn_sink : NULL;
    ssize_t r = he_lg_body_feed(&c->body, p, n, sink, c);
    if (r < 0) return HE_LG_STEP_BAD;
    if (c->body.done) return (size_t)r < n ? HE_LG_STEP_BAD : HE_LG_STEP_DONE;
    return HE_LG_STEP_MORE;
}

static he_lg_step_t he_lg_conn_head_step(he_lg_conn_t *c)
{
    for (;;) {
        int rc = he_lg_http_parse_head(c->hdr, c->hlen, &c->head);
        if (rc == HE_LG_AGAIN) return c->hlen == HE_LG_HDR_CAP ? HE_LG_STEP_BAD : HE_LG_STEP_MORE;
        if (rc < 0) return HE_LG_STEP_BAD;
        if (c->head.status >= 100 && c->head.status < 200 && c->head.status != 101) {
            /* interim response: drop it, the real one follows */
            size_t hl = c->head.head_len;
            memmove(c->hdr, c->hdr + hl, c->hlen - hl);
            c->hlen -= (uint32_t)hl;
            continue;
        }
        he_lg_body_init(&c->body, &c->head);
        c->state = HE_LG_CONN_BODY;
        size_t hl = c->head.head_len;
        if (c->body.done) return c->hlen > hl ? HE_LG_STEP_BAD : HE_LG_STEP_DONE;
        return he_lg_conn_body_step(c, c->hdr + hl, c->hlen - hl);
    }
}

/* Plaintext from anywhere but the head buffer itself (TLS, provided buffers). */
static he_lg_step_t he_lg_conn_consume(he_lg_conn_t *c, const char *p, size_t n)
{
    while (c->state == HE_LG_CONN_HEAD) {
        if (n == 0) return HE_LG_STEP_MORE;
        size_t k = HE_LG_HDR_CAP - c->hlen;
        if (k > n) k = n;
        memcpy(c->hdr + c->hlen, p, k);
        c->hlen += (uint32_t)k;
        p += k;
        n -= k;
        he_lg_step_t st = he_lg_conn_head_step(c);
        if (st == HE_LG_STEP_BAD) return st;
        if (st == HE_LG_STEP_DONE) return n ? HE_LG_STEP_BAD : st;
        if (c->state == HE_LG_CONN_HEAD && n) return HE_LG_STEP_BAD; /* head too large */
    }
    if (n == 0) return c->body.done ? HE_LG_STEP_DONE : HE_LG_STEP_MORE;
    return he_lg_conn_body_step(c, p, n);
}

static void he_lg_conn_after_step(he_lg_conn_t *c, he_lg_step_t st)
{
    if (st == HE_LG_STEP_BAD)
        he_lg_conn_fail(c, HE_LG_ERR_PROTOCOL);
    else if (st == HE_LG_STEP_DONE)
        he_lg_conn_complete(c);
    else if (c->tls)
        he_lg_conn_tls_pump(c);
    else if (c->state == HE_LG_CONN_HEAD) {
        struct io_uring_sqe *sqe = he_lg_sqe(c->th);
        io_uring_prep_recv(sqe, c->fd, c->hdr + c->hlen, HE_LG_HDR_CAP - c->hlen, 0);
        io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_RECV_HDR, c->gen, c->slot));
        c->inflight++;
    } else {
        he_lg_conn_post_body_recv(c);
    }
}

static void he_lg_conn_post_body_recv(he_lg_conn_t *c)
{
    he_lg_thread_t *th = c->th;
    struct io_uring_sqe *sqe = he_lg_sqe(th);
    uint64_t skip = he_lg_body_skippable(&c->body);
    if (!c->want_body && !th->cfg->verify && !th->cfg->no_trunc && skip > 0) {
        /* the kernel frees the skbs without copying. No MSG_WAITALL: with
         * MSG_TRUNC, io_uring's partial-receive retry never completed here
         * (6.x), so each completion takes what has arrived */
        unsigned len = skip > HE_LG_TRUNC_MAX ? HE_LG_TRUNC_MAX : (unsigned)skip;
        int flags = MSG_TRUNC;
        io_uring_prep_recv(sqe, c->fd, th->scratch, len, flags);
        io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_RECV_TRUNC, c->gen, c->slot));
    } else if (th->br && !c->want_body) {
        io_uring_prep_recv(sqe, c->fd, NULL, th->bufsz, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = HE_LG_BUF_GROUP;
        io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_RECV_BUF, c->gen, c->slot));
    } else {
        io_uring_prep_recv(sqe, c->fd, c->hdr, HE_LG_HDR_CAP, 0);
        io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_RECV_HDR, c->gen, c->slot));
    }
    c->inflight++;
}

static void he_lg_conn_start_send(he_lg_conn_t *c)
{
    c->state = HE_LG_CONN_HEAD;
    c->reqs++;
    c->last_io = c->th->now;
    if (c->th->cfg->http2) {
        if (!c->h2 && (c->tls && !he_lg_tls_is_h2(c->tls))) {
            he_lg_conn_fail(c, HE_LG_ERR_PROTOCOL); /* the server did not choose h2 */
            return;
        }
        if ((!c->h2 && he_lg_h2_open(c) < 0) ||
            he_lg_h2_request(c, c->h2_target, c->h2_range_off, c->h2_range_len) < 0) {
            he_lg_conn_fail(c, HE_LG_ERR_OTHER);
            return;
        }
        he_lg_conn_h2_flush(c);
        return;
    }
    if (c->tls) {
        if (he_lg_tls_write(c->tls, c->req, c->req_len) < 0) {
            he_lg_conn_fail(c, HE_LG_ERR_TLS);
            return;
        }
        he_lg_conn_tls_pump(c);
        return;
    }
    /* the receive waits for the answer while the send goes out */
    struct io_uring_sqe *sqe = he_lg_sqe(c->th);
    io_uring_prep_send(sqe, c->fd, c->req, c->req_len, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_SEND, c->gen, c->slot));
    sqe = he_lg_sqe(c->th);
    io_uring_prep_recv(sqe, c->fd, c->hdr, HE_LG_HDR_CAP, 0);
    io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_RECV_HDR, c->gen, c->slot));
    c->inflight += 2;
}

/* What nghttp2 wants sent goes out; one receive stays posted. */
static void he_lg_conn_h2_flush(he_lg_conn_t *c)
{
    struct io_uring_sqe *sqe;
    if (c->tls) {
        size_t n;
        while ((n = he_lg_h2_take(c, c->req, sizeof(c->req))) > 0)
            if (he_lg_tls_write(c->tls, c->req, n) < 0) {
                he_lg_conn_fail(c, HE_LG_ERR_TLS);
                return;
            }
        he_lg_conn_tls_pump(c);
        return;
    }
    if (c->req_sent >= c->req_len) { /* no send in flight */
        c->req_len = (uint32_t)he_lg_h2_take(c, c->req, sizeof(c->req));
        c->req_sent = 0;
        if (c->req_len) {
            sqe = he_lg_sqe(c->th);
            io_uring_prep_send(sqe, c->fd, c->req, c->req_len, MSG_NOSIGNAL);
            io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_SEND, c->gen, c->slot));
            c->inflight++;
        }
    }
    if (!c->h2_rx_busy) {
        sqe = he_lg_sqe(c->th);
        io_uring_prep_recv(sqe, c->fd, c->hdr, HE_LG_HDR_CAP, 0);
        io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_RECV_HDR, c->gen, c->slot));
        c->inflight++;
        c->h2_rx_busy = true;
    }
}

/* Plaintext from the server on an HTTP/2 connection. */
static void he_lg_conn_h2_input(he_lg_conn_t *c, const char *p, size_t n)
{
    if (he_lg_h2_feed(c, p, n) < 0) {
        if (c->state == HE_LG_CONN_HEAD)
            he_lg_conn_fail(c, HE_LG_ERR_PROTOCOL);
        else
            he_lg_conn_close(c);
        return;
    }
    if (c->state == HE_LG_CONN_HEAD && c->h2_done) {
        if (c->h2_done < 0) {
            he_lg_conn_fail(c, HE_LG_ERR_CLOSED); /* reset, or no response */
            return;
        }
        c->h2_done = 0;
        he_lg_conn_complete(c); /* may start the next request on this stack */
        if (c->state == HE_LG_CONN_CLOSED || c->state == HE_LG_CONN_CLOSING) return;
    }
    if (c->h2 && !he_lg_h2_alive(c) && c->state == HE_LG_CONN_IDLE) {
        he_lg_conn_close(c); /* GOAWAY and nothing open */
        return;
    }
    if (c->h2) he_lg_conn_h2_flush(c);
}

static void he_lg_conn_start_connect(he_lg_conn_t *c)
{
    const he_lg_endpoint_t *e = he_lg_endpoint_at(c->ep);
    int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        he_lg_conn_fail(c, HE_LG_ERR_CONNECT);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->fd = fd;
    c->reqs = 0;
    c->state = HE_LG_CONN_CONNECTING;
    c->last_io = c->th->now;
    c->th->stats.connects++;
    struct io_uring_sqe *sqe = he_lg_sqe(c->th);
    io_uring_prep_connect(sqe, fd, (const struct sockaddr *)&e->addr, e->addrlen);
    io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_CONNECT, c->gen, c->slot));
    c->inflight++;
}

int he_lg_conn_request(he_lg_conn_t *c, int ep, const char *target, int64_t range_off,
                       int64_t range_len, bool want_body, uint64_t key)
{
    const he_lg_endpoint_t *e = he_lg_endpoint_at(ep);
    if (c->th->cfg->http2) {
        /* a stream, submitted by he_lg_conn_start_send; c->req is the
         * session's send buffer and may be in flight */
        if (strlen(target) >= sizeof(c->h2_target)) return -ENAMETOOLONG;
        strcpy(c->h2_target, target);
        c->h2_range_off = range_off;
        c->h2_range_len = range_len;
    } else {
        int n = snprintf(c->req, sizeof(c->req),
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: hlsedge-loadgen\r\n", target,
                         e->hosthdr);
        if (n > 0 && (size_t)n < sizeof(c->req) && range_len > 0)
            n += snprintf(c->req + n, sizeof(c->req) - (size_t)n, "Range: bytes=%lld-%lld\r\n",
                          (long long)range_off, (long long)(range_off + range_len - 1));
        if (n > 0 && (size_t)n < sizeof(c->req))
            n += snprintf(c->req + n, sizeof(c->req) - (size_t)n, "\r\n");
        if (n <= 0 || (size_t)n >= sizeof(c->req)) return -ENAMETOOLONG;
        c->req_len = (uint32_t)n;
        c->req_sent = 0;
    }
    c->want_body = want_body;
    c->key = key;
    c->retried = false;
    c->hlen = 0;
    c->wire = 0;
    c->t_first = 0;
    c->bodylen = 0;
    c->csum = HE_LG_FNV_INIT;
    memset(&c->head, 0, sizeof(c->head));
    memset(&c->body, 0, sizeof(c->body));
    c->t_start = c->th->now;
    c->last_io = c->th->now;

    if (c->state == HE_LG_CONN_CLOSING) {
        c->ep = ep;
        c->pending = true;
        return 0;
    }
    if (c->state == HE_LG_CONN_IDLE && c->ep == ep) {
        he_lg_conn_start_send(c);
        return 0;
    }
    if (c->state != HE_LG_CONN_CLOSED) he_lg_conn_close_now(c);
    c->ep = ep;
    he_lg_conn_start_connect(c);
    return 0;
}

/* Bytes arrived from the socket. */
static void he_lg_conn_got(he_lg_conn_t *c, unsigned n)
{
    HE_LG_STAT_ADD(c->th->stats.bytes, n);
    if (!c->t_first) c->t_first = c->th->now;
}

static void he_lg_conn_eof(he_lg_conn_t *c, int res)
{
    if (c->state == HE_LG_CONN_HEAD && he_lg_conn_retry(c)) return;
    if (res == 0 && c->state == HE_LG_CONN_BODY && he_lg_body_eof(&c->body) == 0) {
        he_lg_conn_complete(c);
        return;
    }
    he_lg_conn_fail(c, HE_LG_ERR_CLOSED);
}

void he_lg_conn_on_cqe(he_lg_conn_t *c, unsigned op, uint32_t gen, int res, unsigned flags)
{
    he_lg_thread_t *th = c->th;
    c->inflight--;
    if (op == HE_LG_OP_RECV_BUF && (flags & IORING_CQE_F_BUFFER) && res <= 0)
        he_lg_buf_recycle(th, flags >> IORING_CQE_BUFFER_SHIFT);
    if (gen != (c->gen & 0xffffff) || c->state == HE_LG_CONN_CLOSING) {
        if (op == HE_LG_OP_RECV_BUF && (flags & IORING_CQE_F_BUFFER) && res > 0)
            he_lg_buf_recycle(th, flags >> IORING_CQE_BUFFER_SHIFT);
        if (c->inflight == 0 && c->state == HE_LG_CONN_CLOSING) he_lg_conn_finish_close(c);
        return;
    }
    c->last_io = th->now;
    switch (op) {
    case HE_LG_OP_CONNECT:
        if (res < 0) {
            he_lg_conn_fail(c, HE_LG_ERR_CONNECT);
        } else if (he_lg_endpoint_at(c->ep)->tls) {
            if (he_lg_tls_new(&c->tls, th->run->ssl_ctx, he_lg_endpoint_at(c->ep)->host) < 0) {
                he_lg_conn_fail(c, HE_LG_ERR_TLS);
                return;
            }
            c->tls_tx_off = c->tls_tx_len = 0;
            c->tls_tx_busy = c->tls_rx_busy = false;
            c->state = HE_LG_CONN_HANDSHAKE;
            he_lg_conn_tls_pump(c);
        } else {
            he_lg_conn_start_send(c);
        }
        break;
    case HE_LG_OP_SEND:
        if (c->h2 && res >= 0 && (c->req_sent += (uint32_t)res) >= c->req_len) {
            he_lg_conn_h2_flush(c); /* what nghttp2 queued meanwhile */
        } else if (c->h2 && res >= 0) {
            struct io_uring_sqe *sqe = he_lg_sqe(th);
            io_uring_prep_send(sqe, c->fd, c->req + c->req_sent, c->req_len - c->req_sent,
                               MSG_NOSIGNAL);
            io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_SEND, c->gen, c->slot));
            c->inflight++;
        } else if (res < 0) {
            if (c->state == HE_LG_CONN_IDLE)
                he_lg_conn_close(c);
            else if (!he_lg_conn_retry(c))
                he_lg_conn_fail(c, HE_LG_ERR_CLOSED);
        } else if ((c->req_sent += (uint32_t)res) < c->req_len) {
            struct io_uring_sqe *sqe = he_lg_sqe(th);
            io_uring_prep_send(sqe, c->fd, c->req + c->req_sent, c->req_len - c->req_sent,
                               MSG_NOSIGNAL);
            io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_SEND, c->gen, c->slot));
            c->inflight++;
        }
        break;
    case HE_LG_OP_RECV_HDR:
        if (c->h2) {
            c->h2_rx_busy = false;
            if (res <= 0) {
                if (c->state == HE_LG_CONN_IDLE)
                    he_lg_conn_close(c); /* the server closed an idle session */
                else
                    he_lg_conn_fail(c, HE_LG_ERR_CLOSED);
                return;
            }
            he_lg_conn_got(c, (unsigned)res);
            c->wire += (unsigned)res;
            he_lg_conn_h2_input(c, c->hdr, (size_t)res);
        } else if (res <= 0) {
            he_lg_conn_eof(c, res);
        } else {
            he_lg_conn_got(c, (unsigned)res);
            c->wire += (unsigned)res;
            if (c->state == HE_LG_CONN_HEAD) {
                c->hlen += (uint32_t)res;
                he_lg_conn_after_step(c, he_lg_conn_head_step(c));
            } else {
                he_lg_conn_after_step(c, he_lg_conn_body_step(c, c->hdr, (size_t)res));
            }
        }
        break;
    case HE_LG_OP_RECV_TRUNC:
        if (res <= 0) {
            he_lg_conn_eof(c, res);
        } else {
            he_lg_conn_got(c, (unsigned)res);
            c->wire += (unsigned)res;
            he_lg_body_skip(&c->body, (uint64_t)res);
            he_lg_conn_after_step(c, c->body.done ? HE_LG_STEP_DONE : HE_LG_STEP_MORE);
        }
        break;
    case HE_LG_OP_RECV_BUF:
        if (res == -ENOBUFS) {
            /* ring empty: this once, read into the head buffer */
            struct io_uring_sqe *sqe = he_lg_sqe(th);
            io_uring_prep_recv(sqe, c->fd, c->hdr, HE_LG_HDR_CAP, 0);
            io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_RECV_HDR, c->gen, c->slot));
            c->inflight++;
        } else if (res <= 0) {
            he_lg_conn_eof(c, res);
        } else {
            unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
            he_lg_conn_got(c, (unsigned)res);
            c->wire += (unsigned)res;
            he_lg_step_t st =
                he_lg_conn_consume(c, th->bufs + (size_t)bid * th->bufsz, (size_t)res);
            he_lg_buf_recycle(th, bid);
            he_lg_conn_after_step(c, st);
        }
        break;
    case HE_LG_OP_TLS_SEND:
    case HE_LG_OP_TLS_RECV: {
        if (op == HE_LG_OP_TLS_SEND) {
            c->tls_tx_busy = false;
            if (res < 0) {
                if (!he_lg_conn_retry(c)) he_lg_conn_fail(c, HE_LG_ERR_CLOSED);
                return;
            }
            c->tls_tx_off += (uint32_t)res;
            he_lg_conn_tls_pump(c);
            return;
        }
        c->tls_rx_busy = false;
        if (res <= 0) {
            if (c->h2 && c->state == HE_LG_CONN_IDLE)
                he_lg_conn_close(c);
            else
                he_lg_conn_eof(c, res);
            return;
        }
        HE_LG_STAT_ADD(th->stats.bytes, (unsigned)res);
        size_t cap;
        char *rx = he_lg_tls_rxbuf(c->tls, &cap);
        if (he_lg_tls_feed(c->tls, rx, (size_t)res) < 0) {
            he_lg_conn_fail(c, HE_LG_ERR_TLS);
            return;
        }
        if (c->state == HE_LG_CONN_HANDSHAKE) {
            he_lg_conn_tls_pump(c);
            return;
        }
        for (;;) {
            int n = he_lg_tls_read(c->tls, th->scratch, th->scratch_cap);
            if (n == 0) break;
            if (n == -EPIPE) {
                he_lg_conn_eof(c, 0);
                return;
            }
            if (n < 0) {
                he_lg_conn_fail(c, HE_LG_ERR_TLS);
                return;
            }
            if (!c->t_first) c->t_first = th->now;
            c->wire += (unsigned)n;
            if (th->cfg->http2) {
                uint32_t g = c->gen;
                if (!c->h2 && he_lg_h2_open(c) < 0) {
                    he_lg_conn_fail(c, HE_LG_ERR_OTHER);
                    return;
                }
                he_lg_conn_h2_input(c, th->scratch, (size_t)n);
                if (c->gen != g || !c->tls) return;
                continue;
            }
            he_lg_step_t st = he_lg_conn_consume(c, th->scratch, (size_t)n);
            if (st != HE_LG_STEP_MORE) {
                he_lg_conn_after_step(c, st);
                return;
            }
        }
        he_lg_conn_tls_pump(c);
        break;
    }
    default:
        break;
    }
}

/* Moves TLS along: handshake, flush ciphertext, keep one receive posted. */
static void he_lg_conn_tls_pump(he_lg_conn_t *c)
{
    if (c->state == HE_LG_CONN_HANDSHAKE) {
        int rc = he_lg_tls_handshake(c->tls);
        if (rc < 0) {
            he_lg_conn_fail(c, HE_LG_ERR_TLS);
            return;
        }
        if (rc == 0) {
            he_lg_conn_start_send(c); /* writes the request, comes back here */
            return;
        }
    }
    if (!c->tls_tx_busy) {
        size_t cap;
        char *tx = he_lg_tls_txbuf(c->tls, &cap);
        if (c->tls_tx_off >= c->tls_tx_len) {
            c->tls_tx_off = 0;
            c->tls_tx_len = (uint32_t)he_lg_tls_take(c->tls, tx, cap);
        }
        if (c->tls_tx_off < c->tls_tx_len) {
            struct io_uring_sqe *sqe = he_lg_sqe(c->th);
            io_uring_prep_send(sqe, c->fd, tx + c->tls_tx_off, c->tls_tx_len - c->tls_tx_off,
                               MSG_NOSIGNAL);
            io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_TLS_SEND, c->gen, c->slot));
            c->inflight++;
            c->tls_tx_busy = true;
        }
    }
    if (!c->tls_rx_busy) {
        size_t cap;
        char *rx = he_lg_tls_rxbuf(c->tls, &cap);
        struct io_uring_sqe *sqe = he_lg_sqe(c->th);
        io_uring_prep_recv(sqe, c->fd, rx, cap, 0);
        io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_TLS_RECV, c->gen, c->slot));
        c->inflight++;
        c->tls_rx_busy = true;
    }
}

void he_lg_conn_check_timeout(he_lg_conn_t *c, uint64_t now, uint64_t timeout_ns)
{
    if (c->state < HE_LG_CONN_CONNECTING || c->state > HE_LG_CONN_BODY) return;
    if (now - c->last_io > timeout_ns) he_lg_conn_fail(c, HE_LG_ERR_TIMEOUT);
}

void he_lg_conn_abort(he_lg_conn_t *c)
{
    c->pending = false;
    if (c->state >= HE_LG_CONN_CONNECTING && c->state <= HE_LG_CONN_BODY) c->th->stats.aborted++;
    if (c->state != HE_LG_CONN_CLOSING) he_lg_conn_close(c);
}
