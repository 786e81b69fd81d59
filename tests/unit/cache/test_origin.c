/* cache/origin.c, pool.c, fetch.c: origin URLs; the request bytes; 200,
 * 304, 404, 5xx, chunked and Content-Length bodies from a scripted origin
 * on loopback; keep-alive reuse from the pool; a dead pooled connection
 * retried once; failover order over three origins; connect/read/total
 * timeouts by injected clock and one in real time; a transfer cut
 * mid-body ends the fill with an error and leaves no entry; 304
 * revalidation of a stale object; https over memory BIOs (private CA,
 * hostname check, wrong CA refused); the same fetch on a real io_uring
 * with linked timeouts. Every wait is bounded. */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/fill.h"
#include "cache/fresh.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/origin.h"
#include "cache/stats.h"
#include "cache/origin_srv.h"
#include "he_test.h"

#define BODY 100000
#define NOW 1700000000000ll

static char body[BODY];
static he_conf_t conf;
static he_cache_stats_t st;

typedef struct sinkbuf {
    int headers, status;
    he_cache_http_resp_t resp;
    char *buf;
    size_t len;
    bool fail_headers;
    bool in_place; /* offer room for the body to be received in place */
    size_t placed; /* bytes that were */
} sinkbuf_t;

static int sb_headers(void *ctx, const he_cache_http_resp_t *r)
{
    sinkbuf_t *s = ctx;
    s->headers++;
    s->status = r->status;
    s->resp = *r;
    return s->fail_headers ? -ENOMEM : 0;
}

static int sb_body(void *ctx, const char *p, size_t n)
{
    sinkbuf_t *s = ctx;
    if (s->len + n > BODY + 1024) return -E2BIG;
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    return 0;
}

static unsigned sb_space(void *ctx, struct iovec *iov, unsigned max, size_t want)
{
    sinkbuf_t *s = ctx;
    size_t room = BODY + 1024 - s->len;
    if (!s->in_place || !max || !room) return 0;
    iov[0].iov_base = s->buf + s->len;
    iov[0].iov_len = want < room ? want : room;
    return 1;
}

static int sb_placed(void *ctx, size_t n)
{
    sinkbuf_t *s = ctx;
    s->len += n;
    s->placed += n;
    return 0;
}

static void sb_init(sinkbuf_t *s)
{
    static char store[BODY + 1024];
    memset(s, 0, sizeof(*s));
    s->buf = store;
}

static he_cache_sink_t sb_sink(sinkbuf_t *s)
{
    he_cache_sink_t k = {s, sb_headers, sb_body, sb_space, sb_placed};
    return k;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Origins from URLs (numeric hosts). */
static he_cache_origins_t *origins(const char *const *urls, unsigned n, const char *ca)
{
    he_cache_origin_t list[HE_CONF_MAX_ORIGINS];
    he_cache_origins_t *o = NULL;
    char err[256];
    for (unsigned i = 0; i < n; i++)
        if (he_cache_origin_parse(urls[i], &list[i], err, sizeof(err)) < 0) {
            fprintf(stderr, "%s\n", err);
            return NULL;
        }
    he_cache_origins_opts_t oo = {.conf = &conf, .origins = list, .norigins = n, .tls_ca_file = ca};
    if (he_cache_origins_new(&o, &oo, err, sizeof(err)) < 0) fprintf(stderr, "%s\n", err);
    return o;
}

static he_cache_origins_t *origin1(uint16_t port)
{
    char url[64];
    const char *u[1] = {url};
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    return origins(u, 1, NULL);
}

static int fetch(he_cache_origins_t *o, const char *path, sinkbuf_t *sb, he_cache_oerr_t *cause)
{
    he_cache_fetch_req_t req = {.path = path};
    he_cache_sink_t k = sb_sink(sb);
    he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &k, mono_ms(), &st);
    int rc;
    if (!f) return -ENOMEM;
    rc = he_cache_fetch_run_sync(f, NULL);
    he_cache_fetch_result(f, cause);
    he_cache_fetch_free(f);
    return rc;
}

/* ---------------------------------------------------------------- URLs */

