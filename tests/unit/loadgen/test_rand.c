/* loadgen/rand.c: Zipf and weighted sampling match their distributions. */
#include "he_test.h"
#include "loadgen/rand.c"

static double chi2(const he_lg_pick_t *p, he_lg_rng_t *r, int draws)
{
    uint64_t cnt[64] = {0};
    for (int i = 0; i < draws; i++)
        cnt[he_lg_pick_sample(p, r)]++;
    double x = 0;
    for (size_t i = 0; i < p->n; i++) {
        double e = he_lg_pick_prob(p, i) * draws;
        if (e > 0)
            x += ((double)cnt[i] - e) * ((double)cnt[i] - e) / e;
        else if (cnt[i])
            x += 1e9; /* a zero-weight item was drawn */
    }
    return x;
}

int main(void)
{
    he_lg_rng_t r;
    he_lg_rng_seed(&r, 42);
    for (int i = 0; i < 1000; i++) {
        double u = he_lg_rng_double(&r);
        HE_CHECK(u >= 0 && u < 1);
    }

    he_lg_pick_t p;
    /* Zipf s=1 over 10: p(k) = (1/k) / H_10 */
    HE_CHECK_INT(he_lg_pick_init_zipf(&p, 10, 1.0), 0);
    double h10 = 0;
    for (int k = 1; k <= 10; k++)
        h10 += 1.0 / k;
    HE_CHECK(fabs(he_lg_pick_prob(&p, 0) - 1.0 / h10) < 1e-12);
    HE_CHECK(fabs(he_lg_pick_prob(&p, 9) - 0.1 / h10) < 1e-12);
    /* chi-square with 9 degrees of freedom: 99.9% quantile is 27.9 */
    HE_CHECK(chi2(&p, &r, 200000) < 27.9);
    he_lg_pick_free(&p);

    /* s=0 is uniform */
    HE_CHECK_INT(he_lg_pick_init_zipf(&p, 4, 0), 0);
    for (int i = 0; i < 4; i++)
        HE_CHECK(fabs(he_lg_pick_prob(&p, (size_t)i) - 0.25) < 1e-12);
    HE_CHECK(chi2(&p, &r, 100000) < 16.3);
    he_lg_pick_free(&p);

    /* steep Zipf s=2 over 50 */
    HE_CHECK_INT(he_lg_pick_init_zipf(&p, 50, 2.0), 0);
    HE_CHECK(fabs(he_lg_pick_prob(&p, 0) / he_lg_pick_prob(&p, 1) - 4.0) < 1e-9);
    he_lg_pick_free(&p);

    /* weights, with a zero that must never be drawn */
    const double w[] = {1, 0, 3, 6};
    HE_CHECK_INT(he_lg_pick_init_weights(&p, w, 4), 0);
    HE_CHECK(fabs(he_lg_pick_prob(&p, 2) - 0.3) < 1e-12);
    HE_CHECK(chi2(&p, &r, 100000) < 16.3);
    he_lg_pick_free(&p);

    /* bad inputs */
    const double zero[] = {0, 0}, neg[] = {1, -1};
    HE_CHECK_INT(he_lg_pick_init_weights(&p, zero, 2), -EINVAL);
    HE_CHECK_INT(he_lg_pick_init_weights(&p, neg, 2), -EINVAL);
    HE_CHECK_INT(he_lg_pick_init_zipf(&p, 0, 1), -EINVAL);
    HE_CHECK_INT(he_lg_pick_init_zipf(&p, 3, -1), -EINVAL);
    HE_TEST_MAIN_END();
}
