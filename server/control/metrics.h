/* metrics: the figures the control thread exposes, as one snapshot, and
 * its two renderings: the Prometheus text format (/metrics) and JSON
 * (/stats). The control thread builds the snapshot (server/control.c); this
 * file only formats, so it can be tested without a server. */
#ifndef HE_METRICS_H
#define HE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/server.h"
#include "server/base/buf.h"
#include "server/base/stats.h"

/* Adds every counter of src to dst. Every field of he_stats_t is a
 * uint64_t counter (the histograms too), which is what lets new counters
 * be added to stats.h without touching the summing. */
void he_metrics_stats_add(he_stats_t *dst, const he_stats_t *src);
/* dst = newer - older, bucket by bucket (the requests between two reads). */
void he_metrics_hist_delta(he_hist_t *dst, const he_hist_t *newer, const he_hist_t *older);

typedef struct he_metrics_worker {
    unsigned id;
    int cpu;             /* CPU it is pinned to, -1 when not pinned */
    unsigned generation; /* configuration generation it serves; 0 = none running */
    he_stats_t st;       /* since start, over every generation of this worker id */
    double cpu_seconds;  /* thread CPU time, over every generation */
    double rps_1s, gbps_1s, cpu_pct_1s;
} he_metrics_worker_t;

/* One second of the dashboard's charts (the control thread keeps the
 * last few minutes of them). */
typedef struct he_hpoint {
    double t; /* uptime, seconds */
    double gbps, rps;
    double active;
    double status_rps[5];       /* 1xx .. 5xx responses per second */
    double p99_ms, p99_ttfb_ms; /* of the requests finished in that second; 0 when none */
} he_hpoint_t;

typedef struct he_metrics_snap {
    const char *version;
    const char *conf_file;       /* "" = built-in defaults */
    unsigned generation;         /* of the configuration being served */
    unsigned server_generations; /* worker generations alive (2 while a reload drains one) */
    uint64_t reloads_ok, reloads_failed;
    double uptime_s;
    double start_time_s; /* Unix time */
    bool draining;
    he_features_t features;
    double process_cpu_seconds;
    const char *control_cpus; /* where the control thread runs, "0-3,8" */
    bool control_apart;       /* on no worker's CPU */

    he_stats_t total;
    he_metrics_worker_t *workers;
    unsigned nworkers;

    double rps_1s, gbps_1s, rps_10s, gbps_10s;
    /* latency of the requests that finished in the last 1 s and 10 s */
    he_hist_t ttfb_1s, total_1s, ttfb_10s, total_10s;

    /* per-second points, oldest first (only when /stats?history=1) */
    const he_hpoint_t *history;
    unsigned nhistory;

    const char *tls_json; /* he_tls_describe() of the serving generation, or NULL */

    /* the serving generation's origins (parent selection) */
    he_server_parent_t parents[HE_CONF_MAX_ORIGINS];
    unsigned nparents;
    const char *parent_select;

    bool alog_on;
    const char *alog_path;
    const char *alog_format;
    uint64_t alog_written, alog_write_errors;

    /* admin requests refused: outside admin.allow (403), without the
     * token a state-changing route needs (401) */
    uint64_t admin_refused_address, admin_refused_token;
} he_metrics_snap_t;

/* a - b for two counters a snapshot read apart (the worker may have
 * moved between the reads): never below zero. */
static inline uint64_t he__metrics_sub(uint64_t a, uint64_t b)
{
    return a >= b ? a - b : 0;
}

/* Active connections of a stats block (accepted and not yet closed). */
static inline uint64_t he_metrics_active(const he_stats_t *st)
{
    return he__metrics_sub(st->conn_accepted, st->conn_closed);
}

void he_metrics_prometheus(const he_metrics_snap_t *s, he_buf_t *out);
/* A counter per worker and per value of one label: hlsedge_<name>{worker,
 * <label>="values[k]"} from the n uint64_t at offset off in he_stats_t. */
void he__prom_per_worker_by(he_buf_t *b, const he_metrics_snap_t *s, const char *name,
                            const char *help, const char *label, const char *const *values,
                            size_t off, int n);
void he_metrics_json(const he_metrics_snap_t *s, he_buf_t *out);

/* metrics_cache.c: hlsedge_cache_* and "cache":{...}; nothing without a
 * cache (he_server_cache_enabled). */
void he__metrics_cache_prom(const he_metrics_snap_t *s, he_buf_t *b);
void he__metrics_cache_json(const he_metrics_snap_t *s, he_buf_t *b);

/* metrics_http2.c: connections and requests by protocol, hlsedge_http2_*
 * and "http2":{...}. */
void he__metrics_h2_prom(const he_metrics_snap_t *s, he_buf_t *b);
void he__metrics_h2_json(const he_metrics_snap_t *s, he_buf_t *b);

#endif