static void test_urls(void)
{
    he_cache_origin_t o;
    char err[256], out[256];
    HE_CHECK_INT(he_cache_origin_parse("http://127.0.0.1:9000", &o, err, sizeof(err)), 0);
    HE_CHECK(!o.tls && o.port == 9000 && o.host_is_ip && o.addrlen == sizeof(struct sockaddr_in));
    HE_CHECK_STR(o.authority, "127.0.0.1:9000");
    HE_CHECK_STR(o.base, "");
    HE_CHECK_INT(he_cache_origin_parse("https://origin.example.com/vod/", &o, err, sizeof(err)), 0);
    HE_CHECK(o.tls && o.port == 443 && !o.host_is_ip && o.addrlen == 0);
    HE_CHECK_STR(o.authority, "origin.example.com");
    HE_CHECK_STR(o.base, "/vod");
    HE_CHECK_INT(he_cache_origin_path(&o, "/a/b.ts?x=1", out, sizeof(out)), 15);
    HE_CHECK_STR(out, "/vod/a/b.ts?x=1");
    HE_CHECK_INT(he_cache_origin_parse("http://[::1]:8080/x", &o, err, sizeof(err)), 0);
    HE_CHECK(o.host_is_ip && o.addr.ss_family == AF_INET6);
    HE_CHECK_STR(o.host, "::1");
    HE_CHECK_STR(o.authority, "[::1]:8080");
    HE_CHECK_INT(he_cache_origin_parse("http://[::1]", &o, err, sizeof(err)), 0);
    HE_CHECK_STR(o.authority, "[::1]");
    static const char *const bad[] = {"ftp://h",        "http://",      "http://h:0",
                                      "http://h:70000", "http://h/a?q", "http://[zz]:1",
                                      "http://u@h/",    "http://h:80x", "http://[::1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        HE_CHECK_INT(he_cache_origin_parse(bad[i], &o, err, sizeof(err)), -EINVAL);

    /* names are resolved on the control side */
    he_cache_origin_t list[HE_CONF_MAX_ORIGINS];
    he_conf_t c = conf;
    c.norigin_urls = 2;
    strcpy(c.origin_urls[0], "http://localhost:81/p");
    strcpy(c.origin_urls[1], "http://10.0.0.1");
    HE_CHECK_INT(he_cache_origins_resolve(&c, list, err, sizeof(err)), 2);
    HE_CHECK(list[0].addrlen > 0 && !list[0].host_is_ip && list[0].port == 81);
    HE_CHECK_STR(list[0].authority, "localhost:81");
    strcpy(c.origin_urls[1], "http://no-such-host.invalid");
    HE_CHECK_INT(he_cache_origins_resolve(&c, list, err, sizeof(err)), -EHOSTUNREACH);
    HE_CHECK(strstr(err, "no-such-host.invalid") != NULL);
}

/* ---------------------------------------------------------------- socketpair */

/* Drives a fetch by hand on a pooled socketpair end: checks the request
 * bytes and feeds the scripted response step bytes per recv. */
static int drive_pair(he_cache_origins_t *o, const he_cache_fetch_req_t *req, const char *resp,
                      size_t step, sinkbuf_t *sb, char *sent, size_t cap)
{
    int sp[2];
    he_cache_conn_t c = {.fd = -1};
    he_cache_io_t io;
    size_t off = 0, rl = strlen(resp), got = 0;
    he_cache_sink_t k = sb_sink(sb);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp) < 0) return -errno;
    c.fd = sp[0];
    he_cache_pool_put(o, 0, &c, 1);
    he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, req, &k, 1, &st);
    while (he_cache_fetch_next(f, 2, &io) != HE_CACHE_IO_DONE) {
        int res;
        if (io.op == HE_CACHE_IO_RECV) {
            size_t n = rl - off < step ? rl - off : step;
            if (n == 0) {
                close(sp[1]);
                sp[1] = -1;
            } else {
                HE_CHECK(write(sp[1], resp + off, n) == (ssize_t)n);
                off += n;
            }
        }
        res = he_cache_io_run_sync(&io, 2);
        if (io.op == HE_CACHE_IO_SEND && res > 0) {
            ssize_t r = read(sp[1], sent + got, cap - 1 - got);
            if (r > 0) got += (size_t)r;
            sent[got] = '\0';
        }
        he_cache_fetch_complete(f, res, 2);
    }
    int rc = he_cache_fetch_result(f, NULL);
    he_cache_fetch_free(f);
    if (sp[1] >= 0) close(sp[1]);
    he_cache_pool_expire(o, UINT64_MAX, 0);
    return rc;
}

static void test_socketpair(void)
{
    he_cache_origins_t *o;
    const char *u[1] = {"http://10.1.2.3:8080/base"};
    char sent[4096];
    sinkbuf_t sb;
    he_cache_fetch_req_t req = {
        .path = "/live/a.ts?tok=1", .inm = "\"e1\"", .ims = "Sun, 06 Nov 1994 08:49:37 GMT"};
    conf.origin_pool = 4;
    conf.origin_retries = 0; /* 10.1.2.3 is never connected to */
    o = origins(u, 1, NULL);
    HE_CHECK(o != NULL);
    if (!o) return;
    static const char r200[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nETag: \"e2\"\r\n\r\nhello world";
    for (size_t step = 1; step <= 16; step += 5) {
        sb_init(&sb);
        memset(&st, 0, sizeof(st));
        HE_CHECK_INT(drive_pair(o, &req, r200, step, &sb, sent, sizeof(sent)), 0);
        HE_CHECK(sb.headers == 1 && sb.status == 200 && sb.len == 11);
        HE_CHECK(memcmp(sb.buf, "hello world", 11) == 0);
        HE_CHECK_STR(sb.resp.etag, "\"e2\"");
        HE_CHECK_INT(st.origin_reused, 1);
    }
    HE_CHECK(strncmp(sent, "GET /base/live/a.ts?tok=1 HTTP/1.1\r\n", 36) == 0);
    HE_CHECK(strstr(sent, "\r\nHost: 10.1.2.3:8080\r\n") != NULL);
    HE_CHECK(strstr(sent, "\r\nIf-None-Match: \"e1\"\r\n") != NULL);
    HE_CHECK(strstr(sent, "\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n") != NULL);
    HE_CHECK(strstr(sent, "\r\n\r\n") == sent + strlen(sent) - 4);

    /* chunked, split at every byte */
    static const char rch[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n";
    sb_init(&sb);
    HE_CHECK_INT(drive_pair(o, &req, rch, 1, &sb, sent, sizeof(sent)), 0);
    HE_CHECK(sb.len == 11 && memcmp(sb.buf, "hello world", 11) == 0);
    /* 304: head only, delivered at the end */
    sb_init(&sb);
    HE_CHECK_INT(drive_pair(o, &req, "HTTP/1.1 304 Not Modified\r\nETag: \"e1\"\r\n\r\n", 7, &sb,
                            sent, sizeof(sent)),
                 0);
    HE_CHECK(sb.headers == 1 && sb.status == 304 && sb.len == 0);
    /* 404 is an answer, not a failure */
    sb_init(&sb);
    HE_CHECK_INT(drive_pair(o, &req, "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno", 100,
                            &sb, sent, sizeof(sent)),
                 0);
    HE_CHECK(sb.status == 404 && sb.len == 2);
    /* HEAD: no body even with Content-Length */
    he_cache_fetch_req_t hreq = {.path = "/h.ts", .head = true};
    sb_init(&sb);
    HE_CHECK_INT(drive_pair(o, &hreq, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", 100, &sb,
                            sent, sizeof(sent)),
                 0);
    HE_CHECK(strncmp(sent, "HEAD /base/h.ts HTTP/1.1\r\n", 26) == 0);
    HE_CHECK(sb.status == 200 && sb.len == 0 && sb.resp.content_length == 99);
    /* read until close */
    sb_init(&sb);
    HE_CHECK_INT(
        drive_pair(o, &req, "HTTP/1.0 200 OK\r\n\r\nuntil close", 4, &sb, sent, sizeof(sent)), 0);
    HE_CHECK(sb.len == 11 && memcmp(sb.buf, "until close", 11) == 0);
    /* garbage: a protocol error, the sink saw nothing */
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    HE_CHECK_INT(drive_pair(o, &req, "HTTX/1.1 200 OK\r\n\r\n", 100, &sb, sent, sizeof(sent)),
                 -EPROTO);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_PROTOCOL], 1);
    HE_CHECK_INT(sb.headers, 0);
    /* a sink that refuses: the fetch stops, no origin error counted */
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    sb.fail_headers = true;
    HE_CHECK_INT(drive_pair(o, &req, r200, 100, &sb, sent, sizeof(sent)), -ENOMEM);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_PROTOCOL] + st.origin_errors[HE_CACHE_OERR_IO], 0);
    conf.origin_retries = 1;
    he_cache_origins_free(o);
}

