/* server/net/tls_out.c: the filter BIO under a userspace TLS connection's
 * SSL, over a real non-blocking socket (a socketpair whose send buffer is
 * small, so it fills). Writes pass straight through until gathering
 * starts; gathered bytes are held until the size is reached and then
 * written in one go; a full socket makes a write that does not fit say
 * "retry", the flush say HE_TLS_AGAIN (never "done": 1 is HE_TLS_AGAIN,
 * which is how an earlier build lost a stalled reader's tail) and the
 * release refuse; bytes come out in the order they went in, across the
 * buffer and pass-through; BIO_flush and BIO_wpending see the buffer; a
 * peer that has gone is an error, not a retry; records sealed from pieces
 * without SSL_write leave whole and in order. */
#include <errno.h>
#include <fcntl.h>
#include <linux/tls.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "he_test.h"
#include "server/net/tls.h"

static int fds[2];
static unsigned char seq_out; /* the next byte written, as a counter */
static unsigned char seq_in;  /* the next byte expected at the peer */

/* A filter over a new socketpair's first end (sndbuf 0: the default). */
static BIO *filter_open(he_tls_out_t *o, int sndbuf)
{
    HE_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
    if (sndbuf) setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    seq_out = seq_in = 0;
    return he__tls_out_new(o, fds[0]);
}

static void filter_close(BIO *b)
{
    BIO_free_all(b);
    close(fds[0]);
    close(fds[1]);
}

/* A "record" of n bytes continuing the counter. */
static int write_record(BIO *b, size_t n)
{
    unsigned char rec[20000];
    unsigned char save = seq_out;
    int r;
    for (size_t i = 0; i < n; i++)
        rec[i] = seq_out++;
    r = BIO_write(b, rec, (int)n);
    if (r <= 0) seq_out = save; /* not taken: OpenSSL writes it again */
    return r;
}

