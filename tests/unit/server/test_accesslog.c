/* server/accesslog.c: the SPSC ring (full, wrap-around, drain), and the
 * combined and JSON lines with their escaping. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "he_test.h"
#include "server/accesslog.h"

/* 2024-03-01T12:34:56.789Z as the offset from a monotonic 1 s */
#define HE_T_REAL_NS 1709296496789000000ll
#define HE_T_MONO_NS 1000000000ll

static void he_t_rec(he_alog_rec_t *r, const char *target)
{
    memset(r, 0, sizeof(*r));
    r->end_ns = HE_T_MONO_NS;
    r->bytes_sent = 1234;
    r->body_bytes = 1000;
    r->duration_us = 1500;
    r->ttfb_us = 250;
    r->status = 200;
    r->worker = 3;
    r->port = 40000;
    r->family = AF_INET;
    inet_pton(AF_INET, "192.0.2.7", r->addr);
    r->method = 1; /* HTTP_GET */
    r->http_major = 1;
    r->http_minor = 1;
    memcpy(r->cache, "-", 2);
    r->target_len = (uint16_t)strlen(target);
    memcpy(r->target, target, r->target_len);
}

static void test_format_combined(void)
{
    he_alog_t a;
    he_alog_rec_t r;
    char line[8192];
    size_t n;

    he_alog_init(&a);
    a.format = HE_ACCESS_LOG_COMBINED;
    a.real_minus_mono_ns = HE_T_REAL_NS - HE_T_MONO_NS;
    he_t_rec(&r, "/live/a.ts?x=1");
    n = he_alog_format(&a, &r, line, sizeof(line));
    HE_CHECK_INT(n, strlen(line));
    HE_CHECK_STR(line,
                 "192.0.2.7 - - [01/Mar/2024:12:34:56 +0000] \"GET /live/a.ts?x=1 HTTP/1.1\" 200 "
                 "1000 \"-\" \"-\" rt=0.001500 ttfb=0.000250 worker=3 cache=- tls=-\n");

    /* quotes, backslashes, control and non-ASCII bytes cannot break the line */
    he_t_rec(&r, "/a\"b\\c\n\x01\xff");
    r.status = 404;
    r.method = 2; /* HTTP_HEAD */
    r.tls = HE_ALOG_TLS_KTLS;
    memcpy(r.cache, "HIT", 4);
    r.family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8::1", r.addr);
    he_alog_format(&a, &r, line, sizeof(line));
    HE_CHECK_STR(
        line, "2001:db8::1 - - [01/Mar/2024:12:34:56 +0000] \"HEAD /a\\x22b\\x5Cc\\x0A\\x01\\xFF "
              "HTTP/1.1\" 404 1000 \"-\" \"-\" rt=0.001500 ttfb=0.000250 worker=3 cache=HIT "
              "tls=ktls\n");

    /* unknown peer, truncated target, odd cache word */
    he_t_rec(&r, "/x");
    r.family = 0;
    r.truncated = 1;
    r.tls = HE_ALOG_TLS_USERSPACE;
    memcpy(r.cache, "a b", 4);
    he_alog_format(&a, &r, line, sizeof(line));
    HE_CHECK(strncmp(line, "- - - [", 7) == 0);
    HE_CHECK(strstr(line, "\"GET /x... HTTP/1.1\"") != NULL);
    HE_CHECK(strstr(line, "cache=a_b tls=tls\n") != NULL);
}

static void test_format_json(void)
{
    he_alog_t a;
    he_alog_rec_t r;
    char line[8192];

    he_alog_init(&a);
    a.format = HE_ACCESS_LOG_JSON;
    a.real_minus_mono_ns = HE_T_REAL_NS - HE_T_MONO_NS;
    he_t_rec(&r, "/a\"b\\c\x01\xe9");
    he_alog_format(&a, &r, line, sizeof(line));
    HE_CHECK_STR(line,
                 "{\"time\":\"2024-03-01T12:34:56.789Z\",\"client\":\"192.0.2.7\",\"port\":40000,"
                 "\"method\":\"GET\",\"target\":\"/a\\\"b\\\\c\\u0001\\u00E9\",\"protocol\":"
                 "\"HTTP/1.1\",\"status\":200,\"bytes\":1000,\"bytes_sent\":1234,"
                 "\"duration_us\":1500,\"ttfb_us\":250,\"worker\":3,\"cache\":\"-\","
                 "\"tls\":\"-\"}\n");
}