/* ---------------------------------------------------------------- a real origin */

static void test_server(void)
{
    srv_t *s = srv_start(SRV_OK, body, BODY, NULL);
    he_cache_origins_t *o;
    sinkbuf_t sb;
    he_cache_oerr_t cause;
    conf.origin_pool = 4;
    o = origin1(s->port);
    memset(&st, 0, sizeof(st));
    for (int i = 0; i < 3; i++) {
        sb_init(&sb);
        HE_CHECK_INT(fetch(o, "/seg.ts", &sb, &cause), 0);
        HE_CHECK(sb.status == 200 && sb.len == BODY && memcmp(sb.buf, body, BODY) == 0);
        HE_CHECK_INT(sb.resp.content_length, BODY);
    }
    /* keep-alive: three requests, one connection */
    HE_CHECK_INT(atomic_load(&s->requests), 3);
    HE_CHECK_INT(atomic_load(&s->conns), 1);
    HE_CHECK_INT(st.origin_requests, 3);
    HE_CHECK_INT(st.origin_reused, 2);
    HE_CHECK_INT(he_cache_pool_idle(o, 0), 1);
    /* idle expiry closes it */
    he_cache_pool_expire(o, mono_ms() + 100000, 1000);
    HE_CHECK_INT(he_cache_pool_idle(o, 0), 0);

    /* chunked */
    s->mode = SRV_CHUNKED;
    sb_init(&sb);
    HE_CHECK_INT(fetch(o, "/c.ts", &sb, &cause), 0);
    HE_CHECK(sb.len == BODY && memcmp(sb.buf, body, BODY) == 0);
    HE_CHECK_INT(he_cache_pool_idle(o, 0), 1);

    /* A body that comes in several reads is received in place once the
     * sink has seen the head, up to its end and not past it: the next
     * response on the pooled connection is parsed as usual. Chunked
     * framing keeps to the buffer. */
    for (int mode = SRV_OK; mode <= SRV_CHUNKED; mode++) {
        s->mode = mode;
        s->pause_ms = 30;
        for (int i = 0; i < 2; i++) {
            sb_init(&sb);
            sb.in_place = true;
            HE_CHECK_INT(fetch(o, "/p.ts", &sb, &cause), 0);
            HE_CHECK(sb.status == 200 && sb.len == BODY && memcmp(sb.buf, body, BODY) == 0);
            if (mode == SRV_OK)
                HE_CHECK(sb.placed > 0 && sb.placed < BODY);
            else
                HE_CHECK_INT(sb.placed, 0);
        }
        HE_CHECK_INT(he_cache_pool_idle(o, 0), 1);
    }
    /* cut short while received in place: the fetch fails, truncated */
    s->mode = SRV_CUT;
    sb_init(&sb);
    sb.in_place = true;
    memset(&st, 0, sizeof(st));
    conf.origin_retries = 0;
    HE_CHECK(fetch(o, "/cut.ts", &sb, &cause) < 0);
    HE_CHECK_INT(cause, HE_CACHE_OERR_TRUNCATED);
    HE_CHECK(sb.placed > 0 && sb.len == BODY / 2);
    conf.origin_retries = 1;
    s->pause_ms = 0;

    /* Connection: close is honoured: nothing pooled */
    he_cache_pool_expire(o, UINT64_MAX, 0);
    s->mode = SRV_OK;
    s->close = true;
    sb_init(&sb);
    HE_CHECK_INT(fetch(o, "/k.ts", &sb, &cause), 0);
    HE_CHECK_INT(he_cache_pool_idle(o, 0), 0);
    s->close = false;

    /* pool size 0: never pooled */
    he_cache_origins_free(o);
    conf.origin_pool = 0;
    o = origin1(s->port);
    sb_init(&sb);
    HE_CHECK_INT(fetch(o, "/n.ts", &sb, &cause), 0);
    HE_CHECK_INT(he_cache_pool_idle(o, 0), 0);
    he_cache_origins_free(o);
    conf.origin_pool = 4;

    /* a pooled connection the origin closed while we sent: retried once on
     * a fresh one, not an attempt, not an error */
    s->mode = SRV_DROP_SECOND;
    int conns0 = atomic_load(&s->conns);
    o = origin1(s->port);
    sb_init(&sb);
    HE_CHECK_INT(fetch(o, "/d.ts", &sb, &cause), 0);
    memset(&st, 0, sizeof(st));
    conf.origin_retries = 0;
    sb_init(&sb);
    HE_CHECK_INT(fetch(o, "/d.ts", &sb, &cause), 0);
    HE_CHECK(sb.status == 200 && sb.len == BODY && sb.headers == 1);
    HE_CHECK_INT(atomic_load(&s->conns) - conns0, 2);
    HE_CHECK_INT(st.origin_requests, 2);
    HE_CHECK_INT(st.origin_reused, 1);
    HE_CHECK_INT(st.origin_failovers, 0);
    for (int c = 0; c < HE_CACHE_OERR_COUNT; c++)
        HE_CHECK_INT(st.origin_errors[c], 0);
    conf.origin_retries = 1;
    he_cache_origins_free(o);
    srv_stop(s);
}

