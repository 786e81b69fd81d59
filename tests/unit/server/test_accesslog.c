/* server/accesslog.c: the SPSC byte ring (variable-length records, the
 * skip at the ring's end, full, wrap-around, drain), the merge of several
 * workers' rings by time, and the combined and JSON lines with their
 * escaping. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "he_test.h"
#include "server/accesslog.h"
#include "server/cache_glue.h"

/* 2024-03-01T12:34:56.789Z as the offset from a monotonic 1 s */
#define HE_T_REAL_NS 1709296496789000000ll
#define HE_T_MONO_NS 1000000000ll

static _Alignas(8) char he_t_buf[sizeof(he_alog_rec_t) + HE_ALOG_TARGET_MAX];

/* Fills rec (with room for target) with a known request. */
static void he_t_fill(he_alog_rec_t *r, const char *target)
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
    r->cache = HE_CST_NONE;
    r->target_len = (uint16_t)strlen(target);
    memcpy(r->target, target, r->target_len);
}

static he_alog_rec_t *he_t_rec(const char *target)
{
    he_alog_rec_t *r = (he_alog_rec_t *)he_t_buf;
    he_t_fill(r, target);
    return r;
}

static void test_format_combined(void)
{
    he_alog_t a;
    he_alog_rec_t *r;
    char line[HE_ALOG_TARGET_MAX * 8];
    size_t n;

    he_alog_init(&a);
    a.format = HE_ACCESS_LOG_COMBINED;
    a.real_minus_mono_ns = HE_T_REAL_NS - HE_T_MONO_NS;
    r = he_t_rec("/live/a.ts?x=1");
    n = he_alog_format(&a, r, line, sizeof(line));
    HE_CHECK_INT(n, strlen(line));
    HE_CHECK_STR(line,
                 "192.0.2.7 - - [01/Mar/2024:12:34:56 +0000] \"GET /live/a.ts?x=1 HTTP/1.1\" 200 "
                 "1000 \"-\" \"-\" rt=0.001500 ttfb=0.000250 worker=3 cache=- tls=-\n");

    /* quotes, backslashes, control and non-ASCII bytes cannot break the line */
    r = he_t_rec("/a\"b\\c\n\x01\xff");
    r->status = 404;
    r->method = 2; /* HTTP_HEAD */
    r->tls = HE_ALOG_TLS_KTLS;
    r->cache = HE_CST_HIT_RAM;
    r->family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8::1", r->addr);
    r->duration_us = 12345678;
    he_alog_format(&a, r, line, sizeof(line));
    HE_CHECK_STR(
        line, "2001:db8::1 - - [01/Mar/2024:12:34:56 +0000] \"HEAD /a\\x22b\\x5Cc\\x0A\\x01\\xFF "
              "HTTP/1.1\" 404 1000 \"-\" \"-\" rt=12.345678 ttfb=0.000250 worker=3 "
              "cache=HIT-RAM tls=ktls\n");

    /* unknown peer, truncated target, a cache status out of range; the
     * address cache must notice the change of peer */
    r = he_t_rec("/x");
    r->family = 0;
    memset(r->addr, 0, sizeof(r->addr));
    r->truncated = 1;
    r->tls = HE_ALOG_TLS_USERSPACE;
    r->cache = 200;
    he_alog_format(&a, r, line, sizeof(line));
    HE_CHECK(strncmp(line, "- - - [", 7) == 0);
    HE_CHECK(strstr(line, "\"GET /x... HTTP/1.1\"") != NULL);
    HE_CHECK(strstr(line, "cache=- tls=tls\n") != NULL);
    r = he_t_rec("/y");
    inet_pton(AF_INET, "10.0.0.255", r->addr);
    he_alog_format(&a, r, line, sizeof(line));
    HE_CHECK(strncmp(line, "10.0.0.255 - - [", 16) == 0);
}

static void test_format_json(void)
{
    he_alog_t a;
    he_alog_rec_t *r;
    char line[HE_ALOG_TARGET_MAX * 8];

    he_alog_init(&a);
    a.format = HE_ACCESS_LOG_JSON;
    a.real_minus_mono_ns = HE_T_REAL_NS - HE_T_MONO_NS;
    r = he_t_rec("/a\"b\\c\x01\xe9");
    he_alog_format(&a, r, line, sizeof(line));
    HE_CHECK_STR(line,
                 "{\"time\":\"2024-03-01T12:34:56.789Z\",\"client\":\"192.0.2.7\",\"port\":40000,"
                 "\"method\":\"GET\",\"target\":\"/a\\\"b\\\\c\\u0001\\u00E9\",\"protocol\":"
                 "\"HTTP/1.1\",\"status\":200,\"bytes\":1000,\"bytes_sent\":1234,"
                 "\"duration_us\":1500,\"ttfb_us\":250,\"worker\":3,\"cache\":\"-\","
                 "\"tls\":\"-\"}\n");
}

