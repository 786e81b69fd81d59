/* server/metrics.c: summing stats blocks, histogram deltas, and the
 * Prometheus and JSON renderings of a snapshot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "he_test.h"
#include "server/control/metrics.h"

static void test_stats_add(void)
{
    he_stats_t *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    uint64_t *pa = (uint64_t *)a, *pb = (uint64_t *)b;
    size_t n = sizeof(he_stats_t) / sizeof(uint64_t);
    int bad = 0;

    for (size_t i = 0; i < n; i++)
        pb[i] = i + 1;
    he_metrics_stats_add(a, b);
    he_metrics_stats_add(a, b);
    for (size_t i = 0; i < n; i++)
        bad += pa[i] != 2 * (i + 1);
    HE_CHECK_INT(bad, 0); /* every field, the histograms included */
    HE_CHECK_INT(a->conn_accepted, 2 * b->conn_accepted);
    HE_CHECK_INT(a->total.buckets[7], 2 * b->total.buckets[7]);
    free(a);
    free(b);
}

static void test_hist_delta(void)
{
    he_hist_t *old = calloc(1, sizeof(*old)), *cur = calloc(1, sizeof(*cur)), *d;
    d = calloc(1, sizeof(*d));
    for (int i = 0; i < 100; i++)
        he_hist_record(old, 10);
    memcpy(cur, old, sizeof(*cur));
    for (int i = 0; i < 10; i++)
        he_hist_record(cur, 5000);
    he_metrics_hist_delta(d, cur, old);
    HE_CHECK_INT(d->count, 10);
    HE_CHECK_INT(d->sum_us, 50000);
    HE_CHECK(he_hist_quantile(d, 0.5) >= 5000 && he_hist_quantile(d, 0.5) < 5200);
    he_metrics_hist_delta(d, old, cur); /* never negative */
    HE_CHECK_INT(d->count, 0);
    HE_CHECK_INT(he_hist_quantile(d, 0.99), 0);
    free(old);
    free(cur);
    free(d);
}

static he_metrics_snap_t *he_t_snap(void)
{
    he_metrics_snap_t *s = calloc(1, sizeof(*s));
    s->version = "9.9.9";
    s->conf_file = "/etc/a \"b\".yaml";
    s->generation = 3;
    s->server_generations = 1;
    s->uptime_s = 12.5;
    s->features.multishot_accept = true;
    s->features.numa_nodes = 2;
    s->nworkers = 2;
    s->workers = calloc(2, sizeof(*s->workers));
    for (unsigned i = 0; i < 2; i++) {
        he_stats_t *st = &s->workers[i].st;
        s->workers[i].id = i;
        s->workers[i].generation = 3;
        st->conn_accepted = 10 + i;
        st->conn_closed = 8;
        st->requests[HE_STATS_METHOD_GET] = 7;
        st->status_class[2] = 6;
        st->status_class[4] = 1;
        st->bytes_out = 1000;
        for (uint64_t v = 1; v <= 100; v++)
            he_hist_record(&st->total, v * 100); /* 100 us .. 10 ms */
        he_metrics_stats_add(&s->total, st);
    }
    return s;
}

