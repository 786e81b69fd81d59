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

/* Every histogram of the statistics, for init, free and merge. */
static he_lg_hist_t *he_lg_stats_hist(he_lg_stats_t *s, int i)
{
    he_lg_hist_t *all[] = {&s->ttfb_us, &s->download_us, &s->ll.hold_us, &s->ll.hint_us,
                           &s->ll.latency_ms};
    return i < (int)(sizeof(all) / sizeof(all[0])) ? all[i] : NULL;
}

int he_lg_stats_init(he_lg_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; he_lg_stats_hist(s, i); i++)
        if (he_lg_hist_init(he_lg_stats_hist(s, i)) < 0) {
            while (i-- > 0)
                he_lg_hist_free(he_lg_stats_hist(s, i));
            return -ENOMEM;
        }
    return 0;
}

void he_lg_stats_free(he_lg_stats_t *s)
{
    for (int i = 0; he_lg_stats_hist(s, i); i++)
        he_lg_hist_free(he_lg_stats_hist(s, i));
}

static void he_lg_stats_merge_ll(he_lg_ll_stats_t *d, const he_lg_ll_stats_t *s)
{
    d->reloads += s->reloads;
    d->deltas += s->deltas;
    d->st400 += s->st400;
    d->st503 += s->st503;
    d->parts += s->parts;
    d->part_bytes += s->part_bytes;
    d->hints += s->hints;
    d->part_misses += s->part_misses;
    d->not_held += s->not_held;
}

