/* loadgen/audience.c: when clients join and leave. --ramp spreads the
 * first joins evenly over its duration across all threads' slots;
 * without it many viewers are staggered over a second and few start at
 * once; --churn draws exponential sessions (mean MEAN) and gaps (mean
 * MEAN / clients); a leaving client closes its connection and leaves the
 * active count, and a slot that never joined settles nothing at the end. */
#include "he_test.h"
#include "loadgen/rand.c"
#include "loadgen/urls.c"
#include "loadgen/audience.c"
#include "lg_client_fake.h"

#include <math.h>

static int ep[] = {0};
static char *tg[] = {"/x"};

static void fake(lg_fake_t *f, char **urls, const he_lg_client_ops_t *ops, unsigned clients,
                 unsigned nthreads)
{
    lg_fake_init(f, urls, 1, HE_LG_MODE_URLS);
    f->run.ops = ops;
    f->run.clients = clients;
    f->run.nthreads = nthreads;
    f->run.url_ep = ep;
    f->run.url_target = tg;
    f->th.stats.active = 0; /* counted when it joins */
    f->run.start_ns = f->th.now;
}

int main(void)
{
    char *urls[] = {"http://a/x"};
    lg_fake_t f;
    HE_CHECK(lg_ops_complete(&he_lg_urls_ops));

    /* --ramp 10s over 100 clients in 2 threads: thread 1's slot 7 is
     * client 15 of 100, so it joins at 1.5 s */
    fake(&f, urls, &he_lg_urls_ops, 100, 2);
    f.th.id = 1;
    f.th.stats.active = 0;
    f.cfg.ramp_s = 10;
    he_lg_audience_start(&f.v, 7);
    HE_CHECK(f.v.joining);
    HE_CHECK_INT(f.requests, 0);
    HE_CHECK_INT(f.timer_at, f.th.now + 1500000000ull);
    HE_CHECK_INT(f.th.stats.active, 0);
    /* the end of the run before it joined: nothing to settle */
    he_lg_audience_finish(&f.v);
    HE_CHECK_INT(f.v.stage, HE_LG_V_DONE);
    HE_CHECK_INT(f.th.stats.active, 0);
    lg_fake_free(&f);

    /* slot 0 of thread 0 joins at once; its timer is not the audience's */
    fake(&f, urls, &he_lg_urls_ops, 100, 2);
    f.cfg.ramp_s = 10;
    he_lg_audience_start(&f.v, 0);
    HE_CHECK(!f.v.joining);
    HE_CHECK_INT(f.requests, 1);
    HE_CHECK_INT(f.th.stats.joins, 1);
    HE_CHECK_INT(f.th.stats.active, 1);
    HE_CHECK_INT(f.th.stats.joins_per_s[0], 1);
    HE_CHECK(!he_lg_audience_on_timer(&f.v));
    lg_fake_free(&f);

    /* --churn 10s: the mean of many sessions is about 10 s, of many gaps
     * about 10 s / clients; a session that is over ends at the next request */
    fake(&f, urls, &he_lg_urls_ops, 4, 1);
    f.cfg.churn_s = 10;
    double sum = 0;
    for (int i = 0; i < 20000; i++)
        sum += (double)he_lg_audience_exp_ns(&f.th, 10) / 1e9;
    HE_CHECK(fabs(sum / 20000 - 10) < 0.5);
    he_lg_audience_start(&f.v, 0);
    HE_CHECK(f.v.leave_ns > f.th.now);
    uint64_t leave = f.v.leave_ns;
    f.th.now = leave - 1;
    HE_CHECK(!he_lg_audience_leave_due(&f.v));
    f.th.now = leave;
    HE_CHECK(he_lg_audience_leave_due(&f.v));
    HE_CHECK(f.v.away);
    HE_CHECK_INT(f.aborts, 1);
    HE_CHECK_INT(f.th.stats.leaves, 1);
    HE_CHECK_INT(f.th.stats.active, 0);
    HE_CHECK(f.timer_at >= f.th.now);
    /* the gap's end: a new client joins on the slot */
    int reqs = f.requests;
    HE_CHECK(he_lg_audience_on_timer(&f.v));
    HE_CHECK_INT(f.th.stats.joins, 2);
    HE_CHECK_INT(f.th.stats.active, 1);
    HE_CHECK_INT(f.requests, reqs + 1);
    lg_fake_free(&f);

    /* without --ramp: a kind that staggers spreads many clients over a
     * second (slot 100 of 200 at 0.5 s); URL-list connections start at once */
    he_lg_client_ops_t staggered = he_lg_urls_ops;
    staggered.stagger = true;
    fake(&f, urls, &staggered, 200, 1);
    f.th.n = 200;
    he_lg_audience_start(&f.v, 100);
    HE_CHECK(f.v.joining);
    HE_CHECK_INT(f.timer_at, f.th.now + 500000000ull);
    f.run.ops = &he_lg_urls_ops;
    f.v.joining = false;
    he_lg_audience_start(&f.v, 100);
    HE_CHECK(!f.v.joining);
    HE_CHECK_INT(f.requests, 1);
    lg_fake_free(&f);
    HE_TEST_MAIN_END();
}
