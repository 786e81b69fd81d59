/* server/control/accesslog.c: the merge of several workers' rings by
 * time, and the combined and JSON lines with their escaping. The ring
 * itself is tests/unit/server/base/test_alog_ring.c. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "he_test.h"
#include "server/control/accesslog.h"
#include "server/handler/cache_glue.h"
#include "server/server.h"
#include "tests/he_xorshift.h"
#include "alog_test.h"

/* 2024-03-01T12:34:56.789Z as the offset from a monotonic 1 s */
#define HE_T_REAL_NS 1709296496789000000ll

static _Alignas(8) char he_t_buf[sizeof(he_alog_rec_t) + HE_ALOG_TARGET_MAX];


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
    r->cache = HE_ALOG_CACHE_HIT_RAM;
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

    /* the next second, to the nanosecond, and back a second */
    r->end_ns = HE_T_MONO_NS + 211000000;
    he_alog_format(&a, r, line, sizeof(line));
    HE_CHECK(strstr(line, "[01/Mar/2024:12:34:57 +0000]") != NULL);
    r->end_ns = HE_T_MONO_NS + 210999999;
    he_alog_format(&a, r, line, sizeof(line));
    HE_CHECK(strstr(line, "[01/Mar/2024:12:34:56 +0000]") != NULL);
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
    HE_CHECK_STR(line, "{\"time\":\"2024-03-01T12:34:56.789Z\",\"client\":\"192.0.2.7\","
                       "\"method\":\"GET\",\"target\":\"/a\\\"b\\\\c\\u0001\\u00E9\",\"protocol\":"
                       "\"HTTP/1.1\",\"status\":200,\"bytes\":1000,"
                       "\"duration_us\":1500,\"ttfb_us\":250,\"worker\":3,\"cache\":\"-\","
                       "\"tls\":\"-\"}\n");
}

/* ---------------------------------------------------------------- reference */

/* The formats spelled the obvious way (snprintf), to hold the fast
 * formatter to the same bytes on records of every shape. */
static char *he_t_ref_escape(char *o, const char *s, size_t n, int json)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
            *o++ = (char)ch;
        else if (json && (ch == '"' || ch == '\\'))
            o += sprintf(o, "\\%c", ch);
        else
            o += sprintf(o, json ? "\\u00%02X" : "\\x%02X", ch);
    }
    return o;
}

static void he_t_ref(const he_alog_rec_t *r, int json, int64_t real_minus_mono, char *out)
{
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static const char *const tls[] = {"-", "tls", "ktls"};
    uint64_t real = r->end_ns + (uint64_t)real_minus_mono;
    time_t sec = (time_t)(real / 1000000000ull);
    char addr[64], target[HE_ALOG_TARGET_MAX * 6 + 8], proto[16], *t;
    const char *method = llhttp_method_name((llhttp_method_t)r->method);
    unsigned long long body = r->bytes_sent > r->head_len ? r->bytes_sent - r->head_len : 0;
    struct tm tm;

    gmtime_r(&sec, &tm);
    if (!method || !*method) method = "-";
    if (r->family == AF_INET || r->family == AF_INET6)
        inet_ntop(r->family, r->addr, addr, sizeof(addr));
    else
        strcpy(addr, "-");
    t = he_t_ref_escape(target, r->target, r->target_len, json);
    strcpy(t, r->truncated ? "..." : "");
    /* a request refused before its version was read (414) has none */
    if (r->http_major)
        sprintf(proto, "HTTP/%u.%u", r->http_major % 10, r->http_minor % 10);
    else
        strcpy(proto, "-");
    if (json)
        sprintf(out,
                "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03uZ\",\"client\":\"%s\","
                "\"method\":\"%s\",\"target\":\"%s\",\"protocol\":\"%s\",\"status\":%u,"
                "\"bytes\":%llu,\"duration_us\":%u,\"ttfb_us\":%u,"
                "\"worker\":%u,\"cache\":\"%s\",\"tls\":\"%s\"}\n",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                (unsigned)(real / 1000000 % 1000), addr, method, target, proto, r->status, body,
                r->duration_us, r->ttfb_us, r->worker, he_alog_cache_name(r->cache),
                r->tls < 3 ? tls[r->tls] : "-");
    else
        sprintf(out,
                "%s - - [%02d/%s/%04d:%02d:%02d:%02d +0000] \"%s %s %s\" %u %llu \"-\" "
                "\"-\" rt=%u.%06u ttfb=%u.%06u worker=%u cache=%s tls=%s\n",
                addr, tm.tm_mday, mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec, method, target, proto, r->status, body, r->duration_us / 1000000,
                r->duration_us % 1000000, r->ttfb_us / 1000000, r->ttfb_us % 1000000, r->worker,
                he_alog_cache_name(r->cache), r->tls < 3 ? tls[r->tls] : "-");
}

