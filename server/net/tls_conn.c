/* One TLS connection on a worker: first-byte check, handshake, reading
 * requests and, without kTLS, writing responses.
 *
 * Input comes as it does for plain connections, by the ring's multishot
 * recv, and goes into a memory BIO that the SSL reads; the SSL writes the
 * non-blocking socket itself (a socket BIO), which is what lets OpenSSL
 * switch sending to kTLS at the end of the handshake. So a request costs
 * no read(2) and no poll of its own (docs/performance.md, "TLS input by
 * the ring"); the price is kTLS receive, which OpenSSL only sets up on a
 * socket BIO and which TLS 1.2 alone would use: requests are small, and
 * the kernel's work for them is the same either way. Whenever OpenSSL
 * wants the socket writable, a poll on the worker's ring (HE_OP_TLS_POLL)
 * waits for it; nothing blocks the worker.
 *
 *   accept -> PEEK: the first byte received. 0x16 starts a TLS record; a
 *             letter is plain HTTP (answered 400 in plain text); anything
 *             else is garbage. Both close at once, counted by cause.
 *          -> HANDSHAKE: SSL_do_handshake as input comes, under the TLS
 *             handshake timer.
 *          -> OPEN: SSL_read into he__conn_on_data until the BIO is empty
 *             (or the connection's input is full); responses leave through
 *             send.c, which calls he__tls_send when the kernel does not
 *             encrypt.
 */
#include <errno.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/net/tls.h"

#define HE_TLS_READ_BUF 16384
/* Most one SSL_write loop sends before the worker looks at its other
 * connections again (then a poll for POLLOUT, which completes at once when
 * the socket has room). */
#define HE_TLS_WRITE_BUDGET (1u << 20)

/* ---------------------------------------------------------------- SIGBUS guard */

/* Userspace TLS encrypts file bodies straight from a mapping of the file.
 * A file truncated in place while it is being sent (cp over it, a
 * packager rewriting it) makes the pages past its new end fault with
 * SIGBUS. While a worker reads a mapping it names the range here; the
 * handler puts a zero page over a faulting page in that range, so the read
 * completes, and flags it: the response is abandoned and the connection
 * closed, as sendfile does when a file shrinks. Faults anywhere else go to
 * the previous disposition. */
static __thread const char *he_tls_guard_lo, *he_tls_guard_hi;
static __thread volatile sig_atomic_t he_tls_guard_hit;
static struct sigaction he_tls_bus_prev;
static long he_tls_pagesz = 4096;
static pthread_once_t he_tls_guard_once = PTHREAD_ONCE_INIT;

static void he_tls_on_sigbus(int sig, siginfo_t *si, void *uc)
{
    const char *a = si->si_addr;
    (void)sig;
    (void)uc;
    if (he_tls_guard_lo && a >= he_tls_guard_lo && a < he_tls_guard_hi) {
        void *page = (void *)((uintptr_t)a & ~(uintptr_t)(he_tls_pagesz - 1));
        if (mmap(page, (size_t)he_tls_pagesz, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                 -1, 0) != MAP_FAILED) {
            he_tls_guard_hit = 1;
            return;
        }
    }
    sigaction(SIGBUS, &he_tls_bus_prev, NULL); /* the fault repeats under it */
}

