/* loadgen: one run: resolve the URLs, start the threads (one ring each,
 * pinned), print the live line once a second, stop them, sum what they saw. */
#include "loadgen/engine.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t he_lg_interrupted;

void he_lg_run_interrupt(int sig)
{
    (void)sig;
    he_lg_interrupted = 1;
}

static void he_lg_run_live_line(const he_lg_run_t *run, uint64_t now, uint64_t *last_bytes,
                                uint64_t *last_reqs, uint64_t *last_ns)
{
    uint64_t bytes = 0, reqs = 0, active = 0, stalls = 0, errors = 0;
    for (unsigned i = 0; i < run->nthreads; i++) {
        const he_lg_stats_t *s = &run->threads[i].stats;
        bytes += HE_LG_STAT_GET(s->bytes);
        reqs += HE_LG_STAT_GET(s->requests);
        active += HE_LG_STAT_GET(s->active);
        stalls += HE_LG_STAT_GET(s->stalls);
        errors += HE_LG_STAT_GET(s->errors);
    }
    double dt = (double)(now - *last_ns) / 1e9;
    if (dt <= 0) dt = 1;
    fprintf(stderr, "[%6.1fs] %8.3f Gbit/s %10.0f req/s  %s %llu  stalls %llu  errors %llu\n",
            (double)(now - run->start_ns) / 1e9, (double)(bytes - *last_bytes) * 8 / dt / 1e9,
            (double)(reqs - *last_reqs) / dt, run->ops->noun, (unsigned long long)active,
            (unsigned long long)stalls, (unsigned long long)errors);
    *last_bytes = bytes;
    *last_reqs = reqs;
    *last_ns = now;
}

static int he_lg_run_prepare(he_lg_run_t *run)
{
    const he_lg_config_t *cfg = run->cfg;
    int rc = he_lg_pick_init_zipf(&run->pop, cfg->nurls, cfg->zipf_s);
    if (rc < 0) return rc;
    run->url_ep = calloc(cfg->nurls, sizeof(*run->url_ep));
    run->url_target = calloc(cfg->nurls, sizeof(*run->url_target));
    he_lg_url_t *u = malloc(sizeof(*u));
    if (!run->url_ep || !run->url_target || !u) {
        free(u);
        return -ENOMEM;
    }
    bool tls = false;
    for (size_t i = 0; i < cfg->nurls; i++) {
        if ((rc = he_lg_url_parse(cfg->urls[i], u)) < 0) break;
        if ((rc = he_lg_endpoint_get(u->host, u->port, u->tls)) < 0) {
            fprintf(stderr, "hlsedge-loadgen: cannot resolve '%s'\n", u->host);
            break;
        }
        run->url_ep[i] = rc;
        tls |= u->tls;
        if (!(run->url_target[i] = strdup(u->target))) {
            rc = -ENOMEM;
            break;
        }
        rc = 0;
    }
    free(u);
    if (rc < 0) return rc;
    /* playlists may point at https even when the master is plain */
    (void)tls;
    return he_lg_tls_ctx_new(&run->ssl_ctx, cfg->insecure, cfg->http2);
}

static void he_lg_run_release(he_lg_run_t *run)
{
    if (run->threads) {
        for (unsigned i = 0; i < run->nthreads; i++) {
            he_lg_thread_t *th = &run->threads[i];
            free(th->conns);
            free(th->viewers);
            he_lg_stats_free(&th->stats);
            he_lg_vmap_free(&th->vmap);
        }
        free(run->threads);
    }
    if (run->url_target)
        for (size_t i = 0; i < run->cfg->nurls; i++)
            free(run->url_target[i]);
    free(run->url_target);
    free(run->url_ep);
    he_lg_pick_free(&run->pop);
    if (run->ssl_ctx) he_lg_tls_ctx_free(run->ssl_ctx);
}

int he_lg_run(const he_lg_config_t *cfg, unsigned clients, he_lg_stats_t *out, double *elapsed_s,
              size_t *verify_mismatches)
{
    he_lg_run_t run;
    memset(&run, 0, sizeof(run));
    run.cfg = cfg;
    /* the one place the client kind is chosen; args.c resolved auto */
    run.ops = cfg->mode == HE_LG_MODE_HLS ? &he_lg_viewer_ops : &he_lg_urls_ops;
    run.clients = clients;
    int rc = he_lg_run_prepare(&run);
    if (rc < 0) goto done;

    run.nthreads = cfg->threads < clients ? cfg->threads : clients;
    run.threads = calloc(run.nthreads, sizeof(*run.threads));
    if (!run.threads) {
        rc = -ENOMEM;
        goto done;
    }
    for (unsigned i = 0; i < run.nthreads; i++) {
        he_lg_thread_t *th = &run.threads[i];
        th->run = &run;
        th->cfg = cfg;
        th->id = i;
        th->cpu = cfg->ncpus ? cfg->cpus[i % cfg->ncpus] : -1;
        th->n = clients / run.nthreads + (i < clients % run.nthreads);
        th->conns = calloc(th->n, sizeof(*th->conns));
        th->viewers = calloc(th->n, sizeof(*th->viewers));
        he_lg_rng_seed(&th->rng, cfg->seed * 0x100000001b3ull + i + 1);
        if (!th->conns || !th->viewers || he_lg_stats_init(&th->stats) < 0) {
            rc = -ENOMEM;
            goto done;
        }
    }

    run.start_ns = he_lg_now_ns();
    run.end_ns = cfg->duration_s > 0 ? run.start_ns + (uint64_t)(cfg->duration_s * 1e9) : 0;
    unsigned started = 0;
    for (; started < run.nthreads; started++) {
        if ((rc = -pthread_create(&run.threads[started].tid, NULL, he_lg_thread_main,
                                  &run.threads[started])) < 0) {
            __atomic_store_n(&run.stop, 1, __ATOMIC_RELAXED);
            break;
        }
    }

    bool *joined = calloc(run.nthreads, sizeof(*joined));
    unsigned left = started;
    uint64_t last_bytes = 0, last_reqs = 0, last_ns = run.start_ns,
             next_line = run.start_ns + 1000000000ull;
    while (left) {
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
        if (he_lg_interrupted) __atomic_store_n(&run.stop, 1, __ATOMIC_RELAXED);
        for (unsigned i = 0; i < started; i++) {
            if (joined && !joined[i] && pthread_tryjoin_np(run.threads[i].tid, NULL) == 0) {
                joined[i] = true;
                left--;
            }
        }
        uint64_t now = he_lg_now_ns();
        if (now >= next_line && left) {
            if (!cfg->quiet) he_lg_run_live_line(&run, now, &last_bytes, &last_reqs, &last_ns);
            next_line += 1000000000ull;
        }
        if (!joined) break;
    }
    if (!joined)
        for (unsigned i = 0; i < started; i++)
            pthread_join(run.threads[i].tid, NULL);
    free(joined);
    *elapsed_s = (double)(he_lg_now_ns() - run.start_ns) / 1e9;

    he_lg_vmap_t vm = {0};
    size_t bad = 0;
    for (unsigned i = 0; i < run.nthreads; i++) {
        he_lg_thread_t *th = &run.threads[i];
        if (th->rc < 0 && rc >= 0) rc = th->rc;
        he_lg_stats_merge(out, &th->stats);
        bad += he_lg_vmap_merge(&vm, &th->vmap);
    }
    *verify_mismatches = he_lg_vmap_mismatches(&vm);
    (void)bad;
    he_lg_vmap_free(&vm);
done:
    he_lg_run_release(&run);
    return rc;
}
