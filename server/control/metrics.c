/* Rendering a metrics snapshot as Prometheus text (/metrics) and as JSON
 * (/stats). Names: hlsedge_*, counters end in _total, times are seconds,
 * sizes bytes (the Prometheus conventions promtool checks). */
#include "server/control/metrics.h"
#include "server/handler/handler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void he_metrics_stats_add(he_stats_t *dst, const he_stats_t *src)
{
    /* Read through volatile: the owner keeps writing while we sum, and each
     * aligned 64-bit load is whole; the sum is a consistent-enough view. */
    const volatile uint64_t *s = (const volatile uint64_t *)src;
    uint64_t *d = (uint64_t *)dst;
    _Static_assert(sizeof(he_stats_t) % sizeof(uint64_t) == 0, "he_stats_t is uint64_t counters");
    for (size_t i = 0; i < sizeof(he_stats_t) / sizeof(uint64_t); i++)
        d[i] += s[i];
}

void he_metrics_hist_delta(he_hist_t *dst, const he_hist_t *newer, const he_hist_t *older)
{
#define HE_SUB(a, b) ((a) > (b) ? (a) - (b) : 0)
    dst->count = HE_SUB(newer->count, older->count);
    dst->sum_us = HE_SUB(newer->sum_us, older->sum_us);
    for (unsigned i = 0; i < HE_HIST_BUCKETS; i++)
        dst->buckets[i] = HE_SUB(newer->buckets[i], older->buckets[i]);
#undef HE_SUB
}

/* ---------------------------------------------------------------- names */

static const char *const he_metrics_methods[HE_STATS_METHOD_COUNT] = {"GET", "HEAD", "OPTIONS",
                                                                      "other"};
static const char *const he_metrics_errors[HE_STATS_ERR_COUNT] = {
    "timeout_header", "timeout_keepalive", "timeout_send", "bad_request", "reset"};

static const char *const he_metrics_tls_errors[HE_STATS_TLS_ERR_COUNT] = {
    "plain_http", "garbage", "truncated", "protocol", "other"};

/* he_stats_auth_t, as /metrics and /stats name the causes */
static const char *const he_metrics_auth[HE_STATS_AUTH_COUNT] = {
    "ok", "missing", "malformed", "bad_signature", "acl", "ip", "not_yet_valid", "expired"};

/* he_stats_auth_kept_t */
static const char *const he_metrics_auth_kept[HE_STATS_AUTH_KEPT_COUNT] = {"hit", "miss", "bypass"};

/* Bucket bounds of the exported latency histograms, microseconds. */
static const uint64_t he_metrics_le_us[] = {100,     250,     500,     1000,     2500,    5000,
                                            10000,   25000,   50000,   100000,   250000,  500000,
                                            1000000, 2500000, 5000000, 10000000, 30000000};

static double he_metrics_num(double v)
{
    return isfinite(v) ? v : 0;
}

/* ---------------------------------------------------------------- Prometheus */

static void he_prom_head(he_buf_t *b, const char *name, const char *type, const char *help)
{
    he_buf_printf(b, "# HELP hlsedge_%s %s\n# TYPE hlsedge_%s %s\n", name, help, name, type);
}

/* One sample per worker of a counter found at offset off in he_stats_t. */
static void he_prom_per_worker(he_buf_t *b, const he_metrics_snap_t *s, const char *name,
                               const char *type, const char *help, size_t off)
{
    he_prom_head(b, name, type, help);
    for (unsigned i = 0; i < s->nworkers; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&s->workers[i].st + off, sizeof(v));
        he_buf_printf(b, "hlsedge_%s{worker=\"%u\"} %llu\n", name, s->workers[i].id,
                      (unsigned long long)v);
    }
}

void he__prom_per_worker_by(he_buf_t *b, const he_metrics_snap_t *s, const char *name,
                            const char *help, const char *label, const char *const *values,
                            size_t off, int n)
{
    he_prom_head(b, name, "counter", help);
    for (unsigned i = 0; i < s->nworkers; i++)
        for (int k = 0; k < n; k++) {
            uint64_t v;
            memcpy(&v, (const char *)&s->workers[i].st + off + (size_t)k * sizeof(v), sizeof(v));
            he_buf_printf(b, "hlsedge_%s{worker=\"%u\",%s=\"%s\"} %llu\n", name, s->workers[i].id,
                          label, values[k], (unsigned long long)v);
        }
}

