/* Connection lifecycle: creation on accept, input buffering, pipelining,
 * timers and teardown. A connection's slot is reused only after every ring
 * operation that names it has completed (inflight == 0); the generation in
 * user_data catches anything that still arrives for an older incarnation. */
#include <errno.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/net/net.h"
#include "server/net/tls.h"

static int he_conn_outq(const he_conn_t *c)
{
    int outq = 0;
    return ioctl(c->fd, SIOCOUTQ, &outq) < 0 ? -errno : outq;
}

/* Each list is sorted by deadline, so expiry pops from the head, and a new
 * deadline (now + the list's timeout) is the latest: it goes at the tail
 * in O(1). A live reload that shortens a timeout keeps that true by
 * bringing the deadlines already set down to it (he__conn_timers_reconf). */
static unsigned he_conn_timeout_ms(he_worker_t *w, enum he_timer_list list)
{
    switch (list) {
    case HE_TIMER_HEADER:
        return w->conf->header_timeout_ms;
    case HE_TIMER_KEEPALIVE:
        return w->conf->keepalive_timeout_ms;
    case HE_TIMER_SEND:
    case HE_TIMER_LINGER:
        return w->conf->send_timeout_ms;
    case HE_TIMER_TLS:
        return w->conf->tls_handshake_timeout_ms ? w->conf->tls_handshake_timeout_ms : 10000;
    case HE_TIMER_H2_IDLE:
        return w->conf->http2_idle_timeout_ms;
    case HE_TIMER_H2_STALL: /* a check of each stream's progress (http2.c): a
                             * stall is caught within 1.25 timeouts */
        return w->conf->http2_stall_timeout_ms / 4;
    default:
        return 0;
    }
}

static void he_conn_timer_unlink(he_worker_t *w, he_conn_t *c)
{
    he_conn_t **list = w->timers[c->timer];
    if (c->timer == HE_TIMER_NONE) return;
    if (c->tprev)
        c->tprev->tnext = c->tnext;
    else
        list[0] = c->tnext;
    if (c->tnext)
        c->tnext->tprev = c->tprev;
    else
        list[1] = c->tprev;
    c->tprev = c->tnext = NULL;
    c->timer = HE_TIMER_NONE;
}

void he__conn_timer_set(he_worker_t *w, he_conn_t *c, enum he_timer_list list)
{
    he_conn_t **l;
    he_conn_timer_unlink(w, c);
    if (list == HE_TIMER_NONE) return;
    l = w->timers[list];
    c->timer = (uint8_t)list;
    c->deadline_ms = w->now_ms + he_conn_timeout_ms(w, list);
    c->tnext = NULL;
    c->tprev = l[1];
    if (l[1])
        l[1]->tnext = c;
    else
        l[0] = c;
    l[1] = c;
}

/* A shortened timeout applies from the reload on to connections already
 * waiting: deadlines past now + timeout come down to it. Clamping keeps
 * the list sorted, and no later deadline is earlier than the clamp, so
 * appending at the tail stays right. */
void he__conn_timers_reconf(he_worker_t *w)
{
    for (int list = HE_TIMER_HEADER; list < HE_TIMER_COUNT; list++) {
        uint64_t cap = w->now_ms + he_conn_timeout_ms(w, (enum he_timer_list)list);
        for (he_conn_t *c = w->timers[list][1]; c && c->deadline_ms > cap; c = c->tprev)
            c->deadline_ms = cap;
    }
}