static void test_ring(void)
{
    he_alog_ring_t *r = he_alog_ring_new(8);
    he_alog_t a;
    char path[] = "/tmp/he-alog-XXXXXX";
    int fd = mkstemp(path);
    char buf[65536];
    ssize_t n;
    unsigned lines = 0;

    HE_CHECK(r != NULL);
    HE_CHECK(he_alog_ring_new(6) == NULL); /* not a power of two */
    HE_CHECK(fd >= 0);
    close(fd);
    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, path, HE_ACCESS_LOG_COMBINED), 0);

    /* Three rounds: fill, see it full, drain, so the indexes wrap. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 8; i++) {
            he_alog_rec_t *rec = he_alog_reserve(r);
            HE_CHECK(rec != NULL);
            if (!rec) break;
            he_t_rec(rec, "/r");
            rec->status = (uint16_t)(200 + i);
            he_alog_commit(r);
        }
        HE_CHECK(he_alog_reserve(r) == NULL); /* full: the caller drops and counts */
        HE_CHECK_INT(he_alog_drain(&a, r), 8);
        HE_CHECK_INT(he_alog_drain(&a, r), 0);
        HE_CHECK(he_alog_reserve(r) != NULL);
    }
    HE_CHECK_INT(a.written, 24);
    he_alog_close(&a);

    fd = open(path, O_RDONLY);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    HE_CHECK(n > 0);
    buf[n > 0 ? n : 0] = 0;
    for (char *p = buf; (p = strchr(p, '\n')); p++)
        lines++;
    HE_CHECK_INT(lines, 24);
    HE_CHECK(strstr(buf, "\" 207 ") != NULL);

    /* a log turned off discards what the ring holds */
    he_alog_init(&a);
    he_alog_reserve(r);
    he_alog_commit(r);
    HE_CHECK_INT(he_alog_drain(&a, r), 1);
    HE_CHECK_INT(a.written, 0);
    unlink(path);
    he_alog_ring_free(r);
}

/* Two workers' rings drained together come out in time order. */
static void test_merge(void)
{
    he_alog_ring_t *r[2] = {he_alog_ring_new(16), he_alog_ring_new(16)};
    he_alog_t a;
    char path[] = "/tmp/he-alog-merge-XXXXXX";
    int fd = mkstemp(path);
    char buf[16384], *p;
    ssize_t n;
    /* ring 0 holds times 1 4 5 9, ring 1 holds 2 3 7 8 */
    static const int t0[] = {1, 4, 5, 9}, t1[] = {2, 3, 7, 8};
    int last = 0, count = 0;

    HE_CHECK(fd >= 0);
    close(fd);
    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, path, HE_ACCESS_LOG_COMBINED), 0);
    for (int i = 0; i < 4; i++) {
        he_alog_rec_t *x = he_alog_reserve(r[0]);
        he_t_rec(x, "/m");
        x->end_ns = (uint64_t)t0[i] * 1000;
        x->duration_us = (uint32_t)t0[i];
        he_alog_commit(r[0]);
        x = he_alog_reserve(r[1]);
        he_t_rec(x, "/m");
        x->end_ns = (uint64_t)t1[i] * 1000;
        x->duration_us = (uint32_t)t1[i];
        he_alog_commit(r[1]);
    }
    HE_CHECK_INT(he_alog_drain_many(&a, r, 2), 8);
    HE_CHECK_INT(he_alog_drain_many(&a, r, 2), 0);
    he_alog_close(&a);
    fd = open(path, O_RDONLY);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    for (p = buf; (p = strstr(p, "rt=0.0000")); p += 9) {
        int t = atoi(p + 9);
        HE_CHECK(t > last);
        last = t;
        count++;
    }
    HE_CHECK_INT(count, 8);
    unlink(path);
    he_alog_ring_free(r[0]);
    he_alog_ring_free(r[1]);
}

int main(void)
{
    test_format_combined();
    test_format_json();
    test_ring();
    test_merge();
    HE_TEST_MAIN_END();
}