static void test_failover(void)
{
    srv_t *b = srv_start(SRV_503, body, BODY, NULL), *c = srv_start(SRV_OK, body, BODY, NULL);
    char ua[64], ub[64], uc[64];
    const char *u[3] = {ua, ub, uc};
    he_cache_origins_t *o;
    sinkbuf_t sb;
    he_cache_oerr_t cause;
    snprintf(ua, sizeof(ua), "http://127.0.0.1:%u", srv_refused_port());
    snprintf(ub, sizeof(ub), "http://127.0.0.1:%u", b->port);
    snprintf(uc, sizeof(uc), "http://127.0.0.1:%u", c->port);
    o = origins(u, 3, NULL);

    /* refused -> 503 -> 200 */
    conf.origin_retries = 2;
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    he_cache_fetch_req_t req = {.path = "/f.ts"};
    he_cache_sink_t k = sb_sink(&sb);
    he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &k, mono_ms(), &st);
    HE_CHECK_INT(he_cache_fetch_run_sync(f, NULL), 0);
    HE_CHECK_INT(he_cache_fetch_origin(f), 2);
    he_cache_fetch_free(f);
    HE_CHECK(sb.headers == 1 && sb.status == 200 && sb.len == BODY);
    HE_CHECK_INT(atomic_load(&b->requests), 1);
    HE_CHECK_INT(atomic_load(&c->requests), 1);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_CONNECT], 1);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_STATUS_5XX], 1);
    HE_CHECK_INT(st.origin_failovers, 2);
    HE_CHECK_INT(st.origin_requests, 2);

    /* one retry only: the 503 ends it, the third origin is never asked */
    conf.origin_retries = 1;
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    HE_CHECK_INT(fetch(o, "/g.ts", &sb, &cause), -EREMOTEIO);
    HE_CHECK_INT(cause, HE_CACHE_OERR_STATUS_5XX);
    HE_CHECK_INT(sb.headers, 0);
    HE_CHECK_INT(atomic_load(&c->requests), 1);

    /* no retries: the refusal ends it */
    conf.origin_retries = 0;
    sb_init(&sb);
    HE_CHECK_INT(fetch(o, "/h.ts", &sb, &cause), -ECONNREFUSED);
    HE_CHECK_INT(cause, HE_CACHE_OERR_CONNECT);
    conf.origin_retries = 1;
    he_cache_origins_free(o);
    srv_stop(b);
    srv_stop(c);
}

/* ---------------------------------------------------------------- timeouts */

/* Runs ops for real until the one named, which is then "cancelled" at its
 * deadline instead of run. Returns the deadline it had. */
static uint64_t run_until_expire(he_cache_fetch_t *f, he_cache_io_op_t which, uint64_t t)
{
    he_cache_io_t io;
    while (he_cache_fetch_next(f, t, &io) != HE_CACHE_IO_DONE) {
        if (io.op == which) {
            HE_CHECK(io.deadline_ms > t);
            HE_CHECK(!he_cache_fetch_expired(f, io.deadline_ms - 1));
            HE_CHECK(he_cache_fetch_expired(f, io.deadline_ms));
            HE_CHECK_INT(he_cache_fetch_deadline(f), io.deadline_ms);
            he_cache_fetch_complete(f, -ECANCELED, io.deadline_ms);
            return io.deadline_ms;
        }
        he_cache_fetch_complete(f, he_cache_io_run_sync(&io, t), t);
    }
    return 0;
}

/* Parent health shared by two workers' origins: a parent that refuses is
 * marked down by the first worker's fetch, and the second worker's next
 * fetch goes straight to the other parent; an answer marks it up. A 503
 * on the first attempt gets one retry on another origin even with
 * origin.retries 0 (the fill's waiters are not all failed by one parent).
 * The request carries the request's Via with ours appended. */