static void he_tls_guard_setup(void)
{
    struct sigaction sa, pipe_old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = he_tls_on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    he_tls_pagesz = sysconf(_SC_PAGESIZE);
    sigaction(SIGBUS, &sa, &he_tls_bus_prev);
    /* OpenSSL's socket BIO writes with write(2): a peer that has gone must
     * give EPIPE, never kill the process. */
    if (sigaction(SIGPIPE, NULL, &pipe_old) == 0 && pipe_old.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
}

void he__tls_guard_install(void)
{
    pthread_once(&he_tls_guard_once, he_tls_guard_setup);
}

/* ---------------------------------------------------------------- helpers */

static const char *const he_tls_cause_names[HE_STATS_TLS_ERR_COUNT] = {
    [HE_STATS_TLS_ERR_PLAIN_HTTP] = "plain HTTP", [HE_STATS_TLS_ERR_GARBAGE] = "garbage",
    [HE_STATS_TLS_ERR_TRUNCATED] = "truncated",   [HE_STATS_TLS_ERR_PROTOCOL] = "protocol",
    [HE_STATS_TLS_ERR_OTHER] = "other",
};

static void he_tls_arm_poll(he_worker_t *w, he_conn_t *c, unsigned events)
{
    struct io_uring_sqe *sqe;
    if (c->tls->poll_armed || c->closing) return;
    if (!(sqe = he__worker_sqe(w))) { /* SQ full: nothing would resume it */
        he__conn_close(w, c);
        return;
    }
    io_uring_prep_poll_add(sqe, c->fd, events);
    he__worker_sqe_conn(w, sqe, c, HE_OP_TLS_POLL);
    c->tls->poll_armed = true;
}

static void he_tls_fail(he_worker_t *w, he_conn_t *c, he_stats_tls_err_t cause, const char *why)
{
    c->tls->fatal = true;
    w->stats.tls_handshake_errors++;
    w->stats.tls_errors[cause]++;
    he_log_debug("worker %u: TLS handshake on fd %d failed (%s): %s", w->id, c->fd,
                 he_tls_cause_names[cause], why);
    ERR_clear_error();
    he__conn_close(w, c);
}

/* Why a handshake failed, from OpenSSL's first error. */
static he_stats_tls_err_t he_tls_classify(int sslerr, unsigned long e)
{
    if (sslerr == SSL_ERROR_SYSCALL || sslerr == SSL_ERROR_ZERO_RETURN)
        return HE_STATS_TLS_ERR_TRUNCATED; /* EOF or reset mid-handshake */
    if (ERR_GET_LIB(e) != ERR_LIB_SSL) return HE_STATS_TLS_ERR_OTHER;
    switch (ERR_GET_REASON(e)) {
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
        return HE_STATS_TLS_ERR_TRUNCATED;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_VERSION_TOO_HIGH:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_NO_CIPHERS_AVAILABLE:
    case SSL_R_NO_SHARED_GROUPS:
    case SSL_R_NO_SUITABLE_KEY_SHARE:
    case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
    case SSL_R_NO_SHARED_SIGNATURE_ALGORITHMS:
    case SSL_R_INAPPROPRIATE_FALLBACK:
        return HE_STATS_TLS_ERR_PROTOCOL;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_LENGTH_MISMATCH:
    case SSL_R_BAD_PACKET_LENGTH:
    case SSL_R_UNEXPECTED_MESSAGE:
    case SSL_R_UNEXPECTED_RECORD:
    case SSL_R_BAD_LENGTH:
    case SSL_R_LENGTH_TOO_SHORT:
    case SSL_R_EXCESSIVE_MESSAGE_SIZE:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_BAD_EXTENSION:
    case SSL_R_BAD_RECORD_TYPE:
    case SSL_R_UNKNOWN_PROTOCOL:
        return HE_STATS_TLS_ERR_GARBAGE;
    default:
        return HE_STATS_TLS_ERR_OTHER;
    }
}

/* ---------------------------------------------------------------- states */

static void he_tls_read(he_worker_t *w, he_conn_t *c);

/* The first byte is not a TLS handshake record. A plain HTTP client gets a
 * plain answer: what it sent is read first (bounded) so that the close
 * does not reset the connection under the answer. */
static void he_tls_not_tls(he_worker_t *w, he_conn_t *c, unsigned char first)
{
    static const char body[] = "This port speaks HTTPS: use https:// to reach it.\n";
    he_stats_tls_err_t cause = HE_STATS_TLS_ERR_GARBAGE;

    c->tls->fatal = true;
    if (first >= 'A' && first <= 'Z') {
        char sink[4096], resp[256];
        int n =
            snprintf(resp, sizeof(resp),
                     "HTTP/1.1 400 Bad Request\r\nServer: hlsedge\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     sizeof(body) - 1, body);
        for (int i = 0; i < 16 && recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++) {
        }
        if (send(c->fd, resp, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        }
        shutdown(c->fd, SHUT_WR);
        cause = HE_STATS_TLS_ERR_PLAIN_HTTP;
    }
    he_tls_fail(w, c, cause,
                cause == HE_STATS_TLS_ERR_PLAIN_HTTP ? "plain HTTP request"
                                                     : "first byte is not 0x16");
}

static void he_tls_established(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    bool ktls = he__tls_set_ktls(t->set);
    bool reused = SSL_session_reused(t->ssl);
    bool sealed;

    t->state = HE_TLS_OPEN;
    w->stats.tls_handshakes++;
    if (reused) w->stats.tls_resumed++;
    /* the filter's answer to BIO_get_ktls_send covers its sealing too:
     * only the socket's means the kernel encrypts */
    t->ktls_tx = t->out.ktls_send;
    sealed = t->out.seal != NULL;
    if (t->ktls_tx) {
        w->stats.tls_conn_ktls++;
    } else {
        w->stats.tls_conn_userspace++;
        if (ktls) w->stats.tls_conn_ktls_fallback++;
        if (sealed) w->stats.tls_conn_sealed++;
    }
    he_log_debug("worker %u: fd %d: %s %s%s, send %s, receive SSL_read", w->id, c->fd,
                 SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl), reused ? " resumed" : "",
                 t->ktls_tx ? "kTLS"
                 : sealed ? (ktls ? "sealed by hlsedge (suite not offloaded)" : "sealed by hlsedge")
                 : ktls   ? "SSL_write (suite not offloaded)"
                          : "SSL_write");
    he__conn_timer_set(w, c, HE_TIMER_HEADER);
    {
        const unsigned char *alpn;
        unsigned alen;
        SSL_get0_alpn_selected(t->ssl, &alpn, &alen);
        if (alen == 2 && alpn[0] == 'h' && alpn[1] == '2' && w->server->proto_h2)
            he__conn_switch(w, c, w->server->proto_h2);
    }
    if (c->closing) return;
    he_tls_read(w, c); /* the request may have come with the client's Finished */
}

static void he_tls_handshake(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    unsigned long err;
    char why[200];
    int rc, e;

    errno = 0; /* a socket error on the write side is the only errno that counts */
    rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        he_tls_established(w, c);
        return;
    }
    e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ) return; /* the ring's recv brings more */
    if (e == SSL_ERROR_WANT_WRITE) {
        he_tls_arm_poll(w, c, POLLOUT);
        return;
    }
    err = ERR_peek_error();
    if (err)
        ERR_error_string_n(err, why, sizeof(why));
    else
        snprintf(why, sizeof(why), "%s",
                 e == SSL_ERROR_SYSCALL && errno ? strerror(errno) : "connection closed");
    he_tls_fail(w, c, he_tls_classify(e, err), why);
}

