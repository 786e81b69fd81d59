/* The one send path: a response head in c->hdr, then a body source
 * (net.h), whatever the body is made of and whatever the connection is.
 *
 *   file range, plain or kTLS  head by send(MSG_MORE), then sendfile(2) in
 *                              chunks, both directly on the non-blocking
 *                              socket (the kernel encrypts under kTLS)
 *   memory, plain or kTLS      head and spans gathered into one send or
 *                              sendmsg on the ring; a large span of
 *                              registered buffer 0 by IORING_OP_SEND_ZC;
 *                              a large spliceable span by vmsplice(2) into
 *                              a pipe and splice(2) to the socket
 *   userspace TLS              SSL_write from memory spans (files mapped),
 *                              tls_conn.c
 *
 * A protocol without pull (HTTP/1.1) starts each response here; one with
 * pull (HTTP/2) is asked for its next unit whenever the path is idle
 * (he__send_kick): frame bytes in c->hdr and perhaps a lent range of a
 * stream's body, sent exactly like a response's head and body.
 *
 * One operation is in flight per connection (send_op). A zero-copy send
 * posts a result and, later, a notification: both count in c->inflight,
 * and the response ends (the source is released, the protocol's sent()
 * runs) only after the last notification, so neither the connection nor
 * the memory goes while the kernel may still read it. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/net/net.h"
#include "server/net/tls.h"

/* Most bytes one ring send moves before the worker looks at other
 * connections again. */
#define HE_SEND_MAX (1u << 20)

enum he_send_op { HE_SEND_OP_NONE = 0, HE_SEND_OP_SEND, HE_SEND_OP_ZC, HE_SEND_OP_POLL };

/* The most a body's first turn moves while other bodies' turns wait
 * behind new requests (worker_turns.c): the new one's first bytes go at
 * once, but its whole turn does not pass theirs; its next turn waits in
 * line. */
#define HE_SEND_FIRST_TURN (64u << 10)

/* len, bounded as a first turn while turns wait. */
static size_t he_send_turn_len(const he_worker_t *w, const he_conn_t *c, size_t len)
{
    bool first = w->turns_len && c->hdr_sent < c->hdr_len;
    return first && len > HE_SEND_FIRST_TURN ? HE_SEND_FIRST_TURN : len;
}

static void he_send_pump(he_worker_t *w, he_conn_t *c);

/* TCP_CORK around a file body (send.cork, like nginx's tcp_nopush): each
 * sendfile ends with a push, so a chunk that is not a multiple of the
 * segment size leaves one short segment behind it; corked, only the body's
 * last bytes go short, when the cork comes off. */
static void he_send_cork(he_conn_t *c, bool on)
{
    int v = on;
    if (c->corked == on) return;
    setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v));
    c->corked = on;
}

/* The source has no more bytes yet (a fill still streaming in): what was
 * sent must not sit corked until they come. */
static void he_send_wait(he_conn_t *c)
{
    c->send_wait = true;
    if (c->corked) he_send_cork(c, false);
}

/* The last byte went to the kernel and no notification is outstanding. */
static void he_send_finish(he_worker_t *w, he_conn_t *c)
{
    if (c->corked) he_send_cork(c, false);
    if (c->zc_pending) { /* the kernel may still read the body's memory */
        c->finish_wait = true;
        return;
    }
    c->finish_wait = false;
    c->sending = false;
    if (c->body_lent)
        memset(&c->body, 0, sizeof(c->body)); /* the protocol's: it goes on from where we were */
    else
        he__body_release(&c->body);
    if (c->tls) he__tls_account(w, c);
    c->protocol->sent(w, c);
    /* a protocol that pulls: its next unit, unless the loop that started
     * this one is still on the stack (it takes the next turn) */
    if (c->protocol->pull && !c->send_kick && c->in_use && !c->closing) he__send_kick(w, c);
}

static void he_send_fail(he_worker_t *w, he_conn_t *c, int err)
{
    if (err == -ECONNRESET || err == -EPIPE) w->stats.errors[HE_STATS_ERR_RESET]++;
    he__conn_close(w, c);
}

