/* loadgen/urls.c: the URL-list client as the engine drives it, through
 * he_lg_urls_ops only. */
#include "he_test.h"
#include "loadgen/rand.c"
#include "loadgen/urls.c"
#include "loadgen/audience.c"
#include "lg_client_fake.h"

int main(void)
{
    char *urls[] = {"http://a/x", "http://a/y", "http://a/z"};
    const he_lg_client_ops_t *ops = &he_lg_urls_ops;
    lg_fake_t f;
    lg_fake_init(&f, urls, 3, HE_LG_MODE_URLS);
    static int ep[] = {4, 5, 6};
    static char *tg[] = {"/x", "/y", "/z"};
    f.run.url_ep = ep;
    f.run.url_target = tg;

    HE_CHECK(lg_ops_complete(ops));
    HE_CHECK_STR(ops->noun, "connections");
    HE_CHECK(!ops->stagger);

    /* round robin from the slot's own offset (slot 0, thread 0: the first) */
    ops->start(&f.v);
    HE_CHECK_INT(f.requests, 1);
    HE_CHECK_STR(f.target, "/x");
    HE_CHECK_INT(f.ep, 4);
    HE_CHECK(!f.want_body);

    /* a response, even a 404, is followed at once by the next URL */
    he_lg_result_t r = {.err = HE_LG_ERR_STATUS, .status = 404, .total_ns = 5000};
    ops->on_result(&f.v, &r);
    HE_CHECK_INT(f.requests, 2);
    HE_CHECK_STR(f.target, "/y");
    HE_CHECK_INT(f.th.stats.download_us.count, 1);

    /* a failed connect pauses on the timer; the timer sends the next one */
    he_lg_result_t fail = {.err = HE_LG_ERR_CONNECT};
    ops->on_result(&f.v, &fail);
    HE_CHECK_INT(f.requests, 2);
    HE_CHECK_INT(f.timers, 1);
    HE_CHECK(f.timer_at > f.th.now);
    ops->on_timer(&f.v);
    HE_CHECK_INT(f.requests, 3);
    HE_CHECK_STR(f.target, "/z");

    /* the budget runs out: the client finishes itself, once */
    f.budget = false;
    ops->on_result(&f.v, &r);
    HE_CHECK_INT(f.requests, 3);
    HE_CHECK_INT(f.v.stage, HE_LG_V_DONE);
    HE_CHECK_INT(f.th.stats.active, 0);
    ops->finish(&f.v); /* the engine's end-of-thread call */
    HE_CHECK_INT(f.th.stats.active, 0);
    ops->on_result(&f.v, &r); /* a late result is ignored */
    ops->on_timer(&f.v);
    HE_CHECK_INT(f.requests, 3);
    if (ops->free) ops->free(&f.v);
    lg_fake_free(&f);

    /* --popularity given (here uniform): each request is drawn, so over
     * many requests every URL comes up, in no fixed turn */
    lg_fake_init(&f, urls, 3, HE_LG_MODE_URLS);
    f.run.url_ep = ep;
    f.run.url_target = tg;
    f.cfg.popularity_set = true;
    int seen[3] = {0, 0, 0}, in_turn = 0;
    ops->start(&f.v);
    for (int i = 0; i < 3000; i++) {
        int prev = f.target[1] - 'x';
        seen[prev]++;
        ops->on_result(&f.v, &r);
        if (f.target[1] - 'x' == (prev + 1) % 3) in_turn++;
    }
    for (int i = 0; i < 3; i++)
        HE_CHECK(seen[i] > 800 && seen[i] < 1200);
    HE_CHECK(in_turn < 1300); /* a walk would be in turn 3000 times, draws about 1000 */
    if (ops->free) ops->free(&f.v);
    lg_fake_free(&f);
    HE_TEST_MAIN_END();
}
