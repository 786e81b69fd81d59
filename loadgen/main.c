/* hlsedge-loadgen: HLS-aware load generator. See lg.h for the layout. */
#include "loadgen/engine.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static int he_lg_main_once(const he_lg_config_t *cfg, unsigned clients, he_lg_stats_t *st,
                           double *elapsed, size_t *mism)
{
    if (he_lg_stats_init(st) < 0) return -ENOMEM;
    int rc = he_lg_run(cfg, clients, st, elapsed, mism);
    if (rc < 0) fprintf(stderr, "hlsedge-loadgen: run failed: %s\n", strerror(-rc));
    return rc;
}

static int he_lg_main_sweep(const he_lg_config_t *cfg)
{
    size_t cap = (cfg->sweep_end - cfg->sweep_start) / cfg->sweep_step + 1, n = 0;
    he_lg_sweep_point_t *pts = calloc(cap, sizeof(*pts));
    uint64_t errors = 0;
    if (!pts) return 1;
    for (unsigned c = cfg->sweep_start; c <= cfg->sweep_end && n < cap; c += cfg->sweep_step) {
        he_lg_stats_t st;
        double el = 0;
        size_t mism = 0;
        int rc = he_lg_main_once(cfg, c, &st, &el, &mism);
        if (rc < 0) {
            he_lg_stats_free(&st);
            free(pts);
            return 1;
        }
        he_lg_sweep_point_t *p = &pts[n++];
        p->clients = c;
        p->gbps = (double)st.bytes * 8 / (el > 0 ? el : 1) / 1e9;
        p->rps = (double)st.requests / (el > 0 ? el : 1);
        const he_lg_hist_t *h = cfg->sla_metric == HE_LG_SLA_TTFB ? &st.ttfb_us : &st.download_us;
        p->p99_ms = (double)he_lg_hist_percentile(h, 99) / 1000.0;
        p->errors = st.errors;
        errors += st.errors;
        if (!cfg->quiet)
            fprintf(stderr,
                    "sweep: %u clients: %.3f Gbit/s, %.1f req/s, p99 %.3f ms, %llu errors\n", c,
                    p->gbps, p->rps, p->p99_ms, (unsigned long long)p->errors);
        he_lg_stats_free(&st);
        if (c > cfg->sweep_end - cfg->sweep_step) break; /* no overflow past END */
    }
    he_lg_report_sweep(stdout, cfg, pts, n, he_lg_sweep_best(pts, n, cfg->sla_ms));
    free(pts);
    return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
    he_lg_config_t cfg;
    char err[512];
    int rc = he_lg_args_parse(argc, argv, &cfg, err, sizeof(err), stdout);
    if (rc == 1) {
        he_lg_args_free(&cfg);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "hlsedge-loadgen: %s\nTry 'hlsedge-loadgen --help' for the options.\n",
                rc == -ENOMEM ? "out of memory" : err);
        he_lg_args_free(&cfg);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = he_lg_run_interrupt;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int status;
    if (cfg.sweep) {
        status = he_lg_main_sweep(&cfg);
    } else {
        unsigned clients = cfg.mode == HE_LG_MODE_HLS ? cfg.viewers : cfg.connections;
        he_lg_stats_t st;
        double el = 0;
        size_t mism = 0;
        rc = he_lg_main_once(&cfg, clients, &st, &el, &mism);
        if (rc < 0) {
            status = 1;
        } else {
            he_lg_summary_t sum = {.cfg = &cfg,
                                   .clients = clients,
                                   .threads = cfg.threads < clients ? cfg.threads : clients,
                                   .elapsed_s = el,
                                   .s = &st,
                                   .verify_mismatches = mism};
            if (cfg.json) {
                he_lg_report_json(stdout, &sum);
                fputc('\n', stdout);
            } else {
                he_lg_report_text(stdout, &sum);
            }
            status = st.errors || mism ? 1 : 0;
        }
        he_lg_stats_free(&st);
    }
    he_lg_endpoints_reset();
    he_lg_args_free(&cfg);
    return status;
}