static void he_send_arm_pollout(he_worker_t *w, he_conn_t *c)
{
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    if (!sqe) {
        he__conn_close(w, c);
        return;
    }
    io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
    he__worker_sqe_conn(w, sqe, c, HE_OP_POLLOUT);
    c->send_op = HE_SEND_OP_POLL;
}

/* Bytes the kernel took: the head's first, then the body's. */
static void he_send_took(he_worker_t *w, he_conn_t *c, size_t n, uint64_t now_ns)
{
    size_t h = c->hdr_len - c->hdr_sent;
    if (!c->t_first_byte_ns) c->t_first_byte_ns = now_ns;
    if (c->tls) c->tls->last_write_ns = now_ns; /* kTLS: tls.first_record */
    c->bytes_sent += n;
    if (n && !c->protocol->pull) he__conn_timer_set(w, c, HE_TIMER_SEND);
    if (n < h) h = n;
    c->hdr_sent += (uint32_t)h;
    if (n > h) he__body_advance(&c->body, n - h);
}

/* A read error of the file behind a failed sendfile, or 0 when the socket
 * failed. The errno alone cannot tell: a kTLS socket that received a
 * corrupt record fails the next send with EBADMSG, which any client can
 * cause. So one byte is read where the send failed; on an error path
 * only, so the possible disk wait is no concern. */
bool he__disk_errno(int err)
{
    switch (-err) {
    case EIO:
    case ENODATA:
    case ESTALE:
    case ENXIO:
    case EOVERFLOW:
    case EBADMSG:
        return true;
    default:
        return false; /* the socket's (EPIPE, ECONNRESET, ...) or ours */
    }
}

int he__send_file_error(int fd, uint64_t off, int err)
{
    char b;
    ssize_t n;
    if (!he__disk_errno(err)) return 0;
    n = pread(fd, &b, 1, (off_t)off);
    if (n == 1) return 0;
    return n == 0 ? -EBADMSG : -errno; /* 0: short of the promised length */
}

static void he_send_source_error(he_worker_t *w, he_conn_t *c, int err)
{
    if (c->body.ops && c->body.ops->error) c->body.ops->error(&c->body, w, err);
}

/* The file shrank under us: the length we promised is a lie. how: the
 * way it showed, for the log ("" for a short sendfile). */
static void he_send_shrank(he_worker_t *w, he_conn_t *c, const char *how)
{
    he_log_warn("worker %u: %s shrank while sending%s, closing", w->id,
                c->body.name ? c->body.name : "a file", how);
    he_send_source_error(w, c, -EBADMSG);
    he__conn_close(w, c);
}

/* The head of a body sent by reference (sendfile, splice), directly and
 * corked: it is small and the socket has room in all but pipelined cases;
 * MSG_MORE holds it for the body's first bytes. Over kTLS, where MSG_MORE
 * also keeps the record open for them, a head due a small first record
 * (tls.first_record, tls_conn.c) closes its record instead. False when it
 * did not all go: the poll is armed, or the connection failed. */
static bool he_send_head_direct(he_worker_t *w, he_conn_t *c, size_t body_len)
{
    int more = MSG_MORE;
    bool head_left = c->hdr_sent < c->hdr_len;
    uint64_t now = c->tls && head_left ? he__now_ns() : 0; /* kTLS: tls.first_record */
    ssize_t n;
    /* a pulling protocol (HTTP/2) interleaves frames: no cork there */
    if (w->conf->send_cork && !c->corked && !c->protocol->pull && body_len > 0)
        he_send_cork(c, true);
    /* HTTP/1.1 only: an HTTP/2 head here is a DATA frame's 9 bytes */
    if (now && !c->protocol->pull && he__tls_record_cap(w, c, now)) more = 0;
    while (c->hdr_sent < c->hdr_len) {
        n = send(c->fd, c->hdr + c->hdr_sent, c->hdr_len - c->hdr_sent,
                 MSG_DONTWAIT | MSG_NOSIGNAL | more);
        if (n < 0) {
            if (errno == EAGAIN)
                he_send_arm_pollout(w, c);
            else
                he_send_fail(w, c, -errno);
            return false;
        }
        c->hdr_sent += (uint32_t)n;
        c->bytes_sent += (uint64_t)n;
    }
    if (now) { /* the head went: its record was the small one, if due */
        c->tls->small_left = 0;
        c->tls->last_write_ns = now;
    }
    return true;
}