/* Label values must be UTF-8: a byte that is not part of it becomes U+FFFD. */
static void he_prom_label_value(he_buf_t *b, const char *v)
{
    const unsigned char *p = (const unsigned char *)v;

    while (*p) {
        size_t n = he__utf8_len(p);
        if (*p == '\\' || *p == '"')
            he_buf_printf(b, "\\%c", *p);
        else if (*p == '\n')
            he_buf_put(b, "\\n", 2);
        else if (n)
            he_buf_put(b, (const char *)p, n);
        else
            he_buf_put(b, "\xef\xbf\xbd", 3); /* U+FFFD */
        p += n ? n : 1;
    }
}

static void he_prom_hist(he_buf_t *b, const char *name, const char *help, const he_hist_t *h)
{
    uint64_t lo, hi, cum = 0, total = 0;
    unsigned bucket = 0;

    he_prom_head(b, name, "histogram", help);
    for (unsigned i = 0; i < HE_HIST_BUCKETS; i++)
        total += h->buckets[i];
    /* A Prometheus bucket "le" counts the log-linear buckets that end at or
     * below it; one straddling the bound is left to the next, so a bucket
     * may undercount by values within 1/HE_HIST_SUB (3%) below its bound. */
    for (size_t k = 0; k < sizeof(he_metrics_le_us) / sizeof(he_metrics_le_us[0]); k++) {
        for (; bucket < HE_HIST_BUCKETS; bucket++) {
            he_hist_bucket_range(bucket, &lo, &hi);
            if (hi > he_metrics_le_us[k]) break;
            cum += h->buckets[bucket];
        }
        he_buf_printf(b, "hlsedge_%s_bucket{le=\"%g\"} %llu\n", name,
                      (double)he_metrics_le_us[k] / 1e6, (unsigned long long)cum);
    }
    he_buf_printf(b, "hlsedge_%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)total);
    he_buf_printf(b, "hlsedge_%s_sum %.6f\n", name, (double)h->sum_us / 1e6);
    he_buf_printf(b, "hlsedge_%s_count %llu\n", name, (unsigned long long)total);
}

#define HE_OFF(f) offsetof(he_stats_t, f)

/* Userspace TLS write buffers held now: taken and not yet freed. */
static uint64_t he_metrics_held(const he_stats_t *st)
{
    return he__metrics_sub(st->tls_write_buffers_taken, st->tls_write_buffers_freed);
}

/* The copies of files in huge pages (fd_cache.memory): process-wide, not
 * per worker, read from their store as they are now. */
static void he_metrics_fcopy_prom(he_buf_t *b)
{
    he_fcopy_stats_t fs;
    he_fcopy_stats(&fs);
    he_prom_head(b, "fd_cache_copy_memory_bytes", "gauge",
                 "What copies of files in huge pages may take (fd_cache.memory; 0 = off).");
    he_buf_printf(b, "hlsedge_fd_cache_copy_memory_bytes %llu\n", (unsigned long long)fs.budget);
    he_prom_head(b, "fd_cache_copy_bytes", "gauge", "What the copies take now.");
    he_buf_printf(b, "hlsedge_fd_cache_copy_bytes %llu\n", (unsigned long long)fs.bytes);
    he_prom_head(b, "fd_cache_copies_kept", "gauge", "Copies of files in huge pages.");
    he_buf_printf(b, "hlsedge_fd_cache_copies_kept %llu\n", (unsigned long long)fs.copies);
    he_prom_head(b, "fd_cache_copy_events_total", "counter",
                 "Copies by event: made (read), evicted (idle, for room), refused (no room).");
    he_buf_printf(b,
                  "hlsedge_fd_cache_copy_events_total{event=\"made\"} %llu\n"
                  "hlsedge_fd_cache_copy_events_total{event=\"evicted\"} %llu\n"
                  "hlsedge_fd_cache_copy_events_total{event=\"refused\"} %llu\n",
                  (unsigned long long)fs.made, (unsigned long long)fs.evicted,
                  (unsigned long long)fs.refused);
}

void he_metrics_prometheus(const he_metrics_snap_t *s, he_buf_t *b)
{
    const he_features_t *f = &s->features;
    const struct {
        const char *name;
        bool on;
    } feats[] = {
        {"single_issuer", f->single_issuer},     {"defer_taskrun", f->defer_taskrun},
        {"coop_taskrun", f->coop_taskrun},       {"multishot_accept", f->multishot_accept},
        {"recv_multishot", f->recv_multishot},   {"buf_ring", f->buf_ring},
        {"fixed_files", f->fixed_files},         {"send_zc", f->send_zc},
        {"zc_report_usage", f->zc_report_usage}, {"openat2_beneath", f->openat2_beneath},
        {"reuseport_cbpf", f->reuseport_cbpf},   {"ktls", f->ktls},
        {"min_timeout", f->min_timeout},
    };

    he_prom_head(b, "build_info", "gauge", "Version of the running binary.");
    he_buf_printf(b, "hlsedge_build_info{version=\"%s\"} 1\n", s->version);
    he_prom_head(b, "config_info", "gauge", "Configuration file being served (\"\" = defaults).");
    he_buf_put(b, "hlsedge_config_info{file=\"", 26);
    he_prom_label_value(b, s->conf_file);
    he_buf_printf(b, "\"} 1\n");
    he_prom_head(b, "config_generation", "gauge",
                 "Generation of the configuration being served; 1 at start, +1 per reload.");
    he_buf_printf(b, "hlsedge_config_generation %u\n", s->generation);
    he_prom_head(b, "config_reloads_total", "counter", "Configuration reloads (SIGHUP) by result.");
    he_buf_printf(b, "hlsedge_config_reloads_total{result=\"ok\"} %llu\n",
                  (unsigned long long)s->reloads_ok);
    he_buf_printf(b, "hlsedge_config_reloads_total{result=\"failed\"} %llu\n",
                  (unsigned long long)s->reloads_failed);
    he_prom_head(b, "server_generations", "gauge",
                 "Worker generations running: 2 while a reload drains the previous one.");
    he_buf_printf(b, "hlsedge_server_generations %u\n", s->server_generations);
    he_prom_head(b, "start_time_seconds", "gauge", "Start time of the process, Unix seconds.");
    he_buf_printf(b, "hlsedge_start_time_seconds %.3f\n", s->start_time_s);
    he_prom_head(b, "uptime_seconds", "gauge", "Seconds since the process started.");
    he_buf_printf(b, "hlsedge_uptime_seconds %.3f\n", s->uptime_s);
    he_prom_head(b, "draining", "gauge", "1 while shutting down (SIGTERM/SIGINT), else 0.");
    he_buf_printf(b, "hlsedge_draining %d\n", s->draining ? 1 : 0);
    he_prom_head(b, "admin_refused_total", "counter",
                 "Admin requests refused: outside admin.allow (403), no valid token (401).");
    he_buf_printf(b, "hlsedge_admin_refused_total{reason=\"address\"} %llu\n",
                  (unsigned long long)s->admin_refused_address);
    he_buf_printf(b, "hlsedge_admin_refused_total{reason=\"token\"} %llu\n",
                  (unsigned long long)s->admin_refused_token);
    he_prom_per_worker(b, s, "purge_refused_total", "counter",
                       "PURGE requests on the viewer port refused (not loopback, no valid token).",
                       HE_OFF(purge_refused));
    he_prom_head(b, "kernel_feature", "gauge",
                 "Kernel features in use (probed at start): 1 used, 0 not.");
    for (size_t i = 0; i < sizeof(feats) / sizeof(feats[0]); i++)
        he_buf_printf(b, "hlsedge_kernel_feature{feature=\"%s\"} %d\n", feats[i].name,
                      feats[i].on ? 1 : 0);
    he_prom_head(b, "numa_nodes", "gauge", "NUMA nodes seen (0: libnuma unavailable).");
    he_buf_printf(b, "hlsedge_numa_nodes %d\n", f->numa_nodes);
    he_prom_head(b, "process_cpu_seconds_total", "counter", "CPU time of the whole process.");
    he_buf_printf(b, "hlsedge_process_cpu_seconds_total %.2f\n", s->process_cpu_seconds);

    he_prom_head(b, "worker_cpu_seconds_total", "counter", "CPU time of each worker thread.");
    for (unsigned i = 0; i < s->nworkers; i++)
        he_buf_printf(b, "hlsedge_worker_cpu_seconds_total{worker=\"%u\"} %.2f\n", s->workers[i].id,
                      s->workers[i].cpu_seconds);
    he_prom_per_worker(b, s, "connections_accepted_total", "counter", "Connections accepted.",
                       HE_OFF(conn_accepted));
    he_prom_per_worker(b, s, "connections_refused_total", "counter",
                       "Connections refused with 503 (connection limit or shutdown).",
                       HE_OFF(conn_refused));
    he_prom_head(b, "connections_active", "gauge", "Open connections.");
    for (unsigned i = 0; i < s->nworkers; i++)
        he_buf_printf(b, "hlsedge_connections_active{worker=\"%u\"} %llu\n", s->workers[i].id,
                      (unsigned long long)he_metrics_active(&s->workers[i].st));

    he__prom_per_worker_by(b, s, "requests_total", "Requests by method.", "method",
                           he_metrics_methods, HE_OFF(requests), HE_STATS_METHOD_COUNT);
    he_prom_head(b, "responses_total", "counter", "Responses by status class.");
    for (unsigned i = 0; i < s->nworkers; i++)
        for (int c = 1; c <= 5; c++)
            he_buf_printf(b, "hlsedge_responses_total{worker=\"%u\",status_class=\"%dxx\"} %llu\n",
                          s->workers[i].id, c,
                          (unsigned long long)s->workers[i].st.status_class[c]);
    he_prom_head(b, "responses_by_kind_total", "counter",
                 "Responses by content kind (master playlist, media playlist, segment, other).");
    for (unsigned i = 0; i < s->nworkers; i++)
        for (int k = 0; k < HE_SEG_KIND_COUNT; k++)
            he_buf_printf(b, "hlsedge_responses_by_kind_total{worker=\"%u\",kind=\"%s\"} %llu\n",
                          s->workers[i].id, he_seg_kind_name((he_seg_kind_t)k),
                          (unsigned long long)s->workers[i].st.kind[k]);
    he_prom_per_worker(b, s, "sent_bytes_total", "counter",
                       "Bytes handed to the kernel for clients (headers and bodies).",
                       HE_OFF(bytes_out));
    he__prom_per_worker_by(
        b, s, "errors_total",
        "Errors by cause: timeouts (header, keep-alive, send), bad requests, resets.", "cause",
        he_metrics_errors, HE_OFF(errors), HE_STATS_ERR_COUNT);
    he_prom_per_worker(b, s, "fd_cache_hits_total", "counter", "Open-file cache hits.",
                       HE_OFF(fcache_hits));
    he_prom_per_worker(b, s, "fd_cache_misses_total", "counter", "Open-file cache misses.",
                       HE_OFF(fcache_misses));
    he_prom_per_worker(b, s, "file_vmsplice_bytes_total", "counter",
                       "File body bytes handed to TCP by vmsplice of the file's mapping or "
                       "its copy (send.file_splice).",
                       HE_OFF(file_vmsplice_bytes));
    he_prom_per_worker(b, s, "file_copy_bytes_total", "counter",
                       "Of those, bytes from a file's copy in huge pages (fd_cache.memory).",
                       HE_OFF(file_copy_bytes));
    he_prom_per_worker(b, s, "slices_spent_total", "counter",
                       "Batches of bodies' turns cut at ring.slice_us so that new requests went "
                       "first.",
                       HE_OFF(slices_spent));
    he_prom_per_worker(b, s, "turns_deferred_total", "counter",
                       "Bodies' next turns that waited behind new requests (ring.slice_us).",
                       HE_OFF(turns_deferred));
    he_metrics_fcopy_prom(b);
    he_prom_per_worker(b, s, "llhls_held_total", "counter",
                       "LL-HLS blocking reloads and preload hints held from root.",
                       HE_OFF(llhls_held));
    he_prom_per_worker(b, s, "llhls_released_total", "counter",
                       "Held LL-HLS requests answered when the file changed.",
                       HE_OFF(llhls_released));
    he_prom_per_worker(b, s, "llhls_timeouts_total", "counter",
                       "Held LL-HLS requests answered 503 (or 404 for a hint) after 3 TD.",
                       HE_OFF(llhls_timeouts));
    he_prom_per_worker(b, s, "llhls_rejected_total", "counter",
                       "LL-HLS directives refused with 400 (6.2.5.2 limits).",
                       HE_OFF(llhls_rejected));
    he_prom_per_worker(b, s, "llhls_origin_blocking_total", "counter",
                       "LL-HLS blocking reloads sent to an origin for held requests.",
                       HE_OFF(llhls_origin_blocking));
    he_prom_per_worker(b, s, "llhls_origin_polls_total", "counter",
                       "Plain playlist reloads sent to an origin for held LL-HLS requests.",
                       HE_OFF(llhls_origin_polls));
    he__metrics_cache_prom(s, b); /* hlsedge_cache_*: server/metrics_cache.c */
    he__metrics_h2_prom(s, b);    /* by protocol, hlsedge_http2_*: metrics_http2.c */

    he_prom_per_worker(b, s, "tls_handshakes_total", "counter", "TLS handshakes completed.",
                       HE_OFF(tls_handshakes));
    he_prom_per_worker(b, s, "tls_handshake_errors_total", "counter", "TLS handshakes failed.",
                       HE_OFF(tls_handshake_errors));
    he_prom_head(b, "tls_connections_total", "counter",
                 "TLS connections by send path: kernel TLS or userspace (SSL_write).");
    for (unsigned i = 0; i < s->nworkers; i++) {
        he_buf_printf(b, "hlsedge_tls_connections_total{worker=\"%u\",mode=\"ktls\"} %llu\n",
                      s->workers[i].id, (unsigned long long)s->workers[i].st.tls_conn_ktls);
        he_buf_printf(b, "hlsedge_tls_connections_total{worker=\"%u\",mode=\"userspace\"} %llu\n",
                      s->workers[i].id, (unsigned long long)s->workers[i].st.tls_conn_userspace);
    }
    he_prom_head(b, "tls_sent_bytes_total", "counter", "Bytes sent over TLS by send path.");
    for (unsigned i = 0; i < s->nworkers; i++) {
        he_buf_printf(b, "hlsedge_tls_sent_bytes_total{worker=\"%u\",mode=\"ktls\"} %llu\n",
                      s->workers[i].id, (unsigned long long)s->workers[i].st.tls_bytes_ktls);
        he_buf_printf(b, "hlsedge_tls_sent_bytes_total{worker=\"%u\",mode=\"userspace\"} %llu\n",
                      s->workers[i].id, (unsigned long long)s->workers[i].st.tls_bytes_userspace);
    }

    he_prom_per_worker(b, s, "tls_resumed_total", "counter",
                       "TLS handshakes that resumed a session (ticket or cache).",
                       HE_OFF(tls_resumed));
    he_prom_per_worker(b, s, "tls_ktls_fallback_total", "counter",
                       "TLS connections that could not use kTLS for their cipher.",
                       HE_OFF(tls_conn_ktls_fallback));
    he_prom_per_worker(b, s, "tls_sealed_connections_total", "counter",
                       "Userspace TLS connections whose records hlsedge sealed itself "
                       "(tls.seal_records) rather than SSL_write.",
                       HE_OFF(tls_conn_sealed));
    he_prom_per_worker(b, s, "tls_write_buffers_total", "counter",
                       "Userspace TLS write buffers taken (tls.write_buffer).",
                       HE_OFF(tls_write_buffers_taken));
    he_prom_head(b, "tls_write_buffers_held", "gauge",
                 "Userspace TLS write buffers held now: connections with records gathered or "
                 "a large body under way.");
    for (unsigned i = 0; i < s->nworkers; i++)
        he_buf_printf(b, "hlsedge_tls_write_buffers_held{worker=\"%u\"} %llu\n", s->workers[i].id,
                      (unsigned long long)he_metrics_held(&s->workers[i].st));
    he__prom_per_worker_by(b, s, "tls_errors_total",
                           "TLS connections that ended before or during the handshake, by cause.",
                           "cause", he_metrics_tls_errors, HE_OFF(tls_errors),
                           HE_STATS_TLS_ERR_COUNT);

    he__prom_per_worker_by(b, s, "auth_requests_total",
                           "Requests under an auth rule, by what the token check made of them "
                           "(ok, or the cause of a 403/410).",
                           "result", he_metrics_auth, HE_OFF(auth), HE_STATS_AUTH_COUNT);
    he_prom_per_worker(b, s, "auth_playlist_rewrites_total", "counter",
                       "Playlists sent with the viewer's token carried into their URIs.",
                       HE_OFF(auth_rewrites));
    he__prom_per_worker_by(b, s, "auth_rewrite_cache_total",
                           "Tokenised playlists by whether a kept output was sent (hit), one was "
                           "rewritten to keep (miss), or it could not be kept (bypass).",
                           "result", he_metrics_auth_kept, HE_OFF(auth_kept),
                           HE_STATS_AUTH_KEPT_COUNT);
    he_prom_per_worker(b, s, "auth_rewrite_cache_entries", "gauge",
                       "Tokenised playlists kept (auth_cache.entries).", HE_OFF(auth_kept_entries));
    he_prom_per_worker(b, s, "auth_rewrite_cache_bytes", "gauge",
                       "Memory they take (auth_cache.bytes).", HE_OFF(auth_kept_bytes));

    he_prom_head(b, "access_log_enabled", "gauge", "1 when an access log is open.");
    he_buf_printf(b, "hlsedge_access_log_enabled %d\n", s->alog_on ? 1 : 0);
    he_prom_head(b, "access_log_records_total", "counter", "Access log records written.");
    he_buf_printf(b, "hlsedge_access_log_records_total %llu\n",
                  (unsigned long long)s->alog_written);
    he_prom_head(b, "access_log_write_errors_total", "counter", "Failed access log writes.");
    he_buf_printf(b, "hlsedge_access_log_write_errors_total %llu\n",
                  (unsigned long long)s->alog_write_errors);
    he_prom_per_worker(b, s, "access_log_dropped_total", "counter",
                       "Access log records dropped because the worker's ring was full.",
                       HE_OFF(log_dropped));

    he_prom_hist(
        b, "ttfb_seconds",
        "Time from the start of a request to its first response byte handed to the kernel.",
        &s->total.ttfb);
    he_prom_hist(b, "response_seconds",
                 "Time from the start of a request to its last response byte handed to the kernel.",
                 &s->total.total);
}

/* ---------------------------------------------------------------- JSON */

static void he_json_u64(he_buf_t *b, const char *key, uint64_t v, bool comma)
{
    he_buf_printf(b, "\"%s\":%llu%s", key, (unsigned long long)v, comma ? "," : "");
}

static void he_json_latency(he_buf_t *b, const char *key, const he_hist_t *h)
{
    uint64_t n = h->count;
    he_buf_printf(b,
                  "\"%s\":{\"count\":%llu,\"mean\":%.1f,\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,"
                  "\"p99.9\":%llu}",
                  key, (unsigned long long)n, n ? (double)h->sum_us / (double)n : 0.0,
                  (unsigned long long)he_hist_quantile(h, 0.5),
                  (unsigned long long)he_hist_quantile(h, 0.9),
                  (unsigned long long)he_hist_quantile(h, 0.99),
                  (unsigned long long)he_hist_quantile(h, 0.999));
}

static void he_json_counts(he_buf_t *b, const he_stats_t *st)
{
    uint64_t req = 0;
    for (int m = 0; m < HE_STATS_METHOD_COUNT; m++)
        req += st->requests[m];
    he_buf_printf(b, "\"requests\":{\"total\":%llu", (unsigned long long)req);
    for (int m = 0; m < HE_STATS_METHOD_COUNT; m++)
        he_buf_printf(b, ",\"%s\":%llu", he_metrics_methods[m],
                      (unsigned long long)st->requests[m]);
    he_buf_printf(b, "},\"responses\":{");
    for (int c = 1; c <= 5; c++)
        he_buf_printf(b, "%s\"%dxx\":%llu", c > 1 ? "," : "", c,
                      (unsigned long long)st->status_class[c]);
    he_buf_printf(b, "},\"kinds\":{");
    for (int k = 0; k < HE_SEG_KIND_COUNT; k++)
        he_buf_printf(b, "%s\"%s\":%llu", k ? "," : "", he_seg_kind_name((he_seg_kind_t)k),
                      (unsigned long long)st->kind[k]);
    he_buf_printf(b, "},\"errors\":{");
    for (int e = 0; e < HE_STATS_ERR_COUNT; e++)
        he_buf_printf(b, "%s\"%s\":%llu", e ? "," : "", he_metrics_errors[e],
                      (unsigned long long)st->errors[e]);
    he_buf_printf(b, "},\"connections\":{");
    he_json_u64(b, "accepted", st->conn_accepted, true);
    he_json_u64(b, "active", he_metrics_active(st), true);
    he_json_u64(b, "refused", st->conn_refused, true);
    he_json_u64(b, "closed", st->conn_closed, false);
    he_buf_printf(b, "},");
    he_json_u64(b, "bytes_out", st->bytes_out, true);
}

/* Column-wise, for the dashboard's charts: "history":{"t":[...],...}. */
static void he_metrics_json_history(he_buf_t *b, const he_hpoint_t *h, unsigned n)
{
    static const struct {
        const char *name;
        size_t off;
    } cols[] = {
        {"t", offsetof(he_hpoint_t, t)},
        {"gbps", offsetof(he_hpoint_t, gbps)},
        {"rps", offsetof(he_hpoint_t, rps)},
        {"active", offsetof(he_hpoint_t, active)},
        {"p99_ms", offsetof(he_hpoint_t, p99_ms)},
        {"p99_ttfb_ms", offsetof(he_hpoint_t, p99_ttfb_ms)},
    };
    he_buf_printf(b, ",\"history\":{");
    for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++) {
        he_buf_printf(b, "%s\"%s\":[", c ? "," : "", cols[c].name);
        for (unsigned i = 0; i < n; i++) {
            double v;
            memcpy(&v, (const char *)&h[i] + cols[c].off, sizeof(v));
            he_buf_printf(b, "%s%.6g", i ? "," : "", he_metrics_num(v));
        }
        he_buf_printf(b, "]");
    }
    he_buf_printf(b, ",\"status\":[");
    for (int k = 0; k < 5; k++) {
        he_buf_printf(b, "%s[", k ? "," : "");
        for (unsigned i = 0; i < n; i++)
            he_buf_printf(b, "%s%.6g", i ? "," : "", he_metrics_num(h[i].status_rps[k]));
        he_buf_printf(b, "]");
    }
    he_buf_printf(b, "]}");
}