static void he_lg_stats_merge_audience(he_lg_stats_t *d, const he_lg_stats_t *s)
{
    if (s->joins && (!d->joins || s->first_join_ns < d->first_join_ns))
        d->first_join_ns = s->first_join_ns;
    if (s->last_join_ns > d->last_join_ns) d->last_join_ns = s->last_join_ns;
    d->joins += s->joins;
    d->leaves += s->leaves;
    for (int i = 0; i < HE_LG_SECONDS; i++) {
        d->joins_per_s[i] += s->joins_per_s[i];
        d->requests_per_s[i] += s->requests_per_s[i];
    }
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
    he_lg_stats_merge_ll(&d->ll, &s->ll);
    he_lg_stats_merge_audience(d, s);
    for (int i = 0; he_lg_stats_hist(d, i); i++)
        he_lg_hist_merge(he_lg_stats_hist(d, i), he_lg_stats_hist((he_lg_stats_t *)s, i));
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

static void he_lg_report_ll_text(FILE *f, const he_lg_stats_t *s)
{
    const he_lg_ll_stats_t *l = &s->ll;
    fprintf(f,
            "  ll-hls     blocking reloads %llu (deltas %llu, not held %llu), 400: %llu, "
            "503: %llu\n",
            (unsigned long long)l->reloads, (unsigned long long)l->deltas,
            (unsigned long long)l->not_held, (unsigned long long)l->st400,
            (unsigned long long)l->st503);
    fprintf(f,
            "             parts %llu (%.3f MB, %llu by preload hint), part misses %llu, "
            "part stalls %llu\n",
            (unsigned long long)l->parts, (double)l->part_bytes / 1e6, (unsigned long long)l->hints,
            (unsigned long long)l->part_misses, (unsigned long long)s->stalls);
    he_lg_report_hist(f, "hold", &l->hold_us);
    he_lg_report_hist(f, "hint", &l->hint_us);
    if (l->latency_ms.count)
        fprintf(f,
                "  latency    p50 %.3f s  p90 %.3f s  p99 %.3f s  max %.3f s  mean %.3f s "
                "(play head behind the playlist's end, %llu samples)\n",
                (double)he_lg_hist_percentile(&l->latency_ms, 50) / 1e3,
                (double)he_lg_hist_percentile(&l->latency_ms, 90) / 1e3,
                (double)he_lg_hist_percentile(&l->latency_ms, 99) / 1e3,
                (double)l->latency_ms.max / 1e3, he_lg_hist_mean(&l->latency_ms) / 1e3,
                (unsigned long long)l->latency_ms.count);
    else
        fprintf(f, "  latency    (none)\n");
}

/* The seconds of the run the per-second counts cover. */
static unsigned he_lg_report_seconds(const he_lg_summary_t *sum)
{
    double el = sum->elapsed_s;
    unsigned n = el > 0 ? (unsigned)el + 1 : 1;
    return n < HE_LG_SECONDS ? n : HE_LG_SECONDS;
}

static void he_lg_report_audience_text(FILE *f, const he_lg_summary_t *sum)
{
    const he_lg_stats_t *s = sum->s;
    fprintf(f, "  audience   joins %llu (first at %.3f s, last at %.3f s), leaves %llu\n",
            (unsigned long long)s->joins, (double)s->first_join_ns / 1e9,
            (double)s->last_join_ns / 1e9, (unsigned long long)s->leaves);
    fprintf(f, "  per second joins/requests:");
    for (unsigned i = 0; i < he_lg_report_seconds(sum); i++)
        fprintf(f, " %u/%u", s->joins_per_s[i], s->requests_per_s[i]);
    fputc('\n', f);
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
    if (hls && cfg->llhls) he_lg_report_ll_text(f, s);
    he_lg_report_audience_text(f, sum);
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

static void he_lg_report_seconds_json(FILE *f, const char *name, const uint32_t *v, unsigned n)
{
    fprintf(f, ",\"%s\":[", name);
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", v[i]);
    fputc(']', f);
}

static void he_lg_report_audience_json(FILE *f, const he_lg_summary_t *sum)
{
    const he_lg_stats_t *s = sum->s;
    unsigned n = he_lg_report_seconds(sum);
    fprintf(f,
            ",\"audience\":{\"joins\":%llu,\"leaves\":%llu,\"first_join_s\":%.3f,"
            "\"last_join_s\":%.3f",
            (unsigned long long)s->joins, (unsigned long long)s->leaves,
            (double)s->first_join_ns / 1e9, (double)s->last_join_ns / 1e9);
    he_lg_report_seconds_json(f, "joins_per_s", s->joins_per_s, n);
    he_lg_report_seconds_json(f, "requests_per_s", s->requests_per_s, n);
    fputc('}', f);
}

static void he_lg_report_ll_json(FILE *f, const he_lg_stats_t *s)
{
    const he_lg_ll_stats_t *l = &s->ll;
    fprintf(f,
            ",\"llhls\":{\"reloads\":%llu,\"deltas\":%llu,\"not_held\":%llu,\"status_400\":%llu,"
            "\"status_503\":%llu,\"parts\":%llu,\"part_bytes\":%llu,\"hints\":%llu,"
            "\"part_misses\":%llu,\"part_stalls\":%llu,",
            (unsigned long long)l->reloads, (unsigned long long)l->deltas,
            (unsigned long long)l->not_held, (unsigned long long)l->st400,
            (unsigned long long)l->st503, (unsigned long long)l->parts,
            (unsigned long long)l->part_bytes, (unsigned long long)l->hints,
            (unsigned long long)l->part_misses, (unsigned long long)s->stalls);
    he_lg_json_hist(f, "hold", &l->hold_us);
    fputc(',', f);
    he_lg_json_hist(f, "hint", &l->hint_us);
    const he_lg_hist_t *h = &l->latency_ms;
    fprintf(f,
            ",\"latency\":{\"count\":%llu,\"p50_s\":%.3f,\"p90_s\":%.3f,\"p99_s\":%.3f,"
            "\"max_s\":%.3f,\"mean_s\":%.3f}}",
            (unsigned long long)h->count, (double)he_lg_hist_percentile(h, 50) / 1e3,
            (double)he_lg_hist_percentile(h, 90) / 1e3, (double)he_lg_hist_percentile(h, 99) / 1e3,
            h->count ? (double)h->max / 1e3 : 0.0, he_lg_hist_mean(h) / 1e3);
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
    he_lg_report_audience_json(f, sum);
    if (hls && cfg->llhls) he_lg_report_ll_json(f, s);
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