/* sendfile(2) on the worker: the socket is non-blocking, and the file's
 * pages are in the page cache for any segment worth caching. io_uring has
 * no sendfile; IORING_OP_SPLICE needs a pipe and two linked operations per
 * chunk. Measured here (tests/bench/splice_cost.c, 4.6 MB segment over
 * loopback, sender CPU per GB, 3 runs): sendfile 0.28-0.37 s, io_uring
 * splice 0.43-0.55 s. */
static void he_send_file(he_worker_t *w, he_conn_t *c, const he_body_span_t *s)
{
    off_t off = (off_t)s->file_off;
    size_t chunk = w->conf->send_sendfile_chunk, want = s->len;
    ssize_t n;
    int err, derr;

    /* send.sendfile_chunk, like nginx's sendfile_max_chunk: the most one
     * call moves before the worker serves its other connections
     * (docs/performance.md has the sweep that chose the default) */
    if (chunk && want > chunk) want = chunk;
    want = he_send_turn_len(w, c, want);
    if (!he_send_head_direct(w, c, s->len)) return;
    n = sendfile(c->fd, s->fd, &off, want);
    if (n > 0) {
        /* Often the same batch that parsed the request: the batch clock
         * would say 0 us. One clock read per file response is nothing next
         * to its sendfile. */
        he_send_took(w, c, (size_t)n, he__now_ns());
        if (!he__body_left(&c->body)) {
            he_send_finish(w, c);
            return;
        }
        /* Short or chunk-limited: wait until the socket has room again (a
         * poll on a writable socket completes at once). */
        he_send_arm_pollout(w, c);
        return;
    }
    if (n == 0) {
        he_send_shrank(w, c, "");
        return;
    }
    err = -errno; /* before anything that may clobber it (malloc, logging) */
    if (err == -EAGAIN) {
        he_send_arm_pollout(w, c);
        return;
    }
    if (c->body.ops->error && (derr = he__send_file_error(s->fd, s->file_off, err)))
        he_send_source_error(w, c, derr);
    he_send_fail(w, c, err);
}

/* ---------------------------------------------------------------- vmsplice */

#define HE_SEND_PIPES_MAX 16
/* Pipes held by connections whose splice came up short: two descriptors
 * each, so a crowd of slow readers could otherwise take the descriptors
 * accept needs; past this many they are sent by copy. */
#define HE_SEND_PIPES_BUSY_MAX 256
#define HE_SEND_PIPE_MAX (1024 * 1024)
#define HE_SEND_PIPE_MIN (256 * 1024)
#define HE_SEND_PIPE_DEFAULT (64 * 1024) /* the kernel's, 16 pages */
#define HE_SEND_PAGE 4096u

struct he_pipe {
    int rd, wr;
    unsigned pages; /* its size, charged to the user's pipe budget */
    struct he_pipe *next;
};

/* The size to ask for a new pipe, 0 for the kernel's: what one turn moves
 * (send.sendfile_chunk; 0, what the socket takes, asks the most), so a
 * turn is one vmsplice and one splice. Measured with the client's receive
 * on its own CPU (docs/performance.md, "The line-rate cell with one mix
 * for every server"): 1 MiB pipes against 256 KiB moved 7-14 % more bytes
 * per CPU-second at line rate and under wrk. Bounded by fs.pipe-max-size,
 * and by this worker's share of the user's pipe pages, three quarters of
 * fs.pipe-user-pages-soft over the workers: past that limit the kernel
 * gives every new pipe of the user two pages, and each send would crawl.
 * budget_pages 0: no bound (a privileged user). */
