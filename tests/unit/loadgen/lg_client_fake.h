/* A fake engine for the client kinds' unit tests: one thread with one slot,
 * and the engine calls a kind makes (take a request, start one on the
 * connection, arm the timer) recorded instead of reaching a ring. The test
 * includes the kind's .c and what it uses before this header. */
#ifndef HE_LG_CLIENT_FAKE_H
#define HE_LG_CLIENT_FAKE_H

#include "loadgen/hist.c"
#include "loadgen/report.c"

typedef struct lg_fake {
    he_lg_config_t cfg;
    he_lg_run_t run;
    he_lg_thread_t th;
    he_lg_conn_t conn;
    he_lg_viewer_t v;
    bool budget; /* what he_lg_take_request answers */
    int requests, timers, aborts;
    char target[HE_LG_URL_MAX];
    int ep;
    bool want_body;
    uint64_t timer_at;
} lg_fake_t;

static lg_fake_t *lg_fake;

bool he_lg_take_request(he_lg_thread_t *th)
{
    (void)th;
    return lg_fake->budget;
}

int he_lg_conn_request(he_lg_conn_t *c, int ep, const char *target, int64_t range_off,
                       int64_t range_len, bool want_body, uint64_t key)
{
    (void)c, (void)range_off, (void)range_len, (void)key;
    lg_fake->requests++;
    lg_fake->ep = ep;
    lg_fake->want_body = want_body;
    snprintf(lg_fake->target, sizeof(lg_fake->target), "%s", target);
    return 0;
}

void he_lg_conn_abort(he_lg_conn_t *c)
{
    (void)c;
    lg_fake->aborts++;
}

void he_lg_timer_arm(he_lg_viewer_t *v, uint64_t at_ns)
{
    v->timer_armed = true;
    lg_fake->timers++;
    lg_fake->timer_at = at_ns;
}

/* A fresh slot as the engine hands it over: zeroed, conn set, counted active. */
static void lg_fake_init(lg_fake_t *f, char **urls, size_t nurls, he_lg_mode_t mode)
{
    memset(f, 0, sizeof(*f));
    lg_fake = f;
    f->cfg.mode = mode;
    f->cfg.urls = urls;
    f->cfg.nurls = nurls;
    f->cfg.pace = HE_LG_PACE_LINERATE;
    f->cfg.buffer_s = 30;
    f->run.cfg = &f->cfg;
    f->th.run = &f->run;
    f->th.cfg = &f->cfg;
    f->th.n = 1;
    f->th.now = 1000000000ull;
    f->th.viewers = &f->v;
    f->th.conns = &f->conn;
    f->conn.th = &f->th;
    f->conn.fd = -1;
    f->conn.ep = -1;
    f->v.conn = &f->conn;
    f->budget = true;
    he_lg_rng_seed(&f->th.rng, 1);
    if (he_lg_stats_init(&f->th.stats) < 0 || he_lg_pick_init_zipf(&f->run.pop, nurls, 0) < 0)
        abort();
    f->th.stats.active = 1;
}

static void lg_fake_free(lg_fake_t *f)
{
    he_lg_stats_free(&f->th.stats);
    he_lg_pick_free(&f->run.pop);
}

/* The entries the engine calls without checking. */
static bool lg_ops_complete(const he_lg_client_ops_t *ops)
{
    return ops->noun && ops->start && ops->on_result && ops->on_timer && ops->finish;
}

#endif