static void he_tls_peek(he_worker_t *w, he_conn_t *c)
{
    char *p;
    long n = BIO_get_mem_data(c->tls->rbio, &p);
    if (n <= 0) {
        if (!c->tls->eof) return; /* the ring's recv brings the first bytes */
        c->tls->fatal = true; /* connected and left without a byte: no handshake to count */
        he__conn_close(w, c);
        return;
    }
    if ((unsigned char)p[0] != 0x16) {
        he_tls_not_tls(w, c, (unsigned char)p[0]);
        return;
    }
    c->tls->state = HE_TLS_HANDSHAKE;
    he_tls_handshake(w, c);
}

/* Reads every complete record, handing plaintext to the HTTP side, until
 * the BIO holds no whole record (or the connection's input is full: then
 * he__tls_want_recv reads on once a response made room). A response
 * answered inside the loop calls back in through he__tls_want_recv; the
 * loop under way goes on reading instead of a nested one. */
static void he_tls_read_records(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    uint32_t gen = c->gen;
    char buf[HE_TLS_READ_BUF];

    for (;;) {
        int n, e;
        /* full input: he__conn_request_done reads on */
        if (c->closing || c->peer_eof || he__conn_in_full(c)) return;
        /* nothing buffered: an SSL_read would only say WANT_READ */
        if (!t->eof && !BIO_ctrl_pending(t->rbio) && !SSL_has_pending(t->ssl)) return;
        errno = 0;
        n = SSL_read(t->ssl, buf, sizeof(buf));
        if (n > 0) {
            he__conn_on_data(w, c, buf, (size_t)n);
            if (!c->in_use || c->gen != gen) return;
            continue;
        }
        e = SSL_get_error(t->ssl, n);
        switch (e) {
        case SSL_ERROR_WANT_READ:
            return; /* the ring's recv brings more */
        case SSL_ERROR_WANT_WRITE:
            t->read_wants_write = true;
            he_tls_arm_poll(w, c, POLLOUT);
            return;
        case SSL_ERROR_ZERO_RETURN: /* close_notify, or EOF (IGNORE_UNEXPECTED_EOF) */
            ERR_clear_error();
            he__conn_peer_eof(w, c); /* what was received before is answered */
            return;
        default:
            if (e == SSL_ERROR_SYSCALL && (errno == ECONNRESET || errno == EPIPE))
                w->stats.errors[HE_STATS_ERR_RESET]++;
            else
                he_log_debug("worker %u: fd %d: TLS read: %s", w->id, c->fd,
                             ERR_peek_error() ? ERR_reason_error_string(ERR_peek_error())
                                              : "connection closed");
            t->fatal = true;
            ERR_clear_error();
            he__conn_close(w, c);
            return;
        }
    }
}