static size_t he_send_pipe_bytes(size_t chunk, unsigned max_bytes, uint64_t budget_pages,
                                 uint64_t used_pages)
{
    size_t want = chunk && chunk < HE_SEND_PIPE_MAX ? chunk : HE_SEND_PIPE_MAX;
    if (want < HE_SEND_PIPE_MIN) want = HE_SEND_PIPE_MIN; /* a kept playlist in one turn */
    if (max_bytes && want > max_bytes) want = max_bytes;  /* below the floor: the kernel's */
    for (; want >= HE_SEND_PIPE_MIN; want /= 2)
        if (!budget_pages || used_pages + want / HE_SEND_PAGE <= budget_pages) return want;
    return 0;
}

/* This worker's share of the user's pipe pages, for a new pipe; 0: no
 * bound. */
static uint64_t he_send_pipe_share(const he_worker_t *w)
{
    const he_server_t *s = w->server;
    uint64_t share;
    if (!s->features.pipe_budget_pages) return 0;
    share = s->features.pipe_budget_pages / 4 * 3 / (s->nworkers ? s->nworkers : 1);
    return share ? share : 1; /* a bound, even one that rounds to nothing */
}

static struct he_pipe *he_send_pipe_get(he_worker_t *w)
{
    struct he_pipe *p = w->pipes;
    size_t want;
    int fds[2];
    if (w->pipes_busy >= HE_SEND_PIPES_BUSY_MAX) return NULL;
    if (p) {
        w->pipes = p->next;
        w->npipes--;
        w->pipes_busy++;
        return p;
    }
    if (!(p = malloc(sizeof(*p)))) return NULL;
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(p);
        return NULL;
    }
    p->pages = HE_SEND_PIPE_DEFAULT / HE_SEND_PAGE;
    want = he_send_pipe_bytes(w->conf->send_sendfile_chunk, w->server->features.pipe_max_bytes,
                              he_send_pipe_share(w), w->pipe_pages + p->pages);
    if (want) { /* refused, it stays at the kernel's size */
        int got = fcntl(fds[0], F_SETPIPE_SZ, (int)want);
        if (got > 0) p->pages = (unsigned)got / HE_SEND_PAGE;
    }
    w->pipe_pages += p->pages;
    p->rd = fds[0];
    p->wr = fds[1];
    w->pipes_busy++;
    return p;
}

static void he_send_pipe_close(he_worker_t *w, struct he_pipe *p)
{
    w->pipe_pages -= p->pages;
    close(p->rd);
    close(p->wr);
    free(p);
}

/* An empty pipe back to the pool; one with bytes still in it (the
 * connection went before they did) is closed: they are not ours to send. */
static void he_send_pipe_put(he_worker_t *w, he_conn_t *c)
{
    struct he_pipe *p = c->splice_pipe;
    if (!p) return;
    c->splice_pipe = NULL;
    w->pipes_busy--;
    if (c->splice_len || w->npipes >= HE_SEND_PIPES_MAX || w->exiting) {
        he_send_pipe_close(w, p);
    } else {
        p->next = w->pipes;
        w->pipes = p;
        w->npipes++;
    }
    c->splice_len = 0;
}

void he__send_worker_cleanup(he_worker_t *w)
{
    while (w->pipes) {
        struct he_pipe *p = w->pipes;
        w->pipes = p->next;
        he_send_pipe_close(w, p);
    }
    w->npipes = 0;
}

/* Memory that will not change, by page reference: vmsplice puts its pages
 * in a pipe, splice hands them to TCP, as sendfile does with a file's
 * (a kept tokenised playlist: the kernel reads no page cache, which from a
 * memfd costs a shmem lookup per page; docs/performance.md, signed URLs).
 * Bytes in the pipe are the body's, not yet counted: on a short splice
 * they wait there for the socket's room, and only the pipe is read until
 * it is empty. False: no pipe to be had; the caller copies instead. */
