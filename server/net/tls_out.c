/* The write side of a userspace TLS connection: a filter BIO of our own
 * between the SSL and its socket BIO, there from the first handshake byte
 * to SSL_free.
 *
 * OpenSSL hands each record to its write BIO as soon as it is sealed, so a
 * socket BIO alone makes a write(2) per 16 KiB record, and each write is a
 * push to TCP: over a 1500-byte MTU a burst of its own, with its transmit,
 * the receiver's wake-up and its ACKs (docs/architecture.md, "Userspace TLS
 * writes"). While a large HTTP/1.1 body is sent (he__tls_out_gather), the
 * filter gathers records in a buffer of the connection's and writes them
 * to the socket when tls.write_buffer bytes are there; the send loop
 * drains it at the end of every turn, and the buffer goes when the
 * response is out and it is empty.
 *
 * Otherwise the filter passes every write and control straight to the
 * socket BIO, so the handshake (and OpenSSL's own buffer over us during
 * it), kTLS set-up and kTLS's control messages see the socket as before.
 * The filter is never taken off or put back: bytes it holds are always
 * ahead of anything written later, whatever writes it (an alert, a
 * close_notify), and what waits is in plain view: a response is done only
 * when nothing does.
 *
 * With tls.seal_records the filter takes the write keys OpenSSL offers for
 * kTLS when the kernel cannot (tls_seal.c): each write is then one
 * record's plaintext, sealed into the buffer (or, when none is held, a
 * thread's scratch record written at once), and what a full socket leaves
 * of it waits in a buffer taken for it: a sealed record has spent its
 * sequence number and cannot be handed back. The send loop seals its
 * application data the same way without SSL_write (he__tls_out_seal),
 * from the head and body where they lie. */
#include <errno.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/net/tls.h"

/* Room past tls.write_buffer for one more record: the buffer is written
 * once it holds the size or more, so each write carries whole records and
 * at least the size. A TLS 1.2 record with the largest expansion a suite
 * may add (RFC 5246 6.2.3) fits. */
#define HE_TLS_OUT_SLACK (16384 + 2048 + 5)

static BIO_METHOD *he_tls_out_method;
static int he_tls_out_type;
static pthread_once_t he_tls_out_once = PTHREAD_ONCE_INIT;

/* Writes what the buffer holds to next. 1: empty; 0: the socket is full
 * (next's retry flags say so); or a negative errno. */
static int he_tls_out_drain(he_tls_out_t *o, BIO *next)
{
    while (o->len) {
        int n;
        errno = 0;
        n = BIO_write(next, o->buf + o->off, (int)o->len);
        if (n <= 0) {
            if (BIO_should_retry(next)) return 0;
            return errno ? -errno : -EIO;
        }
        o->off += (uint32_t)n;
        o->len -= (uint32_t)n;
    }
    o->off = 0;
    return 1;
}

/* A sealed record's tail the socket did not take waits in a buffer. */
static int he_tls_out_hold(he_tls_out_t *o, const unsigned char *p, size_t len)
{
    int rc = he__tls_out_gather(o, HE_TLS_SEAL_MAX_PLAIN);
    if (rc < 0) return rc;
    memcpy(o->buf, p, len); /* a new buffer: off is 0 */
    o->len = (uint32_t)len;
    return 0;
}

/* One record's plaintext, in count pieces of len bytes in all, sealed
 * where it leaves from. len, or 0 when what waits must go first and the
 * socket is full (nothing sealed: next's retry flags say so), or -1 with
 * errno. */
static int he_tls_out_seal(he_tls_out_t *o, BIO *next, uint8_t type, const struct iovec *in,
                           int count, size_t len)
{
    static __thread unsigned char scratch[HE_TLS_SEAL_MAX_PLAIN + HE_TLS_SEAL_OVERHEAD];
    size_t need = len + HE_TLS_SEAL_OVERHEAD;
    unsigned char *dst;
    int n, w;

    if (len > HE_TLS_SEAL_MAX_PLAIN) {
        errno = EMSGSIZE;
        return -1;
    }
    if (o->len && o->off + o->len + need > o->alloc) {
        n = he_tls_out_drain(o, next); /* what waits goes first */
        if (n <= 0) return n < 0 ? -1 : 0;
    }
    dst = o->buf ? (unsigned char *)o->buf + o->off + o->len : scratch;
    n = he__tls_seal_recordv(o->seal, type, in, count, dst);
    if (n < 0) {
        errno = -n;
        return -1;
    }
    o->record_type = 0; /* OpenSSL's record of its type is sealed */
    if (o->buf) {
        o->len += (uint32_t)n;
        if (o->len >= o->size && he_tls_out_drain(o, next) < 0) return -1;
        return (int)len;
    }
    errno = 0;
    w = BIO_write(next, scratch, n);
    if (w == n) return (int)len;
    if (w <= 0 && !BIO_should_retry(next)) return -1; /* errno is the socket's */
    if (w < 0) w = 0;
    if (he_tls_out_hold(o, scratch + w, (size_t)(n - w)) < 0) {
        errno = ENOMEM;
        return -1;
    }
    return (int)len;
}