static void he_tls_read(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    uint32_t gen = c->gen;

    if (t->reading) return;
    t->reading = true;
    he_tls_read_records(w, c);
    if (c->in_use && c->gen == gen) t->reading = false;
}

/* Whatever the connection waits for next: the first byte, more of the
 * handshake, records; and a response's SSL_write that needed input. */
static void he_tls_advance(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    uint32_t gen = c->gen;

    switch (t->state) {
    case HE_TLS_PEEK:
        he_tls_peek(w, c);
        return;
    case HE_TLS_HANDSHAKE:
        he_tls_handshake(w, c);
        return;
    default:
        t->read_wants_write = false;
        he_tls_read(w, c);
        /* A write that waited for input (TLS 1.3 post-handshake traffic)
         * goes on now that input was read. */
        if (c->in_use && c->gen == gen && !c->closing && c->tls->write_wants_read &&
            (c->busy || c->sending)) {
            c->tls->write_wants_read = false;
            he__send_on_pollout(w, c, POLLOUT);
        }
        return;
    }
}

/* ---------------------------------------------------------------- API */

void he__tls_conn_start(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = calloc(1, sizeof(*t));

    c->tls = t;
    if (!t) goto fail;
    t->ssl = he__tls_ssl_new(w->server->tls, w->id, &t->set);
    if (!t->ssl) goto fail;
    t->rbio = BIO_new(BIO_s_mem());
    if (!t->rbio) goto fail;
    t->wbio = he__tls_out_new(&t->out, c->fd);
    if (!t->wbio) {
        BIO_free(t->rbio);
        t->rbio = NULL;
        goto fail;
    }
    t->out.taken = &w->stats.tls_write_buffers_taken;
    t->out.kernel_ok = he__tls_set_ktls(t->set);
    t->out.seal_ok = he__tls_set_seal(t->set);
    BIO_set_mem_eof_return(t->rbio, -1); /* empty: "retry", until the ring sees EOF */
    SSL_set_bio(t->ssl, t->rbio, t->wbio); /* the SSL owns both now */
    SSL_set_accept_state(t->ssl);
    he__conn_timer_set(w, c, HE_TIMER_TLS);
    return;
fail:
    he_log_error("worker %u: cannot set up TLS for a new connection (out of memory)", w->id);
    w->stats.tls_handshake_errors++;
    w->stats.tls_errors[HE_STATS_TLS_ERR_OTHER]++;
    if (t) t->fatal = true;
    ERR_clear_error();
    he__conn_close(w, c);
}

void he__tls_on_poll(he_worker_t *w, he_conn_t *c, int res)
{
    he_tls_conn_t *t = c->tls;

    if (!t) return;
    t->poll_armed = false;
    if (res == -ECANCELED) return;
    if (res < 0) {
        t->fatal = true;
        he__conn_close(w, c);
        return;
    }
    he_tls_advance(w, c);
}