static bool he_send_splice(he_worker_t *w, he_conn_t *c, const he_body_span_t *s)
{
    size_t chunk = he_send_turn_len(
        w, c, w->conf->send_sendfile_chunk ? w->conf->send_sendfile_chunk : HE_SEND_MAX);
    ssize_t n;

    if (!c->splice_pipe && !(c->splice_pipe = he_send_pipe_get(w))) return false;
    if (!he_send_head_direct(w, c, s->len)) return true;
    if (!c->splice_len) {
        struct iovec v = {(void *)s->p, s->len < chunk ? s->len : chunk};
        n = vmsplice(c->splice_pipe->wr, &v, 1, SPLICE_F_NONBLOCK);
        if (n <= 0 && s->mapped && (n == 0 || errno == EFAULT)) {
            /* a file's mapping past its end (the kernel's fault, not a
             * SIGBUS, as the pages are taken for us) */
            he_send_shrank(w, c, " (its mapping faulted)");
            return true;
        }
        if (n <= 0) {
            he_send_fail(w, c, n < 0 ? -errno : -EIO); /* an empty pipe takes at least a page */
            return true;
        }
        c->splice_len = (uint32_t)n;
        if (s->mapped || s->file_copy) {
            w->stats.file_vmsplice_bytes += (uint64_t)n;
            if (s->file_copy) w->stats.file_copy_bytes += (uint64_t)n;
        } else if (s->cache_ram) {
            w->stats.cache.ram_vmsplice_bytes += (uint64_t)n;
        }
    }
    n = splice(c->splice_pipe->rd, NULL, c->fd, NULL, c->splice_len,
               SPLICE_F_NONBLOCK | SPLICE_F_MORE);
    if (n > 0) {
        c->splice_len -= (uint32_t)n;
        he_send_took(w, c, (size_t)n, he__now_ns());
        if (!c->splice_len && !he__body_left(&c->body)) {
            he_send_pipe_put(w, c);
            he_send_finish(w, c);
            return true;
        }
        he_send_arm_pollout(w, c);
        return true;
    }
    if (n < 0 && errno == EAGAIN) {
        he_send_arm_pollout(w, c);
        return true;
    }
    he_send_fail(w, c, n < 0 ? -errno : -EPIPE);
    return true;
}

/* Memory spans: zero-copy for a large span of the registered buffer, else
 * the head and as many spans as fit gathered into one send. */
