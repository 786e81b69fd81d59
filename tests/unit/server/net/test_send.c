/* server/net/send.c: the one send path over every kind of body source.
 *
 *   memory     a small body copied behind the head goes in one send; a
 *              large one is gathered (head + spans, one sendmsg), pieces
 *              that are not adjacent as iovecs of their own
 *   file       sendfile in chunks of fx_conf.send_sendfile_chunk with POLLOUT
 *              between, even when the socket has room; a file shorter
 *              than promised calls the source's error with -EBADMSG and
 *              closes
 *   chunked    a source with nothing yet (peek 0) waits for
 *              he__send_resume; one that fails (peek < 0) after the head
 *              closes, and the client sees a short body
 *   short      a small SO_SNDBUF: sends are short and the rest follows
 *
 * and in every case the protocol's sent() runs exactly once per response
 * that ends, never for one that fails, and the source is released exactly
 * once. A failed sendfile counts against the file only when the file
 * itself cannot be read where the send failed (he__send_file_error).
 *
 * The worker has a real io_uring, connections are socketpairs
 * (ring_fixture.h); the bodies are fake sources that count their calls. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "he_test.h"
#include "ring_fixture.h"
#include "server/net/send.c"

/* ---------------------------------------------------------------- fake protocol */

static struct {
    unsigned sent;
    bool sending_at_sent; /* c->sending when sent() ran */
    bool body_at_sent;    /* c->body still held when sent() ran */
} fp;

static size_t fp_conn_size(const he_conf_t *conf)
{
    return 16;
}
static void fp_open(he_worker_t *w, he_conn_t *c) {}
static size_t fp_data(he_worker_t *w, he_conn_t *c, const char *p, size_t n, bool *ready)
{
    *ready = false;
    return n;
}
static void fp_request(he_worker_t *w, he_conn_t *c) {}
static void fp_eof(he_worker_t *w, he_conn_t *c) {}
static void fp_idle(he_worker_t *w, he_conn_t *c, bool hard) {}
static void fp_sent(he_worker_t *w, he_conn_t *c)
{
    fp.sent++;
    fp.sending_at_sent |= c->sending;
    fp.body_at_sent |= c->body.ops != NULL;
}

static const he_proto_t fp_proto = {
    .name = "fake",
    .conn_size = fp_conn_size,
    .open = fp_open,
    .data = fp_data,
    .request = fp_request,
    .eof = fp_eof,
    .idle = fp_idle,
    .sent = fp_sent,
};

/* ---------------------------------------------------------------- fake sources */

typedef struct src {
    const char *mem; /* memory source: logical byte i at mem[phys(i)] */
    size_t piece;    /* nonzero: spans of at most piece bytes, one byte apart in mem */
    int fd;          /* file source (mem NULL) */
    const char *map; /* the file mapped, offered when need_mem (as file.c does) */
    uint64_t avail;  /* bytes that have arrived: peek says 0 at or past it */
    int fail;        /* nonzero: peek fails with it */
    unsigned peeks, peeks_mem, releases, errors;
    int err;
    uint64_t advanced;
} src_t;

static ssize_t src_peek(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem)
{
    src_t *x = b->ctx;
    uint64_t end = x->avail < b->end ? x->avail : b->end;
    x->peeks++;
    x->peeks_mem += need_mem;
    HE_CHECK(off >= b->off && off < b->end);
    if (x->fail) return x->fail;
    if (off >= end) return 0;
    memset(s, 0, sizeof(*s));
    s->fd = -1;
    s->fixed_off = -1;
    s->len = (size_t)(end - off);
    if (x->mem && x->piece) {
        size_t in = (size_t)(off % x->piece);
        s->p = x->mem + (off / x->piece) * (x->piece + 1) + in;
        if (s->len > x->piece - in) s->len = x->piece - in;
    } else if (x->mem) {
        s->p = x->mem + off;
    } else if (need_mem && x->map) {
        s->p = x->map + off;
        s->mapped = true;
    } else {
        s->fd = x->fd;
        s->file_off = off;
    }
    return (ssize_t)s->len;
}