void he__conn_timers_expire(he_worker_t *w)
{
    static const he_stats_err_t cause[HE_TIMER_COUNT] = {
        [HE_TIMER_HEADER] = HE_STATS_ERR_TIMEOUT_HEADER,
        [HE_TIMER_KEEPALIVE] = HE_STATS_ERR_TIMEOUT_KEEPALIVE,
        [HE_TIMER_SEND] = HE_STATS_ERR_TIMEOUT_SEND,
        [HE_TIMER_H2_IDLE] = HE_STATS_ERR_TIMEOUT_KEEPALIVE,
        [HE_TIMER_H2_STALL] = HE_STATS_ERR_TIMEOUT_SEND,
    };
    for (int list = HE_TIMER_HEADER; list < HE_TIMER_COUNT; list++) {
        he_conn_t *c;
        while ((c = w->timers[list][0]) != NULL && c->deadline_ms <= w->now_ms) {
            if (list == HE_TIMER_LINGER) {
                /* the client still reads the tail: wait on while it moves */
                int outq = he_conn_outq(c);
                if (outq > 0 && (uint32_t)outq < c->linger_outq) {
                    c->linger_outq = (uint32_t)outq;
                    he__conn_timer_set(w, c, HE_TIMER_LINGER);
                } else {
                    he__conn_close(w, c);
                }
                continue;
            }
            if (list == HE_TIMER_TLS) { /* a handshake that never completed */
                w->stats.tls_handshake_errors++;
                w->stats.tls_errors[HE_STATS_TLS_ERR_TRUNCATED]++;
                c->tls->fatal = true;
                he_log_debug("worker %u: TLS handshake timeout, closing fd %d", w->id, c->fd);
                he__conn_close(w, c);
                continue;
            }
            if (c->protocol->expire && c->protocol->expire(w, c, list)) continue;
            w->stats.errors[cause[list]]++;
            if (list == HE_TIMER_H2_STALL) w->stats.h2_stall_timeouts++;
            he_log_debug("worker %u: %s timeout, closing fd %d", w->id,
                         list == HE_TIMER_HEADER      ? "header"
                         : list == HE_TIMER_SEND      ? "send"
                         : list == HE_TIMER_H2_STALL  ? "HTTP/2 stalled-stream"
                         : list == HE_TIMER_H2_IDLE   ? "HTTP/2 idle"
                                                      : "keep-alive",
                         c->fd);
            he__conn_close(w, c);
        }
    }
}

he_conn_t *he__conn_new(he_worker_t *w, int fd, const struct sockaddr_storage *peer, bool tls)
{
    he_conn_t *c;
    int one = 1;
    char *hdr;
    void *proto;
    uint32_t slot, gen;

    if (w->nfree == 0) return NULL;
    slot = w->free_slots[--w->nfree];
    c = &w->conns[slot];
    gen = c->gen + 1;
    hdr = c->hdr;
    proto = c->proto;
    memset(c, 0, sizeof(*c));
    c->gen = gen;
    c->slot = slot;
    c->hdr = hdr;
    c->proto = proto;
    c->protocol = w->proto;
    c->fd = fd;
    c->in_use = true;
    if (peer) c->peer = *peer;
    w->nconns++;

    /* Responses are written whole (or with MSG_MORE ahead of sendfile), so
     * Nagle can only add delay. One setsockopt per connection, never per
     * request. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (w->conf->send_notsent_lowat) {
        int lowat = (int)w->conf->send_notsent_lowat;
        setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
    }

    if (w->fixed_files) {
        struct io_uring_sqe *sqe = he__worker_sqe(w);
        if (!sqe) goto plain;
        /* Issued before the recv below in the same submission; FILES_UPDATE
         * completes inline, so the recv finds the slot filled. */
        io_uring_prep_files_update(sqe, &c->fd, 1, (int)slot);
        sqe->user_data = he__ud(HE_OP_FILES_UPDATE, slot, c->gen);
        c->inflight++;
        c->fixed = true;
    }
plain:
    c->protocol->open(w, c);
    if (tls) { /* the handshake comes first, under its own timer */
        he__tls_conn_start(w, c);
        if (c->closing || !c->in_use) return NULL;
    }
    he__conn_arm_recv(w, c); /* under TLS it brings ciphertext for OpenSSL */
    if (c->closing || !c->in_use) return NULL; /* no SQE for the recv */
    if (!tls) he__conn_timer_set(w, c, HE_TIMER_HEADER);
    return c;
}