static void he_send_mem(he_worker_t *w, he_conn_t *c, he_body_span_t *s)
{
    he_body_t *b = &c->body;
    uint32_t hrem = c->hdr_len - c->hdr_sent;
    uint64_t off = b->off, total = hrem;
    struct io_uring_sqe *sqe;
    unsigned niov = 0;

    if (w->zc && !c->tls && !c->zc_copies && s && s->fixed_off >= 0) {
        he_body_span_t q;
        size_t n = s->len;
        ssize_t m;
        /* adjacent pieces of the registered buffer make one span */
        while (n < HE_SEND_MAX && off + n < b->end &&
               (m = b->ops->peek(b, off + n, &q, false)) > 0 && q.p == s->p + n &&
               q.fixed_off == s->fixed_off + (int64_t)n)
            n += (size_t)m;
        if (n > HE_SEND_MAX) n = HE_SEND_MAX;
        if (n >= w->zc_min && hrem) {
            /* the head alone first: gathered with the body it would take
             * the first MiB along as a copy */
            if (!(sqe = he__worker_sqe(w))) goto fail;
            io_uring_prep_send(sqe, c->fd, c->hdr + c->hdr_sent, hrem, MSG_NOSIGNAL | MSG_MORE);
            he__worker_sqe_conn(w, sqe, c, HE_OP_SEND);
            c->send_op = HE_SEND_OP_SEND;
            return;
        }
        if (n >= w->zc_min) {
            if (!(sqe = he__worker_sqe(w))) goto fail;
            io_uring_prep_send_zc_fixed(sqe, c->fd, (void *)s->p, n, MSG_NOSIGNAL, 0, 0);
            /* the notification says whether the kernel copied after all:
             * counted, so an operator sees whether zero-copy happens */
            if (w->zc_usage) sqe->ioprio |= HE_SEND_ZC_REPORT_USAGE;
            he__worker_sqe_conn(w, sqe, c, HE_OP_SEND);
            c->inflight++; /* the notification */
            c->zc_pending++;
            c->send_op = HE_SEND_OP_ZC;
            return;
        }
    }
    if (hrem) {
        c->iov[0].iov_base = c->hdr + c->hdr_sent;
        c->iov[0].iov_len = hrem;
        niov = 1;
    }
    while (s && niov < HE_SEND_IOV && total < HE_SEND_MAX) {
        if (niov > (hrem ? 1u : 0u) &&
            (const char *)c->iov[niov - 1].iov_base + c->iov[niov - 1].iov_len == s->p) {
            c->iov[niov - 1].iov_len += s->len;
        } else {
            c->iov[niov].iov_base = (void *)s->p;
            c->iov[niov].iov_len = s->len;
            niov++;
        }
        off += s->len;
        total += s->len;
        if (off >= b->end || b->ops->peek(b, off, s, false) <= 0 || !s->p) break;
    }
    if (!(sqe = he__worker_sqe(w))) goto fail;
    if (niov == 1) {
        io_uring_prep_send(sqe, c->fd, c->iov[0].iov_base, c->iov[0].iov_len, MSG_NOSIGNAL);
    } else {
        memset(&c->msg, 0, sizeof(c->msg));
        c->msg.msg_iov = c->iov;
        c->msg.msg_iovlen = niov;
        io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
    }
    he__worker_sqe_conn(w, sqe, c, HE_OP_SEND);
    c->send_op = HE_SEND_OP_SEND;
    return;
fail:
    he__conn_close(w, c);
}

/* TLS without kTLS: SSL_write (tls_conn.c). With kTLS the plain paths run
 * as they are: the kernel encrypts what send and sendfile hand it. */
static void he_send_tls(he_worker_t *w, he_conn_t *c)
{
    int rc;
    /* one write per 16 KiB record: corked, the records of a large body
     * leave in full segments instead of one short push each */
    if (w->conf->send_cork && !c->corked && !c->protocol->pull && c->body.ops &&
        c->body.end - c->body.off > 65536)
        he_send_cork(c, true);
    rc = he__tls_send(w, c);
    if (rc == HE_TLS_DONE)
        he_send_finish(w, c);
    else if (rc == HE_TLS_AGAIN)
        he_send_arm_pollout(w, c);
    else if (rc == HE_TLS_WAIT)
        he_send_wait(c);
    else if (rc < 0)
        he_send_fail(w, c, rc);
    /* HE_TLS_AGAIN_READ: the next input the ring brings resumes it */
}

static void he_send_pump(he_worker_t *w, he_conn_t *c)
{
    he_body_t *b = &c->body;
    he_body_span_t s = {.spliceable = false}; /* sources that do not know it leave it so */
    ssize_t n = 0;

    if (c->send_op != HE_SEND_OP_NONE || c->closing || !c->sending || c->finish_wait) return;
    c->send_wait = false;
    if (he__tls_userspace(c)) {
        he_send_tls(w, c);
        return;
    }
    if (he__body_left(b)) n = b->ops->peek(b, b->off, &s, false);
    if (n < 0) {
        /* the source failed after the head went: the client sees a short
         * body once what was sent is out */
        if (c->hdr_sent == c->hdr_len) {
            he__conn_close(w, c);
            return;
        }
        n = 0;
    }
    /* Memory that is also a file range (a file's mapping, the RAM tier's
     * memfd arena) goes by vmsplice over plain TCP: the pages are mapped
     * already, where sendfile looks each one up in the page cache
     * (docs/performance.md, "vmsplice of mappings"). A short one, and kTLS,
     * whose proven path is sendfile, take the file; but never while the
     * pipe holds bytes: they are the body's next, and go first. A file's
     * copy (fcopy.c) sends its short spans from memory: the file may have
     * changed since it was read. */
    if (n > 0 && !c->splice_len &&
        (!s.p || (s.file_too && (c->tls || (s.len < HE_SEND_SPLICE_MIN && !s.file_copy))))) {
        he_send_file(w, c, &s);
        return;
    }
    if ((n > 0 && s.spliceable && s.len >= HE_SEND_SPLICE_MIN) || c->splice_len) {
        if (he_send_splice(w, c, &s)) return;
        if (s.file_too) { /* no pipe to be had: the file, rather than a copy */
            he_send_file(w, c, &s);
            return;
        }
    }
    if (n == 0 && c->hdr_sent == c->hdr_len) {
        if (he__body_left(b))
            he_send_wait(c); /* more comes with he__send_resume */
        else
            he_send_finish(w, c);
        return;
    }
    he_send_mem(w, c, n > 0 ? &s : NULL);
}