static void src_advance(he_body_t *b, size_t n)
{
    src_t *x = b->ctx;
    x->advanced += n;
    b->off += n;
}

static void src_release(he_body_t *b)
{
    ((src_t *)b->ctx)->releases++;
}

static void src_error(he_body_t *b, he_worker_t *w, int err)
{
    src_t *x = b->ctx;
    x->errors++;
    x->err = err;
}

static const he_body_ops_t src_ops = {
    .peek = src_peek,
    .advance = src_advance,
    .release = src_release,
    .error = src_error,
};

static void src_body(he_conn_t *c, src_t *x, uint64_t len)
{
    memset(&c->body, 0, sizeof(c->body));
    c->body.ops = &src_ops;
    c->body.ctx = x;
    c->body.end = len;
    c->body.name = "test body";
}

static unsigned mem_done;
static void mem_release(void *ctx)
{
    (*(unsigned *)ctx)++;
}

/* ---------------------------------------------------------------- helpers */

#define HEAD "HTTP/1.1 200 OK\r\nServer: t\r\n\r\n"
#define HEAD_LEN (sizeof(HEAD) - 1)

static he_conn_t *conn(int *peer, int sndbuf)
{
    int fds[2];
    he_conn_t *c;
    fx_pair(fds);
    if (sndbuf) HE_CHECK_INT(setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    c = he__conn_new(&fx_w, fds[0], NULL, false);
    HE_CHECK(c != NULL);
    if (!c) exit(1);
    *peer = fds[1];
    fx_reap(0); /* the recv is armed */
    memcpy(c->hdr, HEAD, HEAD_LEN);
    c->hdr_len = HEAD_LEN;
    c->hdr_sent = 0;
    return c;
}

static void setup(void)
{
    memset(&fp, 0, sizeof(fp));
    mem_done = 0;
    fx_setup(&fp_proto, 4);
}

/* Reads the client end while reaping, until the response ended (sent()
 * ran) or the connection went; then what is left. *eof: the server end
 * closed. Returns the bytes read. */
static size_t drain(he_conn_t *c, int peer, char *buf, size_t cap, unsigned sent0, int *eof)
{
    size_t len = 0;
    int e = 0;
    /* bounded: stops when nothing happened for a second */
    for (int idle = 0; idle < 500 && !e && fp.sent == sent0 && c->in_use;) {
        size_t before = len;
        e = fx_read(peer, buf, cap, &len);
        idle = fx_reap(e ? 0 : 2) || len != before ? 0 : idle + 1;
    }
    fx_settle(2);
    for (int i = 0; i < 100 && !e; i++) { /* a closed connection: up to its EOF */
        e = fx_read(peer, buf, cap, &len);
        if (c->in_use) break;
    }
    if (eof) *eof = e;
    return len;
}

static char *pattern(size_t n)
{
    char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (char)('a' + (i * 7 + i / 251) % 26);
    return p;
}

static char *tmpfile_of(const char *data, size_t n, int *fd)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/he-test-send-XXXXXX");
    *fd = mkstemp(path);
    HE_CHECK(*fd >= 0);
    HE_CHECK_INT(write(*fd, data, n), n);
    return path;
}

/* ---------------------------------------------------------------- memory */

