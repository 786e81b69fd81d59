/* The control thread's loop: start-up, signals, the 100 ms tick (access
 * log, reload progress, shutdown), the 1 s stats sampler and the admin
 * routes. See control.h. */
#include "server/control/control.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/control/dashboard.h"
#include "server/base/log.h"
#include "server/control/metrics.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t he_control_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

he_gen_t *he__control_serving(he_control_t *ctl)
{
    return ctl->ngens ? &ctl->gens[ctl->ngens - 1] : NULL;
}

int he__control_keep_conf(he_control_t *ctl, he_conf_t *conf)
{
    if (ctl->nconfs == ctl->confs_cap) {
        unsigned cap = ctl->confs_cap ? ctl->confs_cap * 2 : 8;
        he_conf_t **n = realloc(ctl->confs, sizeof(*n) * cap);
        if (!n) return -ENOMEM;
        ctl->confs = n;
        ctl->confs_cap = cap;
    }
    ctl->confs[ctl->nconfs++] = conf;
    return 0;
}

static int he_control_grow_ids(he_control_t *ctl, unsigned n)
{
    unsigned old = ctl->nids;
#define HE_GROW(field)                                                                             \
    do {                                                                                           \
        void *p = realloc(ctl->field, sizeof(*ctl->field) * n);                                    \
        if (!p) return -ENOMEM;                                                                    \
        ctl->field = p;                                                                            \
        memset(ctl->field + old, 0, sizeof(*ctl->field) * (n - old));                              \
    } while (0)
    if (n <= old) return 0;
    HE_GROW(base);
    HE_GROW(base_cpu_s);
    HE_GROW(prev_req);
    HE_GROW(prev_bytes);
    HE_GROW(prev_cpu_s);
    HE_GROW(rps);
    HE_GROW(gbps);
    HE_GROW(cpu_pct);
#undef HE_GROW
    ctl->nids = n;
    return 0;
}

int he__control_add_gen(he_control_t *ctl, he_server_t *s)
{
    he_gen_t *g;
    if (ctl->ngens == HE_CONTROL_MAX_GENS) return -EBUSY;
    if (he_control_grow_ids(ctl, he_server_nworkers(s)) < 0) return -ENOMEM;
    g = &ctl->gens[ctl->ngens];
    memset(g, 0, sizeof(*g));
    g->cpu_s = calloc(he_server_nworkers(s), sizeof(double));
    if (!g->cpu_s) return -ENOMEM;
    g->server = s;
    g->state = HE_GEN_SERVING;
    ctl->ngens++;
    return 0;
}

void he__control_set_alog_enabled(he_control_t *ctl)
{
    for (unsigned i = 0; i < ctl->ngens; i++)
        he_server_set_alog_enabled(ctl->gens[i].server, ctl->alog.fd >= 0);
}

void he__control_drain_logs(he_control_t *ctl)
{
    he_alog_ring_t *small[64] = {0}, **rings = small;
    unsigned n = 0, cap = 0;
    size_t count;

    for (unsigned i = 0; i < ctl->ngens; i++)
        cap += he_server_nworkers(ctl->gens[i].server);
    if (cap > 64 && !(rings = malloc(sizeof(*rings) * cap))) return;
    for (unsigned i = 0; i < ctl->ngens; i++) {
        he_server_t *s = ctl->gens[i].server;
        for (unsigned k = 0; k < he_server_nworkers(s); k++)
            rings[n++] = he_server_alog_ring(s, k);
    }
    count = he_alog_drain_many(&ctl->alog, rings, n);
    if (count) he_alog_flush(&ctl->alog);
    if (rings != small) free(rings);
}