static unsigned he_t_lines(const char *path, const char *needle)
{
    static char buf[1 << 20];
    unsigned lines = 0;
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) close(fd);
    buf[n > 0 ? n : 0] = 0;
    for (char *p = buf; (p = strchr(p, '\n')); p++)
        lines++;
    if (needle) HE_CHECK(strstr(buf, needle) != NULL);
    return lines;
}

static void test_ring(void)
{
    he_alog_ring_t *r = he_alog_ring_new(4096);
    he_alog_t a;
    char path[] = "/tmp/he-alog-XXXXXX";
    int fd = mkstemp(path);
    unsigned total = 0;

    HE_CHECK(r != NULL);
    HE_CHECK(he_alog_ring_new(6000) == NULL); /* not a power of two */
    HE_CHECK(he_alog_ring_new(1024) == NULL); /* too small */
    HE_CHECK(fd >= 0);
    close(fd);
    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, path, HE_ACCESS_LOG_COMBINED), 0);

    /* Rounds of: fill until full, drain. Targets of varying length make
     * records of varying size, so the rounds end at different offsets and
     * cross the ring's end with a skip. */
    for (int round = 0; round < 6; round++) {
        unsigned n = 0;
        char target[300];
        for (;;) {
            size_t len = 1 + (size_t)((n * 37 + (unsigned)round * 11) % 250);
            he_alog_rec_t *rec;
            memset(target, 'a' + round, len);
            target[0] = '/';
            target[len] = 0;
            rec = he_alog_reserve(r, len);
            if (!rec) break; /* full: the caller drops and counts */
            HE_CHECK((((uintptr_t)rec) & 7) == 0);
            HE_CHECK((char *)rec + rec->size <= r->data + r->size); /* never wraps */
            he_t_fill(rec, target);
            rec->size = (uint32_t)((sizeof(*rec) + len + 7) & ~(size_t)7);
            rec->status = (uint16_t)(200 + n % 100);
            he_alog_commit(r, rec);
            n++;
        }
        HE_CHECK(n > 5);
        HE_CHECK_INT(he_alog_drain(&a, r), n);
        HE_CHECK_INT(he_alog_drain(&a, r), 0);
        HE_CHECK(he_alog_reserve(r, 10) != NULL);
        total += n;
    }
    HE_CHECK_INT(a.written, total);
    he_alog_close(&a);
    HE_CHECK_INT(he_t_lines(path, "\" 204 "), total);

    /* a log turned off discards what the ring holds */
    he_alog_init(&a);
    he_alog_commit(r, he_alog_reserve(r, 4));
    HE_CHECK_INT(he_alog_drain(&a, r), 0);
    HE_CHECK_INT(atomic_load(&r->head), atomic_load(&r->tail));
    HE_CHECK_INT(a.written, 0);
    unlink(path);
    he_alog_ring_free(r);
}

/* Two workers' rings drained together come out in time order. */
static void test_merge(void)
{
    he_alog_ring_t *r[2] = {he_alog_ring_new(4096), he_alog_ring_new(4096)};
    he_alog_t a;
    char path[] = "/tmp/he-alog-merge-XXXXXX";
    int fd = mkstemp(path);
    /* ring 0 holds times 1 4 5 9, ring 1 holds 2 3 7 8 */
    static const int t0[] = {1, 4, 5, 9}, t1[] = {2, 3, 7, 8};
    static char buf[16384];
    char *p;
    int last = 0, count = 0;
    ssize_t n;

    HE_CHECK(fd >= 0);
    close(fd);
    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, path, HE_ACCESS_LOG_COMBINED), 0);
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < 2; k++) {
            he_alog_rec_t *x = he_alog_reserve(r[k], 2);
            uint32_t size = x->size;
            he_t_fill(x, "/m");
            x->size = size;
            x->end_ns = (uint64_t)(k ? t1[i] : t0[i]) * 1000;
            x->duration_us = (uint32_t)(k ? t1[i] : t0[i]);
            he_alog_commit(r[k], x);
        }
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