void he_metrics_json(const he_metrics_snap_t *s, he_buf_t *b)
{
    const he_features_t *f = &s->features;
    const he_stats_t *t = &s->total;
    char feat[512];

    he_buf_printf(b, "{\"version\":\"%s\",\"uptime_s\":%.3f,\"start_time\":%.3f,\"draining\":%s,",
                  s->version, s->uptime_s, s->start_time_s, s->draining ? "true" : "false");
    he_buf_printf(b,
                  "\"admin\":{\"refused\":{\"address\":%llu,\"token\":%llu},"
                  "\"purge_refused\":%llu},",
                  (unsigned long long)s->admin_refused_address,
                  (unsigned long long)s->admin_refused_token,
                  (unsigned long long)t->purge_refused);
    he_buf_printf(b, "\"config\":{\"file\":");
    he_buf_json_str(b, s->conf_file);
    he_buf_printf(b,
                  ",\"generation\":%u,\"reloads_ok\":%llu,\"reloads_failed\":%llu,"
                  "\"server_generations\":%u},",
                  s->generation, (unsigned long long)s->reloads_ok,
                  (unsigned long long)s->reloads_failed, s->server_generations);
    he_features_describe(f, feat, sizeof(feat));
    he_buf_printf(b,
                  "\"features\":{\"io_uring\":{\"single_issuer\":%s,\"defer_taskrun\":%s,"
                  "\"coop_taskrun\":%s,\"multishot_accept\":%s,\"recv_multishot\":%s,"
                  "\"buf_ring\":%s,\"fixed_files\":%s,\"send_zc\":%s,\"zc_report_usage\":%s,"
                  "\"min_timeout\":%s},"
                  "\"openat2_beneath\":%s,\"reuseport_cbpf\":%s,\"ktls\":%s,\"numa_nodes\":%d,"
                  "\"summary\":",
                  f->single_issuer ? "true" : "false", f->defer_taskrun ? "true" : "false",
                  f->coop_taskrun ? "true" : "false", f->multishot_accept ? "true" : "false",
                  f->recv_multishot ? "true" : "false", f->buf_ring ? "true" : "false",
                  f->fixed_files ? "true" : "false", f->send_zc ? "true" : "false",
                  f->zc_report_usage ? "true" : "false", f->min_timeout ? "true" : "false",
                  f->openat2_beneath ? "true" : "false", f->reuseport_cbpf ? "true" : "false",
                  f->ktls ? "true" : "false", f->numa_nodes);
    he_buf_json_str(b, feat);
    he_buf_printf(b, "},\"control_thread\":{\"cpus\":");
    he_buf_json_str(b, s->control_cpus ? s->control_cpus : "");
    he_buf_printf(b, ",\"apart_from_workers\":%s},", s->control_apart ? "true" : "false");

    he_json_counts(b, t);
    he__metrics_cache_json(s, b); /* "cache":{...}, when the cache is on */
    he__metrics_h2_json(s, b);    /* "http2":{...} */
    he_buf_printf(b, "\"fd_cache\":{");
    he_json_u64(b, "hits", t->fcache_hits, true);
    he_json_u64(b, "misses", t->fcache_misses, true);
    {
        he_fcopy_stats_t fs;
        he_fcopy_stats(&fs);
        he_buf_printf(b, "\"copies\":{");
        he_json_u64(b, "memory", fs.budget, true);
        he_json_u64(b, "bytes", fs.bytes, true);
        he_json_u64(b, "count", fs.copies, true);
        he_json_u64(b, "made", fs.made, true);
        he_json_u64(b, "evicted", fs.evicted, true);
        he_json_u64(b, "refused", fs.refused, false);
        he_buf_printf(b, "}");
    }
    he_buf_printf(b, "},\"send\":{");
    he_json_u64(b, "file_vmsplice_bytes", t->file_vmsplice_bytes, true);
    he_json_u64(b, "file_copy_bytes", t->file_copy_bytes, true);
    he_json_u64(b, "slices_spent", t->slices_spent, true);
    he_json_u64(b, "turns_deferred", t->turns_deferred, false);
    he_buf_printf(b, "},\"llhls\":{");
    he_json_u64(b, "held", t->llhls_held, true);
    he_json_u64(b, "released", t->llhls_released, true);
    he_json_u64(b, "timeouts", t->llhls_timeouts, true);
    he_json_u64(b, "rejected", t->llhls_rejected, true);
    he_json_u64(b, "deltas", t->llhls_deltas, true);
    he_json_u64(b, "gzip", t->llhls_gzip, true);
    he_json_u64(b, "events", t->llhls_events, true);
    he_json_u64(b, "origin_blocking", t->llhls_origin_blocking, true);
    he_json_u64(b, "origin_polls", t->llhls_origin_polls, false);
    he_buf_printf(b, "},\"tls\":{");
    he_json_u64(b, "handshakes", t->tls_handshakes, true);
    he_json_u64(b, "handshake_errors", t->tls_handshake_errors, true);
    he_json_u64(b, "connections_ktls", t->tls_conn_ktls, true);
    he_json_u64(b, "connections_userspace", t->tls_conn_userspace, true);
    he_json_u64(b, "bytes_ktls", t->tls_bytes_ktls, true);
    he_json_u64(b, "bytes_userspace", t->tls_bytes_userspace, true);
    he_json_u64(b, "resumed", t->tls_resumed, true);
    he_json_u64(b, "ktls_fallback", t->tls_conn_ktls_fallback, true);
    he_json_u64(b, "connections_sealed", t->tls_conn_sealed, true);
    he_json_u64(b, "write_buffers_taken", t->tls_write_buffers_taken, true);
    he_json_u64(b, "write_buffers_held", he_metrics_held(t), true);
    he_buf_printf(b, "\"errors\":{");
    for (int e = 0; e < HE_STATS_TLS_ERR_COUNT; e++)
        he_buf_printf(b, "%s\"%s\":%llu", e ? "," : "", he_metrics_tls_errors[e],
                      (unsigned long long)t->tls_errors[e]);
    he_buf_printf(b, "}");
    he_buf_printf(b, "},");
    if (s->tls_json && s->tls_json[0] == '{') he_buf_printf(b, "\"tls_config\":%s,", s->tls_json);
    he_buf_printf(b, "\"auth\":{");
    for (int e = 0; e < HE_STATS_AUTH_COUNT; e++)
        he_buf_printf(b, "\"%s\":%llu,", he_metrics_auth[e], (unsigned long long)t->auth[e]);
    he_json_u64(b, "playlist_rewrites", t->auth_rewrites, true);
    he_buf_printf(b, "\"rewrite_cache\":{");
    for (int e = 0; e < HE_STATS_AUTH_KEPT_COUNT; e++)
        he_buf_printf(b, "\"%s\":%llu,", he_metrics_auth_kept[e],
                      (unsigned long long)t->auth_kept[e]);
    he_json_u64(b, "entries", t->auth_kept_entries, true);
    he_json_u64(b, "bytes", t->auth_kept_bytes, false);
    he_buf_printf(b, "}");
    he_buf_printf(b, "},");
    he_buf_printf(b, "\"access_log\":{\"enabled\":%s,\"path\":", s->alog_on ? "true" : "false");
    he_buf_json_str(b, s->alog_path ? s->alog_path : "");
    he_buf_printf(b, ",\"format\":\"%s\",", s->alog_format ? s->alog_format : "combined");
    he_json_u64(b, "written", s->alog_written, true);
    he_json_u64(b, "dropped", t->log_dropped, true);
    he_json_u64(b, "write_errors", s->alog_write_errors, false);
    he_buf_printf(b, "},\"latency_us\":{");
    he_json_latency(b, "ttfb", &t->ttfb);
    he_buf_printf(b, ",");
    he_json_latency(b, "total", &t->total);
    he_buf_printf(b, ",\"last_1s\":{");
    he_json_latency(b, "ttfb", &s->ttfb_1s);
    he_buf_printf(b, ",");
    he_json_latency(b, "total", &s->total_1s);
    he_buf_printf(b, "},\"last_10s\":{");
    he_json_latency(b, "ttfb", &s->ttfb_10s);
    he_buf_printf(b, ",");
    he_json_latency(b, "total", &s->total_10s);
    he_buf_printf(b, "}");
    he_buf_printf(b,
                  "},\"throughput\":{\"1s\":{\"gbps\":%.6f,\"rps\":%.1f},"
                  "\"10s\":{\"gbps\":%.6f,\"rps\":%.1f}},\"cpu_seconds\":%.2f,\"workers\":[",
                  he_metrics_num(s->gbps_1s), he_metrics_num(s->rps_1s),
                  he_metrics_num(s->gbps_10s), he_metrics_num(s->rps_10s), s->process_cpu_seconds);
    for (unsigned i = 0; i < s->nworkers; i++) {
        const he_metrics_worker_t *w = &s->workers[i];
        he_buf_printf(b, "%s{\"id\":%u,\"cpu\":%d,\"generation\":%u,", i ? "," : "", w->id, w->cpu,
                      w->generation);
        he_json_counts(b, &w->st);
        he_buf_printf(b,
                      "\"rps\":%.1f,\"gbps\":%.6f,\"cpu_pct\":%.1f,\"cpu_seconds\":%.2f,"
                      "\"log_dropped\":%llu}",
                      he_metrics_num(w->rps_1s), he_metrics_num(w->gbps_1s),
                      he_metrics_num(w->cpu_pct_1s), w->cpu_seconds,
                      (unsigned long long)w->st.log_dropped);
    }
    he_buf_printf(b, "]");
    if (s->history) he_metrics_json_history(b, s->history, s->nhistory);
    he_buf_printf(b, "}\n");
}
