/* loadgen: log-linear latency histograms (HdrHistogram's bucketing with a
 * fixed 2^-7 relative precision), cheap to record and to merge per thread. */
#include "loadgen/lg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int he_lg_hist_init(he_lg_hist_t *h)
{
    memset(h, 0, sizeof(*h));
    h->counts = calloc(HE_LG_HIST_BUCKETS, sizeof(*h->counts));
    if (!h->counts) return -ENOMEM;
    h->min = UINT64_MAX;
    return 0;
}

void he_lg_hist_free(he_lg_hist_t *h)
{
    free(h->counts);
    h->counts = NULL;
}

void he_lg_hist_reset(he_lg_hist_t *h)
{
    memset(h->counts, 0, HE_LG_HIST_BUCKETS * sizeof(*h->counts));
    h->count = 0;
    h->max = 0;
    h->min = UINT64_MAX;
    h->sum = 0;
}

/* Values below 2^SUB index themselves. Above, with m = floor(log2 v) and
 * shift = m - SUB, the bucket is (shift + 1) * 2^SUB + (v >> shift) - 2^SUB:
 * the top SUB+1 bits of v select it, the rest are dropped. */
unsigned he_lg_hist_index(uint64_t v)
{
    if (v < HE_LG_HIST_SUB) return (unsigned)v;
    unsigned m = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = m - HE_LG_HIST_SUB_BITS;
    return (shift + 1) * HE_LG_HIST_SUB + (unsigned)(v >> shift) - HE_LG_HIST_SUB;
}

uint64_t he_lg_hist_bucket_lo(unsigned idx)
{
    if (idx < HE_LG_HIST_SUB) return idx;
    unsigned shift = idx / HE_LG_HIST_SUB - 1;
    uint64_t sub = idx % HE_LG_HIST_SUB;
    return (HE_LG_HIST_SUB + sub) << shift;
}

uint64_t he_lg_hist_bucket_hi(unsigned idx)
{
    if (idx < HE_LG_HIST_SUB) return idx;
    unsigned shift = idx / HE_LG_HIST_SUB - 1;
    return he_lg_hist_bucket_lo(idx) + ((1ull << shift) - 1);
}

void he_lg_hist_record(he_lg_hist_t *h, uint64_t v)
{
    h->counts[he_lg_hist_index(v)]++;
    h->count++;
    h->sum += (double)v;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
}

void he_lg_hist_merge(he_lg_hist_t *dst, const he_lg_hist_t *src)
{
    if (!src->count) return;
    for (unsigned i = 0; i < HE_LG_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
}

uint64_t he_lg_hist_percentile(const he_lg_hist_t *h, double p)
{
    if (!h->count) return 0;
    if (p <= 0) return h->min;
    if (p > 100) p = 100;
    double r = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)r;
    if ((double)rank < r) rank++;
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HE_LG_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = he_lg_hist_bucket_hi(i);
            if (v > h->max) v = h->max;
            if (v < h->min) v = h->min;
            return v;
        }
    }
    return h->max;
}

double he_lg_hist_mean(const he_lg_hist_t *h)
{
    return h->count ? h->sum / (double)h->count : 0;
}
