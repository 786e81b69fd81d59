/* loadgen/sweep.c: parsing START:END:STEP and choosing the best point. */
#include "he_test.h"
#include "loadgen/sweep.c"

int main(void)
{
    unsigned a, b, c;
    HE_CHECK_INT(he_lg_sweep_parse("100:500:100", &a, &b, &c), 0);
    HE_CHECK_INT(a, 100);
    HE_CHECK_INT(b, 500);
    HE_CHECK_INT(c, 100);
    HE_CHECK_INT(he_lg_sweep_parse("10:20", &a, &b, &c), 0);
    HE_CHECK_INT(c, 10);
    HE_CHECK_INT(he_lg_sweep_parse("7:7:1", &a, &b, &c), 0);
    const char *bad[] = {"",      "100",    "100:",  ":5:1",       "5:4:1", "0:5:1",
                         "1:5:0", "1:5:1:", "a:b:c", "1:100000:1", "1:5:-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        HE_CHECK_INT(he_lg_sweep_parse(bad[i], &a, &b, &c), -EINVAL);

    he_lg_sweep_point_t pts[] = {
        {100, 10.0, 1000, 5.0, 0},  {200, 18.0, 1800, 9.0, 0},
        {300, 22.0, 2200, 12.0, 0}, /* over the SLA */
        {400, 21.0, 2100, 9.5, 3},  /* errors disqualify */
        {500, 18.0, 1900, 8.0, 0},  /* ties 200 on Gbit/s, more req/s */
    };
    HE_CHECK_INT(he_lg_sweep_best(pts, 5, 10.0), 4);
    HE_CHECK_INT(he_lg_sweep_best(pts, 5, 12.0), 2);
    HE_CHECK_INT(he_lg_sweep_best(pts, 5, 4.0), -1);
    HE_CHECK_INT(he_lg_sweep_best(pts, 2, 9.0), 1); /* the limit is inclusive */
    HE_CHECK_INT(he_lg_sweep_best(pts, 0, 9.0), -1);
    HE_TEST_MAIN_END();
}
