/* server/hist.c: bucket bounds, exactness below HE_HIST_SUB, the relative
 * error bound, quantiles and merge. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "he_test.h"
#include "server/base/stats.h"

static he_hist_t *he_t_hist(void)
{
    he_hist_t *h = calloc(1, sizeof(*h));
    if (!h) abort();
    return h;
}

static void test_exact_small(void)
{
    uint64_t lo, hi;
    /* Group 0 and the first log group both have width 1. */
    for (uint64_t v = 0; v < 2 * HE_HIST_SUB; v++) {
        unsigned b = he_hist_bucket(v);
        he_hist_bucket_range(b, &lo, &hi);
        HE_CHECK_INT(lo, v);
        HE_CHECK_INT(hi, v);
        HE_CHECK_INT(b, v);
    }
}

static void test_bounds_contiguous(void)
{
    uint64_t lo, hi, prev_hi = 0;
    /* Buckets tile the range without gaps or overlaps, and every value maps
     * to the bucket whose range holds it. */
    for (unsigned b = 0; b < HE_HIST_BUCKETS; b++) {
        he_hist_bucket_range(b, &lo, &hi);
        if (b) HE_CHECK_INT(lo, prev_hi + 1);
        HE_CHECK(hi >= lo);
        HE_CHECK_INT(he_hist_bucket(lo), b);
        HE_CHECK_INT(he_hist_bucket(hi), b);
        /* width / lo <= 1 / HE_HIST_SUB (below HE_HIST_SUB the width is 1: exact) */
        if (lo >= HE_HIST_SUB)
            HE_CHECK((double)(hi - lo + 1) / (double)lo <= 1.0 / HE_HIST_SUB + 1e-12);
        prev_hi = hi;
    }
    HE_CHECK_INT(prev_hi, ((uint64_t)1 << (HE_HIST_MAX_EXP + 1)) - 1);
    /* Beyond the range: the last bucket, never out of bounds. */
    HE_CHECK_INT(he_hist_bucket((uint64_t)1 << (HE_HIST_MAX_EXP + 1)), HE_HIST_BUCKETS - 1);
    HE_CHECK_INT(he_hist_bucket(UINT64_MAX), HE_HIST_BUCKETS - 1);
    /* A few by hand: 100 is in [100, 101] (width 2 between 64 and 127);
     * 1000 in [992, 1007] (width 16 between 512 and 1023). */
    he_hist_bucket_range(he_hist_bucket(100), &lo, &hi);
    HE_CHECK_INT(lo, 100);
    HE_CHECK_INT(hi, 101);
    he_hist_bucket_range(he_hist_bucket(1000), &lo, &hi);
    HE_CHECK_INT(lo, 992);
    HE_CHECK_INT(hi, 1007);
}

static void test_relative_error(void)
{
    uint64_t lo, hi;
    srand(7);
    for (int i = 0; i < 200000; i++) {
        uint64_t v = ((uint64_t)rand() << 20 ^ (uint64_t)rand()) >> (rand() % 50);
        if (v >= ((uint64_t)1 << (HE_HIST_MAX_EXP + 1))) continue;
        he_hist_bucket_range(he_hist_bucket(v), &lo, &hi);
        HE_CHECK(lo <= v && v <= hi);
        if (v >= HE_HIST_SUB)
            HE_CHECK((double)(hi - v) / (double)v <= 1.0 / HE_HIST_SUB);
        else
            HE_CHECK_INT(hi, v);
    }
}

static void test_quantiles(void)
{
    he_hist_t *h = he_t_hist();
    HE_CHECK_INT(he_hist_quantile(h, 0.5), 0); /* empty */
    /* 1..1000 us, once each */
    for (uint64_t v = 1; v <= 1000; v++)
        he_hist_record(h, v);
    HE_CHECK_INT(h->count, 1000);
    HE_CHECK_INT(h->sum_us, 500500);
    struct {
        double q;
        uint64_t exact;
    } qs[] = {{0.5, 500}, {0.9, 900}, {0.99, 990}, {0.999, 999}, {1.0, 1000}, {0.0, 1}};
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        uint64_t got = he_hist_quantile(h, qs[i].q);
        /* the upper bound of the bucket holding the exact value */
        HE_CHECK(got >= qs[i].exact);
        HE_CHECK((double)(got - qs[i].exact) / (double)qs[i].exact <= 1.0 / HE_HIST_SUB);
    }
    /* small values are exact */
    he_hist_t *s = he_t_hist();
    for (int i = 0; i < 50; i++)
        he_hist_record(s, 3);
    for (int i = 0; i < 50; i++)
        he_hist_record(s, 17);
    HE_CHECK_INT(he_hist_quantile(s, 0.5), 3);
    HE_CHECK_INT(he_hist_quantile(s, 0.51), 17);
    HE_CHECK_INT(he_hist_quantile(s, 1.0), 17);
    free(s);
    free(h);
}

static void test_merge(void)
{
    he_hist_t *a = he_t_hist(), *b = he_t_hist(), *all = he_t_hist();
    srand(11);
    for (int i = 0; i < 10000; i++) {
        uint64_t v = (uint64_t)rand() % 100000;
        he_hist_record(i % 3 ? a : b, v);
        he_hist_record(all, v);
    }
    he_hist_merge(a, b);
    HE_CHECK_INT(a->count, all->count);
    HE_CHECK_INT(a->sum_us, all->sum_us);
    HE_CHECK(memcmp(a->buckets, all->buckets, sizeof(a->buckets)) == 0);
    HE_CHECK_INT(he_hist_quantile(a, 0.99), he_hist_quantile(all, 0.99));
    free(a);
    free(b);
    free(all);
}

int main(void)
{
    test_exact_small();
    test_bounds_contiguous();
    test_relative_error();
    test_quantiles();
    test_merge();
    HE_TEST_MAIN_END();
}