void he__send_start(he_worker_t *w, he_conn_t *c)
{
    he_body_t *b = &c->body;
    he_body_span_t s;

    c->sending = true;
    c->send_wait = c->finish_wait = false;
    c->send_op = HE_SEND_OP_NONE;
    /* A small body all there costs less copied behind the head than
     * described by a second iovec: one plain send, no msghdr to import. */
    if (he__body_left(b) && c->hdr_sent == 0 && c->hdr_len + (b->end - b->off) <= HE_CONN_HDR_CAP) {
        /* memory only: a small file range stays a sendfile */
        while (b->off < b->end && b->ops->peek(b, b->off, &s, false) > 0 && s.p) {
            memcpy(c->hdr + c->hdr_len, s.p, s.len);
            c->hdr_len += (uint32_t)s.len;
            he__body_advance(b, s.len);
        }
    }
    he_send_pump(w, c);
}

/* Most bytes one turn of he__send_kick moves before the worker looks at
 * its other connections (a POLLOUT, which completes at once on a socket
 * with room, takes the next turn): the units of a pulling protocol often
 * end inline (sendfile), and a fast reader would never leave the loop. */
#define HE_SEND_KICK_BUDGET (1u << 20)

/* Records a pulling protocol's turn gathered under userspace TLS (tls_conn.c)
 * go when the turn ends, and before the next turn pulls more: true when
 * none wait. The buffer goes with them, also when the turn's last record
 * happened to empty it, so an idle connection holds none. A socket that
 * is full takes a POLLOUT, whose completion kicks again; a connection its
 * protocol is done with (close_drained) closes once they went. */
static bool he_send_drain(he_worker_t *w, he_conn_t *c)
{
    int rc;
    if (!he__tls_out_held(c) && !c->close_drained) return true;
    rc = he__tls_drain(w, c);
    if (rc == HE_TLS_AGAIN) {
        if (c->send_op == HE_SEND_OP_NONE) he_send_arm_pollout(w, c);
        return false;
    }
    if (rc < 0)
        he_send_fail(w, c, rc);
    else if (c->close_drained)
        he__conn_close(w, c);
    return rc == HE_TLS_DONE && !c->closing;
}

void he__send_kick(he_worker_t *w, he_conn_t *c)
{
    uint32_t gen = c->gen;
    uint64_t moved = 0;

    if (c->send_kick || !c->protocol->pull || c->closing) return;
    if (!c->sending && !he_send_drain(w, c)) return;
    c->send_kick = true;
    while (c->in_use && c->gen == gen && !c->closing && !c->sending &&
           c->send_op == HE_SEND_OP_NONE) {
        if (moved >= HE_SEND_KICK_BUDGET) {
            he_send_arm_pollout(w, c); /* its completion kicks again */
            break;
        }
        if (!c->protocol->pull(w, c)) break;
        moved += c->hdr_len + (c->body.ops ? c->body.end - c->body.off : 0);
        he__send_start(w, c);
    }
    if (!c->in_use || c->gen != gen) return;
    c->send_kick = false;
    if (!c->closing && !c->sending) (void)he_send_drain(w, c);
}