/* A small body is copied behind the head: one plain send of both. */
static void test_mem_small(void)
{
    char buf[256];
    int peer, eof;
    he_conn_t *c;
    size_t n;

    setup();
    c = conn(&peer, 0);
    he__body_mem(&c->body, "hello, world", 12, mem_release, &mem_done);
    he__send_start(&fx_w, c);
    HE_CHECK_INT(c->hdr_len, HEAD_LEN + 12); /* the body went into the head */
    HE_CHECK(c->body.off == c->body.end);
    HE_CHECK_INT(fx_queued(), 1);
    HE_CHECK_INT(fx_last_sqe()->opcode, IORING_OP_SEND);
    HE_CHECK_INT(fx_last_sqe()->len, HEAD_LEN + 12);
    HE_CHECK_INT(mem_done, 0); /* the source stays until the response ends */
    n = drain(c, peer, buf, sizeof(buf), 0, &eof);
    HE_CHECK_INT(fx_ops[HE_OP_SEND], 1);
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK(!fp.sending_at_sent && !fp.body_at_sent);
    HE_CHECK_INT(mem_done, 1);
    HE_CHECK_INT(n, HEAD_LEN + 12);
    HE_CHECK(n == HEAD_LEN + 12 && memcmp(buf, HEAD "hello, world", n) == 0);
    HE_CHECK(!eof && c->in_use && !c->sending);
    HE_CHECK_INT(c->bytes_sent, HEAD_LEN + 12);
    fx_teardown();
    HE_CHECK_INT(mem_done, 1);
    close(peer);
}

/* A large body is gathered behind the head in one sendmsg. */
static void test_mem_large(void)
{
    enum { N = 150000 };
    char *body = pattern(N), *buf = malloc(N + 256);
    int peer, eof;
    he_conn_t *c;
    size_t n;

    setup();
    c = conn(&peer, 0);
    he__body_mem(&c->body, body, N, mem_release, &mem_done);
    he__send_start(&fx_w, c);
    HE_CHECK_INT(c->hdr_len, HEAD_LEN); /* too large to copy */
    HE_CHECK_INT(fx_queued(), 1);
    HE_CHECK_INT(fx_last_sqe()->opcode, IORING_OP_SENDMSG);
    HE_CHECK_INT(c->msg.msg_iovlen, 2);
    HE_CHECK(c->iov[0].iov_base == c->hdr && c->iov[0].iov_len == HEAD_LEN);
    HE_CHECK(c->iov[1].iov_base == body && c->iov[1].iov_len == N);
    n = drain(c, peer, buf, N + 256, 0, &eof);
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(mem_done, 1);
    HE_CHECK_INT(n, HEAD_LEN + N);
    HE_CHECK(n == HEAD_LEN + N && memcmp(buf, HEAD, HEAD_LEN) == 0 &&
             memcmp(buf + HEAD_LEN, body, N) == 0);
    HE_CHECK(!eof);
    fx_teardown();
    HE_CHECK_INT(mem_done, 1);
    close(peer);
    free(body);
    free(buf);
}

/* Pieces that are not adjacent in memory: an iovec each, at most
 * HE_SEND_IOV per sendmsg; the body arrives whole and in order. */
static void test_mem_pieces(void)
{
    enum { PIECE = 1000, NP = 40, N = PIECE * NP };
    char *phys = pattern((size_t)(PIECE + 1) * NP), *want = malloc(N), *buf = malloc(N + 256);
    src_t x = {.mem = phys, .piece = PIECE, .avail = N};
    int peer, eof;
    he_conn_t *c;
    size_t n;

    for (size_t i = 0; i < N; i++)
        want[i] = phys[(i / PIECE) * (PIECE + 1) + i % PIECE];
    setup();
    c = conn(&peer, 0);
    src_body(c, &x, N);
    he__send_start(&fx_w, c);
    HE_CHECK_INT(fx_last_sqe()->opcode, IORING_OP_SENDMSG);
    HE_CHECK_INT(c->msg.msg_iovlen, HE_SEND_IOV);
    HE_CHECK(c->iov[1].iov_len == PIECE && c->iov[2].iov_base == phys + PIECE + 1);
    n = drain(c, peer, buf, N + 256, 0, &eof);
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(x.releases, 1);
    HE_CHECK_INT(x.errors, 0);
    HE_CHECK_INT(x.advanced, N); /* through the source's own advance */
    HE_CHECK(fx_ops[HE_OP_SEND] >= (NP + HE_SEND_IOV - 2) / (HE_SEND_IOV - 1));
    HE_CHECK_INT(n, HEAD_LEN + N);
    HE_CHECK(n == HEAD_LEN + N && memcmp(buf + HEAD_LEN, want, N) == 0);
    fx_teardown();
    HE_CHECK_INT(x.releases, 1);
    close(peer);
    free(phys);
    free(want);
    free(buf);
}

