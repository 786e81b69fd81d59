/* The edge cache's figures in /metrics (hlsedge_cache_*) and /stats
 * ("cache": tiers with hit ratios, which the dashboard draws, and the other
 * counters of he_cache_stats_t). Summed like every other counter: the
 * per-worker he_cache_stats_t lives inside he_stats_t. Nothing is written
 * when the cache is off (no origin.urls): the dashboard then says n/a. */
#include <stddef.h>

#include "cache/cache.h"
#include "server/control/metrics.h"
#include "server/server.h"

static const char *const he_mc_tiers[HE_CACHE_TIER_COUNT] = {"ram", "ssd"};

typedef struct he_mc_counter {
    const char *name, *help;
    size_t off; /* in he_cache_stats_t */
} he_mc_counter_t;

#define HE_MC(f) offsetof(he_cache_stats_t, f)
#define HE_MS(f) offsetof(he_stats_t, cache.f) /* in the worker's whole stats block */

static const he_mc_counter_t he_mc_counters[] = {
    {"negative_hits", "Cached 404 answers served.", HE_MC(negative_hits)},
    {"stale_serves", "Stale objects served (stale-while-revalidate, stale-if-error).",
     HE_MC(stale_serves)},
    {"revalidations", "Conditional requests sent to origins.", HE_MC(revalidations)},
    {"revalidated_304", "Revalidations answered 304 (entry refreshed).", HE_MC(revalidated_304)},
    {"fills", "Origin fills started.", HE_MC(fills)},
    {"fills_failed", "Origin fills that failed.", HE_MC(fills_failed)},
    {"bytes_filled", "Body bytes received from origins.", HE_MC(bytes_filled)},
    {"coalesced_waiters", "Requests that joined a fill already running.", HE_MC(coalesced_waiters)},
    {"origin_requests", "Requests sent to origins.", HE_MC(origin_requests)},
    {"origin_failovers", "Fetches moved to the next origin.", HE_MC(origin_failovers)},
    {"origin_reused", "Origin requests sent on a pooled connection.", HE_MC(origin_reused)},
    {"ram_admitted", "Objects published into the RAM tier.", HE_MC(ram_admitted)},
    {"ram_rejected", "Objects not published (too large or not cacheable).", HE_MC(ram_rejected)},
    {"ram_ghost_hits", "S3-FIFO ghost hits (re-inserted into the main queue).",
     HE_MC(ram_ghost_hits)},
    {"ram_overflow", "RAM chunks taken from malloc because the arena was pinned full.",
     HE_MC(ram_overflow)},
    {"ram_evict_held", "RAM evictions that passed over an object a send or fill still held.",
     HE_MC(ram_evict_held)},
    {"prefetch_issued", "Prefetch fills started.", HE_MC(prefetch_issued)},
    {"prefetch_used", "Prefetched objects later requested.", HE_MC(prefetch_used)},
    {"prefetch_wasted", "Prefetched objects evicted without a request.", HE_MC(prefetch_wasted)},
    {"store_writes", "Objects written to the SSD tier.", HE_MC(store_writes)},
    {"store_write_bytes", "Bytes written to the SSD tier.", HE_MC(store_write_bytes)},
    {"zc_sends", "RAM-tier bodies sent zero-copy (IORING_OP_SEND_ZC), notified.", HE_MC(zc_sends)},
    {"zc_copied", "Zero-copy sends the kernel reported as copied after all (loopback, no offload).",
     HE_MC(zc_copied)},
    {"ram_vmsplice_bytes", "RAM-tier body bytes handed to TCP by vmsplice of the arena's mapping "
                           "(cache.ram_splice).", HE_MC(ram_vmsplice_bytes)},
    {"promotions", "SSD hits copied into the RAM tier.", HE_MC(promotions)},
    {"parent_marked_down", "Origin failures that marked a parent down.",
     HE_MC(parent_marked_down)},
    {"via_loops", "Requests refused 508: their Via named this box already.", HE_MC(via_loops)},
};

