/* Log-linear latency histograms (the HdrHistogram idea, fixed precision).
 *
 * Group 0 holds the values 0..HE_HIST_SUB-1 exactly, one bucket each. A
 * value v >= HE_HIST_SUB with highest set bit e (2^e <= v < 2^(e+1)) goes
 * to group e - HE_HIST_SUB_BITS + 1, split into HE_HIST_SUB linear buckets
 * of width 2^(e - HE_HIST_SUB_BITS). The width of a bucket is therefore at
 * most 1/HE_HIST_SUB of its lower bound, which bounds the relative error of
 * any quantile. Finding a bucket is one count-leading-zeros and two shifts,
 * cheap enough to run twice per request on the worker. */
#include <stdint.h>
#include <string.h>

#include "server/base/stats.h"

#define HE_HIST_GROUPS (HE_HIST_MAX_EXP - HE_HIST_SUB_BITS + 2)

_Static_assert(HE_HIST_BUCKETS == HE_HIST_GROUPS * HE_HIST_SUB, "bucket count");

unsigned he_hist_bucket(uint64_t us)
{
    unsigned e, g, sub;

    if (us < HE_HIST_SUB) return (unsigned)us;
    e = 63u - (unsigned)__builtin_clzll(us);
    if (e > HE_HIST_MAX_EXP) return HE_HIST_BUCKETS - 1; /* beyond the range: last bucket */
    g = e - HE_HIST_SUB_BITS + 1;
    sub = (unsigned)(us >> (e - HE_HIST_SUB_BITS)) & (HE_HIST_SUB - 1);
    return g * HE_HIST_SUB + sub;
}

void he_hist_bucket_range(unsigned b, uint64_t *lo, uint64_t *hi)
{
    unsigned g, sub, shift;

    if (b >= HE_HIST_BUCKETS) b = HE_HIST_BUCKETS - 1;
    g = b / HE_HIST_SUB;
    sub = b % HE_HIST_SUB;
    if (g == 0) {
        *lo = *hi = sub;
        return;
    }
    shift = g - 1; /* = e - HE_HIST_SUB_BITS */
    *lo = (uint64_t)(HE_HIST_SUB + sub) << shift;
    *hi = *lo + ((uint64_t)1 << shift) - 1;
}

void he_hist_record(he_hist_t *h, uint64_t us)
{
    h->count++;
    h->sum_us += us;
    h->buckets[he_hist_bucket(us)]++;
}

void he_hist_merge(he_hist_t *dst, const he_hist_t *src)
{
    dst->count += src->count;
    dst->sum_us += src->sum_us;
    for (unsigned i = 0; i < HE_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
}

uint64_t he_hist_quantile(const he_hist_t *h, double q)
{
    uint64_t total = 0, rank, seen = 0, lo, hi;

    /* Sum the buckets rather than trust count: a histogram read while its
     * worker writes may have count one ahead of its buckets. */
    for (unsigned i = 0; i < HE_HIST_BUCKETS; i++)
        total += h->buckets[i];
    if (total == 0) return 0;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    rank = (uint64_t)(q * (double)total);
    if ((double)rank < q * (double)total) rank++; /* ceil */
    if (rank == 0) rank = 1;
    for (unsigned i = 0; i < HE_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            he_hist_bucket_range(i, &lo, &hi);
            return hi;
        }
    }
    he_hist_bucket_range(HE_HIST_BUCKETS - 1, &lo, &hi);
    return hi;
}