/* A small send buffer: the kernel takes part of each send, the rest goes
 * in later ones, and nothing is lost or repeated. */
static void test_mem_short_sends(void)
{
    enum { N = 300000 };
    char *body = pattern(N), *buf = malloc(N + 256);
    int peer, eof;
    he_conn_t *c;
    size_t n;

    setup();
    c = conn(&peer, 4096);
    he__body_mem(&c->body, body, N, mem_release, &mem_done);
    he__send_start(&fx_w, c);
    n = drain(c, peer, buf, N + 256, 0, &eof);
    HE_CHECK(fx_ops[HE_OP_SEND] > 2); /* short sends */
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(mem_done, 1);
    HE_CHECK_INT(n, HEAD_LEN + N);
    HE_CHECK(n == HEAD_LEN + N && memcmp(buf + HEAD_LEN, body, N) == 0);
    HE_CHECK_INT(c->bytes_sent, HEAD_LEN + N);
    fx_teardown();
    close(peer);
    free(body);
    free(buf);
}

/* ---------------------------------------------------------------- file ranges */

/* A range of a file by sendfile, in chunks; with a small send buffer the
 * socket fills and POLLOUT is armed until it has room. */
static void chunk_conf(he_conf_t *conf)
{
    conf->send_sendfile_chunk = 256u << 10; /* below the body, so it takes chunks */
}

static void test_file(int sndbuf)
{
    enum { N = 600000, OFF = 1234 };
    char *data = pattern(N + OFF), *buf = malloc(N + 256);
    int fd, peer, eof;
    char *path = tmpfile_of(data, N + OFF, &fd);
    src_t x = {.fd = fd, .avail = N + OFF};
    bool poll_seen = false;
    he_conn_t *c;
    size_t n = 0;

    fx_conf_init = chunk_conf;
    setup();
    fx_conf_init = NULL;
    c = conn(&peer, sndbuf);
    src_body(c, &x, N + OFF);
    c->body.off = OFF; /* bytes OFF.. of the file */
    he__send_start(&fx_w, c);
    HE_CHECK_INT(x.releases, 0);
    HE_CHECK(c->hdr_sent == c->hdr_len); /* the head went directly */
    HE_CHECK(c->body.off > OFF);         /* and sendfile began at once */
    HE_CHECK(c->body.off - OFF <= fx_conf.send_sendfile_chunk);
    if (sndbuf >= (int)(4 * fx_conf.send_sendfile_chunk)) {
        int got = 0;
        socklen_t gl = sizeof(got);
        getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &got, &gl);
        if (got >= sndbuf) /* room for all of it: one chunk, then the others' turn */
            HE_CHECK_INT(c->body.off - OFF, fx_conf.send_sendfile_chunk);
    }
    HE_CHECK_INT(c->send_op, HE_SEND_OP_POLL); /* more when the socket has room */
    HE_CHECK_INT(fx_last_sqe()->opcode, IORING_OP_POLL_ADD);
    for (int idle = 0; idle < 500 && !fp.sent && c->in_use;) {
        size_t before = n;
        poll_seen |= c->send_op == HE_SEND_OP_POLL;
        fx_read(peer, buf, N + 256, &n);
        idle = fx_reap(2) || n != before ? 0 : idle + 1;
    }
    n += drain(c, peer, buf + n, N + 256 - n, 0, &eof);
    HE_CHECK(poll_seen);
    HE_CHECK(fx_ops[HE_OP_POLLOUT] >= (sndbuf && sndbuf < 65536 ? 3u : 2u));
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(x.releases, 1);
    HE_CHECK_INT(x.errors, 0);
    HE_CHECK_INT(x.advanced, N);
    HE_CHECK_INT(n, HEAD_LEN + N);
    HE_CHECK(n == HEAD_LEN + N && memcmp(buf, HEAD, HEAD_LEN) == 0 &&
             memcmp(buf + HEAD_LEN, data + OFF, N) == 0);
    HE_CHECK(c->in_use && !eof);
    fx_teardown();
    HE_CHECK_INT(x.releases, 1);
    close(peer);
    close(fd);
    unlink(path);
    free(data);
    free(buf);
}