static uint64_t he_t_rng = 0x2545f4914f6cdd1dull;

/* A number of a random digit count, often at a power of ten's edge. */
static uint64_t he_t_num(uint64_t max)
{
    uint64_t p = 1, v;
    unsigned d = (unsigned)(he_xorshift64(&he_t_rng) % 21);
    for (unsigned i = 0; i < d && p <= UINT64_MAX / 10; i++)
        p *= 10;
    switch (he_xorshift64(&he_t_rng) % 4) {
    case 0:
        v = p - 1;
        break;
    case 1:
        v = p;
        break;
    case 2:
        v = 0;
        break;
    default:
        v = he_xorshift64(&he_t_rng) % p;
    }
    return v > max ? max : v;
}

static void test_format_reference(void)
{
    static const char *const addrs[] = {"127.0.0.1",
                                        "0.0.0.0",
                                        "255.255.255.255",
                                        "10.1.22.133",
                                        "::1",
                                        "2001:db8::1",
                                        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                                        "::ffff:1.2.3.4"};
    static const char special[] = "\"\\\x01\x1f\x7f\x80\xff \x20~";
    static char line[HE_ALOG_TARGET_MAX * 8], want[HE_ALOG_TARGET_MAX * 8];
    _Alignas(8) static char buf[sizeof(he_alog_rec_t) + HE_ALOG_TARGET_MAX];
    he_alog_rec_t *r = (he_alog_rec_t *)buf;
    he_alog_t a;
    uint64_t t = HE_T_MONO_NS;
    unsigned bad = 0;

    he_alog_init(&a);
    a.real_minus_mono_ns = HE_T_REAL_NS - HE_T_MONO_NS;
    for (int i = 0; i < 100000; i++) {
        size_t len = he_xorshift64(&he_t_rng) % 4
                         ? he_xorshift64(&he_t_rng) % 40
                         : he_xorshift64(&he_t_rng) % (HE_ALOG_TARGET_MAX + 1);
        int json;

        /* the format changes now and then, as after a reload */
        if (i % 5000 == 0) a.format = (i / 5000) % 2 ? HE_ACCESS_LOG_JSON : HE_ACCESS_LOG_COMBINED;
        json = a.format == HE_ACCESS_LOG_JSON;
        memset(r, 0, sizeof(*r));
        for (size_t k = 0; k < len; k++)
            r->target[k] = he_xorshift64(&he_t_rng) % 16
                               ? (char)('!' + he_xorshift64(&he_t_rng) % 94)
                               : special[he_xorshift64(&he_t_rng) % (sizeof(special) - 1)];
        r->target_len = (uint16_t)len;
        r->truncated = he_xorshift64(&he_t_rng) % 10 == 0;
        t += he_xorshift64(&he_t_rng) % 3 ? he_xorshift64(&he_t_rng) % 5000000
                                          : he_xorshift64(&he_t_rng) % 3000000000ull;
        r->end_ns = t;
        r->bytes_sent = he_t_num(UINT64_MAX);
        r->head_len = (uint16_t)he_t_num(UINT16_MAX);
        r->duration_us = (uint32_t)he_t_num(UINT32_MAX);
        r->ttfb_us = (uint32_t)he_t_num(UINT32_MAX);
        r->status = (uint16_t)(he_xorshift64(&he_t_rng) % 4 ? 200 + he_xorshift64(&he_t_rng) % 400
                                                            : he_t_num(UINT16_MAX));
        r->worker = (uint16_t)he_t_num(UINT16_MAX);
        r->method = (uint8_t)(he_xorshift64(&he_t_rng) % 4
                                  ? 1
                                  : he_xorshift64(&he_t_rng) % 46); /* llhttp's methods */
        r->http_major = (uint8_t)(he_xorshift64(&he_t_rng) % 4
                                      ? 1
                                      : he_xorshift64(&he_t_rng) % 256); /* 0: no version read */
        r->http_minor =
            (uint8_t)(he_xorshift64(&he_t_rng) % 4 ? 1 : he_xorshift64(&he_t_rng) % 256);
        r->cache = (uint8_t)(he_xorshift64(&he_t_rng) % 4 ? he_xorshift64(&he_t_rng) % HE_ALOG_CACHE_COUNT
                                                          : he_xorshift64(&he_t_rng) % 256);
        r->tls = (uint8_t)(he_xorshift64(&he_t_rng) % 4 ? he_xorshift64(&he_t_rng) % 3
                                                        : he_xorshift64(&he_t_rng) % 256);
        switch (he_xorshift64(&he_t_rng) % 8) {
        case 0:
            r->family = 0;
            break;
        case 1:
            r->family = AF_INET6;
            inet_pton(AF_INET6, addrs[4 + he_xorshift64(&he_t_rng) % 4], r->addr);
            break;
        default:
            r->family = AF_INET;
            inet_pton(AF_INET, addrs[he_xorshift64(&he_t_rng) % 4], r->addr);
            break;
        }
        he_t_ref(r, json, a.real_minus_mono_ns, want);
        if (he_alog_format(&a, r, line, sizeof(line)) != strlen(want) || strcmp(line, want) != 0) {
            if (bad++ < 3) fprintf(stderr, "got  %s\nwant %s\n", line, want);
        }
    }
    HE_CHECK_INT(bad, 0);
}

