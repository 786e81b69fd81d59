/* loadgen: URL-list mode, as wrk does it: each connection requests the
 * URLs one after another (round robin from its own offset, or each drawn
 * by --popularity) as fast as responses come back, over keep-alive. A walk
 * in turn lets the mix of responses a run completes follow the server's
 * pace over the list; draws give every server the same mix. */
#include "loadgen/engine.h"

#define HE_LG_URLS_ERR_PAUSE_NS 10000000ull /* after a failed connect */

/* No player to settle: the connection only leaves the active count. */
static void he_lg_urls_finish(he_lg_viewer_t *v)
{
    if (v->stage == HE_LG_V_DONE) return;
    v->stage = HE_LG_V_DONE;
    HE_LG_STAT_ADD(v->conn->th->stats.active, (uint64_t)-1);
}

static void he_lg_urls_issue(he_lg_viewer_t *v)
{
    he_lg_thread_t *th = v->conn->th;
    const he_lg_run_t *run = th->run;
    if (he_lg_audience_leave_due(v)) return; /* --churn */
    if (!he_lg_take_request(th)) {
        he_lg_urls_finish(v);
        return;
    }
    size_t n = th->cfg->nurls, i;
    if (th->cfg->popularity_set)
        i = he_lg_pick_sample(&run->pop, &th->rng);
    else
        i = (size_t)(v->urls_next++ % n);
    v->stage = HE_LG_V_SEGMENT;
    v->url = (int)i;
    if (he_lg_conn_request(v->conn, run->url_ep[i], run->url_target[i], 0, -1, false,
                           (uint64_t)i + 1) < 0) {
        th->stats.err[HE_LG_ERR_OTHER]++;
        HE_LG_STAT_ADD(th->stats.errors, 1);
        he_lg_timer_arm(v, th->now + HE_LG_URLS_ERR_PAUSE_NS);
    }
}

/* Also its on_timer: the pause after a failed request ends in the next one. */
static void he_lg_urls_start(he_lg_viewer_t *v)
{
    if (v->stage == HE_LG_V_DONE) return; /* done */
    if (!v->started) {
        v->started = true;
        v->urls_next = v->conn->slot + v->conn->th->id * 7919u;
    }
    he_lg_urls_issue(v);
}

static void he_lg_urls_on_result(he_lg_viewer_t *v, const he_lg_result_t *r)
{
    he_lg_thread_t *th = v->conn->th;
    if (v->stage == HE_LG_V_DONE) return;
    v->stage = HE_LG_V_IDLE;
    if (r->status) he_lg_hist_record(&th->stats.download_us, r->total_ns / 1000);
    if (r->err == HE_LG_ERR_CONNECT || r->err == HE_LG_ERR_TIMEOUT) {
        if (th->stopping) {
            he_lg_urls_finish(v);
            return;
        }
        he_lg_timer_arm(v, th->now + HE_LG_URLS_ERR_PAUSE_NS);
        return;
    }
    he_lg_urls_issue(v);
}

const he_lg_client_ops_t he_lg_urls_ops = {
    .noun = "connections",
    .stagger = false, /* wrk-style: every connection at once */
    .start = he_lg_urls_start,
    .on_result = he_lg_urls_on_result,
    .on_timer = he_lg_urls_start,
    .finish = he_lg_urls_finish,
    .free = NULL, /* its state is all in the slot */
};