/* send.cork and send.sendfile_chunk 0: the socket is corked from the head
 * to the body's last byte, each sendfile moves what the socket takes, and
 * the cork comes off when the response ends. */
static void cork_conf(he_conf_t *conf)
{
    conf->send_cork = true;
    conf->send_sendfile_chunk = 0;
}

/* TCP_CORK needs TCP: a loopback pair, the server end non-blocking. */
static he_conn_t *tcp_conn(int *peer)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), fd, small = 65536;
    he_conn_t *c;

    HE_CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0);
    getsockname(l, (struct sockaddr *)&a, &al);
    *peer = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(*peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)); /* so the sender fills */
    HE_CHECK(connect(*peer, (struct sockaddr *)&a, sizeof(a)) == 0);
    fd = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    close(l);
    HE_CHECK(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    fcntl(*peer, F_SETFL, O_NONBLOCK);
    c = he__conn_new(&fx_w, fd, NULL, false);
    if (!c) exit(1);
    fx_reap(0);
    memcpy(c->hdr, HEAD, HEAD_LEN);
    c->hdr_len = HEAD_LEN;
    c->hdr_sent = 0;
    return c;
}

static void test_file_cork(void)
{
    enum { N = 3000000 };
    char *data = pattern(N), *buf = malloc(N + 256);
    int fd, peer, eof, cork = 0;
    socklen_t cl = sizeof(cork);
    char *path = tmpfile_of(data, N, &fd);
    src_t x = {.fd = fd, .avail = N};
    he_conn_t *c;
    size_t n = 0;

    fx_conf_init = cork_conf;
    setup();
    fx_conf_init = NULL;
    c = tcp_conn(&peer);
    src_body(c, &x, N);
    he__send_start(&fx_w, c);
    HE_CHECK(c->hdr_sent == c->hdr_len);
    HE_CHECK(c->body.off > 0 && c->body.off < N); /* the socket filled up */
    HE_CHECK(c->corked);
    HE_CHECK(getsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &cork, &cl) == 0 && cork == 1);
    n = drain(c, peer, buf, N + 256, 0, &eof);
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(n, HEAD_LEN + N);
    HE_CHECK(n == HEAD_LEN + N && memcmp(buf + HEAD_LEN, data, N) == 0);
    HE_CHECK(!c->corked);
    cl = sizeof(cork);
    HE_CHECK(getsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &cork, &cl) == 0 && cork == 0);
    fx_teardown();
    close(peer);
    close(fd);
    unlink(path);
    free(data);
    free(buf);
}

/* The file holds less than the length promised in the head: the source
 * hears -EBADMSG, the connection closes, the response never ends. */
static void test_file_short(void)
{
    char *data = pattern(4000), buf[16384];
    int fd, peer, eof;
    char *path = tmpfile_of(data, 4000, &fd);
    src_t x = {.fd = fd, .avail = 10000};
    he_conn_t *c;
    size_t n;

    setup();
    c = conn(&peer, 0);
    src_body(c, &x, 10000);
    he__send_start(&fx_w, c);
    n = drain(c, peer, buf, sizeof(buf), 0, &eof);
    HE_CHECK(!c->in_use);
    HE_CHECK_INT(x.errors, 1);
    HE_CHECK_INT(x.err, -EBADMSG);
    HE_CHECK_INT(fp.sent, 0);
    HE_CHECK_INT(x.releases, 1);
    HE_CHECK(eof);
    HE_CHECK_INT(n, HEAD_LEN + 4000); /* what there was, then the close */
    HE_CHECK(n == HEAD_LEN + 4000 && memcmp(buf + HEAD_LEN, data, 4000) == 0);
    fx_teardown();
    HE_CHECK_INT(x.releases, 1);
    close(peer);
    close(fd);
    unlink(path);
    free(data);
}