/* utime + stime of a /proc stat file, in seconds; -1 when unreadable. */
static double he_control_proc_cpu(const char *path)
{
    char buf[1024], *p;
    unsigned long long ut, st;
    FILE *f = fopen(path, "re");
    size_t n;

    if (!f) return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double he_control_now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t he_control_requests(const he_stats_t *st)
{
    uint64_t n = 0;
    for (int m = 0; m < HE_STATS_METHOD_COUNT; m++)
        n += st->requests[m];
    return n;
}

/* ---------------------------------------------------------------- sampling */

/* One point of the dashboard's history from the last two samples. */
static void he_control_history_add(he_control_t *ctl, uint64_t active, const uint64_t *status)
{
    const he_sample_t *b = &ctl->samples[(ctl->nsamples - 1) % HE_CONTROL_SAMPLES];
    const he_sample_t *a = &ctl->samples[(ctl->nsamples - 2) % HE_CONTROL_SAMPLES];
    he_hpoint_t *p = &ctl->history[ctl->nhistory % HE_CONTROL_HISTORY];
    double dt = (double)(b->t_ns - a->t_ns) / 1e9;

    memset(p, 0, sizeof(*p));
    p->t = (double)(b->t_ns - ctl->start_ns) / 1e9;
    p->active = (double)active;
    if (dt > 0) {
        p->rps = (double)(b->requests - a->requests) / dt;
        p->gbps = (double)(b->bytes - a->bytes) * 8 / 1e9 / dt;
        for (int c = 1; c <= 5; c++)
            p->status_rps[c - 1] = status[c] >= ctl->prev_status[c]
                                       ? (double)(status[c] - ctl->prev_status[c]) / dt
                                       : 0;
    }
    he_metrics_hist_delta(&ctl->scratch, &b->total, &a->total);
    p->p99_ms = (double)he_hist_quantile(&ctl->scratch, 0.99) / 1000;
    he_metrics_hist_delta(&ctl->scratch, &b->ttfb, &a->ttfb);
    p->p99_ttfb_ms = (double)he_hist_quantile(&ctl->scratch, 0.99) / 1000;
    memcpy(ctl->prev_status, status, sizeof(ctl->prev_status));
    ctl->nhistory++;
}

/* Every second: worker CPU times, per-worker rates, and a sample of the
 * totals for the 1 s and 10 s throughput figures. */
/* Once a minute, freed heap goes back to the kernel. glibc returns only
 * the top of each arena by itself, so a burst (a fault that fails every
 * fill at once, thousands of connections) leaves RSS at its high-water
 * mark for the process's life, and RSS stops telling an operator whether
 * memory is in use. malloc_trim takes each arena's lock in turn, for
 * microseconds: a worker's malloc may wait that long once a minute. */
#define HE_CONTROL_TRIM_SAMPLES 60

static void he_control_trim(he_control_t *ctl)
{
#ifdef __GLIBC__
    if (++ctl->trim_samples % HE_CONTROL_TRIM_SAMPLES == 0) malloc_trim(0);
#else
    (void)ctl;
#endif
}

static void he_control_on_sample(uv_timer_t *t)
{
    he_control_t *ctl = t->data;
    uint64_t now = he_control_now_ns(), tot_req = 0, tot_bytes = 0, active = 0, status[6] = {0};
    double dt = ctl->prev_t_ns ? (double)(now - ctl->prev_t_ns) / 1e9 : 0;
    char path[64];

    he_control_trim(ctl);

    for (unsigned i = 0; i < ctl->ngens; i++) {
        he_gen_t *g = &ctl->gens[i];
        for (unsigned k = 0; k < he_server_nworkers(g->server); k++) {
            he_server_worker_view_t v;
            double cpu;
            he_server_worker_view(g->server, k, &v);
            if (!v.tid || v.exited) continue;
            snprintf(path, sizeof(path), "/proc/self/task/%d/stat", v.tid);
            cpu = he_control_proc_cpu(path);
            if (cpu >= 0) g->cpu_s[k] = cpu;
        }
    }
    for (unsigned id = 0; id < ctl->nids; id++) {
        he_stats_t st;
        uint64_t req, bytes;
        double cpu = ctl->base_cpu_s[id];
        memset(&st, 0, sizeof(st));
        he_metrics_stats_add(&st, &ctl->base[id]);
        for (unsigned i = 0; i < ctl->ngens; i++) {
            he_gen_t *g = &ctl->gens[i];
            he_server_worker_view_t v;
            if (id >= he_server_nworkers(g->server)) continue;
            he_server_worker_view(g->server, id, &v);
            he_metrics_stats_add(&st, v.stats);
            cpu += g->cpu_s[id];
        }
        req = he_control_requests(&st);
        bytes = st.bytes_out;
        if (dt > 0) {
            ctl->rps[id] = (double)(req - ctl->prev_req[id]) / dt;
            ctl->gbps[id] = (double)(bytes - ctl->prev_bytes[id]) * 8 / 1e9 / dt;
            ctl->cpu_pct[id] = 100 * (cpu - ctl->prev_cpu_s[id]) / dt;
        }
        ctl->prev_req[id] = req;
        ctl->prev_bytes[id] = bytes;
        ctl->prev_cpu_s[id] = cpu;
        tot_req += req;
        tot_bytes += bytes;
        active += he_metrics_active(&st);
        for (int c = 1; c <= 5; c++)
            status[c] += st.status_class[c];
    }
    ctl->prev_t_ns = now;
    {
        he_sample_t *sm = &ctl->samples[ctl->nsamples % HE_CONTROL_SAMPLES];
        memset(sm, 0, sizeof(*sm));
        sm->t_ns = now;
        sm->bytes = tot_bytes;
        sm->requests = tot_req;
        for (unsigned id = 0; id < ctl->nids; id++) {
            he_hist_merge(&sm->ttfb, &ctl->base[id].ttfb);
            he_hist_merge(&sm->total, &ctl->base[id].total);
        }
        for (unsigned i = 0; i < ctl->ngens; i++) {
            he_server_t *srv = ctl->gens[i].server;
            for (unsigned k = 0; k < he_server_nworkers(srv); k++) {
                he_server_worker_view_t v;
                he_server_worker_view(srv, k, &v);
                he_hist_merge(&sm->ttfb, &v.stats->ttfb);
                he_hist_merge(&sm->total, &v.stats->total);
            }
        }
        ctl->nsamples++;
        if (ctl->nsamples >= 2) he_control_history_add(ctl, active, status);
    }
}

/* Rates and latency between the newest sample and the one `back` samples
 * older (or the oldest kept). */
static void he_control_rate(const he_control_t *ctl, unsigned back, double *rps, double *gbps,
                            he_hist_t *ttfb, he_hist_t *total)
{
    const he_sample_t *a, *b;
    double dt;
    *rps = *gbps = 0;
    if (ctl->nsamples < 2) return;
    if (back > ctl->nsamples - 1) back = ctl->nsamples - 1;
    b = &ctl->samples[(ctl->nsamples - 1) % HE_CONTROL_SAMPLES];
    a = &ctl->samples[(ctl->nsamples - 1 - back) % HE_CONTROL_SAMPLES];
    he_metrics_hist_delta(ttfb, &b->ttfb, &a->ttfb);
    he_metrics_hist_delta(total, &b->total, &a->total);
    dt = (double)(b->t_ns - a->t_ns) / 1e9;
    if (dt <= 0) return;
    *rps = (double)(b->requests - a->requests) / dt;
    *gbps = (double)(b->bytes - a->bytes) * 8 / 1e9 / dt;
}

static void he_control_snapshot(he_control_t *ctl, he_metrics_snap_t *s)
{
    he_gen_t *serving = he__control_serving(ctl);

    memset(s, 0, sizeof(*s));
    s->version = HE_VERSION;
    s->conf_file = ctl->conf->file;
    s->generation = ctl->conf->generation;
    s->server_generations = ctl->ngens;
    s->reloads_ok = ctl->reloads_ok;
    s->reloads_failed = ctl->reloads_failed;
    s->uptime_s = (double)(he_control_now_ns() - ctl->start_ns) / 1e9;
    s->start_time_s = ctl->start_real_s;
    s->draining = ctl->draining;
    {
        uint64_t refused[HE_ADMIN_REFUSED_COUNT];
        he_admin_refusals(refused);
        s->admin_refused_address = refused[HE_ADMIN_REFUSED_ADDRESS];
        s->admin_refused_token = refused[HE_ADMIN_REFUSED_TOKEN];
    }
    s->control_cpus = ctl->cpus_text;
    s->control_apart = ctl->cpus_apart;
    if (serving) s->features = *he_server_features(serving->server);
    if (serving)
        s->nparents = he_server_parents(serving->server, s->parents, HE_CONF_MAX_ORIGINS,
                                        &s->parent_select);
    s->process_cpu_seconds = he_control_proc_cpu("/proc/self/stat");
    if (s->process_cpu_seconds < 0) s->process_cpu_seconds = 0;
    s->workers = calloc(ctl->nids ? ctl->nids : 1, sizeof(*s->workers));
    if (s->workers) {
        s->nworkers = ctl->nids;
        for (unsigned id = 0; id < ctl->nids; id++) {
            he_metrics_worker_t *w = &s->workers[id];
            w->id = id;
            w->cpu = -1;
            he_metrics_stats_add(&w->st, &ctl->base[id]);
            w->cpu_seconds = ctl->base_cpu_s[id];
            for (unsigned i = 0; i < ctl->ngens; i++) {
                he_gen_t *g = &ctl->gens[i];
                he_server_worker_view_t v;
                if (id >= he_server_nworkers(g->server)) continue;
                he_server_worker_view(g->server, id, &v);
                he_metrics_stats_add(&w->st, v.stats);
                w->cpu_seconds += g->cpu_s[id];
                w->cpu = v.cpu;
                w->generation = v.conf_ack;
            }
            w->rps_1s = ctl->rps[id];
            w->gbps_1s = ctl->gbps[id];
            w->cpu_pct_1s = ctl->cpu_pct[id];
            he_metrics_stats_add(&s->total, &w->st);
        }
    }
    he_control_rate(ctl, 1, &s->rps_1s, &s->gbps_1s, &s->ttfb_1s, &s->total_1s);
    he_control_rate(ctl, 10, &s->rps_10s, &s->gbps_10s, &s->ttfb_10s, &s->total_10s);
    s->alog_on = ctl->alog.fd >= 0;
    s->alog_path = ctl->alog.path;
    s->alog_format = ctl->alog.format == HE_ACCESS_LOG_JSON ? "json" : "combined";
    s->alog_written = ctl->alog.written;
    s->alog_write_errors = ctl->alog.write_errors;
}

/* ---------------------------------------------------------------- admin routes */

/* A formatted body (b, which the response takes over) or, when something
 * ran out of memory on the way, a 500. */
static void he_control_reply(he_admin_resp_t *resp, he_buf_t *b, bool ok, const char *type)
{
    if (!ok) {
        he_buf_free(b);
        he_admin_resp_text(resp, 500, "out of memory\n");
        return;
    }
    resp->status = 200;
    resp->type = type;
    resp->body = b->p;
    resp->len = b->len;
}

/* A snapshot on the heap (four histograms: not for the stack), or NULL
 * with a 500 answered. */
static he_metrics_snap_t *he_control_snap_new(he_control_t *ctl, he_admin_resp_t *resp)
{
    he_metrics_snap_t *snap = malloc(sizeof(*snap));
    if (!snap) {
        he_admin_resp_text(resp, 500, "out of memory\n");
        return NULL;
    }
    he_control_snapshot(ctl, snap);
    return snap;
}

static void he_control_route_metrics(void *ctx, const he_admin_req_t *req, he_admin_resp_t *resp)
{
    he_control_t *ctl = ctx;
    he_metrics_snap_t *snap = he_control_snap_new(ctl, resp);
    he_buf_t b = {0};
    bool ok;

    if (!snap) return;
    he_metrics_prometheus(snap, &b);
    ok = snap->workers && !b.failed;
    free(snap->workers);
    free(snap);
    he_control_reply(resp, &b, ok, "text/plain; version=0.0.4; charset=utf-8");
}

#define HE_CONTROL_TLS_JSON 65536

static void he_control_route_stats(void *ctx, const he_admin_req_t *req, he_admin_resp_t *resp)
{
    he_control_t *ctl = ctx;
    char *tls = NULL;
    he_metrics_snap_t *snap = he_control_snap_new(ctl, resp);
    he_buf_t b = {0};
    bool ok;

    if (!snap) return;
    if (strstr(req->query, "history=1")) {
        /* oldest first, out of the ring */
        unsigned n = ctl->nhistory < HE_CONTROL_HISTORY ? ctl->nhistory : HE_CONTROL_HISTORY;
        he_hpoint_t *h = malloc(sizeof(*h) * (n ? n : 1));
        for (unsigned i = 0; h && i < n; i++)
            h[i] = ctl->history[(ctl->nhistory - n + i) % HE_CONTROL_HISTORY];
        snap->history = h;
        snap->nhistory = h ? n : 0;
    }
    if (he__control_serving(ctl) && (tls = malloc(HE_CONTROL_TLS_JSON))) {
        /* the process's totals: the serving generation's alone restart at 0 */
        /* a description cut short would not be JSON */
        if (he_server_tls_describe(he__control_serving(ctl)->server, &snap->total, tls,
                                   HE_CONTROL_TLS_JSON) >= 0)
            snap->tls_json = tls;
    }
    he_metrics_json(snap, &b);
    free(tls);
    ok = snap->workers && !b.failed;
    free((void *)snap->history);
    free(snap->workers);
    free(snap);
    he_control_reply(resp, &b, ok, "application/json");
}

static void he_control_route_healthz(void *ctx, const he_admin_req_t *req, he_admin_resp_t *resp)
{
    he_control_t *ctl = ctx;
    if (ctl->draining)
        he_admin_resp_text(resp, 503, "draining\n");
    else
        he_admin_resp_text(resp, 200, "ok\n");
}

static void he_control_route_dashboard(void *ctx, const he_admin_req_t *req, he_admin_resp_t *resp)
{
    resp->status = 200;
    resp->type = "text/html; charset=utf-8";
    resp->body = (char *)he_dashboard_html;
    resp->len = he_dashboard_html_len;
    resp->body_static = true;
}

/* ---------------------------------------------------------------- signals */

static void he_control_drain_all(he_control_t *ctl)
{
    ctl->draining = true;
    for (unsigned i = 0; i < ctl->ngens; i++) {
        /* the timeout in force now: a generation a reload retired has its
         * old configuration, whose drain may be longer */
        he_server_set_drain_timeout(ctl->gens[i].server, ctl->conf->drain_timeout_ms);
        he_server_drain(ctl->gens[i].server);
    }
}

static void he_control_on_signal(uv_signal_t *h, int sig)
{
    he_control_t *ctl = h->data;
    int rc;

    switch (sig) {
    case SIGTERM:
    case SIGINT:
        if (ctl->draining) {
            he_log_info("%s: already draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return;
        }
        he_log_info("%s: draining (up to %u ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                    ctl->conf->drain_timeout_ms);
        he_control_drain_all(ctl);
        break;
    case SIGHUP:
        he__control_reload(ctl);
        break;
    case SIGUSR1:
        /* Whatever the workers logged so far goes to the old file. */
        he__control_drain_logs(ctl);
        if ((rc = he_alog_reopen(&ctl->alog)) < 0)
            he_log_error("SIGUSR1: reopening access log %s: %s", ctl->alog.path, strerror(-rc));
        if ((rc = he_log_reopen()) < 0)
            he_log_error("SIGUSR1: reopening error log %s: %s", ctl->conf->error_log,
                         strerror(-rc));
        he_log_info("SIGUSR1: log files reopened");
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- tick, stop */

static void he_control_close_cb(uv_handle_t *h) {}

static void he_control_stop(he_control_t *ctl)
{
    if (ctl->stopped) return;
    ctl->stopped = true;
    he__control_drain_logs(ctl);
    he_admin_stop(ctl->admin);
    ctl->admin = NULL;
    uv_close((uv_handle_t *)&ctl->sig_term, he_control_close_cb);
    uv_close((uv_handle_t *)&ctl->sig_int, he_control_close_cb);
    uv_close((uv_handle_t *)&ctl->sig_hup, he_control_close_cb);
    uv_close((uv_handle_t *)&ctl->sig_usr1, he_control_close_cb);
    uv_close((uv_handle_t *)&ctl->tick, he_control_close_cb);
    uv_close((uv_handle_t *)&ctl->sampler, he_control_close_cb);
    uv_close((uv_handle_t *)&ctl->alog_async, he_control_close_cb);
}

static void he_control_on_tick(uv_timer_t *t)
{
    he_control_t *ctl = t->data;
    he_gen_t *serving;
    bool all_exited = true;

    he__control_drain_logs(ctl);
    he__control_reload_tick(ctl);
    he_admin_sweep(ctl->admin, uv_now(&ctl->loop), 60000);
    serving = he__control_serving(ctl);
    if (!ctl->draining && serving && he_server_exited(serving->server)) {
        he_log_error("every worker of the serving generation has stopped; exiting");
        ctl->exit_code = 1;
        he_control_drain_all(ctl);
    }
    for (unsigned i = 0; i < ctl->ngens; i++)
        if (!he_server_exited(ctl->gens[i].server)) all_exited = false;
    if (ctl->draining && all_exited) he_control_stop(ctl);
}

static void he_control_on_alog_async(uv_async_t *a)
{
    he__control_drain_logs(a->data);
}

/* ---------------------------------------------------------------- main */

static int he_control_start(he_control_t *ctl, he_conf_t *conf)
{
    char err[HE_CONF_ERR_MAX + 256], feat[512];
    he_server_t *s;
    int rc;

    if ((rc = he_log_open(conf->error_log)) < 0) {
        he_log_error("log.file %s: %s", conf->error_log, strerror(-rc));
        return rc;
    }
    if (conf->access_log[0] &&
        (rc = he_alog_open(&ctl->alog, conf->access_log, conf->access_log_format)) < 0) {
        he_log_error("log.access %s: %s", conf->access_log, strerror(-rc));
        return rc;
    }
    he_admin_route_add("GET", "/metrics", he_control_route_metrics, ctl);
    he_admin_route_add("GET", "/stats", he_control_route_stats, ctl);
    he_admin_route_add("GET", "/healthz", he_control_route_healthz, ctl);
    he_admin_route_add("GET", "/", he_control_route_dashboard, ctl);
    he_admin_route_add_state("POST", "/purge", he__control_route_purge, ctl); /* purge.c */
    /* The admin listener first: once viewers can connect, so can the
     * monitoring (its requests wait in the backlog until the loop runs). */
    if (conf->admin_listen.addr.ss_family &&
        (rc = he_admin_start(&ctl->admin, &ctl->loop, &conf->admin_listen, err, sizeof(err))) < 0) {
        he_log_error("%s", err);
        return rc;
    }
    he_admin_set_conf(ctl->admin, conf); /* admin.allow, admin.token_file */

    rc = he_server_new(&s, conf, err, sizeof(err));
    if (rc < 0) {
        he_log_error("%s", err);
        return rc;
    }
    he_server_set_alog_notify(s, &ctl->alog_async);
    /* before the workers start: a worker serves as soon as it runs */
    he_server_set_alog_enabled(s, ctl->alog.fd >= 0);
    he_features_describe(he_server_features(s), feat, sizeof(feat));
    he_log_info("hlsedge %s: config %s, root %s, %u workers", HE_VERSION,
                conf->file[0] ? conf->file : "(built-in defaults)", conf->root,
                he_server_nworkers(s));
    he_log_info("kernel features: %s", feat);
    rc = he_server_start(s, err, sizeof(err));
    if (rc == 0) {
        rc = he__control_add_gen(ctl, s);
        if (rc < 0) snprintf(err, sizeof(err), "%s", strerror(-rc));
    }
    if (rc < 0) {
        he_log_error("%s", err);
        he_server_drain(s);
        he_server_wait(s);
        he_server_delete(s);
        return rc;
    }
    he__control_groups_add(ctl, s);
    he__control_pin(ctl); /* after the workers: they took their CPUs */
    ctl->admin_addr = conf->admin_listen;
    for (unsigned i = 0; i < conf->nlisten; i++)
        he_log_info("listening on %s", conf->listen[i].text);
    if (ctl->admin)
        he_log_info("admin on http://%s/ (metrics, stats, healthz)", conf->admin_listen.text);
    return 0;
}

int he_control_main(he_conf_t *conf)
{
    he_control_t *ctl = calloc(1, sizeof(*ctl));
    int rc, code;

    if (!ctl || !(ctl->samples = calloc(HE_CONTROL_SAMPLES, sizeof(*ctl->samples))) ||
        !(ctl->history = calloc(HE_CONTROL_HISTORY, sizeof(*ctl->history)))) {
        fprintf(stderr, "hlsedge: out of memory\n");
        if (ctl) free(ctl->samples);
        free(ctl);
        return 1;
    }
    if (conf->generation == 0) conf->generation = 1;
    ctl->conf = conf;
    ctl->start_ns = he_control_now_ns();
    ctl->start_real_s = he_control_now_real();
    he__control_keep_conf(ctl, conf);
    he_alog_init(&ctl->alog);
    uv_loop_init(&ctl->loop);

    /* Handlers before any worker exists: a signal during start-up waits
     * in libuv's pipe instead of killing the process. */
    uv_signal_init(&ctl->loop, &ctl->sig_term);
    uv_signal_init(&ctl->loop, &ctl->sig_int);
    uv_signal_init(&ctl->loop, &ctl->sig_hup);
    uv_signal_init(&ctl->loop, &ctl->sig_usr1);
    ctl->sig_term.data = ctl->sig_int.data = ctl->sig_hup.data = ctl->sig_usr1.data = ctl;
    uv_signal_start(&ctl->sig_term, he_control_on_signal, SIGTERM);
    uv_signal_start(&ctl->sig_int, he_control_on_signal, SIGINT);
    uv_signal_start(&ctl->sig_hup, he_control_on_signal, SIGHUP);
    uv_signal_start(&ctl->sig_usr1, he_control_on_signal, SIGUSR1);
    uv_async_init(&ctl->loop, &ctl->alog_async, he_control_on_alog_async);
    ctl->alog_async.data = ctl;
    uv_timer_init(&ctl->loop, &ctl->tick);
    uv_timer_init(&ctl->loop, &ctl->sampler);
    ctl->tick.data = ctl->sampler.data = ctl;

    rc = he_control_start(ctl, conf);
    if (rc < 0) {
        ctl->exit_code = 1;
        he_control_drain_all(ctl);
    }
    uv_timer_start(&ctl->tick, he_control_on_tick, HE_CONTROL_TICK_MS, HE_CONTROL_TICK_MS);
    uv_timer_start(&ctl->sampler, he_control_on_sample, 0, 1000);
    uv_run(&ctl->loop, UV_RUN_DEFAULT);

    for (unsigned i = 0; i < ctl->ngens; i++) {
        he_server_wait(ctl->gens[i].server);
        he_server_delete(ctl->gens[i].server);
        free(ctl->gens[i].cpu_s);
    }
    for (unsigned i = 0; i < ctl->nconfs; i++)
        free(ctl->confs[i]);
    for (unsigned i = 0; i < ctl->ngroups; i++)
        free(ctl->groups[i].fds);
    he_alog_close(&ctl->alog);
    uv_loop_close(&ctl->loop);
    code = ctl->exit_code;
    if (code == 0) he_log_info("stopped");
    free(ctl->confs);
    free(ctl->groups);
    free(ctl->base);
    free(ctl->base_cpu_s);
    free(ctl->prev_req);
    free(ctl->prev_bytes);
    free(ctl->prev_cpu_s);
    free(ctl->rps);
    free(ctl->gbps);
    free(ctl->cpu_pct);
    free(ctl->samples);
    free(ctl->history);
    free(ctl);
    return code;
}