static void test_health(void)
{
    srv_t *ok = srv_start(SRV_OK, body, BODY, NULL), *bad = srv_start(SRV_503, body, BODY, NULL);
    char ua[64], ub[64];
    const char *u[2] = {ua, ub};
    he_cache_origin_t list[2];
    he_cache_origins_t *w1 = NULL, *w2 = NULL;
    he_cache_health_t *h = he_cache_health_new(2, 10000);
    char err[256];
    sinkbuf_t sb;
    he_cache_oerr_t cause;
    uint64_t now = mono_ms();
    unsigned pool = conf.origin_pool;

    conf.origin_pool = 0; /* the test server answers one connection at a time */
    snprintf(ua, sizeof(ua), "http://127.0.0.1:%u", srv_refused_port());
    snprintf(ub, sizeof(ub), "http://127.0.0.1:%u weight=3", ok->port);
    for (unsigned i = 0; i < 2; i++)
        HE_CHECK_INT(he_cache_origin_parse(u[i], &list[i], err, sizeof(err)), 0);
    HE_CHECK_INT(list[1].parent.weight, 3);
    he_cache_origins_opts_t oo = {
        .conf = &conf, .origins = list, .norigins = 2, .health = h, .via = "1.1 hlsedge-test"};
    HE_CHECK_INT(he_cache_origins_new(&w1, &oo, err, sizeof(err)), 0);
    HE_CHECK_INT(he_cache_origins_new(&w2, &oo, err, sizeof(err)), 0);
    HE_CHECK(he_cache_origins_health(w1) == h && he_cache_origins_health(w2) == h);

    conf.origin_retries = 1;
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    he_cache_fetch_req_t req = {.path = "/p.ts", .via_in = "1.1 hlsedge-edge1"};
    he_cache_sink_t k = sb_sink(&sb);
    he_cache_fetch_t *f = he_cache_fetch_new(w1, &conf, &req, &k, now, &st);
    HE_CHECK_INT(he_cache_fetch_run_sync(f, NULL), 0);
    HE_CHECK_INT(he_cache_fetch_origin(f), 1);
    he_cache_fetch_free(f);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_CONNECT], 1);
    HE_CHECK_INT(st.parent_marked_down, 1);
    HE_CHECK_INT(st.parent_errors[0], 1);
    HE_CHECK_INT(st.parent_requests[1], 1);
    HE_CHECK(!he_cache_health_up(h, 0, mono_ms()));
    HE_CHECK(strstr(ok->last_req, "\r\nVia: 1.1 hlsedge-edge1, 1.1 hlsedge-test\r\n") != NULL);

    /* the other worker: straight to the parent that is up */
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    HE_CHECK_INT(fetch(w2, "/q.ts", &sb, &cause), 0);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_CONNECT], 0);
    HE_CHECK_INT(st.origin_failovers, 0);
    HE_CHECK(strstr(ok->last_req, "\r\nVia: 1.1 hlsedge-test\r\n") != NULL);
    he_cache_origins_free(w1);
    he_cache_origins_free(w2);
    he_cache_health_free(h);

    /* a 503 with no retries configured: one more try on the other origin */
    snprintf(ua, sizeof(ua), "http://127.0.0.1:%u", bad->port);
    snprintf(ub, sizeof(ub), "http://127.0.0.1:%u", ok->port);
    unsigned down = conf.origin_down_time_ms;
    conf.origin_down_time_ms = 10000;
    w1 = origins(u, 2, NULL);
    conf.origin_retries = 0;
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    int okreq = atomic_load(&ok->requests);
    HE_CHECK_INT(fetch(w1, "/r.ts", &sb, &cause), 0);
    HE_CHECK(sb.headers == 1 && sb.status == 200 && sb.len == BODY);
    HE_CHECK_INT(atomic_load(&bad->requests), 1);
    HE_CHECK_INT(atomic_load(&ok->requests) - okreq, 1);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_STATUS_5XX], 1);
    HE_CHECK_INT(st.parent_marked_down, 1);
    /* the 503 one is down now: the next fetch does not ask it */
    sb_init(&sb);
    HE_CHECK_INT(fetch(w1, "/s.ts", &sb, &cause), 0);
    HE_CHECK_INT(atomic_load(&bad->requests), 1);
    he_cache_origins_free(w1);
    /* one origin only: the 503 ends it (nowhere else to go) */
    const char *one[1] = {ua};
    w1 = origins(one, 1, NULL);
    sb_init(&sb);
    HE_CHECK_INT(fetch(w1, "/t.ts", &sb, &cause), -EREMOTEIO);
    HE_CHECK_INT(atomic_load(&bad->requests), 2);
    he_cache_origins_free(w1);
    conf.origin_retries = 1;
    conf.origin_down_time_ms = down;
    conf.origin_pool = pool;
    srv_stop(ok);
    srv_stop(bad);
}