/* ---------------------------------------------------------------- chunked sources */

/* A source whose bytes arrive later (a cache fill): peek 0 waits, with
 * nothing in flight, until he__send_resume. */
static void test_chunked_wait(void)
{
    enum { N = 3000 };
    char *data = pattern(N), buf[8192];
    src_t x = {.mem = data, .avail = 0};
    int peer, eof;
    he_conn_t *c;
    size_t n = 0;

    setup();
    c = conn(&peer, 0);
    src_body(c, &x, N);
    he__send_start(&fx_w, c);
    HE_CHECK_INT(c->hdr_len, HEAD_LEN);                  /* nothing to copy behind it */
    HE_CHECK_INT(fx_last_sqe()->opcode, IORING_OP_SEND); /* the head alone */
    HE_CHECK_INT(fx_last_sqe()->len, HEAD_LEN);
    HE_CHECK(FX_UNTIL(c->send_wait));
    HE_CHECK_INT(c->send_op, HE_SEND_OP_NONE);
    HE_CHECK_INT(fx_ops[HE_OP_SEND], 1);
    fx_settle(5);
    HE_CHECK_INT(fx_ops[HE_OP_SEND], 1); /* waiting costs nothing */
    HE_CHECK_INT(fp.sent, 0);
    fx_read(peer, buf, sizeof(buf), &n);
    HE_CHECK_INT(n, HEAD_LEN);

    /* a resume with nothing new changes nothing */
    he__send_resume(&fx_w, c);
    HE_CHECK(c->send_wait);
    HE_CHECK_INT(fx_queued(), 0);

    x.avail = 1000;
    he__send_resume(&fx_w, c);
    HE_CHECK(!c->send_wait);
    HE_CHECK_INT(fx_queued(), 1);
    HE_CHECK_INT(fx_last_sqe()->len, 1000);
    he__send_resume(&fx_w, c); /* while a send is in flight: no second one */
    HE_CHECK_INT(fx_queued(), 1);
    HE_CHECK(FX_UNTIL(c->send_wait));
    HE_CHECK_INT(x.advanced, 1000);

    x.avail = N;
    he__send_resume(&fx_w, c);
    n += drain(c, peer, buf + n, sizeof(buf) - n, 0, &eof);
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(x.releases, 1);
    HE_CHECK_INT(x.errors, 0);
    HE_CHECK_INT(n, HEAD_LEN + N);
    HE_CHECK(n == HEAD_LEN + N && memcmp(buf + HEAD_LEN, data, N) == 0);
    he__send_resume(&fx_w, c); /* after the end: nothing */
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(fx_queued(), 0);
    fx_teardown();
    HE_CHECK_INT(x.releases, 1);
    close(peer);
    free(data);
}

/* The source fails once the head went: the connection closes and the
 * client sees a short body. */
static void test_chunked_fail(void)
{
    enum { N = 3000 };
    char *data = pattern(N), buf[8192];
    src_t x = {.mem = data, .avail = 1000};
    int peer, eof;
    he_conn_t *c;
    size_t n;

    setup();
    c = conn(&peer, 0);
    src_body(c, &x, N);
    he__send_start(&fx_w, c);
    HE_CHECK(FX_UNTIL(c->send_wait));
    x.fail = -EIO;
    he__send_resume(&fx_w, c);
    HE_CHECK(c->closing);
    n = drain(c, peer, buf, sizeof(buf), 0, &eof);
    HE_CHECK(!c->in_use);
    HE_CHECK(eof);
    HE_CHECK_INT(n, HEAD_LEN + 1000);
    HE_CHECK_INT(fp.sent, 0);
    HE_CHECK_INT(x.releases, 1);
    HE_CHECK_INT(x.errors, 0); /* the source's own failure: it knows */
    fx_teardown();
    HE_CHECK_INT(x.releases, 1);
    close(peer);

    /* failed before anything went: the head still goes (the client sees the
     * status and a short body), then the close */
    memset(&x, 0, sizeof(x));
    x.mem = data;
    x.avail = N;
    x.fail = -EIO;
    setup();
    c = conn(&peer, 0);
    src_body(c, &x, N);
    he__send_start(&fx_w, c);
    HE_CHECK_INT(fx_last_sqe()->len, HEAD_LEN);
    n = drain(c, peer, buf, sizeof(buf), 0, &eof);
    HE_CHECK(!c->in_use && eof);
    HE_CHECK_INT(n, HEAD_LEN);
    HE_CHECK(memcmp(buf, HEAD, HEAD_LEN) == 0);
    HE_CHECK_INT(fp.sent, 0);
    HE_CHECK_INT(x.releases, 1);
    fx_teardown();
    close(peer);
    free(data);
}