void he__tls_on_input(he_worker_t *w, he_conn_t *c, const char *data, size_t len)
{
    he_tls_conn_t *t = c->tls;

    if (!t || t->fatal) return;
    /* bounded as plain input is: the pause of the recv failed otherwise */
    if (BIO_ctrl_pending(t->rbio) + len > he__conn_in_hard_max(w) ||
        BIO_write(t->rbio, data, (int)len) != (int)len) {
        t->fatal = true;
        he__conn_close(w, c);
        return;
    }
    he_tls_advance(w, c);
}

void he__tls_on_eof(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;

    if (!t || t->eof) return;
    t->eof = true;
    BIO_set_mem_eof_return(t->rbio, 0); /* what is buffered reads first, then EOF */
    he_tls_advance(w, c);
}

bool he__tls_want_recv(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    uint32_t gen = c->gen;

    /* records left in the BIO while input was full are read first */
    if (t->state == HE_TLS_OPEN && !c->peer_eof &&
        (t->eof || BIO_ctrl_pending(t->rbio) || SSL_has_pending(t->ssl)))
        he_tls_read(w, c); /* returns at once inside the loop under way */
    if (!c->in_use || c->gen != gen || c->closing) return false;
    return !t->eof && !t->fatal;
}

/* ---------------------------------------------------------------- first record */

/* A record is decrypted only once it is whole. A 16 KiB one is 12 TCP
 * segments: on a new connection it may not fit the initial congestion
 * window (10 segments) and waits a round trip for its last ones, and at a
 * few Mbit/s its transfer alone takes tens of milliseconds, all before the
 * player sees the response's head. So the first tls.first_record bytes of
 * a connection, and the first after a second without writes (an idle
 * connection's TCP has restarted from its initial window by then,
 * tcp_slow_start_after_idle; a stalled reader's has not, and pays one
 * small record for nothing), go in records of their own: by default 1360
 * bytes, one segment with a 1500-byte MTU, IPv6, TCP timestamps and TLS
 * 1.2's 29 bytes of overhead included. Counted in bytes rather than
 * writes, so HTTP/2's SETTINGS, written before the first request arrives,
 * leave the rest to the first response. The records after it are 16 KiB
 * again: a busy connection pays nothing, an idle one one more record per
 * response. */
#define HE_TLS_IDLE_NS 1000000000ull

size_t he__tls_record_cap(const he_worker_t *w, he_conn_t *c, uint64_t now_ns)
{
    he_tls_conn_t *t = c->tls;
    uint32_t limit = (uint32_t)w->conf->tls_first_record;
    if (!t->last_write_ns || now_ns - t->last_write_ns >= HE_TLS_IDLE_NS) t->small_left = limit;
    if (t->small_left > limit) t->small_left = limit; /* a reload lowered it */
    return t->small_left;
}

/* ---------------------------------------------------------------- send */

/* Writes what the filter gathered: HE_TLS_DONE when nothing waits,
 * HE_TLS_AGAIN, or a negative errno (the session is broken then). */
static int he_tls_flush(he_tls_conn_t *t)
{
    int n = he__tls_out_flush(&t->out, t->wbio);
    if (n < 0) {
        t->fatal = true;
        ERR_clear_error();
    }
    return n;
}

/* The write buffer goes once its records are out; counted, so /stats
 * shows what idle connections hold (none). */
static void he_tls_out_drop(he_worker_t *w, he_tls_conn_t *t)
{
    if (t->out.buf && he__tls_out_release(&t->out)) w->stats.tls_write_buffers_freed++;
}

static int he_tls_send_records(he_worker_t *w, he_conn_t *c);

/* tls.write_buffer: an HTTP/1.1 body larger than the buffer has its
 * records gathered (tls_out.c), and so has every unit of a pulling
 * protocol's turn (HTTP/2's frames, he__send_kick): a turn's frames, of
 * many streams and responses, leave in writes of the buffer's size
 * instead of one write per record. A short HTTP/1.1 body is a record or
 * two and writes them as they come. Sealed records leave at the end of
 * every HTTP/1.1 turn, also when the next step waits for input or for the
 * body's source, and a response is done only when they are out; a
 * pulling protocol's units are done once sealed, and the turn's end
 * drains them (he__tls_drain). */