static void test_timeouts(void)
{
    srv_t *s = srv_start(SRV_SILENT, body, BODY, NULL), *ok = srv_start(SRV_OK, body, 1000, NULL);
    char ua[64], ub[64];
    const char *u[2] = {ua, ub};
    he_cache_origins_t *o;
    sinkbuf_t sb;
    he_cache_io_t io;
    he_cache_oerr_t cause;
    snprintf(ua, sizeof(ua), "http://127.0.0.1:%u", s->port);
    snprintf(ub, sizeof(ub), "http://127.0.0.1:%u", ok->port);
    conf.origin_connect_timeout_ms = 2000;
    conf.origin_read_timeout_ms = 5000;
    conf.origin_total_timeout_ms = 60000;
    conf.origin_retries = 0;
    o = origins(u, 2, NULL);

    /* read timeout: the clock says the recv's deadline has passed */
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    he_cache_fetch_req_t req = {.path = "/t.ts"};
    he_cache_sink_t k = sb_sink(&sb);
    he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &k, 1000, &st);
    uint64_t d = run_until_expire(f, HE_CACHE_IO_RECV, 1000);
    HE_CHECK_INT(d, 1000 + 5000);
    while (he_cache_fetch_next(f, d, &io) != HE_CACHE_IO_DONE)
        he_cache_fetch_complete(f, he_cache_io_run_sync(&io, d), d);
    HE_CHECK_INT(he_cache_fetch_result(f, &cause), -ETIMEDOUT);
    HE_CHECK_INT(cause, HE_CACHE_OERR_TIMEOUT_READ);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_TIMEOUT_READ], 1);
    he_cache_fetch_free(f);

    /* total timeout: a short total caps the recv's deadline */
    conf.origin_total_timeout_ms = 1500;
    f = he_cache_fetch_new(o, &conf, &req, &k, 1000, &st);
    d = run_until_expire(f, HE_CACHE_IO_RECV, 1000);
    HE_CHECK_INT(d, 2500);
    while (he_cache_fetch_next(f, d, &io) != HE_CACHE_IO_DONE)
        he_cache_fetch_complete(f, he_cache_io_run_sync(&io, d), d);
    HE_CHECK_INT(he_cache_fetch_result(f, &cause), -ETIMEDOUT);
    HE_CHECK_INT(cause, HE_CACHE_OERR_TIMEOUT_TOTAL);
    he_cache_fetch_free(f);
    /* _next itself notices a passed total deadline */
    f = he_cache_fetch_new(o, &conf, &req, &k, 1000, &st);
    HE_CHECK_INT(he_cache_fetch_next(f, 1000, &io), HE_CACHE_IO_SOCKET);
    he_cache_fetch_complete(f, he_cache_io_run_sync(&io, 1000), 1000);
    HE_CHECK_INT(he_cache_fetch_next(f, 9999, &io), HE_CACHE_IO_CLOSE);
    he_cache_fetch_complete(f, he_cache_io_run_sync(&io, 9999), 9999);
    HE_CHECK_INT(he_cache_fetch_next(f, 9999, &io), HE_CACHE_IO_DONE);
    HE_CHECK_INT(he_cache_fetch_result(f, &cause), -ETIMEDOUT);
    HE_CHECK_INT(cause, HE_CACHE_OERR_TIMEOUT_TOTAL);
    he_cache_fetch_free(f);
    conf.origin_total_timeout_ms = 60000;

    /* connect timeout, then failover to the second origin */
    conf.origin_retries = 1;
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    f = he_cache_fetch_new(o, &conf, &req, &k, 1000, &st);
    HE_CHECK_INT(he_cache_fetch_next(f, 1000, &io), HE_CACHE_IO_SOCKET);
    he_cache_fetch_complete(f, he_cache_io_run_sync(&io, 1000), 1000);
    HE_CHECK_INT(he_cache_fetch_next(f, 1000, &io), HE_CACHE_IO_CONNECT);
    HE_CHECK_INT(io.deadline_ms, 3000);
    HE_CHECK(he_cache_fetch_expired(f, 3000));
    he_cache_fetch_complete(f, -ECANCELED, 3000);
    HE_CHECK_INT(he_cache_fetch_run_sync(f, NULL), 0);
    HE_CHECK_INT(he_cache_fetch_origin(f), 1);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_TIMEOUT_CONNECT], 1);
    HE_CHECK_INT(st.origin_failovers, 1);
    HE_CHECK(sb.status == 200 && sb.len == 1000);
    he_cache_fetch_free(f);
    /* a cancel before the deadline is not a timeout */
    conf.origin_retries = 0;
    f = he_cache_fetch_new(o, &conf, &req, &k, 1000, &st);
    HE_CHECK_INT(he_cache_fetch_next(f, 1000, &io), HE_CACHE_IO_SOCKET);
    he_cache_fetch_complete(f, he_cache_io_run_sync(&io, 1000), 1000);
    HE_CHECK_INT(he_cache_fetch_next(f, 1000, &io), HE_CACHE_IO_CONNECT);
    he_cache_fetch_complete(f, -ECANCELED, 1001);
    HE_CHECK_INT(he_cache_fetch_run_sync(f, NULL), -ECANCELED);
    HE_CHECK_INT((he_cache_fetch_result(f, &cause), cause), HE_CACHE_OERR_CONNECT);
    he_cache_fetch_free(f);

    /* and once in real time: a 200 ms read timeout against a silent origin */
    conf.origin_read_timeout_ms = 200;
    memset(&st, 0, sizeof(st));
    sb_init(&sb);
    uint64_t t0 = mono_ms();
    HE_CHECK_INT(fetch(o, "/slow.ts", &sb, &cause), -ETIMEDOUT);
    HE_CHECK_INT(cause, HE_CACHE_OERR_TIMEOUT_READ);
    HE_CHECK(mono_ms() - t0 < 5000);
    conf.origin_read_timeout_ms = 5000;
    conf.origin_retries = 1;
    he_cache_origins_free(o);
    srv_stop(s);
    srv_stop(ok);
}

/* ---------------------------------------------------------------- with fills */

typedef struct client {
    he_cache_waiter_t w;
    int done, error;
    uint64_t got;
} client_t;

static void client_notify(he_cache_waiter_t *w, he_cache_fill_ev_t ev)
{
    client_t *c = w->ctx;
    he_cache_obj_t *o = he_cache_fill_obj(w->fill);
    if (o) c->got = he_cache_obj_len(o);
    if (ev == HE_CACHE_FILL_EV_DONE) c->done++;
    if (ev == HE_CACHE_FILL_EV_ERROR) c->error++;
    if (ev == HE_CACHE_FILL_EV_DONE || ev == HE_CACHE_FILL_EV_ERROR) he_cache_fill_leave(w);
}

static int fill_fetch(he_cache_fills_t *fs, he_cache_origins_t *o, const char *path,
                      he_cache_obj_t *stale, client_t *c)
{
    he_cache_key_t key;
    bool created;
    he_cache_oerr_t cause;
    he_cache_key_make(&conf, path, strlen(path), &key);
    memset(c, 0, sizeof(*c));
    c->w.notify = client_notify;
    c->w.ctx = c;
    he_cache_fill_t *fl = he_cache_fill_join(fs, &key, &c->w, stale, false, &created);
    HE_CHECK(created);
    he_cache_fetch_req_t req = {.path = path};
    if (stale) he_cache_fetch_req_validators(&req, stale);
    he_cache_sink_t k = he_cache_fill_sink(fl);
    he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &k, mono_ms(), &st);
    int rc = he_cache_fetch_run_sync(f, NULL);
    he_cache_fetch_result(f, &cause);
    he_cache_fetch_free(f);
    he_cache_fill_end(fl, rc, cause, NOW);
    return rc;
}