/* No body (a 304, an error page built into the head): sent() once. */
static void test_no_body(void)
{
    char buf[256];
    int peer, eof;
    he_conn_t *c;
    size_t n;

    setup();
    c = conn(&peer, 0);
    memset(&c->body, 0, sizeof(c->body));
    he__send_start(&fx_w, c);
    n = drain(c, peer, buf, sizeof(buf), 0, &eof);
    HE_CHECK_INT(fp.sent, 1);
    HE_CHECK_INT(n, HEAD_LEN);
    /* the next response on the same connection ends on its own */
    memcpy(c->hdr, HEAD, HEAD_LEN);
    c->hdr_len = HEAD_LEN;
    c->hdr_sent = 0;
    he__body_mem(&c->body, "x", 1, mem_release, &mem_done);
    he__send_start(&fx_w, c);
    n = drain(c, peer, buf, sizeof(buf), 1, &eof);
    HE_CHECK_INT(fp.sent, 2);
    HE_CHECK_INT(mem_done, 1);
    HE_CHECK_INT(n, HEAD_LEN + 1);
    fx_teardown();
    close(peer);
}

/* ---------------------------------------------------------------- small file shrank */

/* A small body of a file is copied behind the head from the source's
 * mapping of it (peek with need_mem, which file.c answers with
 * he_fcache_map). A file that shrank since it was last checked must end
 * like test_file_short: -EBADMSG to the source and a close. The copy reads
 * the mapping past the file's end, unguarded: SIGBUS (as it did before
 * the copy took memory spans only). Runs in a child. */
static void test_small_file_shrank(void)
{
    char data[600];
    int fd, st;
    pid_t pid;
    char *path;

    memset(data, 'f', sizeof(data));
    path = tmpfile_of(data, sizeof(data), &fd);
    pid = fork();
    if (pid == 0) {
        src_t x = {.fd = fd, .avail = sizeof(data)};
        int peer;
        he_conn_t *c;
        x.map = mmap(NULL, sizeof(data), PROT_READ, MAP_SHARED, fd, 0);
        if (x.map == MAP_FAILED) _exit(3);
        setup();
        c = conn(&peer, 0);
        src_body(c, &x, sizeof(data));
        HE_CHECK_INT(ftruncate(fd, 0), 0); /* rewritten in place since the stat */
        he__send_start(&fx_w, c);
        FX_UNTIL(!c->in_use || fp.sent);
        _exit(x.errors == 1 && x.err == -EBADMSG && !c->in_use && fp.sent == 0 ? 0 : 2);
    }
    HE_CHECK(pid > 0);
    HE_CHECK_INT(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st))
        fprintf(stderr, "test_small_file_shrank: the child died of signal %d (%s)\n", WTERMSIG(st),
                strsignal(WTERMSIG(st)));
    HE_CHECK(!WIFSIGNALED(st));
    HE_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(fd);
    unlink(path);
}

/* ---------------------------------------------------------------- he__send_file_error */