int he__tls_send(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    const he_body_t *b = &c->body;
    size_t size = w->conf->tls_write_buffer;
    bool pull = c->protocol->pull != NULL;
    int rc, flushed;

    /* out of memory: a write per record, as without */
    if (size && !t->out.buf && (pull ? c->send_kick : b->ops && b->end - b->off > size))
        (void)he__tls_out_gather(&t->out, size); /* counted in w->stats by the filter */
    rc = he_tls_send_records(w, c);
    if (rc < 0) return rc;
    /* a unit of a turn: sealed is done, and the turn's end drains */
    if (rc == HE_TLS_DONE && pull && c->send_kick && t->out.buf) return rc;
    flushed = he_tls_flush(t);
    if (flushed != HE_TLS_DONE) return flushed;
    if (rc == HE_TLS_DONE) he_tls_out_drop(w, t);
    return rc;
}

int he__tls_drain(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    int rc;
    if (t->fatal) return -EPIPE;
    rc = he_tls_flush(t);
    if (rc == HE_TLS_DONE) he_tls_out_drop(w, t);
    return rc;
}

/* Whether this turn's records are sealed straight from the head and the
 * body (he__tls_out_seal) instead of by SSL_write, which takes one buffer
 * and so a copy of head and body together, and costs its record layer's
 * calls for each record: when hlsedge seals the records anyway and
 * OpenSSL owes the socket nothing (a write to retry, a KeyUpdate to
 * answer, a handshake message). OpenSSL keeps no write sequence of its own
 * once the keys are handed over: whatever it writes later is sealed by the
 * same state, in order. */
static bool he_tls_seal_direct(he_tls_conn_t *t)
{
    return t->out.seal && !t->write_pending && SSL_is_init_finished(t->ssl) &&
           SSL_get_key_update_type(t->ssl) == SSL_KEY_UPDATE_NONE && !SSL_want_write(t->ssl);
}