static void test_fill(void)
{
    he_cache_ram_opts_t ro = {.bytes = 16 << 20, .chunk_size = 16384};
    he_cache_ram_t *ram = he_cache_ram_new(&ro);
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    srv_t *s = srv_start(SRV_CUT, body, BODY, NULL);
    he_cache_origins_t *o = origin1(s->port);
    he_cache_key_t key;
    client_t c;

    /* cut mid-body: the waiter had bytes, then an error; nothing is kept */
    memset(&st, 0, sizeof(st));
    HE_CHECK_INT(fill_fetch(fs, o, "/cut.ts", NULL, &c), -EPIPE);
    HE_CHECK(c.error == 1 && c.done == 0 && c.got == BODY / 2);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_TRUNCATED], 1);
    HE_CHECK_INT(st.origin_failovers, 0); /* bytes had reached the waiter */
    HE_CHECK_INT(st.fills_failed, 1);
    he_cache_key_make(&conf, "/cut.ts", 7, &key);
    HE_CHECK(he_cache_ram_lookup(ram, 0, &key, NULL) == NULL);
    HE_CHECK_INT(he_cache_fills_active(fs), 0);
    /* the next request fetches again, and this time it is kept */
    s->mode = SRV_OK;
    HE_CHECK_INT(fill_fetch(fs, o, "/cut.ts", NULL, &c), 0);
    HE_CHECK(c.done == 1 && c.got == BODY);
    HE_CHECK_INT(atomic_load(&s->requests), 2);
    he_cache_obj_t *obj = he_cache_ram_lookup(ram, 0, &key, NULL);
    HE_CHECK(obj && he_cache_obj_len(obj) == BODY);
    if (obj) he_cache_obj_unref(obj);

    /* revalidation: the stale object's ETag goes out, a 304 serves it */
    s->mode = SRV_304_IF_MATCH;
    s->etag = "\"v7\"";
    he_cache_key_make(&conf, "/re.ts", 6, &key);
    he_cache_obj_t *stale = he_cache_obj_new(ram, 0, &key, 5);
    he_cache_meta_t m = {.status = 200, .kind = HE_SEG_KIND_SEGMENT};
    m.fresh.stored_ms = NOW - 100000;
    m.fresh.expires_ms = NOW - 1000;
    strcpy(m.etag, "\"v7\"");
    he_cache_obj_append(stale, "stale", 5, NULL);
    he_cache_obj_set_meta(stale, &m);
    he_cache_obj_finish(stale);
    memset(&st, 0, sizeof(st));
    HE_CHECK_INT(fill_fetch(fs, o, "/re.ts", stale, &c), 0);
    HE_CHECK(c.done == 1 && c.got == 5);
    HE_CHECK_INT(st.revalidated_304, 1);
    pthread_mutex_lock(&s->lock);
    HE_CHECK(strstr(s->last_req, "If-None-Match: \"v7\"\r\n") != NULL);
    pthread_mutex_unlock(&s->lock);
    he_cache_fresh_t fr;
    he_cache_obj_fresh(stale, &fr);
    HE_CHECK_INT(fr.expires_ms, NOW + 30000);
    he_cache_obj_unref(stale);

    he_cache_origins_free(o);
    srv_stop(s);
    he_cache_fills_free(fs);
    he_cache_ram_free(ram);
}

/* ---------------------------------------------------------------- io_uring */

/* The fetch on a real ring: each op with a linked timeout at its deadline. */
static int run_ring(struct io_uring *ring, he_cache_fetch_t *f)
{
    he_cache_io_t io;
    while (he_cache_fetch_next(f, mono_ms(), &io) != HE_CACHE_IO_DONE) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        struct __kernel_timespec ts;
        int want = 1, res = 0;
        he_cache_io_prep(&io, sqe);
        sqe->user_data = 1;
        if (io.deadline_ms) {
            uint64_t now = mono_ms(), ms = io.deadline_ms > now ? io.deadline_ms - now : 0;
            ts.tv_sec = (long long)(ms / 1000);
            ts.tv_nsec = (long long)(ms % 1000) * 1000000;
            sqe->flags |= IOSQE_IO_LINK;
            sqe = io_uring_get_sqe(ring);
            io_uring_prep_link_timeout(sqe, &ts, 0);
            sqe->user_data = 2;
            want = 2;
        }
        io_uring_submit(ring);
        while (want--) {
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(ring, &cqe) < 0) return -EIO;
            if (cqe->user_data == 1) res = cqe->res;
            io_uring_cqe_seen(ring, cqe);
        }
        he_cache_fetch_complete(f, res, mono_ms());
    }
    return he_cache_fetch_result(f, NULL);
}

static void test_ring(void)
{
    struct io_uring ring;
    srv_t *s = srv_start(SRV_CHUNKED, body, BODY, NULL);
    he_cache_origins_t *o = origin1(s->port);
    sinkbuf_t sb;
    he_cache_fetch_req_t req = {.path = "/r.ts"};
    he_cache_sink_t k = sb_sink(&sb);
    if (io_uring_queue_init(8, &ring, 0) < 0) {
        fprintf(stderr, "io_uring unavailable: ring test skipped\n");
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        sb_init(&sb);
        he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &k, mono_ms(), &st);
        HE_CHECK_INT(run_ring(&ring, f), 0);
        HE_CHECK(sb.len == BODY && memcmp(sb.buf, body, BODY) == 0);
        he_cache_fetch_free(f);
    }
    HE_CHECK_INT(atomic_load(&s->conns), 1);
    /* a linked timeout cancels a silent origin's recv: a read timeout */
    he_cache_pool_expire(o, UINT64_MAX, 0);
    s->mode = SRV_SILENT;
    conf.origin_read_timeout_ms = 150;
    conf.origin_retries = 0;
    memset(&st, 0, sizeof(st));
    he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &k, mono_ms(), &st);
    HE_CHECK_INT(run_ring(&ring, f), -ETIMEDOUT);
    HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_TIMEOUT_READ], 1);
    he_cache_fetch_free(f);
    conf.origin_read_timeout_ms = 5000;
    conf.origin_retries = 1;
    io_uring_queue_exit(&ring);
out:
    he_cache_origins_free(o);
    srv_stop(s);
}

/* ---------------------------------------------------------------- https */