void he__send_kick_later(he_worker_t *w, he_conn_t *c)
{
    struct io_uring_sqe *sqe;
    if (c->sending || c->send_op != HE_SEND_OP_NONE || c->closing || w->exiting) return;
    if (!(sqe = he__worker_sqe(w))) {
        he__conn_close(w, c);
        return;
    }
    io_uring_prep_nop(sqe);
    he__worker_sqe_conn(w, sqe, c, HE_OP_POLLOUT); /* its completion: he__send_on_pollout */
    sqe->flags &= (uint8_t)~IOSQE_FIXED_FILE;
    sqe->fd = -1;
    c->send_op = HE_SEND_OP_POLL;
}

void he__send_resume(he_worker_t *w, he_conn_t *c)
{
    if (c->send_wait) he_send_pump(w, c);
}

void he__send_on_cqe(he_worker_t *w, he_conn_t *c, struct io_uring_cqe *cqe)
{
    int res = cqe->res;
    uint8_t op;

    if (cqe->flags & IORING_CQE_F_NOTIF) {
        bool copied = (uint32_t)res & HE_NOTIF_USAGE_ZC_COPIED;
        if (c->zc_nosend && (copied || !w->zc_usage)) {
            /* a send that sent nothing (reset, EAGAIN ...) is reported
             * "copied" too: not a send, and no reason to stop zero-copy.
             * Notifications may come out of order, but every nothing-sent
             * one has the copied bit, and those all count alike, so taking
             * any copied one for it keeps the totals. */
            c->zc_nosend--;
        } else {
            w->stats.cache.zc_sends++;
            if (copied) {
                w->stats.cache.zc_copied++;
                c->zc_copies = w->zc_adapt;
            }
        }
        c->zc_pending--;
        if (!c->zc_pending && c->finish_wait && !c->closing && !w->exiting) he_send_finish(w, c);
        return;
    }
    op = c->send_op;
    c->send_op = HE_SEND_OP_NONE;
    if (op == HE_SEND_OP_ZC && !(cqe->flags & IORING_CQE_F_MORE)) {
        c->zc_pending--; /* no notification will follow */
        c->inflight--;
    } else if (op == HE_SEND_OP_ZC && res <= 0) {
        c->zc_nosend++; /* its notification follows: see above */
    }
    if (c->closing || !c->sending || w->exiting) return;
    if (res == -EAGAIN) { /* sockets are non-blocking for sendfile's sake */
        he_send_arm_pollout(w, c);
        return;
    }
    if (res < 0) {
        he_send_fail(w, c, res);
        return;
    }
    he_send_took(w, c, (size_t)res, he__batch_ns);
    he_send_pump(w, c);
}

void he__send_on_pollout(he_worker_t *w, he_conn_t *c, int res)
{
    if (c->send_op == HE_SEND_OP_POLL) c->send_op = HE_SEND_OP_NONE;
    if (c->closing) return;
    if (!c->sending) { /* he__send_kick's budget ran out: its next turn */
        if (c->protocol->pull && res >= 0) he__send_kick(w, c);
        return;
    }
    if (res < 0 && res != -ECANCELED) {
        he_send_fail(w, c, res);
        return;
    }
    if (res >= 0 && (res & (POLLERR | POLLHUP)) && !(res & POLLOUT)) {
        he_send_fail(w, c, -ECONNRESET);
        return;
    }
    he_send_pump(w, c);
}

void he__send_dispose(he_worker_t *w, he_conn_t *c)
{
    if (c->body_lent)
        memset(&c->body, 0, sizeof(c->body)); /* the protocol's dispose releases it */
    else
        he__body_release(&c->body);
    c->body_lent = c->send_kick = c->close_drained = false;
    c->sending = c->send_wait = c->finish_wait = false;
    c->send_op = HE_SEND_OP_NONE;
    c->zc_pending = c->zc_nosend = 0;
    c->zc_copies = false; /* the next connection may take another route */
    c->corked = false;
    he_send_pipe_put(w, c);
}
