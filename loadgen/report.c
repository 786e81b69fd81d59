/* loadgen: statistics (per thread, summed at the end) and the final report
 * as text for people or JSON for machines. */
#include "loadgen/engine.h"

#include <errno.h>
#include <string.h>

static const char *const he_lg_err_names[HE_LG_ERR_COUNT] = {"connect",  "timeout",     "closed",
                                                             "protocol", "http_status", "playlist",
                                                             "tls",      "verify",      "other"};

const char *he_lg_err_name(he_lg_err_t e)
{
    return (unsigned)e < HE_LG_ERR_COUNT ? he_lg_err_names[e] : "?";
}

int he_lg_stats_init(he_lg_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    if (he_lg_hist_init(&s->ttfb_us) < 0) return -ENOMEM;
    if (he_lg_hist_init(&s->download_us) < 0) {
        he_lg_hist_free(&s->ttfb_us);
        return -ENOMEM;
    }
    return 0;
}

void he_lg_stats_free(he_lg_stats_t *s)
{
    he_lg_hist_free(&s->ttfb_us);
    he_lg_hist_free(&s->download_us);
}

void he_lg_stats_merge(he_lg_stats_t *d, const he_lg_stats_t *s)
{
    d->requests += s->requests;
    d->bytes += s->bytes;
    d->errors += s->errors;
    d->stalls += s->stalls;
    d->body_bytes += s->body_bytes;
    d->segments += s->segments;
    d->playlists += s->playlists;
    d->stall_ns += s->stall_ns;
    d->play_ns += s->play_ns;
    d->startups += s->startups;
    d->startup_ns += s->startup_ns;
    d->switches_up += s->switches_up;
    d->switches_down += s->switches_down;
    d->connects += s->connects;
    d->retries += s->retries;
    d->aborted += s->aborted;
    d->verified += s->verified;
    for (int i = 0; i < HE_LG_ERR_COUNT; i++)
        d->err[i] += s->err[i];
    for (int i = 0; i < 600; i++)
        d->status[i] += s->status[i];
    for (int i = 0; i < HE_LG_MAX_RENDITIONS; i++) {
        he_lg_rend_stats_t *a = &d->rend[i];
        const he_lg_rend_stats_t *b = &s->rend[i];
        a->segments += b->segments;
        a->bytes += b->bytes;
        a->download_ns += b->download_ns;
        a->media_s += b->media_s;
        if (!a->bandwidth) a->bandwidth = b->bandwidth;
    }
    he_lg_hist_merge(&d->ttfb_us, &s->ttfb_us);
    he_lg_hist_merge(&d->download_us, &s->download_us);
}

static const double he_lg_pcts[] = {50, 90, 99, 99.9};
static const char *const he_lg_pct_names[] = {"p50", "p90", "p99", "p99.9"};

static void he_lg_report_hist(FILE *f, const char *name, const he_lg_hist_t *h)
{
    if (!h->count) {
        fprintf(f, "  %-10s (none)\n", name);
        return;
    }
    fprintf(f, "  %-10s", name);
    for (int i = 0; i < 4; i++)
        fprintf(f, " %s %.3f ms ", he_lg_pct_names[i],
                (double)he_lg_hist_percentile(h, he_lg_pcts[i]) / 1000.0);
    fprintf(f, " max %.3f ms  mean %.3f ms\n", (double)h->max / 1000.0,
            he_lg_hist_mean(h) / 1000.0);
}

static double he_lg_stall_ratio(const he_lg_stats_t *s)
{
    double total = (double)s->stall_ns + (double)s->play_ns;
    return total > 0 ? (double)s->stall_ns / total : 0;
}

