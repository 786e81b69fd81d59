/* loadgen/abr.c: estimator and up/down decisions. */
#include "he_test.h"
#include "loadgen/abr.c"

#include <math.h>

/* one 6 s segment downloaded at rate bps */
static void feed(he_lg_abr_t *a, double bps, int n)
{
    for (int i = 0; i < n; i++)
        he_lg_abr_sample(a, (uint64_t)(bps * 6 / 8), 6000000000ull, 6.0);
}

int main(void)
{
    /* listed out of order on purpose: players sort by BANDWIDTH */
    const uint64_t bw[] = {3000000, 500000, 1000000, 6000000};
    he_lg_abr_t a;
    he_lg_abr_init(&a);

    HE_CHECK(he_lg_abr_estimate(&a) == 0);
    /* too few samples: stay */
    feed(&a, 100e6, 1);
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 1, 30, 30), 1);
    /* a steady rate is estimated without bias */
    feed(&a, 100e6, 1);
    HE_CHECK(fabs(he_lg_abr_estimate(&a) - 100e6) < 1);
    /* plenty of bandwidth and buffer: straight to the top */
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 1, 30, 30), 3);
    /* line rate (no buffer model) goes up too */
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 1, -1, 30), 3);
    /* but not with too little buffer */
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 1, 2, 30), 1);
    /* need is capped at half the maximum buffer */
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 1, 3, 6), 3);

    /* 4 Mbit/s: usable 3.2 -> 3 Mbit/s rendition */
    he_lg_abr_init(&a);
    feed(&a, 4e6, 5);
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 1, 30, 30), 0);
    /* on 6 Mbit/s with 4 measured: 6 > est, so down to what fits */
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 3, 30, 30), 0);

    /* hysteresis: 3.5 Mbit/s measured, on 3 Mbit/s: usable is 2.8 < 3 but
     * 3 <= est, so stay */
    he_lg_abr_init(&a);
    feed(&a, 3.5e6, 5);
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 0, 30, 30), 0);

    /* a sudden drop is believed at once (min of fast and slow) */
    he_lg_abr_init(&a);
    feed(&a, 50e6, 10);
    feed(&a, 1e6, 1);
    double est = he_lg_abr_estimate(&a);
    HE_CHECK(est < 30e6);
    /* nothing fits: the lowest */
    he_lg_abr_init(&a);
    feed(&a, 100e3, 3);
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 3, 30, 30), 1);
    /* a rise is only believed when it lasts: the slow average lags */
    he_lg_abr_init(&a);
    feed(&a, 1e6, 10);
    feed(&a, 100e6, 1);
    HE_CHECK(he_lg_abr_estimate(&a) < 60e6);
    /* degenerate inputs */
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 0, 0, 30, 30), -1);
    HE_CHECK_INT(he_lg_abr_choose(&a, bw, 4, 9, 30, 30) >= 0, 1);
    HE_TEST_MAIN_END();
}