/* The longest line, and what the formatter writes past it, stay within
 * HE_ALOG_LINE_MAX: the batch buffer keeps that much room per line. */
static void test_format_longest(void)
{
    _Alignas(8) static char buf[sizeof(he_alog_rec_t) + HE_ALOG_TARGET_MAX];
    static char line[HE_ALOG_LINE_MAX + 4096];
    he_alog_rec_t *r = (he_alog_rec_t *)buf;
    he_alog_t a;

    for (int json = 0; json < 2; json++) {
        he_alog_init(&a);
        a.format = json ? HE_ACCESS_LOG_JSON : HE_ACCESS_LOG_COMBINED;
        memset(r, 0, sizeof(*r));
        memset(r->target, 1, HE_ALOG_TARGET_MAX);
        r->target_len = HE_ALOG_TARGET_MAX;
        r->truncated = 1;
        r->end_ns = UINT64_MAX / 2;
        r->bytes_sent = UINT64_MAX;
        r->duration_us = r->ttfb_us = UINT32_MAX;
        r->status = r->worker = UINT16_MAX;
        r->method = 41; /* GET_PARAMETER: the longest name */
        r->cache = HE_ALOG_CACHE_REVALIDATED;
        r->tls = HE_ALOG_TLS_KTLS;
        r->family = AF_INET6;
        inet_pton(AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", r->addr);
        memset(line, 0x55, sizeof(line));
        HE_CHECK(he_alog_format(&a, r, line, HE_ALOG_LINE_MAX) + 1 < HE_ALOG_LINE_MAX);
        for (size_t i = HE_ALOG_LINE_MAX; i < sizeof(line); i++)
            if (line[i] != 0x55) {
                HE_CHECK(!"wrote past HE_ALOG_LINE_MAX");
                break;
            }
        HE_CHECK_INT(he_alog_format(&a, r, line, HE_ALOG_LINE_MAX - 1), 0); /* no room: nothing */
    }
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
    test_format_reference();
    test_format_longest();
    test_merge();
    HE_TEST_MAIN_END();
}