static SSL_CTX *tls_server_ctx(const char *dir)
{
    char crt[512], key[512];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    snprintf(crt, sizeof(crt), "%s/leaf.crt", dir);
    snprintf(key, sizeof(key), "%s/leaf.key", dir);
    if (SSL_CTX_use_certificate_chain_file(ctx, crt) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static int make_certs(const char *d)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-days 2 -subj /CN=test-ca -keyout ca.key -out ca.crt >/dev/null 2>&1 && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=origin.test "
             "-keyout leaf.key -out leaf.csr >/dev/null 2>&1 && "
             "printf 'subjectAltName=DNS:origin.test,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' "
             "> ext && openssl x509 -req -in leaf.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-days 2 -extfile ext -out leaf.crt >/dev/null 2>&1",
             d);
    return system(cmd);
}

static void test_tls(void)
{
    char dir[] = "/tmp/he_test_origin.XXXXXX", ca[256], url[128], cmd[300];
    const char *u[1] = {url};
    he_cache_origins_t *o;
    sinkbuf_t sb;
    he_cache_oerr_t cause;
    if (!mkdtemp(dir)) return;
    if (make_certs(dir) != 0) {
        fprintf(stderr, "openssl CLI failed: https tests skipped\n");
        goto out;
    }
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    SSL_CTX *sctx = tls_server_ctx(dir);
    HE_CHECK(sctx != NULL);
    if (!sctx) goto out;
    srv_t *s = srv_start(SRV_OK, body, BODY, sctx);

    /* by IP literal: the certificate names 127.0.0.1 */
    snprintf(url, sizeof(url), "https://127.0.0.1:%u", s->port);
    o = origins(u, 1, ca);
    HE_CHECK(o != NULL);
    memset(&st, 0, sizeof(st));
    for (int i = 0; i < 2; i++) {
        sb_init(&sb);
        HE_CHECK_INT(fetch(o, "/tls.ts", &sb, &cause), 0);
        HE_CHECK(sb.status == 200 && sb.len == BODY && memcmp(sb.buf, body, BODY) == 0);
    }
    HE_CHECK_INT(atomic_load(&s->conns), 1); /* the TLS connection was pooled */
    HE_CHECK_INT(st.origin_reused, 1);
    /* chunked over TLS on the ring */
    s->mode = SRV_CHUNKED;
    {
        struct io_uring ring;
        if (io_uring_queue_init(8, &ring, 0) == 0) {
            he_cache_fetch_req_t req = {.path = "/tr.ts"};
            he_cache_sink_t k = sb_sink(&sb);
            he_cache_pool_expire(o, UINT64_MAX, 0);
            sb_init(&sb);
            he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &k, mono_ms(), &st);
            HE_CHECK_INT(run_ring(&ring, f), 0);
            HE_CHECK(sb.len == BODY && memcmp(sb.buf, body, BODY) == 0);
            he_cache_fetch_free(f);
            io_uring_queue_exit(&ring);
        }
    }
    s->mode = SRV_OK;
    he_cache_origins_free(o);

    /* by name (SNI + hostname check), the address given by hand */
    {
        he_cache_origin_t org;
        char err[256];
        snprintf(url, sizeof(url), "https://origin.test:%u", s->port);
        HE_CHECK_INT(he_cache_origin_parse(url, &org, err, sizeof(err)), 0);
        struct sockaddr_in *a = (struct sockaddr_in *)&org.addr;
        a->sin_family = AF_INET;
        a->sin_port = htons(s->port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        org.addrlen = sizeof(*a);
        he_cache_origins_opts_t oo = {
            .conf = &conf, .origins = &org, .norigins = 1, .tls_ca_file = ca};
        HE_CHECK_INT(he_cache_origins_new(&o, &oo, err, sizeof(err)), 0);
        sb_init(&sb);
        HE_CHECK_INT(fetch(o, "/n.ts", &sb, &cause), 0);
        HE_CHECK(sb.len == BODY);
        he_cache_origins_free(o);
        /* a name the certificate does not carry */
        strcpy(org.host, "other.test");
        HE_CHECK_INT(he_cache_origins_new(&o, &oo, err, sizeof(err)), 0);
        memset(&st, 0, sizeof(st));
        conf.origin_retries = 0;
        sb_init(&sb);
        HE_CHECK(fetch(o, "/n.ts", &sb, &cause) < 0);
        HE_CHECK_INT(cause, HE_CACHE_OERR_TLS);
        HE_CHECK_INT(st.origin_errors[HE_CACHE_OERR_TLS], 1);
        HE_CHECK_INT(sb.headers, 0);
        he_cache_origins_free(o);
    }
    /* the system store does not know the test CA */
    snprintf(url, sizeof(url), "https://127.0.0.1:%u", s->port);
    o = origins(u, 1, NULL);
    sb_init(&sb);
    HE_CHECK(fetch(o, "/x.ts", &sb, &cause) < 0);
    HE_CHECK_INT(cause, HE_CACHE_OERR_TLS);
    he_cache_origins_free(o);
    conf.origin_retries = 1;
    srv_stop(s);
    SSL_CTX_free(sctx);
out:
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
}

int main(void)
{
    for (int i = 0; i < BODY; i++)
        body[i] = (char)(i * 131 + (i >> 9));
    he_conf_defaults(&conf);
    conf.origin_connect_timeout_ms = 2000;
    conf.origin_read_timeout_ms = 5000;
    conf.origin_total_timeout_ms = 60000;
    conf.origin_retries = 1;
    /* health off: these tests check one fetch's failover on its own;
     * test_health checks the marks */
    conf.origin_down_time_ms = 0;
    alarm(120); /* bounded whatever happens */
    test_urls();
    test_socketpair();
    test_server();
    test_failover();
    test_health();
    test_timeouts();
    test_fill();
    test_ring();
    test_tls();
    HE_TEST_MAIN_END();
}