int he__tls_out_seal(he_tls_out_t *o, BIO *filter, const struct iovec *in, int count, size_t len)
{
    int n;
    if (!o->seal || o->record_type) return -EINVAL; /* OpenSSL is amid a record of its own */
    errno = 0;
    n = he_tls_out_seal(o, BIO_next(filter), 23, in, count, len); /* application_data */
    if (n >= 0) return n;
    return errno ? -errno : -EIO;
}

static int he_tls_out_write(BIO *b, const char *in, int inl)
{
    he_tls_out_t *o = BIO_get_data(b);
    BIO *next = BIO_next(b);
    int n;

    BIO_clear_retry_flags(b);
    if (!next) return -1;
    if (inl <= 0) return 0;
    if (o->seal) {
        /* OpenSSL writes no more than a record at once */
        struct iovec one = {.iov_base = (void *)in, .iov_len = (size_t)inl};
        n = he_tls_out_seal(o, next, o->record_type ? o->record_type : 23, &one, 1, (size_t)inl);
        if (n == 0) {
            BIO_copy_next_retry(b); /* not sealed yet: OpenSSL writes it again */
            n = -1;
        }
        return n;
    }
    if (!o->len && (!o->buf || (size_t)inl > o->alloc)) goto pass;
    if (o->off + o->len + (uint32_t)inl > o->alloc) {
        /* No room behind what waits: it goes first. Never moved to the
         * front instead: bytes left after a drain mean the socket is full,
         * and the record could not leave before the next drain anyway. */
        n = he_tls_out_drain(o, next);
        if (n < 0) return -1; /* errno is the socket's */
        if (n == 0) {
            BIO_copy_next_retry(b); /* OpenSSL keeps the record and writes it again */
            return -1;
        }
        if ((uint32_t)inl > o->alloc) goto pass;
    }
    memcpy(o->buf + o->off + o->len, in, (size_t)inl);
    o->len += (uint32_t)inl;
    if (o->len >= o->size) {
        /* full: out now; a socket that refuses keeps it for the next write
         * or the turn's drain, and the record is taken either way */
        n = he_tls_out_drain(o, next);
        if (n < 0) return -1;
    }
    return inl;
pass: /* not gathering, or a write larger than the buffer */
    n = BIO_write(next, in, inl);
    BIO_copy_next_retry(b);
    return n;
}

static long he_tls_out_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    he_tls_out_t *o = BIO_get_data(b);
    BIO *next = BIO_next(b);
    long ret;
    int n;

    if (!next) return 0;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        /* OpenSSL flushes at the end of each handshake flight, and kTLS's
         * set-up flushes before it switches the socket over */
        BIO_clear_retry_flags(b);
        n = he_tls_out_drain(o, next);
        if (n <= 0) {
            BIO_copy_next_retry(b);
            return n < 0 ? -1 : 0;
        }
        return BIO_ctrl(next, cmd, num, ptr);
    case BIO_CTRL_WPENDING:
        return (long)o->len + BIO_ctrl(next, cmd, num, ptr);
    case BIO_CTRL_DUP:
        return 0; /* the state is the connection's: never copied */
    case BIO_CTRL_GET_KTLS_SEND:
        /* OpenSSL 3.0 asks eight times per record it writes; asking the
         * socket BIO through BIO_ctrl each time was a tenth of SSL_write
         * for a playlist. Sealing here is kTLS as far as OpenSSL knows. */
        return o->ktls_send || o->seal;
    case HE_BIO_CTRL_SET_KTLS:
        /* The write keys, after OpenSSL flushed through us: the kernel's
         * when it has kTLS and takes the suite, else ours to seal with. */
        if (!num) break; /* a receive side: never this BIO's */
        ret = 0;
        if (o->kernel_ok) {
            ret = BIO_ctrl(next, cmd, num, ptr);
            o->ktls_send = BIO_ctrl(next, BIO_CTRL_GET_KTLS_SEND, 0, NULL) > 0;
        }
        if (ret <= 0 && o->seal_ok && !o->seal && !o->ktls_send) {
            o->seal = he__tls_seal_new(ptr);
            ret = o->seal != NULL;
        }
        return ret;
    case HE_BIO_CTRL_SET_KTLS_TX_CTRL_MSG:
        if (!o->seal) break;
        o->record_type = (uint8_t)num; /* the next write's type */
        return 0;
    case HE_BIO_CTRL_CLEAR_KTLS_TX_CTRL_MSG:
        if (!o->seal) break;
        o->record_type = 0;
        return 0;
    default:
        break;
    }
    /* only a control can switch the socket to kTLS (its set-up, which
     * OpenSSL sends to this BIO, the SSL's wbio): look again after each */
    ret = BIO_ctrl(next, cmd, num, ptr);
    o->ktls_send = BIO_ctrl(next, BIO_CTRL_GET_KTLS_SEND, 0, NULL) > 0;
    return ret;
}