void he_lg_report_text(FILE *f, const he_lg_summary_t *sum)
{
    const he_lg_config_t *cfg = sum->cfg;
    const he_lg_stats_t *s = sum->s;
    double el = sum->elapsed_s > 0 ? sum->elapsed_s : 1;
    bool hls = cfg->mode == HE_LG_MODE_HLS;
    fprintf(f, "hlsedge-loadgen: %s mode, %u %s, %u thread%s, %.2f s", hls ? "hls" : "urls",
            sum->clients, hls ? "viewers" : "connections", sum->threads,
            sum->threads == 1 ? "" : "s", sum->elapsed_s);
    if (hls)
        fprintf(f, " (%s, %s)", cfg->pace == HE_LG_PACE_REALTIME ? "realtime" : "linerate",
                cfg->rend == HE_LG_REND_ABR     ? "abr"
                : cfg->rend == HE_LG_REND_FIXED ? "fixed"
                                                : "mix");
    fprintf(f, "\n  requests   %llu (%.1f/s), errors %llu, aborted at the end %llu\n",
            (unsigned long long)s->requests, (double)s->requests / el,
            (unsigned long long)s->errors, (unsigned long long)s->aborted);
    fprintf(f, "  received   %.3f MB (%.3f Gbit/s), bodies %.3f MB\n", (double)s->bytes / 1e6,
            (double)s->bytes * 8 / el / 1e9, (double)s->body_bytes / 1e6);
    fprintf(f, "  connects   %llu, keep-alive retries %llu\n", (unsigned long long)s->connects,
            (unsigned long long)s->retries);
    he_lg_report_hist(f, "ttfb", &s->ttfb_us);
    he_lg_report_hist(f, hls ? "segment" : "response", &s->download_us);
    if (hls) {
        fprintf(f, "  segments   %llu, playlists %llu, switches up %llu down %llu\n",
                (unsigned long long)s->segments, (unsigned long long)s->playlists,
                (unsigned long long)s->switches_up, (unsigned long long)s->switches_down);
        if (cfg->pace == HE_LG_PACE_REALTIME)
            fprintf(f,
                    "  stalls     %llu, stall ratio %.4f%% (%.3f s stalled, %.3f s played), "
                    "startup mean %.3f ms\n",
                    (unsigned long long)s->stalls, he_lg_stall_ratio(s) * 100,
                    (double)s->stall_ns / 1e9, (double)s->play_ns / 1e9,
                    s->startups ? (double)s->startup_ns / (double)s->startups / 1e6 : 0.0);
        fprintf(f, "  renditions\n");
        for (int i = 0; i < HE_LG_MAX_RENDITIONS; i++) {
            const he_lg_rend_stats_t *r = &s->rend[i];
            if (!r->segments) continue;
            double dl = (double)r->download_ns / 1e9;
            fprintf(f,
                    "    #%-2d bandwidth %10llu  segments %8llu  %10.3f MB  media %9.1f s  "
                    "download %.1f Mbit/s\n",
                    i, (unsigned long long)r->bandwidth, (unsigned long long)r->segments,
                    (double)r->bytes / 1e6, r->media_s,
                    dl > 0 ? (double)r->bytes * 8 / dl / 1e6 : 0.0);
        }
    }
    fprintf(f, "  status    ");
    for (int i = 0; i < 600; i++)
        if (s->status[i]) fprintf(f, " %d: %llu", i, (unsigned long long)s->status[i]);
    fprintf(f, "\n  errors    ");
    bool any = false;
    for (int i = 0; i < HE_LG_ERR_COUNT; i++)
        if (s->err[i]) {
            fprintf(f, " %s: %llu", he_lg_err_name((he_lg_err_t)i), (unsigned long long)s->err[i]);
            any = true;
        }
    fprintf(f, "%s\n", any ? "" : " none");
    if (cfg->verify)
        fprintf(f, "  verify     %llu bodies checked, %zu URLs with differing bodies\n",
                (unsigned long long)s->verified, sum->verify_mismatches);
}

static void he_lg_json_hist(FILE *f, const char *name, const he_lg_hist_t *h)
{
    fprintf(f, "\"%s\":{\"count\":%llu", name, (unsigned long long)h->count);
    for (int i = 0; i < 4; i++)
        fprintf(f, ",\"%s_ms\":%.3f", he_lg_pct_names[i],
                (double)he_lg_hist_percentile(h, he_lg_pcts[i]) / 1000.0);
    fprintf(f, ",\"max_ms\":%.3f,\"mean_ms\":%.3f}", h->count ? (double)h->max / 1000.0 : 0.0,
            he_lg_hist_mean(h) / 1000.0);
}