#define HE_MC_N (sizeof(he_mc_counters) / sizeof(he_mc_counters[0]))

static uint64_t he_mc_get(const he_cache_stats_t *c, size_t off)
{
    return *(const uint64_t *)((const char *)c + off);
}

static void he_mc_parents_prom(const he_metrics_snap_t *s, he_buf_t *b);

void he__metrics_cache_prom(const he_metrics_snap_t *s, he_buf_t *b)
{
    const char *oerr[HE_CACHE_OERR_COUNT], *derr[HE_CACHE_DERR_COUNT], *arena;

    if (!he_server_cache_enabled()) return;
    for (int e = 0; e < HE_CACHE_OERR_COUNT; e++)
        oerr[e] = he_cache_oerr_name((he_cache_oerr_t)e);
    for (int e = 0; e < HE_CACHE_DERR_COUNT; e++)
        derr[e] = he_cache_derr_name((he_cache_derr_t)e);
    he__prom_per_worker_by(b, s, "cache_hits_total", "Cache hits by tier.", "tier", he_mc_tiers,
                           HE_MS(hits), HE_CACHE_TIER_COUNT);
    he__prom_per_worker_by(b, s, "cache_misses_total", "Cache misses by tier.", "tier", he_mc_tiers,
                           HE_MS(misses), HE_CACHE_TIER_COUNT);
    he__prom_per_worker_by(b, s, "cache_evictions_total", "Objects evicted by tier.", "tier",
                           he_mc_tiers, HE_MS(evictions), HE_CACHE_TIER_COUNT);
    he__prom_per_worker_by(b, s, "cache_origin_errors_total", "Origin errors by cause.", "cause",
                           oerr, HE_MS(origin_errors), HE_CACHE_OERR_COUNT);
    he__prom_per_worker_by(b, s, "cache_disk_errors_total", "SSD tier errors by cause.", "cause",
                           derr, HE_MS(disk_errors), HE_CACHE_DERR_COUNT);
    for (size_t k = 0; k < HE_MC_N; k++) {
        const he_mc_counter_t *m = &he_mc_counters[k];
        he_buf_printf(b,
                      "# HELP hlsedge_cache_%s_total %s\n# TYPE hlsedge_cache_%s_total counter\n",
                      m->name, m->help, m->name);
        for (unsigned i = 0; i < s->nworkers; i++)
            he_buf_printf(b, "hlsedge_cache_%s_total{worker=\"%u\"} %llu\n", m->name,
                          s->workers[i].id,
                          (unsigned long long)he_mc_get(&s->workers[i].st.cache, m->off));
    }
    he_mc_parents_prom(s, b);
    if ((arena = he_server_cache_ram_arena()))
        he_buf_printf(b, "# HELP hlsedge_cache_ram_arena_info What the RAM tier's arena is made "
                         "of (cache.ram_huge_pages).\n# TYPE hlsedge_cache_ram_arena_info gauge\n"
                         "hlsedge_cache_ram_arena_info{arena=\"%s\"} 1\n",
                      arena);
}

/* Every parent's state, and its requests and errors per worker. */
static void he_mc_parents_prom(const he_metrics_snap_t *s, he_buf_t *b)
{
    const char *urls[HE_CONF_MAX_ORIGINS];
    if (!s->nparents) return;
    for (unsigned p = 0; p < s->nparents; p++)
        urls[p] = s->parents[p].url;
    he_buf_printf(b, "# HELP hlsedge_cache_parent_up Whether an origin is up (1) or marked down "
                     "for origin.down_time after a failure (0).\n"
                     "# TYPE hlsedge_cache_parent_up gauge\n");
    for (unsigned p = 0; p < s->nparents; p++)
        he_buf_printf(b, "hlsedge_cache_parent_up{parent=\"%s\",weight=\"%u\",select=\"%s\"} %d\n",
                      urls[p], s->parents[p].weight, s->parent_select, s->parents[p].up ? 1 : 0);
    he_buf_printf(b, "# HELP hlsedge_cache_parent_down_total Times an origin was marked down.\n"
                     "# TYPE hlsedge_cache_parent_down_total counter\n");
    for (unsigned p = 0; p < s->nparents; p++)
        he_buf_printf(b, "hlsedge_cache_parent_down_total{parent=\"%s\"} %llu\n", urls[p],
                      (unsigned long long)s->parents[p].marked_down);
    he__prom_per_worker_by(b, s, "cache_parent_requests_total", "Requests sent to each origin.",
                           "parent", urls, HE_MS(parent_requests), (int)s->nparents);
    he__prom_per_worker_by(b, s, "cache_parent_errors_total",
                           "Failed attempts on each origin (any cause).", "parent", urls,
                           HE_MS(parent_errors), (int)s->nparents);
}