bool he__conn_in_full(const he_conn_t *c)
{
    return c->in_len - c->in_off >= HE_CONN_IN_MAX;
}

void he__conn_arm_recv(he_worker_t *w, he_conn_t *c)
{
    struct io_uring_sqe *sqe;
    /* full input: he__conn_request_done reads on */
    if (he__conn_in_full(c)) return;
    if (c->tls && !he__tls_want_recv(w, c)) return;
    if (c->recv_armed || c->closing || c->peer_eof) return;
    if (!(sqe = he__worker_sqe(w))) {
        he__conn_close(w, c);
        return;
    }
    c->recv_multishot = w->br && w->server->features.recv_multishot;
    if (w->br) {
        if (c->recv_multishot)
            io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
        else
            io_uring_prep_recv(sqe, c->fd, NULL, w->buf_size, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = 0;
    } else {
        /* No buffer ring: a small buffer of the connection's own, parsed
         * like a provided buffer and never moved while a recv targets it. */
        if (!c->rbuf && !(c->rbuf = malloc(HE_CONN_RBUF))) {
            he__conn_close(w, c);
            return;
        }
        io_uring_prep_recv(sqe, c->fd, c->rbuf, HE_CONN_RBUF, 0);
    }
    he__worker_sqe_conn(w, sqe, c, HE_OP_RECV);
    c->recv_armed = true;
}

/* Input is full while a response is under way: stop reading until
 * he__conn_request_done has made room. A single-shot recv is simply not
 * re-armed; a multishot one is cancelled, and its last completion re-arms
 * nothing while input is full. The cancel precedes any later recv with the
 * same user_data in the submission queue, and is issued inline, so it can
 * only meet this one. */
static void he_conn_recv_pause(he_worker_t *w, he_conn_t *c)
{
    struct io_uring_sqe *sqe;
    if (!c->recv_armed || !c->recv_multishot || c->recv_cancel) return;
    if (!(sqe = he__worker_sqe(w))) return; /* reading goes on; the hard cap still holds */
    io_uring_prep_cancel64(sqe, he__ud(HE_OP_RECV, c->slot, c->gen), 0);
    sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
    c->recv_cancel = true;
}

/* Reading pauses at HE_CONN_IN_MAX, but a multishot recv hands over all the
 * socket held when the batch was reaped (measured: 400 KB behind a fast
 * pipelining client), at most the worker's provided buffers, which return
 * only after the batch. A single recv brings at most 16 KiB (a TLS record).
 * More than that means the pause failed: close rather than grow. */
size_t he__conn_in_hard_max(const he_worker_t *w)
{
    return HE_CONN_IN_MAX + (w->br ? (size_t)w->nbufs * w->buf_size : HE_CONN_IN_MAX);
}

/* Appends received bytes that cannot be parsed yet. */
static int he_conn_buffer(he_worker_t *w, he_conn_t *c, const char *data, size_t len)
{
    if (c->in_off && c->in_off == c->in_len) c->in_off = c->in_len = 0;
    if (c->in_len - c->in_off + len > he__conn_in_hard_max(w)) return -ENOBUFS;
    if (c->in_len + len > c->in_cap) {
        uint32_t cap = c->in_cap ? c->in_cap : 4096;
        char *n;
        if (c->in_off) {
            memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
            c->in_len -= c->in_off;
            c->in_off = 0;
        }
        while (cap < c->in_len + len)
            cap *= 2;
        if (cap != c->in_cap) {
            n = realloc(c->in, cap);
            if (!n) return -ENOMEM;
            c->in = n;
            c->in_cap = cap;
        }
    }
    memcpy(c->in + c->in_len, data, len);
    c->in_len += (uint32_t)len;
    return 0;
}

/* Offers data to the protocol; on a complete request keeps what follows
 * (pipelined requests) for later, then has it answered. */
static void he_conn_parse(he_worker_t *w, he_conn_t *c, const char *data, size_t len, bool from_in)
{
    bool ready = false;
    size_t used = c->protocol->data(w, c, data, len, &ready);

    if (from_in) {
        c->in_off += (uint32_t)used;
    } else if (used < len && he_conn_buffer(w, c, data + used, len - used) < 0) {
        he__conn_close(w, c);
        return;
    }
    if (ready) {
        c->busy = true;
        he__conn_timer_set(w, c, HE_TIMER_SEND);
        c->protocol->request(w, c);
    } else if (c->timer == HE_TIMER_KEEPALIVE && (used > 0 || len > 0)) {
        /* the next request has begun: it must now complete in time */
        he__conn_timer_set(w, c, HE_TIMER_HEADER);
    }
}

/* Answers buffered (pipelined) requests in order. A response that
 * completes synchronously calls back into here through request_done; the
 * in_process flag turns that into another turn of this loop instead of
 * recursion, so deep pipelines cannot grow the stack. */
static void he_conn_process_buffered(he_worker_t *w, he_conn_t *c)
{
    uint32_t gen = c->gen;
    if (c->in_process) return;
    c->in_process = true;
    while (c->gen == gen && c->in_use && !c->busy && !c->closing && c->in_len > c->in_off) {
        uint32_t before = c->in_off;
        he_conn_parse(w, c, c->in + c->in_off, c->in_len - c->in_off, true);
        if (c->in_off == before && !c->busy) break; /* partial request: wait for more */
    }
    if (c->gen != gen || !c->in_use) return;
    c->in_process = false;
    if (c->in_off == c->in_len) c->in_off = c->in_len = 0;
}

/* After EOF nothing more can arrive: once the requests received before it
 * are answered, what is left is at most an incomplete one, dropped. */
bool he__conn_close_if_done(he_worker_t *w, he_conn_t *c)
{
    if (!c->peer_eof || c->busy || c->in_process) return false;
    he__conn_close(w, c);
    return true;
}

void he__conn_peer_eof(he_worker_t *w, he_conn_t *c)
{
    c->peer_eof = true;
    if (c->lingering) { /* the client read the tail and closed its side */
        he__conn_close(w, c);
        return;
    }
    c->protocol->eof(w, c);
}

void he__conn_on_data(he_worker_t *w, he_conn_t *c, const char *data, size_t len)
{
    if (c->lingering) return; /* nothing more is answered: read only to keep the tail */
    if (c->busy || c->in_len > c->in_off) {
        if (he_conn_buffer(w, c, data, len) < 0) {
            he__conn_close(w, c);
            return;
        }
        if (!c->busy)
            he_conn_process_buffered(w, c);
        else if (he__conn_in_full(c))
            he_conn_recv_pause(w, c);
        return;
    }
    he_conn_parse(w, c, data, len, false);
}

void he__conn_switch(he_worker_t *w, he_conn_t *c, const he_proto_t *p)
{
    c->protocol = p;
    p->open(w, c);
}

void he__conn_request_done(he_worker_t *w, he_conn_t *c)
{
    c->busy = false;
    if (c->close_after || w->draining) {
        he__conn_close_graceful(w, c);
        return;
    }
    he__conn_timer_set(w, c, HE_TIMER_KEEPALIVE);
    if (c->in_len > c->in_off) he_conn_process_buffered(w, c);
    if (!c->in_use || c->closing || he__conn_close_if_done(w, c)) return;
    if (!c->recv_armed) he__conn_arm_recv(w, c);
}

static void he_conn_free(he_worker_t *w, he_conn_t *c)
{
    if (c->fixed) {
        static int minus_one = -1;
        struct io_uring_sqe *sqe = he__worker_sqe(w);
        /* The table holds a reference to the socket: drop it, or close()
         * below would not end the TCP connection. */
        if (sqe) {
            io_uring_prep_files_update(sqe, &minus_one, 1, (int)c->slot);
            sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
        } else {
            /* SQ full: the table keeps the socket until the slot is
             * reused, so end the TCP connection now */
            shutdown(c->fd, SHUT_RDWR);
        }
    }
    he__send_dispose(w, c); /* the body source goes (unless the protocol's) */
    if (c->protocol->dispose) c->protocol->dispose(w, c);
    for (unsigned i = 0; i < w->server->nhooks; i++)
        if (w->server->hooks[i]->conn_dispose) w->server->hooks[i]->conn_dispose(w, c);
    if (c->tls) he__tls_conn_free(w, c);
    close(c->fd);
    free(c->in);
    free(c->rbuf);
    c->in = NULL;
    c->rbuf = NULL;
    c->in_use = false;
    w->free_slots[w->nfree++] = c->slot;
    w->nconns--;
    w->stats.conn_closed++;
    he__worker_accept_resume(w); /* its descriptor is free again */
}

void he__conn_close(he_worker_t *w, he_conn_t *c)
{
    if (c->closing || !c->in_use) return;
    c->closing = true;
    he_conn_timer_unlink(w, c);
    if (c->inflight) {
        /* Cancel every recv, send and poll of this incarnation by its
         * user_data, a hash lookup in the kernel: a cancel by file scans
         * every armed poll of the ring, and 10,000 clients closing at
         * once then stall the worker for hundreds of ms (test_hostile). */
        static const enum he_op ops[] = {HE_OP_RECV, HE_OP_SEND, HE_OP_POLLOUT, HE_OP_TLS_POLL};
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            struct io_uring_sqe *sqe = he__worker_sqe(w);
            if (!sqe) {
                /* SQ full and the submit failed: a multishot recv would
                 * wait for the client forever. A shut-down socket
                 * completes every recv, send and poll on it; freed at 0. */
                shutdown(c->fd, SHUT_RDWR);
                return;
            }
            io_uring_prep_cancel64(sqe, he__ud(ops[i], c->slot, c->gen), IORING_ASYNC_CANCEL_ALL);
            sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
        }
        return;
    }
    he_conn_free(w, c);
}