static long he_tls_out_callback_ctrl(BIO *b, int cmd, BIO_info_cb *fp)
{
    BIO *next = BIO_next(b);
    return next ? BIO_callback_ctrl(next, cmd, fp) : 0;
}

static int he_tls_out_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void he_tls_out_method_make(void)
{
    int type = BIO_get_new_index() | BIO_TYPE_FILTER;
    BIO_METHOD *m = BIO_meth_new(type, "hlsedge TLS write");
    if (!m) return;
    if (!BIO_meth_set_write(m, he_tls_out_write) || !BIO_meth_set_ctrl(m, he_tls_out_ctrl) ||
        !BIO_meth_set_callback_ctrl(m, he_tls_out_callback_ctrl) ||
        !BIO_meth_set_create(m, he_tls_out_create)) {
        BIO_meth_free(m);
        return;
    }
    he_tls_out_type = type;
    he_tls_out_method = m; /* lives as long as the process, as OpenSSL's own do */
}

BIO *he__tls_out_new(he_tls_out_t *o, int fd)
{
    BIO *f, *sock;

    pthread_once(&he_tls_out_once, he_tls_out_method_make);
    if (!he_tls_out_method) return NULL;
    memset(o, 0, sizeof(*o));
    if (!(f = BIO_new(he_tls_out_method))) return NULL;
    if (!(sock = BIO_new_socket(fd, BIO_NOCLOSE))) {
        BIO_free(f);
        return NULL;
    }
    BIO_set_data(f, o);
    return BIO_push(f, sock);
}

int he__tls_out_gather(he_tls_out_t *o, size_t size)
{
    if (o->buf) return 0;
    if (!size || size > HE_TLS_OUT_MAX) return -EINVAL;
    if (!(o->buf = malloc(size + HE_TLS_OUT_SLACK))) return -ENOMEM;
    if (o->taken) (*o->taken)++;
    o->size = (uint32_t)size;
    o->alloc = (uint32_t)size + HE_TLS_OUT_SLACK;
    o->off = o->len = 0;
    return 0;
}

int he__tls_out_flush(he_tls_out_t *o, BIO *filter)
{
    int n;
    if (!o->len) return HE_TLS_DONE;
    n = he_tls_out_drain(o, BIO_next(filter));
    return n == 1 ? HE_TLS_DONE : n == 0 ? HE_TLS_AGAIN : n;
}

bool he__tls_out_release(he_tls_out_t *o)
{
    if (o->len) return false; /* sealed records: they leave first */
    free(o->buf);
    o->buf = NULL;
    o->size = o->alloc = o->off = 0;
    return true;
}

he_tls_out_t *he__tls_out_of(BIO *b)
{
    if (!b || !he_tls_out_method || BIO_method_type(b) != he_tls_out_type) return NULL;
    return BIO_get_data(b);
}

bool he__tls_out_free(he_tls_out_t *o)
{
    bool had = o->buf != NULL;
    free(o->buf); /* a response cut short leaves records unsent */
    o->buf = NULL;
    o->size = o->alloc = o->off = o->len = 0;
    he__tls_seal_free(o->seal);
    o->seal = NULL;
    return had;
}