static void he_mc_parents_json(const he_metrics_snap_t *s, he_buf_t *b)
{
    const he_cache_stats_t *c = &s->total.cache;
    he_buf_printf(b, ",\"parents\":{\"select\":\"%s\",\"list\":[",
                  s->parent_select ? s->parent_select : "ordered");
    for (unsigned p = 0; p < s->nparents; p++) {
        const he_server_parent_t *x = &s->parents[p];
        he_buf_printf(b, "%s{\"url\":", p ? "," : "");
        he_buf_json_str(b, x->url);
        he_buf_printf(b,
                      ",\"weight\":%u,\"state\":\"%s\",\"down_left_ms\":%llu,"
                      "\"marked_down\":%llu,\"requests\":%llu,\"errors\":%llu}",
                      x->weight, x->up ? "up" : "down", (unsigned long long)x->down_left_ms,
                      (unsigned long long)x->marked_down,
                      (unsigned long long)c->parent_requests[p],
                      (unsigned long long)c->parent_errors[p]);
    }
    he_buf_printf(b, "]}");
}

void he__metrics_cache_json(const he_metrics_snap_t *s, he_buf_t *b)
{
    const he_cache_stats_t *c = &s->total.cache;
    const char *arena;
    if (!he_server_cache_enabled()) return;
    he_buf_printf(b, "\"cache\":{\"tiers\":{");
    for (int t = 0; t < HE_CACHE_TIER_COUNT; t++) {
        uint64_t h = c->hits[t], m = c->misses[t];
        he_buf_printf(
            b, "%s\"%s\":{\"hits\":%llu,\"misses\":%llu,\"hit_ratio\":%.6f,\"evictions\":%llu}",
            t ? "," : "", he_mc_tiers[t], (unsigned long long)h, (unsigned long long)m,
            h + m ? (double)h / (double)(h + m) : 0.0, (unsigned long long)c->evictions[t]);
    }
    he_buf_printf(b, "}");
    for (size_t k = 0; k < HE_MC_N; k++)
        he_buf_printf(b, ",\"%s\":%llu", he_mc_counters[k].name,
                      (unsigned long long)he_mc_get(c, he_mc_counters[k].off));
    he_buf_printf(b, ",\"origin_errors\":{");
    for (int e = 0; e < HE_CACHE_OERR_COUNT; e++)
        he_buf_printf(b, "%s\"%s\":%llu", e ? "," : "", he_cache_oerr_name((he_cache_oerr_t)e),
                      (unsigned long long)c->origin_errors[e]);
    he_buf_printf(b, "},\"disk_errors\":{");
    for (int e = 0; e < HE_CACHE_DERR_COUNT; e++)
        he_buf_printf(b, "%s\"%s\":%llu", e ? "," : "", he_cache_derr_name((he_cache_derr_t)e),
                      (unsigned long long)c->disk_errors[e]);
    he_buf_printf(b, "}");
    if ((arena = he_server_cache_ram_arena())) he_buf_printf(b, ",\"ram_arena\":\"%s\"", arena);
    he_mc_parents_json(s, b);
    he_buf_printf(b, "},");
}