/* close() on a socket that has unread input, or that receives more after
 * it, answers with a reset, and the reset throws away what of the last
 * response the kernel has not sent yet: a client reading slowly loses the
 * tail. So while bytes are still queued, the connection half-closes (FIN
 * after the tail) and reads and drops input until the client closes, or
 * until the tail stops moving for timeouts.send (HE_TIMER_LINGER). A TLS
 * connection sends its close_notify first, so the alert is part of the
 * tail (RFC 8446 6.1: the client then knows the response was not cut),
 * and lingers the same way, reading through OpenSSL until the client's
 * close_notify or EOF. */
void he__conn_close_graceful(he_worker_t *w, he_conn_t *c)
{
    int outq;
    if (c->closing || !c->in_use || c->lingering) return;
    if (c->peer_eof || w->exiting || (c->tls && he__tls_close_notify(w, c) < 0) ||
        (outq = he_conn_outq(c)) <= 0 || shutdown(c->fd, SHUT_WR) < 0) {
        he__conn_close(w, c);
        return;
    }
    c->lingering = true;
    c->linger_outq = (uint32_t)outq;
    c->in_off = c->in_len = 0; /* nothing more is answered */
    he__conn_timer_set(w, c, HE_TIMER_LINGER);
    if (!c->recv_armed) he__conn_arm_recv(w, c);
}

void he__conn_close_drained(he_worker_t *w, he_conn_t *c)
{
    if (c->closing || !c->in_use || c->close_drained) return;
    if (!he__tls_out_held(c)) {
        he__conn_close(w, c);
        return;
    }
    c->close_drained = true;
    he__conn_timer_set(w, c, HE_TIMER_SEND);
    /* inside a turn (pull, sent): its end drains; else a kick does */
    if (!c->send_kick) he__send_kick(w, c);
}

void he__conn_op_done(he_worker_t *w, he_conn_t *c)
{
    if (--c->inflight == 0 && c->closing) he_conn_free(w, c);
}