/* Everything the peer can read now; checks the counter. Returns bytes. */
static size_t drain_peer(void)
{
    unsigned char buf[65536];
    size_t total = 0;
    ssize_t n;
    while ((n = read(fds[1], buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != seq_in++) {
                HE_CHECK(!"bytes out of order");
                return total;
            }
        total += (size_t)n;
    }
    return total;
}

static void test_pass_through(void)
{
    he_tls_out_t o;
    BIO *b;

    b = filter_open(&o, 0);
    HE_CHECK(b != NULL);
    HE_CHECK_INT(write_record(b, 100), 100);
    HE_CHECK_INT(drain_peer(), 100); /* straight to the socket */
    HE_CHECK_INT(BIO_wpending(b), 0);
    HE_CHECK_INT(BIO_flush(b), 1);
    HE_CHECK_INT(he__tls_out_flush(&o, b), HE_TLS_DONE);
    HE_CHECK(he__tls_out_release(&o)); /* nothing to release */
    filter_close(b);
}

static void test_gather_then_write(void)
{
    he_tls_out_t o;
    BIO *b;

    b = filter_open(&o, 0);
    HE_CHECK_INT(he__tls_out_gather(&o, 0), -EINVAL);
    HE_CHECK_INT(he__tls_out_gather(&o, HE_TLS_OUT_MAX + 1), -EINVAL);
    HE_CHECK_INT(he__tls_out_gather(&o, 1000), 0);
    HE_CHECK_INT(he__tls_out_gather(&o, 5000), 0); /* already gathering: the size stays */
    HE_CHECK_INT(o.size, 1000);
    HE_CHECK_INT(write_record(b, 400), 400);
    HE_CHECK_INT(write_record(b, 400), 400);
    HE_CHECK_INT(drain_peer(), 0); /* held */
    HE_CHECK_INT(BIO_wpending(b), 800);
    HE_CHECK_INT(write_record(b, 400), 400); /* 1200 >= 1000: one write */
    HE_CHECK_INT(drain_peer(), 1200);
    HE_CHECK_INT(write_record(b, 300), 300);
    HE_CHECK(!he__tls_out_release(&o)); /* 300 wait */
    HE_CHECK_INT(BIO_flush(b), 1);      /* OpenSSL's flush empties it too */
    HE_CHECK_INT(drain_peer(), 300);
    HE_CHECK(he__tls_out_release(&o));
    HE_CHECK(o.buf == NULL);
    HE_CHECK_INT(write_record(b, 50), 50); /* passes through again */
    HE_CHECK_INT(drain_peer(), 50);
    filter_close(b);
}

static void test_full_socket(void)
{
    he_tls_out_t o;
    BIO *b;
    size_t taken = 0, got = 0;
    int r = 0, rounds = 0;

    b = filter_open(&o, 4096);
    HE_CHECK_INT(he__tls_out_gather(&o, 16384), 0);
    /* records until the socket and then the buffer are full */
    for (int i = 0; i < 1000 && (r = write_record(b, 16406)) > 0; i++)
        taken += (size_t)r;
    HE_CHECK(r < 0);
    HE_CHECK(BIO_should_retry(b) && BIO_should_write(b));
    HE_CHECK(o.len > 0);
    HE_CHECK_INT(he__tls_out_flush(&o, b), HE_TLS_AGAIN);
    HE_CHECK(BIO_flush(b) <= 0 && BIO_should_retry(b));
    HE_CHECK(!he__tls_out_release(&o)); /* the records wait; they are never dropped */
    HE_CHECK(o.buf != NULL);
    /* the reader comes back: a flush each time it made room, as POLLOUT would */
    while (got < taken && rounds++ < 100000) {
        got += drain_peer();
        if (he__tls_out_flush(&o, b) == HE_TLS_DONE) got += drain_peer();
    }
    HE_CHECK_INT(got, taken);
    HE_CHECK_INT(o.len, 0);
    HE_CHECK(he__tls_out_release(&o));
    filter_close(b);
}

static void test_large_write_passes(void)
{
    he_tls_out_t o;
    BIO *b;
    int r;

    b = filter_open(&o, 0);
    HE_CHECK_INT(he__tls_out_gather(&o, 1), 0); /* room for 1 byte plus one record */
    r = write_record(b, 19000);                 /* more than the buffer: straight out */
    HE_CHECK(r > 0);
    HE_CHECK_INT(o.len, 0);
    HE_CHECK_INT(drain_peer(), (size_t)r);
    filter_close(b);
    he__tls_out_release(&o);
}

static void test_peer_gone(void)
{
    he_tls_out_t o;
    BIO *b;

    b = filter_open(&o, 0);
    HE_CHECK_INT(he__tls_out_gather(&o, 4096), 0);
    HE_CHECK_INT(write_record(b, 100), 100);
    close(fds[1]);
    HE_CHECK_INT(he__tls_out_flush(&o, b), -EPIPE);
    HE_CHECK(write_record(b, 5000) < 0 && !BIO_should_retry(b));
    BIO_free_all(b);
    free(o.buf);
    close(fds[0]);
}

/* he__tls_out_seal: application data sealed from pieces without SSL_write,
 * one record a call, each whole on the wire in order; a full socket holds
 * a record's tail, and the next record then waits (0, nothing sealed)
 * until the tail is out; refused when nothing seals (no keys) and while
 * OpenSSL is amid a record of its own type. */
static void test_direct_seal(void)
{
    struct tls12_crypto_info_aes_gcm_128 g = {
        .info = {.version = TLS_1_3_VERSION, .cipher_type = TLS_CIPHER_AES_GCM_128}};
    static unsigned char body[16384];
    unsigned char buf[65536];
    he_tls_out_t o;
    struct iovec in[2] = {{(void *)"HTTP/1.1 200 OK\r\n\r\n", 19}, {body, 16384 - 19}};
    size_t sealed = 0, got = 0, rec = 5 + 16384 + 1 + 16;
    int r = 1, rounds = 0;
    ssize_t n;
    BIO *b;

    b = filter_open(&o, 4096);
    HE_CHECK_INT(he__tls_out_seal(&o, b, in, 2, 16384), -EINVAL); /* no keys */
    HE_CHECK((o.seal = he__tls_seal_new(&g)) != NULL);
    o.record_type = 21;
    HE_CHECK_INT(he__tls_out_seal(&o, b, in, 2, 16384), -EINVAL);
    o.record_type = 0;
    /* records until one waits: the socket took part of one, the rest is held */
    for (int i = 0; i < 1000 && (r = he__tls_out_seal(&o, b, in, 2, 16384)) > 0; i++)
        sealed++;
    HE_CHECK_INT(r, 0);
    HE_CHECK(sealed > 0 && o.len > 0 && o.buf != NULL);
    HE_CHECK_INT(he__tls_out_flush(&o, b), HE_TLS_AGAIN);
    while (rounds++ < 100000) {
        while ((n = read(fds[1], buf, sizeof(buf))) > 0)
            got += (size_t)n;
        if (he__tls_out_flush(&o, b) == HE_TLS_DONE) {
            while ((n = read(fds[1], buf, sizeof(buf))) > 0)
                got += (size_t)n;
            break;
        }
    }
    HE_CHECK_INT(got, sealed * rec); /* whole records, none lost or doubled */
    HE_CHECK(he__tls_out_release(&o));
    /* with the socket empty again, a record leaves at once: one write */
    HE_CHECK_INT(he__tls_out_seal(&o, b, in, 1, 19), 19);
    HE_CHECK_INT(o.len, 0);
    n = read(fds[1], buf, sizeof(buf));
    HE_CHECK_INT(n, 5 + 19 + 1 + 16);
    HE_CHECK(buf[0] == 23 && buf[1] == 3 && buf[2] == 3 && (buf[3] << 8 | buf[4]) == 19 + 1 + 16);
    he__tls_out_free(&o);
    filter_close(b);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the server does */
    test_pass_through();
    test_gather_then_write();
    test_full_socket();
    test_large_write_passes();
    test_peer_gone();
    test_direct_seal();
    HE_TEST_MAIN_END();
}
