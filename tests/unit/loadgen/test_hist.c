/* loadgen/hist.c: bucket bounds, percentile error bound, merge. */
#include "he_test.h"
#include "loadgen/hist.c"

#include <math.h>

static void test_bucket_bounds(void)
{
    /* exact below 2^SUB */
    for (uint64_t v = 0; v < HE_LG_HIST_SUB; v++) {
        HE_CHECK_INT(he_lg_hist_index(v), v);
        HE_CHECK_INT(he_lg_hist_bucket_lo((unsigned)v), v);
        HE_CHECK_INT(he_lg_hist_bucket_hi((unsigned)v), v);
    }
    /* the first log bucket row is still exact (width 1) */
    HE_CHECK_INT(he_lg_hist_index(128), 128);
    HE_CHECK_INT(he_lg_hist_index(255), 255);
    HE_CHECK_INT(he_lg_hist_bucket_hi(255), 255);
    /* then width 2: 256 and 257 share a bucket, 258 starts the next */
    HE_CHECK_INT(he_lg_hist_index(256), 256);
    HE_CHECK_INT(he_lg_hist_index(257), 256);
    HE_CHECK_INT(he_lg_hist_index(258), 257);
    HE_CHECK_INT(he_lg_hist_bucket_lo(256), 256);
    HE_CHECK_INT(he_lg_hist_bucket_hi(256), 257);
    /* 1000000 = 0b11110100001001000000: m = 19, shift = 12, top bits 244 */
    unsigned i = he_lg_hist_index(1000000);
    HE_CHECK_INT(he_lg_hist_bucket_lo(i), 244ull << 12);
    HE_CHECK_INT(he_lg_hist_bucket_hi(i), (245ull << 12) - 1);
    /* the largest value lands in the last bucket */
    HE_CHECK_INT(he_lg_hist_index(UINT64_MAX), HE_LG_HIST_BUCKETS - 1);
    HE_CHECK(he_lg_hist_bucket_hi(HE_LG_HIST_BUCKETS - 1) == UINT64_MAX);

    /* every value lies in its bucket; buckets tile the line without gaps */
    uint64_t vals[] = {300,
                       4095,
                       4096,
                       4097,
                       65535,
                       1u << 20,
                       123456789,
                       1ull << 40,
                       (1ull << 40) + 12345,
                       0x7fffffffffffffffull};
    for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
        unsigned b = he_lg_hist_index(vals[k]);
        HE_CHECK(he_lg_hist_bucket_lo(b) <= vals[k] && vals[k] <= he_lg_hist_bucket_hi(b));
        HE_CHECK_INT(he_lg_hist_bucket_lo(b + 1), he_lg_hist_bucket_hi(b) + 1);
        /* relative width bound: (hi - lo + 1) / lo <= 2^-SUB */
        double w = (double)(he_lg_hist_bucket_hi(b) - he_lg_hist_bucket_lo(b) + 1);
        HE_CHECK(w / (double)he_lg_hist_bucket_lo(b) <= 1.0 / HE_LG_HIST_SUB + 1e-12);
    }
    for (unsigned b = 0; b + 1 < HE_LG_HIST_BUCKETS; b++)
        if (he_lg_hist_bucket_lo(b + 1) != he_lg_hist_bucket_hi(b) + 1) {
            HE_CHECK(!"gap between buckets");
            break;
        }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_percentiles(void)
{
    he_lg_hist_t h;
    HE_CHECK_INT(he_lg_hist_init(&h), 0);
    HE_CHECK_INT(he_lg_hist_percentile(&h, 50), 0); /* empty */

    /* 1..1000: small values are exact */
    for (uint64_t v = 1; v <= 100; v++)
        he_lg_hist_record(&h, v);
    HE_CHECK_INT(h.count, 100);
    HE_CHECK_INT(he_lg_hist_percentile(&h, 50), 50);
    HE_CHECK_INT(he_lg_hist_percentile(&h, 99), 99);
    HE_CHECK_INT(he_lg_hist_percentile(&h, 99.9), 100);
    HE_CHECK_INT(he_lg_hist_percentile(&h, 100), 100);
    HE_CHECK_INT(he_lg_hist_percentile(&h, 0), 1);
    HE_CHECK(fabs(he_lg_hist_mean(&h) - 50.5) < 1e-9);

    /* random values over many magnitudes: the reported percentile is never
     * below the true one and at most 2^-SUB above it */
    he_lg_hist_reset(&h);
    enum { N = 20000 };
    static uint64_t vals[N];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        vals[i] = (s >> 20) % (1ull << (4 + (s >> 60) * 2)) + 1;
        he_lg_hist_record(&h, vals[i]);
    }
    qsort(vals, N, sizeof(vals[0]), cmp_u64);
    double ps[] = {1, 10, 50, 90, 99, 99.9, 99.99};
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
        size_t rank = (size_t)ceil(ps[k] / 100 * N);
        uint64_t truth = vals[rank - 1];
        uint64_t got = he_lg_hist_percentile(&h, ps[k]);
        HE_CHECK(got >= truth);
        HE_CHECK((double)got <= (double)truth * (1.0 + 1.0 / HE_LG_HIST_SUB));
    }
    HE_CHECK_INT(he_lg_hist_percentile(&h, 100), vals[N - 1]);
    HE_CHECK_INT(h.min, vals[0]);
    HE_CHECK_INT(h.max, vals[N - 1]);

    /* merge equals recording everything in one */
    he_lg_hist_t a, b;
    he_lg_hist_init(&a);
    he_lg_hist_init(&b);
    for (int i = 0; i < N; i++)
        he_lg_hist_record(i % 2 ? &a : &b, vals[i]);
    he_lg_hist_merge(&a, &b);
    HE_CHECK_INT(a.count, N);
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++)
        HE_CHECK_INT(he_lg_hist_percentile(&a, ps[k]), he_lg_hist_percentile(&h, ps[k]));
    HE_CHECK_INT(memcmp(a.counts, h.counts, HE_LG_HIST_BUCKETS * sizeof(uint64_t)), 0);
    he_lg_hist_free(&a);
    he_lg_hist_free(&b);
    he_lg_hist_free(&h);
}

int main(void)
{
    test_bucket_bounds();
    test_percentiles();
    HE_TEST_MAIN_END();
}
