/* loadgen: a small fast rng and discrete distributions (Zipf popularity of
 * master URLs, weighted rendition mixes). */
#include "loadgen/lg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

void he_lg_rng_seed(he_lg_rng_t *r, uint64_t seed)
{
    r->s = seed ? seed : 0x9e3779b97f4a7c15ull;
}

/* splitmix64: passes BigCrush, one add and three multiplies per draw. */
uint64_t he_lg_rng_next(he_lg_rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double he_lg_rng_double(he_lg_rng_t *r)
{
    return (double)(he_lg_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int he_lg_pick_init_weights(he_lg_pick_t *p, const double *w, size_t n)
{
    double total = 0;
    p->cdf = NULL;
    p->n = 0;
    if (n == 0) return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (!(w[i] >= 0) || isinf(w[i])) return -EINVAL;
        total += w[i];
    }
    if (!(total > 0)) return -EINVAL;
    p->cdf = malloc(n * sizeof(*p->cdf));
    if (!p->cdf) return -ENOMEM;
    double acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += w[i];
        p->cdf[i] = acc / total;
    }
    p->cdf[n - 1] = 1.0;
    p->n = n;
    return 0;
}

int he_lg_pick_init_zipf(he_lg_pick_t *p, size_t n, double s)
{
    if (n == 0 || !(s >= 0)) return -EINVAL;
    double *w = malloc(n * sizeof(*w));
    if (!w) return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        w[i] = s == 0 ? 1.0 : pow((double)(i + 1), -s);
    int rc = he_lg_pick_init_weights(p, w, n);
    free(w);
    return rc;
}

size_t he_lg_pick_sample(const he_lg_pick_t *p, he_lg_rng_t *r)
{
    double u = he_lg_rng_double(r);
    size_t lo = 0, hi = p->n - 1;
    /* first index whose cdf exceeds u; zero-weight items are never chosen */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

double he_lg_pick_prob(const he_lg_pick_t *p, size_t i)
{
    if (i >= p->n) return 0;
    return i == 0 ? p->cdf[0] : p->cdf[i] - p->cdf[i - 1];
}

void he_lg_pick_free(he_lg_pick_t *p)
{
    free(p->cdf);
    p->cdf = NULL;
    p->n = 0;
}
