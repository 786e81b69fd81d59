/* loadgen: when clients join and leave, for every client kind.
 *
 * Real audiences do not press play in the same millisecond and then watch
 * for ever in lockstep. --ramp DURATION spreads the first joins evenly over
 * DURATION (client g of n joins at g/n of it). --churn MEAN_SESSION gives
 * every session an exponential length with that mean; a client that leaves
 * closes its connection and its slot is taken by a new one after an
 * exponential gap of mean MEAN_SESSION / n, so the audience stays near n
 * (n - 1 on average) while joins and leaves across the slots form a
 * Poisson process of rate about n / MEAN_SESSION.
 *
 * The engine calls he_lg_audience_start for each slot at the start, routes
 * a slot's timer here while it is joining or away, and asks
 * he_lg_audience_leave_due between a client's requests. Joins and requests
 * are also counted per second of the run for the report. */
#include "loadgen/engine.h"

#include <math.h>

/* An exponential variate with this mean, in ns. */
static uint64_t he_lg_audience_exp_ns(he_lg_thread_t *th, double mean_s)
{
    double u = he_lg_rng_double(&th->rng); /* [0, 1) */
    return (uint64_t)(-log1p(-u) * mean_s * 1e9);
}

static unsigned he_lg_audience_second(const he_lg_thread_t *th)
{
    uint64_t el = th->now > th->run->start_ns ? th->now - th->run->start_ns : 0;
    uint64_t s = el / 1000000000ull;
    return s < HE_LG_SECONDS ? (unsigned)s : HE_LG_SECONDS - 1;
}

void he_lg_audience_count_request(he_lg_thread_t *th)
{
    th->stats.requests_per_s[he_lg_audience_second(th)]++;
}

static void he_lg_audience_join(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = v->conn->th;
    he_lg_stats_t *s = &th->stats;
    uint64_t at = th->now - th->run->start_ns;
    v->joining = v->away = false;
    s->joins++;
    if (s->joins == 1 || at < s->first_join_ns) s->first_join_ns = at;
    if (at > s->last_join_ns) s->last_join_ns = at;
    s->joins_per_s[he_lg_audience_second(th)]++;
    HE_LG_STAT_ADD(s->active, 1);
    v->leave_ns = th->cfg->churn_s > 0 ? th->now + he_lg_audience_exp_ns(th, th->cfg->churn_s) : 0;
    th->run->ops->start(v);
}

void he_lg_audience_start(he_lg_viewer_t *v, unsigned i)
{
    he_lg_thread_t *th = v->conn->th;
    const he_lg_run_t *run = th->run;
    uint64_t at = 0;
    if (th->cfg->ramp_s > 0) {
        /* the slot's place among all clients of all threads */
        uint64_t g = (uint64_t)i * run->nthreads + th->id;
        at = (uint64_t)(th->cfg->ramp_s * 1e9 * (double)g / (double)run->clients);
    } else if (run->ops->stagger && th->n > 64) {
        /* players do not all press play in the same millisecond: spread
         * the starts of many viewers over up to a second */
        at = 1000000000ull * i / th->n;
    }
    if (at == 0) {
        he_lg_audience_join(v);
        return;
    }
    v->joining = true;
    he_lg_timer_arm(v, th->now + at);
}

bool he_lg_audience_on_timer(he_lg_viewer_t *v)
{
    if (!v->joining && !v->away) return false;
    he_lg_audience_join(v);
    return true;
}

bool he_lg_audience_leave_due(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = v->conn->th;
    if (!v->leave_ns || th->now < v->leave_ns || th->stopping || v->stage == HE_LG_V_DONE)
        return false;
    if (th->run->ops->leave) th->run->ops->leave(v);
    he_lg_conn_abort(v->conn); /* a new viewer comes with a new connection */
    th->stats.leaves++;
    HE_LG_STAT_ADD(th->stats.active, (uint64_t)-1);
    v->leave_ns = 0;
    v->away = true;
    v->stage = HE_LG_V_IDLE;
    he_lg_timer_arm(v, th->now + he_lg_audience_exp_ns(th, th->cfg->churn_s / th->run->clients));
    return true;
}

void he_lg_audience_finish(he_lg_viewer_t *v)
{
    if (v->joining || v->away) {
        v->stage = HE_LG_V_DONE; /* not in the audience: nothing to settle */
        return;
    }
    v->conn->th->run->ops->finish(v);
}
