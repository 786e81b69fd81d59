/* loadgen: adaptive bitrate decisions, shaped after what players do
 * (Shaka's and hls.js's bandwidth estimators): two exponentially weighted
 * moving averages of the measured download rate, weighted by seconds of media,
 * a fast one (2 s half-life) and a slow one (5 s); the estimate is the lower
 * of the two, so a drop is believed at once and a rise only when it lasts. */
#include "loadgen/lg.h"

#include <math.h>

#define HE_LG_ABR_FAST_HALF_LIFE_S 2.0
#define HE_LG_ABR_SLOW_HALF_LIFE_S 5.0

static void he_lg_ewma_init(he_lg_ewma_t *e, double half_life)
{
    e->alpha = exp(log(0.5) / half_life);
    e->estimate = 0;
    e->total_weight = 0;
}

static void he_lg_ewma_add(he_lg_ewma_t *e, double weight, double value)
{
    double a = pow(e->alpha, weight);
    e->estimate = value * (1 - a) + a * e->estimate;
    e->total_weight += weight;
}

/* Zero-initialised averages are biased low; divide the bias out. */
static double he_lg_ewma_get(const he_lg_ewma_t *e)
{
    double zero_factor = 1 - pow(e->alpha, e->total_weight);
    return zero_factor > 0 ? e->estimate / zero_factor : 0;
}

void he_lg_abr_init(he_lg_abr_t *a)
{
    he_lg_ewma_init(&a->fast, HE_LG_ABR_FAST_HALF_LIFE_S);
    he_lg_ewma_init(&a->slow, HE_LG_ABR_SLOW_HALF_LIFE_S);
    a->samples = 0;
}

void he_lg_abr_sample(he_lg_abr_t *a, uint64_t bytes, uint64_t ns, double media_s)
{
    if (ns == 0) ns = 1;
    if (!(media_s > 0)) media_s = 1;
    double bps = (double)bytes * 8.0 * 1e9 / (double)ns;
    he_lg_ewma_add(&a->fast, media_s, bps);
    he_lg_ewma_add(&a->slow, media_s, bps);
    a->samples++;
}

double he_lg_abr_estimate(const he_lg_abr_t *a)
{
    if (!a->samples) return 0;
    double f = he_lg_ewma_get(&a->fast), s = he_lg_ewma_get(&a->slow);
    return f < s ? f : s;
}

int he_lg_abr_choose(const he_lg_abr_t *a, const uint64_t *bw, size_t n, int cur, double buffer_s,
                     double buffer_max_s)
{
    if (n == 0) return -1;
    if (cur < 0 || (size_t)cur >= n) cur = 0;
    if (a->samples < HE_LG_ABR_MIN_SAMPLES) return cur;
    double est = he_lg_abr_estimate(a);
    double usable = est * HE_LG_ABR_SAFETY;

    /* best: the highest rendition that fits in the usable rate; the lowest
     * one when nothing fits */
    int best = -1, lowest = 0;
    for (size_t i = 0; i < n; i++) {
        if (bw[i] < bw[lowest]) lowest = (int)i;
        if ((double)bw[i] <= usable && (best < 0 || bw[i] > bw[best])) best = (int)i;
    }
    if (best < 0) best = lowest;
    if (bw[best] > bw[cur]) {
        /* up only with the buffer to survive a wrong guess */
        double need = HE_LG_ABR_UP_BUFFER_S;
        if (buffer_max_s > 0 && need > buffer_max_s * 0.5) need = buffer_max_s * 0.5;
        if (buffer_s >= 0 && buffer_s < need) return cur;
        return best;
    }
    if (bw[best] < bw[cur]) {
        /* down only when the current one cannot be sustained at all: the
         * band between usable and est is hysteresis against flapping */
        if ((double)bw[cur] > est) return best;
        return cur;
    }
    return cur;
}