static int he_tls_send_records(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    he_body_t *b = &c->body;
    size_t budget = HE_TLS_WRITE_BUDGET;
    uint64_t now;
    size_t cap;
    bool direct;

    if (t->write_wants_read) return HE_TLS_AGAIN_READ;
    /* A write OpenSSL wants retried must get at least the length it had
     * (else SSL_R_BAD_LENGTH): no cap then, even after a second's stall. */
    now = he__now_ns();
    direct = he_tls_seal_direct(t);
    cap = t->write_pending ? 0 : he__tls_record_cap(w, c, now); /* 0 once the small bytes went */
    for (;;) {
        uint32_t hrem = c->hdr_len - c->hdr_sent;
        he_body_span_t s;
        ssize_t got = 0;
        struct iovec in[2];
        int count = 1;
        const char *p;
        size_t len, h;
        int n, e, err;

        if (he__body_left(b)) {
            got = b->ops->peek(b, b->off, &s, true);
            if (got < 0 && hrem == 0) return (int)got;
            if (got < 0) got = 0;
        }
        if (hrem == 0 && got == 0) return he__body_left(b) ? HE_TLS_WAIT : HE_TLS_DONE;
        if (got > 0 && s.mapped) {
            he_tls_guard_lo = s.p;
            he_tls_guard_hi = s.p + s.len;
        }
        if (hrem && got > 0 && (!cap || cap > hrem)) {
            /* Header and the first body bytes in one record and one write:
             * sealed from both, or the copy of at most 16 KiB for
             * SSL_write, saves a record and a syscall. */
            size_t room = (cap ? cap : HE_TLS_STAGE) - hrem;
            size_t take = s.len < room ? s.len : room;
            in[0] = (struct iovec){.iov_base = c->hdr + c->hdr_sent, .iov_len = hrem};
            in[1] = (struct iovec){.iov_base = (void *)s.p, .iov_len = take};
            count = 2;
            len = hrem + take;
            p = NULL;
            if (!direct) {
                char *st = he__tls_stage(w->server->tls, w->id);
                memcpy(st, c->hdr + c->hdr_sent, hrem);
                memcpy(st + hrem, s.p, take);
                p = st;
            }
        } else if (hrem) {
            p = c->hdr + c->hdr_sent; /* a head longer than the cap goes whole */
            len = hrem;
        } else {
            /* the turn's budget ends on a whole record, not a short one */
            size_t turn_left = budget < HE_TLS_STAGE ? HE_TLS_STAGE : budget;
            p = s.p;
            len = s.len < turn_left ? s.len : turn_left;
            if (cap && len > cap) len = cap;
        }
        if (direct) {
            if (count == 1) {
                if (len > HE_TLS_SEAL_MAX_PLAIN) len = HE_TLS_SEAL_MAX_PLAIN; /* a record */
                in[0] = (struct iovec){.iov_base = (void *)p, .iov_len = len};
            }
            n = he__tls_out_seal(&t->out, t->wbio, in, count, len);
            he_tls_guard_lo = NULL;
            if (he_tls_guard_hit) goto shrank;
            if (n == 0) return HE_TLS_AGAIN; /* nothing sealed: OpenSSL owes nothing */
            if (n < 0) {
                t->fatal = true;
                return n;
            }
            goto sent;
        }
        /* Partial-write mode: each call sends at most one record. */
        n = SSL_write(t->ssl, p, (int)len);
        he_tls_guard_lo = NULL;
        if (he_tls_guard_hit) {
        shrank:
            he_tls_guard_hit = 0;
            he_log_warn("worker %u: %s shrank while sending over TLS, closing", w->id,
                        b->name ? b->name : "a file");
            if (b->ops && b->ops->error) b->ops->error(b, w, -EBADMSG);
            t->fatal = true;
            ERR_clear_error();
            return -EIO;
        }
        if (n <= 0) {
            e = SSL_get_error(t->ssl, n);
            if (e == SSL_ERROR_WANT_WRITE) {
                t->write_pending = true;
                return HE_TLS_AGAIN;
            }
            if (e == SSL_ERROR_WANT_READ) {
                t->write_pending = true;
                t->write_wants_read = true;
                return HE_TLS_AGAIN_READ;
            }
            err = e == SSL_ERROR_SYSCALL && errno ? -errno : -EPROTO;
            t->fatal = true;
            ERR_clear_error();
            return err;
        }
        t->write_pending = false;
    sent:
        if (!c->t_first_byte_ns) c->t_first_byte_ns = now;
        t->last_write_ns = now;
        t->small_left = (size_t)n < t->small_left ? t->small_left - (uint32_t)n : 0;
        cap = t->small_left;
        c->bytes_sent += (uint64_t)n;
        h = (size_t)n < hrem ? (size_t)n : hrem;
        c->hdr_sent += (uint32_t)h;
        if ((size_t)n > h) he__body_advance(b, (size_t)n - h);
        if (!c->protocol->pull) he__conn_timer_set(w, c, HE_TIMER_SEND);
        if ((size_t)n >= budget) return HE_TLS_AGAIN;
        budget -= (size_t)n;
    }
}

void he__tls_account(he_worker_t *w, he_conn_t *c)
{
    if (c->tls->ktls_tx)
        w->stats.tls_bytes_ktls += c->bytes_sent;
    else
        w->stats.tls_bytes_userspace += c->bytes_sent;
}

int he__tls_close_notify(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    (void)w;
    if (t->state != HE_TLS_OPEN || t->fatal) return -ENOTCONN;
    if (SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN) return 0;
    /* 0: sent, the peer's not seen yet (we do not wait for it); <0: the
     * alert did not fit the socket (non-blocking): the close goes on
     * without it, as a failed session's would */
    if (SSL_shutdown(t->ssl) < 0 || he_tls_flush(t) != HE_TLS_DONE) {
        t->fatal = true;
        ERR_clear_error();
        return -EAGAIN;
    }
    return 0;
}

void he__tls_conn_free(he_worker_t *w, he_conn_t *c)
{
    he_tls_conn_t *t = c->tls;
    if (!t) return;
    if (t->ssl) {
        /* close_notify, best effort: the socket is non-blocking */
        bool notify =
            t->state == HE_TLS_OPEN && !t->fatal && !(SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN);
        if (notify && SSL_shutdown(t->ssl) >= 0) he__tls_out_flush(&t->out, t->wbio);
        SSL_free(t->ssl);
    }
    if (he__tls_out_free(&t->out)) w->stats.tls_write_buffers_freed++;
    ERR_clear_error();
    he__tls_set_release(t->set);
    free(t);
    c->tls = NULL;
}
