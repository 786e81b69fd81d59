/* control: the control thread. A libuv loop (on the process's main thread,
 * separate from every worker) that owns the admin listener, the signals,
 * the access log writer and configuration reloads. Workers never wait for
 * it: it reads their counters, drains their access log rings, and sends
 * them messages through atomics plus their wake eventfd.
 *
 *   control.c         loop, signals, timers, stats sampling, admin routes
 *   control_reload.c  SIGHUP: live configuration changes and new worker
 *                     generations (listener hand-over, draining the old)
 *   control_cpus.c    control_cpus: the CPUs the control thread runs on
 *   purge.c           POST /purge: the admin side of a cache purge
 */
#ifndef HE_CONTROL_H
#define HE_CONTROL_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "conf/conf.h"
#include "server/control/accesslog.h"
#include "server/control/admin.h"
#include "server/control/metrics.h"
#include "server/server.h"

#define HE_VERSION "0.1.0"

/* Builds the first worker generation from conf (owned from now on: heap
 * memory from malloc), serves until SIGTERM/SIGINT and the drain, and
 * returns the process exit status. */
int he_control_main(he_conf_t *conf);

/* ---------------------------------------------------------------- internals */

#define HE_CONTROL_TICK_MS 100
#define HE_CONTROL_SAMPLES 16 /* 1 s samples kept: the 10 s rate needs 11 */
#define HE_CONTROL_MAX_GENS 8
/* After a new generation binds its listeners, the old one keeps accepting
 * this long: handshakes begun on its sockets complete and are served. */
#define HE_CONTROL_GRACE_MS 500

enum he_gen_state {
    HE_GEN_SERVING = 0,
    HE_GEN_GRACE,    /* replaced; listeners still open, new SYNs steered away */
    HE_GEN_DRAINING, /* listeners shut; connections finishing */
};

/* One generation of workers (one he_server_t) and what the control thread
 * keeps about it. */
typedef struct he_gen {
    he_server_t *server;
    enum he_gen_state state;
    uint64_t grace_until_ms;
    double *cpu_s; /* per worker: last CPU time read */
} he_gen_t;

/* The kernel's view of one SO_REUSEPORT group: its sockets in the order
 * the kernel indexes them (bind order; a socket that leaves is replaced by
 * the last). Steering programs return these indexes. */
typedef struct he_rgroup {
    char addr[64];
    int *fds;
    unsigned n, cap;
} he_rgroup_t;

typedef struct he_sample {
    uint64_t t_ns;
    uint64_t bytes, requests;
    he_hist_t ttfb, total; /* the totals' histograms at t_ns, for windowed quantiles */
} he_sample_t;

/* One second of the dashboard's charts, kept for the last
 * HE_CONTROL_HISTORY seconds so a page opened now shows the recent past. */
#define HE_CONTROL_HISTORY 180

typedef struct he_control {
    uv_loop_t loop;
    uv_signal_t sig_term, sig_int, sig_hup, sig_usr1;
    uv_timer_t tick, sampler;
    uv_async_t alog_async;

    he_gen_t gens[HE_CONTROL_MAX_GENS]; /* oldest first; the last one is serving */
    unsigned ngens;
    he_conf_t *conf;   /* what is being served */
    he_conf_t **confs; /* every published configuration not yet freed */
    unsigned nconfs, confs_cap;

    he_admin_t *admin;
    he_conf_listen_t admin_addr;
    he_alog_t alog;

    /* per worker id: counters and CPU time of generations already freed */
    he_stats_t *base;
    double *base_cpu_s;
    unsigned nids;
    /* per worker id: the 1 s rates, from the sampler */
    uint64_t *prev_req, *prev_bytes;
    double *prev_cpu_s, *rps, *gbps, *cpu_pct;
    uint64_t prev_t_ns;
    unsigned trim_samples; /* he_control_on_sample calls, for the malloc trim */

    he_sample_t *samples; /* HE_CONTROL_SAMPLES */
    he_hpoint_t *history; /* HE_CONTROL_HISTORY, a ring */
    unsigned nhistory;    /* total points taken */
    uint64_t prev_status[6];
    he_hist_t scratch;
    unsigned nsamples; /* total taken; the ring holds the last HE_CONTROL_SAMPLES */

    he_rgroup_t *groups;
    unsigned ngroups;

    uint64_t start_ns;
    double start_real_s;
    uint64_t reloads_ok, reloads_failed;
    bool draining;
    bool stopped;
    bool reload_pending; /* a SIGHUP arrived during a listener hand-over */
    char cpus_text[256]; /* where the control thread runs, "0-3,8"; "" before he__control_pin */
    bool cpus_apart;     /* on no CPU a worker is pinned to */
    bool migrate_checked;
    int exit_code;
} he_control_t;

/* control.c */
void he__control_drain_logs(he_control_t *ctl);
void he__control_set_alog_enabled(he_control_t *ctl);
he_gen_t *he__control_serving(he_control_t *ctl);
int he__control_add_gen(he_control_t *ctl, he_server_t *s);
int he__control_keep_conf(he_control_t *ctl, he_conf_t *conf);

/* control_reload.c */
void he__control_reload(he_control_t *ctl);
/* Called every tick: ends grace periods, frees finished generations and
 * configurations no worker uses any more. */
void he__control_reload_tick(he_control_t *ctl);
/* Records the listeners of a new generation in the groups model. */
void he__control_groups_add(he_control_t *ctl, he_server_t *s);
/* control_cpus.c: pins the calling (control) thread as conf->control_cpus
 * says, against the serving generation's workers; logs where, or why not. */
void he__control_pin(he_control_t *ctl);
void he__control_cpus_pick(const he_conf_t *conf, const cpu_set_t *allowed,
                           const he_server_t *serving, cpu_set_t *out);
bool he__control_cpus_apart(const cpu_set_t *set, const he_server_t *serving);
void he__control_cpus_text(const cpu_set_t *set, char *out, size_t cap);
void he__control_fold_gen(he_control_t *ctl, he_gen_t *g);
/* purge.c: the POST /purge admin route (ctx: the he_control_t). */
void he__control_route_purge(void *ctx, const he_admin_req_t *req, he_admin_resp_t *resp);

#endif