static void test_file_error(void)
{
    char path[] = "/tmp/he-test-rcache-XXXXXX";
    int fd = mkstemp(path), dfd;
    HE_CHECK(fd >= 0);
    HE_CHECK_INT(write(fd, "abcdef", 6), 6);

    /* readable at the offset: the socket's error, whatever the errno */
    HE_CHECK_INT(he__send_file_error(fd, 0, -EBADMSG), 0);
    HE_CHECK_INT(he__send_file_error(fd, 5, -EIO), 0);
    /* not an errno a file read gives: never the file's */
    HE_CHECK_INT(he__send_file_error(fd, 100, -EPIPE), 0);
    HE_CHECK_INT(he__send_file_error(fd, 100, -ECONNRESET), 0);
    /* the file ends before the offset: short of what was promised */
    HE_CHECK_INT(he__send_file_error(fd, 6, -EIO), -EBADMSG);
    /* the file cannot be read: its own errno */
    dfd = open("/tmp", O_RDONLY | O_DIRECTORY);
    HE_CHECK(dfd >= 0);
    HE_CHECK_INT(he__send_file_error(dfd, 0, -EBADMSG), -EISDIR);
    close(dfd);
    close(fd);
    unlink(path);
}

/* The vmsplice path's pipes: as large as one turn moves, within
 * fs.pipe-max-size and the worker's share of the user's pipe pages. */
static void test_pipe_size(void)
{
    HE_CHECK_INT(he_send_pipe_bytes(1 << 20, 1 << 20, 0, 0), 1 << 20);
    HE_CHECK_INT(he_send_pipe_bytes(0, 1 << 20, 0, 0), 1 << 20); /* what the socket takes */
    HE_CHECK_INT(he_send_pipe_bytes(8 << 20, 1 << 20, 0, 0), 1 << 20);
    HE_CHECK_INT(he_send_pipe_bytes(8 << 20, 0, 0, 0), 1 << 20);
    HE_CHECK_INT(he_send_pipe_bytes(1 << 20, 512 << 10, 0, 0), 512 << 10); /* pipe-max-size */
    HE_CHECK_INT(he_send_pipe_bytes(64 << 10, 1 << 20, 0, 0), 256 << 10); /* a playlist in a turn */
    /* pipe-max-size under the floor: the kernel's size */
    HE_CHECK_INT(he_send_pipe_bytes(1 << 20, 128 << 10, 0, 0), 0);
    /* budget 1000 pages: 1 MiB is 256 of them; smaller, then the kernel's */
    HE_CHECK_INT(he_send_pipe_bytes(1 << 20, 1 << 20, 1000, 700), 1 << 20);
    HE_CHECK_INT(he_send_pipe_bytes(1 << 20, 1 << 20, 1000, 800), 512 << 10);
    HE_CHECK_INT(he_send_pipe_bytes(1 << 20, 1 << 20, 1000, 900), 256 << 10);
    HE_CHECK_INT(he_send_pipe_bytes(1 << 20, 1 << 20, 1000, 950), 0);

    /* a real pipe: the size asked, counted while it lives, uncounted when
     * it goes (fx_server has no budget, as for a privileged user) */
    setup();
    struct he_pipe *p = he_send_pipe_get(&fx_w);
    HE_CHECK(p != NULL);
    if (!p) return;
    int got = fcntl(p->rd, F_GETPIPE_SZ);
    HE_CHECK(got == 1 << 20 || got == HE_SEND_PIPE_DEFAULT); /* root, or a fs.pipe-max-size below */
    HE_CHECK_INT(fx_w.pipe_pages, (uint64_t)got / HE_SEND_PAGE);
    fx_w.pipes_busy--;
    he_send_pipe_close(&fx_w, p);
    HE_CHECK_INT(fx_w.pipe_pages, 0);
    fx_teardown();
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_pipe_size();
    test_file_error();
    test_mem_small();
    test_mem_large();
    test_mem_pieces();
    test_mem_short_sends();
    test_file(0);
    test_file(4096);
    test_file(4 << 20); /* where net.core.wmem_max allows it */
    test_file_cork();
    test_file_short();
    test_chunked_wait();
    test_chunked_fail();
    test_no_body();
    test_small_file_shrank();
    HE_TEST_MAIN_END();
}