static void test_prometheus(void)
{
    he_metrics_snap_t *s = he_t_snap();
    he_buf_t b = {0};
    char *line, *save = NULL;
    uint64_t prev = 0;
    int buckets = 0, types = 0, bad_prefix = 0;

    he_metrics_prometheus(s, &b);
    HE_CHECK(!b.failed && b.len > 0);
    HE_CHECK(strstr(b.p, "hlsedge_build_info{version=\"9.9.9\"} 1\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_config_info{file=\"/etc/a \\\"b\\\".yaml\"} 1\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_connections_active{worker=\"1\"} 3\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_requests_total{worker=\"0\",method=\"GET\"} 7\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_responses_total{worker=\"1\",status_class=\"4xx\"} 1\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_kernel_feature{feature=\"multishot_accept\"} 1\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_numa_nodes 2\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_response_seconds_bucket{le=\"+Inf\"} 200\n") != NULL);
    HE_CHECK(strstr(b.p, "hlsedge_response_seconds_count 200\n") != NULL);
    /* 100..10000 us, 100 apart, twice: le=0.001 holds 1..1000 us but the
     * bucket [992, 1007] straddles 1000, so 900 is counted there and 1000
     * in the next: 2 * 9 */
    HE_CHECK(strstr(b.p, "hlsedge_response_seconds_bucket{le=\"0.001\"} 18\n") != NULL);
    /* likewise 10000 us is in [9984, 10239] */
    HE_CHECK(strstr(b.p, "hlsedge_response_seconds_bucket{le=\"0.01\"} 198\n") != NULL);
    for (line = strtok_r(b.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned long long v;
        if (strncmp(line, "# TYPE ", 7) == 0) {
            types++;
            bad_prefix += strncmp(line + 7, "hlsedge_", 8) != 0;
        }
        if (sscanf(line, "hlsedge_response_seconds_bucket{le=\"%*[^\"]\"} %llu", &v) == 1) {
            HE_CHECK(v >= prev); /* cumulative */
            prev = v;
            buckets++;
        }
    }
    HE_CHECK_INT(buckets, 18);
    HE_CHECK(types > 30);
    HE_CHECK_INT(bad_prefix, 0);
    he_buf_free(&b);
    free(s->workers);
    free(s);
}

static void test_json(void)
{
    he_metrics_snap_t *s = he_t_snap();
    he_hpoint_t h[2] = {{.t = 1, .gbps = 0.5, .rps = 10}, {.t = 2, .gbps = 0.25, .rps = 20}};
    he_buf_t b = {0};
    int depth = 0, min = 0;

    s->history = h;
    s->nhistory = 2;
    he_metrics_json(s, &b);
    HE_CHECK(!b.failed);
    for (size_t i = 0; i < b.len; i++) {
        if (b.p[i] == '{' || b.p[i] == '[') depth++;
        if (b.p[i] == '}' || b.p[i] == ']') depth--;
        if (depth < min) min = depth;
    }
    HE_CHECK_INT(depth, 0);
    HE_CHECK_INT(min, 0);
    HE_CHECK(strstr(b.p, "\"file\":\"/etc/a \\\"b\\\".yaml\"") != NULL);
    HE_CHECK(strstr(b.p, "\"requests\":{\"total\":14,\"GET\":14") != NULL);
    HE_CHECK(strstr(b.p, "\"connections\":{\"accepted\":21,\"active\":5") != NULL);
    HE_CHECK(strstr(b.p, "\"p99.9\":") != NULL);
    HE_CHECK(strstr(b.p, "\"history\":{\"t\":[1,2],\"gbps\":[0.5,0.25],\"rps\":[10,20]") != NULL);
    HE_CHECK(strstr(b.p, "nan") == NULL && strstr(b.p, "inf") == NULL);
    he_buf_free(&b);
    free(s->workers);
    free(s);
}

static void test_utf8(void)
{
    static const struct {
        const char *s;
        size_t len;
    } cases[] = {
        {"a", 1},
        {"\xc3\xa9", 2},         /* U+00E9 */
        {"\xe2\x82\xac", 3},     /* U+20AC */
        {"\xf0\x9f\x98\x80", 4}, /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", 4}, /* U+10FFFF */
        {"\xff", 0},
        {"\x80", 0},             /* a continuation byte alone */
        {"\xc0\x80", 0},         /* overlong NUL */
        {"\xe0\x80\xaf", 0},     /* overlong '/' */
        {"\xed\xa0\x80", 0},     /* a surrogate */
        {"\xf4\x90\x80\x80", 0}, /* past U+10FFFF */
        {"\xe2\x82", 0},         /* cut short by the end */
        {"\xc3(", 0},
    };
    he_metrics_snap_t *s = he_t_snap();
    he_buf_t b = {0};

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        HE_CHECK_INT(he__utf8_len((const unsigned char *)cases[i].s), cases[i].len);

    /* a file name with bytes that are not UTF-8: valid JSON and label values */
    s->conf_file = "/etc/\xff\"\xc3(\xe2\x82\xac\xed\xa0\x80.yaml";
    he_buf_json_str(&b, s->conf_file);
    HE_CHECK_STR(b.p, "\"/etc/\\ufffd\\\"\\ufffd(\xe2\x82\xac\\ufffd\\ufffd\\ufffd.yaml\"");
    he_buf_free(&b);
    he_metrics_prometheus(s, &b);
    HE_CHECK(strstr(b.p, "hlsedge_config_info{file=\"/etc/\xef\xbf\xbd\\\"\xef\xbf\xbd(\xe2\x82\xac"
                         "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd.yaml\"} 1\n") != NULL);
    for (size_t i = 0; i < b.len;) { /* all of it UTF-8 */
        size_t n = he__utf8_len((const unsigned char *)b.p + i);
        HE_CHECK(n > 0);
        i += n ? n : 1;
    }
    he_buf_free(&b);
    free(s->workers);
    free(s);
}

int main(void)
{
    test_stats_add();
    test_hist_delta();
    test_prometheus();
    test_json();
    test_utf8();
    HE_TEST_MAIN_END();
}