void he_lg_report_json(FILE *f, const he_lg_summary_t *sum)
{
    const he_lg_config_t *cfg = sum->cfg;
    const he_lg_stats_t *s = sum->s;
    double el = sum->elapsed_s > 0 ? sum->elapsed_s : 1;
    bool hls = cfg->mode == HE_LG_MODE_HLS;
    fprintf(f, "{\"mode\":\"%s\",\"clients\":%u,\"threads\":%u,\"elapsed_s\":%.3f,",
            hls ? "hls" : "urls", sum->clients, sum->threads, sum->elapsed_s);
    fprintf(f, "\"pace\":\"%s\",", cfg->pace == HE_LG_PACE_REALTIME ? "realtime" : "linerate");
    fprintf(f,
            "\"requests\":%llu,\"requests_per_s\":%.1f,\"bytes\":%llu,\"body_bytes\":%llu,"
            "\"gbit_per_s\":%.4f,\"errors\":%llu,\"aborted\":%llu,\"connects\":%llu,"
            "\"retries\":%llu,",
            (unsigned long long)s->requests, (double)s->requests / el, (unsigned long long)s->bytes,
            (unsigned long long)s->body_bytes, (double)s->bytes * 8 / el / 1e9,
            (unsigned long long)s->errors, (unsigned long long)s->aborted,
            (unsigned long long)s->connects, (unsigned long long)s->retries);
    he_lg_json_hist(f, "ttfb", &s->ttfb_us);
    fputc(',', f);
    he_lg_json_hist(f, hls ? "segment_download" : "response", &s->download_us);
    fprintf(f,
            ",\"segments\":%llu,\"playlists\":%llu,\"stalls\":%llu,\"stall_s\":%.3f,"
            "\"play_s\":%.3f,\"stall_ratio\":%.6f,\"startup_mean_ms\":%.3f,"
            "\"switches_up\":%llu,\"switches_down\":%llu,",
            (unsigned long long)s->segments, (unsigned long long)s->playlists,
            (unsigned long long)s->stalls, (double)s->stall_ns / 1e9, (double)s->play_ns / 1e9,
            he_lg_stall_ratio(s),
            s->startups ? (double)s->startup_ns / (double)s->startups / 1e6 : 0.0,
            (unsigned long long)s->switches_up, (unsigned long long)s->switches_down);
    fprintf(f, "\"renditions\":[");
    bool first = true;
    for (int i = 0; i < HE_LG_MAX_RENDITIONS; i++) {
        const he_lg_rend_stats_t *r = &s->rend[i];
        if (!r->segments) continue;
        fprintf(f,
                "%s{\"index\":%d,\"bandwidth\":%llu,\"segments\":%llu,\"bytes\":%llu,"
                "\"media_s\":%.3f,\"download_s\":%.6f}",
                first ? "" : ",", i, (unsigned long long)r->bandwidth,
                (unsigned long long)r->segments, (unsigned long long)r->bytes, r->media_s,
                (double)r->download_ns / 1e9);
        first = false;
    }
    fprintf(f, "],\"status\":{");
    first = true;
    for (int i = 0; i < 600; i++)
        if (s->status[i]) {
            fprintf(f, "%s\"%d\":%llu", first ? "" : ",", i, (unsigned long long)s->status[i]);
            first = false;
        }
    fprintf(f, "},\"error_kinds\":{");
    first = true;
    for (int i = 0; i < HE_LG_ERR_COUNT; i++)
        if (s->err[i]) {
            fprintf(f, "%s\"%s\":%llu", first ? "" : ",", he_lg_err_name((he_lg_err_t)i),
                    (unsigned long long)s->err[i]);
            first = false;
        }
    fprintf(f, "}");
    if (cfg->verify)
        fprintf(f, ",\"verify\":{\"checked\":%llu,\"mismatched_urls\":%zu}",
                (unsigned long long)s->verified, sum->verify_mismatches);
    fprintf(f, "}");
}

void he_lg_report_sweep(FILE *f, const he_lg_config_t *cfg, const he_lg_sweep_point_t *pts,
                        size_t n, int best)
{
    const char *what = cfg->mode == HE_LG_MODE_HLS ? "viewers" : "connections";
    if (cfg->json) {
        fprintf(f, "{\"sweep\":[");
        for (size_t i = 0; i < n; i++)
            fprintf(f,
                    "%s{\"clients\":%u,\"gbit_per_s\":%.4f,\"requests_per_s\":%.1f,"
                    "\"p99_ms\":%.3f,\"errors\":%llu}",
                    i ? "," : "", pts[i].clients, pts[i].gbps, pts[i].rps, pts[i].p99_ms,
                    (unsigned long long)pts[i].errors);
        fprintf(f, "],\"sla_ms\":%.3f,\"sla_on\":\"%s\",\"best\":", cfg->sla_ms,
                cfg->sla_metric == HE_LG_SLA_TTFB ? "ttfb" : "total");
        if (best >= 0)
            fprintf(
                f,
                "{\"clients\":%u,\"gbit_per_s\":%.4f,\"requests_per_s\":%.1f,\"p99_ms\":%.3f}}\n",
                pts[best].clients, pts[best].gbps, pts[best].rps, pts[best].p99_ms);
        else
            fprintf(f, "null}\n");
        return;
    }
    fprintf(f, "sweep: p99 %s within %.3f ms\n  %12s %12s %12s %12s %8s\n",
            cfg->sla_metric == HE_LG_SLA_TTFB ? "ttfb" : "response", cfg->sla_ms, what, "Gbit/s",
            "req/s", "p99 ms", "errors");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %12u %12.3f %12.1f %12.3f %8llu%s\n", pts[i].clients, pts[i].gbps, pts[i].rps,
                pts[i].p99_ms, (unsigned long long)pts[i].errors,
                (int)i == best ? "  <- best" : "");
    if (best >= 0)
        fprintf(f, "best: %u %s, %.3f Gbit/s, %.1f req/s, p99 %.3f ms\n", pts[best].clients, what,
                pts[best].gbps, pts[best].rps, pts[best].p99_ms);
    else
        fprintf(f, "best: none met the SLA\n");
}
