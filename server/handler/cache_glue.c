/* The edge cache's start-up and teardown.
 *
 * The RAM tier and the SSD store are process-wide: created by the first
 * worker generation that has origin.urls and shared by every generation a
 * reload starts after it (a reload must not drop a warm cache), freed when
 * the last generation that uses them is freed, which is at exit. What they
 * are made with is therefore taken at start-up: a reload that changes
 * cache.ram_size, cache.ram_object_max, cache.admission, cache.ssd or numa
 * keeps the tiers it has (logged).
 *
 * Per generation (he_scache_t): a snapshot of the configuration and the
 * origins resolved with getaddrinfo, on the control thread. Per worker
 * (he_wcache_t): its origins (keep-alive pools, TLS context), fills table,
 * prefetch state, ring jobs and the per-connection send state, freed when
 * the worker exits. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "server/base/log.h"
#include "server/handler/cache_glue.h"

/* The RAM tier needs an arena even with cache.ram_size 0: fills stream
 * through RAM objects. Such a tier is tiny and publishes little. */
#define HE_CACHE_MIN_RAM (16u << 20)
#define HE_CACHE_RENDITIONS 256

__thread he_worker_t *he__cache_w;

/* The keys the tiers take at creation, as the configuration gave them. */
typedef struct he_cache_fixed {
    uint64_t ram_bytes, ram_object_max;
    bool admission, numa, ram_sendfile;
    he_conf_ram_huge_t ram_huge;
    unsigned nstores;
    char stores[HE_CONF_MAX_STORES][PATH_MAX];
    uint64_t store_bytes[HE_CONF_MAX_STORES];
} he_cache_fixed_t;

static struct {
    pthread_mutex_t mu;
    unsigned refs;
    he_cache_ram_t *ram;
    he_cache_store_t *store;
    he_cache_fixed_t fixed;   /* what ram and store were made with */
    he_server_t *servers[16]; /* generations using the tiers; the last is the newest */
    unsigned nservers;
} he_cache_g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* What a RAM tier's arena is made of: [0] as /stats names it, [1] as the
 * start-up log says it. */
static const char *const *he_cache_arena_names(const he_cache_ram_t *ram)
{
    static const char *const names[3][2] = {{"huge_pages", "anonymous huge pages"},
                                            {"memfd", "a memfd"},
                                            {"anonymous", "anonymous memory"}};
    if (he_cache_ram_arena_huge(ram, 0)) return names[0];
    return he_cache_ram_arena_fd(ram, 0) >= 0 ? names[1] : names[2];
}

const char *he__cache_ram_arena(void)
{
    const char *kind = NULL;
    pthread_mutex_lock(&he_cache_g.mu);
    if (he_cache_g.ram) kind = he_cache_arena_names(he_cache_g.ram)[0];
    pthread_mutex_unlock(&he_cache_g.mu);
    return kind;
}

bool he__cache_enabled(void)
{
    bool on;
    pthread_mutex_lock(&he_cache_g.mu);
    on = he_cache_g.refs > 0;
    pthread_mutex_unlock(&he_cache_g.mu);
    return on;
}

static void he_cache_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= 0)
        he_log_error("cache: %s", msg);
    else if (level == 1)
        he_log_warn("cache: %s", msg);
    else
        he_log_info("cache: %s", msg);
}

static int64_t he_cache_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void he_cache_fixed_get(const he_conf_t *conf, he_cache_fixed_t *f)
{
    memset(f, 0, sizeof(*f));
    f->ram_bytes = conf->cache_ram_bytes;
    f->ram_object_max = conf->cache_ram_object_max;
    f->admission = conf->cache_admission;
    f->numa = conf->numa;
    f->ram_sendfile = conf->cache_ram_sendfile;
    f->ram_huge = conf->cache_ram_huge_pages;
    f->nstores = conf->ncache_stores;
    for (unsigned i = 0; i < conf->ncache_stores; i++) {
        memcpy(f->stores[i], conf->cache_stores[i], sizeof(f->stores[i]));
        f->store_bytes[i] = conf->cache_store_bytes[i];
    }
}

/* Lists in keys ("" when none) what conf asks of the tiers that they,
 * made with f, do not have. */
static void he_cache_fixed_diff(const he_cache_fixed_t *f, const he_conf_t *conf, char *keys,
                                size_t cap)
{
    bool stores = f->nstores != conf->ncache_stores;
    size_t off = 0;

    for (unsigned i = 0; !stores && i < f->nstores; i++)
        stores = strcmp(f->stores[i], conf->cache_stores[i]) != 0 ||
                 f->store_bytes[i] != conf->cache_store_bytes[i];
    keys[0] = 0;
#define HE_KEY(cond, name)                                                                         \
    do {                                                                                           \
        if ((cond) && off < cap)                                                                   \
            off += (size_t)snprintf(keys + off, cap - off, "%s%s", off ? ", " : "", name);         \
    } while (0)
    HE_KEY(f->ram_bytes != conf->cache_ram_bytes, "cache.ram_size");
    /* without a RAM tier every object skips it, whatever the limit */
    HE_KEY(f->ram_object_max != conf->cache_ram_object_max &&
               (f->ram_bytes || conf->cache_ram_bytes),
           "cache.ram_object_max");
    HE_KEY(f->admission != conf->cache_admission, "cache.admission");
    HE_KEY(stores, "cache.ssd");
    HE_KEY(f->numa != conf->numa, "numa (the RAM tier's placement)");
    HE_KEY(f->ram_sendfile != conf->cache_ram_sendfile, "cache.ram_sendfile");
    HE_KEY(f->ram_huge != conf->cache_ram_huge_pages, "cache.ram_huge_pages");
#undef HE_KEY
}

bool he__thp_available(void)
{
    char buf[128] = {0};
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
    bool ok;
    if (!f) return false;
    ok = fgets(buf, sizeof(buf), f) && !strstr(buf, "[never]");
    fclose(f);
    return ok;
}

/* cache.ram_huge_pages: auto takes huge pages (docs/performance.md, "The
 * RAM tier in huge pages": 7 % more bytes per CPU-second for hits over
 * plain TCP at line rate) unless kTLS serves the TLS listeners, which send
 * hits by sendfile from the memfd, or the kernel has no huge pages to
 * give. */
static bool he_cache_ram_huge(const he_conf_t *conf, const he_features_t *features,
                              const char **why)
{
    bool thp = he__thp_available();
    switch (conf->cache_ram_huge_pages) {
    case HE_CONF_RAM_HUGE_ON:
        *why = thp ? "cache.ram_huge_pages: true"
                   : "cache.ram_huge_pages: true, but transparent huge pages are off: base pages";
        return true;
    case HE_CONF_RAM_HUGE_OFF:
        *why = "cache.ram_huge_pages: false";
        return false;
    default:
        break;
    }
    if (!thp) {
        *why = "auto: transparent huge pages are off in the kernel";
        return false;
    }
    if (conf->ntls_listen && conf->tls_ktls && features->ktls && conf->cache_ram_sendfile) {
        *why = "auto: kTLS serves tls.listen and sends hits from the memfd";
        return false;
    }
    *why = "auto";
    return true;
}

/* Creates the shared tiers (first generation) under he_cache_g.mu. */
static int he_cache_tiers_open(const he_conf_t *conf, const he_features_t *features, char *err,
                               size_t errlen)
{
    const char *why = "";
    he_cache_ram_opts_t ro;
    he_cache_stats_t st;
    int rc;

    memset(&ro, 0, sizeof(ro));
    ro.bytes = conf->cache_ram_bytes >= HE_CACHE_MIN_RAM ? conf->cache_ram_bytes : HE_CACHE_MIN_RAM;
    ro.object_max = conf->cache_ram_bytes ? conf->cache_ram_object_max : 1;
    ro.numa = conf->numa;
    ro.admission = conf->cache_admission;
    ro.memfd = conf->cache_ram_sendfile;
    ro.huge = he_cache_ram_huge(conf, features, &why);
    he_cache_fixed_get(conf, &he_cache_g.fixed);
    he_cache_g.ram = he_cache_ram_new(&ro);
    if (!he_cache_g.ram) {
        snprintf(err, errlen, "cache: cannot allocate the RAM tier (%llu bytes)",
                 (unsigned long long)ro.bytes);
        return -ENOMEM;
    }
    he_log_info("cache: RAM tier of %llu MiB in %s (%s)", (unsigned long long)(ro.bytes >> 20),
                he_cache_arena_names(he_cache_g.ram)[1], why);
    if (conf->ncache_stores) {
        he_cache_store_opts_t so;
        memset(&so, 0, sizeof(so));
        memset(&st, 0, sizeof(st));
        for (unsigned i = 0; i < conf->ncache_stores; i++) {
            so.dirs[i] = conf->cache_stores[i];
            so.bytes[i] = conf->cache_store_bytes[i];
        }
        so.ndirs = conf->ncache_stores;
        so.fsync = HE_CACHE_FSYNC_NONE;
        so.log = he_cache_log;
        rc = he_cache_store_open(&he_cache_g.store, &so, he_cache_wall_now(), &st);
        if (rc < 0) {
            snprintf(err, errlen, "cache.ssd: %s", strerror(-rc));
            he_cache_ram_free(he_cache_g.ram);
            he_cache_g.ram = NULL;
            he_cache_g.store = NULL;
            return rc;
        }
        he_log_info("cache: SSD tier: %llu objects in %u directories",
                    (unsigned long long)he_cache_store_count(he_cache_g.store), so.ndirs);
    }
    he_log_info("cache: RAM tier %llu bytes over %d partitions, %u origins",
                (unsigned long long)ro.bytes, he_cache_ram_nodes(he_cache_g.ram),
                conf->norigin_urls);
    return 0;
}

int he__cache_server_init(he_server_t *s, char *err, size_t errlen)
{
    const he_conf_t *conf = s->conf;
    he_scache_t *sc;
    int n, rc = 0;

    if (conf->norigin_urls == 0) return 0; /* a file server, exactly as before */
    sc = calloc(1, sizeof(*sc));
    if (!sc) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memcpy(&sc->conf, conf, sizeof(*conf));
    n = he_cache_origins_resolve(conf, sc->origins, err, errlen);
    if (n < 0) {
        free(sc);
        return n;
    }
    sc->norigins = (unsigned)n;
    sc->health = he_cache_health_new(sc->norigins, conf->origin_down_time_ms);
    if (!sc->health) {
        free(sc);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    snprintf(sc->via, sizeof(sc->via), "1.1 %s", he__via_name());

    pthread_mutex_lock(&he_cache_g.mu);
    if (he_cache_g.nservers == sizeof(he_cache_g.servers) / sizeof(he_cache_g.servers[0])) {
        rc = -ENOSPC;
        snprintf(err, errlen, "cache: too many worker generations");
    } else if (he_cache_g.refs == 0) {
        rc = he_cache_tiers_open(conf, &s->features, err, errlen);
    } else {
        char keys[160];
        he_cache_fixed_diff(&he_cache_g.fixed, conf, keys, sizeof(keys));
        if (keys[0])
            he_log_warn("cache: %s: changes take effect at restart (the RAM and SSD tiers outlive "
                        "reloads and keep what they were made with)",
                        keys);
    }
    if (rc == 0) {
        he_cache_g.refs++;
        he_cache_g.servers[he_cache_g.nservers++] = s;
        sc->ram = he_cache_g.ram;
        sc->store = he_cache_g.store;
        s->cache = sc;
    }
    pthread_mutex_unlock(&he_cache_g.mu);
    if (rc < 0) {
        he_cache_health_free(sc->health);
        free(sc);
    }
    return rc;
}

void he__cache_server_free(he_server_t *s)
{
    if (!s->cache) return;
    pthread_mutex_lock(&he_cache_g.mu);
    for (unsigned i = 0; i < he_cache_g.nservers; i++)
        if (he_cache_g.servers[i] == s) {
            memmove(&he_cache_g.servers[i], &he_cache_g.servers[i + 1],
                    (he_cache_g.nservers - i - 1) * sizeof(he_cache_g.servers[0]));
            he_cache_g.nservers--;
            break;
        }
    if (--he_cache_g.refs == 0) {
        if (he_cache_g.store) {
            he_cache_store_unlink_sync(he_cache_g.store);
            he_cache_store_close(he_cache_g.store);
        }
        he_cache_ram_free(he_cache_g.ram);
        he_cache_g.store = NULL;
        he_cache_g.ram = NULL;
    }
    pthread_mutex_unlock(&he_cache_g.mu);
    he_cache_health_free(((he_scache_t *)s->cache)->health);
    free(s->cache);
    s->cache = NULL;
}

/* ---------------------------------------------------------------- workers */

static void he_cache_refresh_wall(he_worker_t *w)
{
    he__wcache(w)->wall_off_ms = he_cache_wall_now() - (int64_t)(he__now_ns() / 1000000);
}

/* How RAM-tier bodies leave, as the worker's log says it. */
static const char *he_cache_body_sends(const he_wcache_t *wc)
{
    bool splice = wc->conf->cache_ram_splice;
    if (wc->arena_huge && splice)
        return "vmsplice of the arena's huge pages for large bodies over plain TCP, send otherwise";
    if (wc->arena_sendfile && splice)
        return "vmsplice of the arena's mapping for large bodies over plain TCP, sendfile from "
               "its memfd over kTLS, send for small";
    if (wc->arena_sendfile)
        return "sendfile from the arena's memfd for large bodies, send for small";
    if (wc->fixed_buf) return "send_zc (fixed buffer) for large spans, send for small";
    return "send/sendmsg";
}

int he__cache_worker_setup(he_worker_t *w)
{
    he_scache_t *sc = w->server->cache;
    he_wcache_t *wc;
    he_cache_origins_opts_t oo;
    he_cache_fills_opts_t fo;
    char err[256];
    int rc;

    if (!sc) return 0;
    wc = calloc(1, sizeof(*wc));
    if (!wc) return -ENOMEM;
    w->hook_data[HE_HOOK_CACHE] = wc;
    he__cache_w = w;
    wc->sc = sc;
    wc->conf = &sc->conf;
    wc->ram = sc->ram;
    wc->store = sc->store;
    wc->st = &w->stats.cache;
    wc->node = w->node >= 0 && w->node < he_cache_ram_nodes(sc->ram) ? w->node : 0;
    he_cache_refresh_wall(w);

    memset(&oo, 0, sizeof(oo));
    oo.conf = wc->conf;
    oo.origins = sc->origins;
    oo.norigins = sc->norigins;
    oo.tls_ca_file = wc->conf->origin_tls_ca_file[0] ? wc->conf->origin_tls_ca_file : NULL;
    oo.health = sc->health;
    oo.via = sc->via;
    rc = he_cache_origins_new(&wc->origins, &oo, err, sizeof(err));
    if (rc < 0) {
        he_log_error("worker %u: origins: %s", w->id, err);
        return rc;
    }
    memset(&fo, 0, sizeof(fo));
    fo.conf = wc->conf;
    fo.ram = wc->ram;
    fo.node = wc->node;
    fo.store = wc->store;
    fo.stats = wc->st;
    wc->fills = he_cache_fills_new(&fo);
    wc->pf = he_cache_prefetch_new(wc->conf, HE_CACHE_RENDITIONS);
    /* Untouched pages cost nothing: one entry per connection slot. */
    wc->cc_bytes = sizeof(he_cconn_t) * w->conn_cap;
    wc->cc = mmap(NULL, wc->cc_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (wc->cc == MAP_FAILED) wc->cc = NULL;
    if (!wc->fills || !wc->pf || !wc->cc) return -ENOMEM;

    /* Zero-copy sends from the node arena: registered once as fixed
     * buffer 0, so SEND_ZC does not pin pages per operation. */
    w->zc_usage = w->server->features.zc_report_usage;
    /* from the generation's configuration: a reload that changes them
     * starts new workers, the draining ones keep theirs */
    w->zc_min = wc->conf->cache_zero_copy_min;
    w->zc_adapt = wc->conf->cache_zero_copy_adapt;
    wc->arena_sendfile = he_cache_ram_arena_fd(wc->ram, wc->node) >= 0;
    wc->arena_huge = he_cache_ram_arena_huge(wc->ram, wc->node);
    if (wc->conf->cache_ram_sendfile && !wc->arena_sendfile && !wc->arena_huge && w->id == 0)
        he_log_warn("cache: the RAM tier is not in a memfd (shmem huge pages forced in "
                    "/sys/kernel/mm/transparent_hugepage, or memfd_create failed): hits by send/send_zc");
    /* a huge-page arena drops freed chunks' pages (MADV_DONTNEED), which a
     * registration would keep pinned under the mapping */
    if (w->server->features.send_zc && !wc->arena_sendfile && !wc->arena_huge) {
        struct iovec iov;
        void *base = NULL;
        size_t len = 0;
        he_cache_ram_arena(wc->ram, wc->node, &base, &len);
        iov.iov_base = base;
        iov.iov_len = len;
        if (base && len && (rc = io_uring_register_buffers(&w->ring, &iov, 1)) == 0) {
            wc->fixed_buf = true;
            w->zc = true; /* the send path may send_zc from registered buffer 0 */
        } else
            he_log_warn("worker %u: cannot register the RAM arena as a fixed buffer (%s): "
                        "plain sends",
                        w->id, base ? strerror(-rc) : "no arena");
    }
    he_log_info("worker %u: cache: RAM partition %d, body sends %s", w->id, wc->node,
                he_cache_body_sends(wc));
    return 0;
}

void he__cache_worker_cleanup(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    if (!wc) return;
    he__oio_cleanup(w); /* fails the fills still running; the ring is gone */
    he__llup_cleanup(w);
    he_cache_fills_free(wc->fills);
    if (wc->pf) he_cache_prefetch_free(wc->pf);
    if (wc->origins) he_cache_origins_free(wc->origins);
    if (wc->cc) munmap(wc->cc, wc->cc_bytes);
    free(wc->jobs);
    free(wc->free_jobs);
    free(wc);
    w->hook_data[HE_HOOK_CACHE] = NULL;
}

void he__cache_tick(he_worker_t *w)
{
    he_cache_refresh_wall(w);
    he_cache_pool_expire(he__wcache(w)->origins, w->now_ms, 30000);
    he__oio_tick(w);
    he__llup_tick(w);
}

/* ---------------------------------------------------------------- purge */

int he__cache_purge(const he_conf_t *conf, const char *target, size_t len)
{
    he_cache_key_t *key = malloc(sizeof(*key));
    int n = 0;
    if (!key) return -ENOMEM;
    if (he_cache_key_make(conf, target, len, key) < 0) {
        free(key);
        return -EINVAL;
    }
    /* Both tiers are thread-safe for removal; the tiers live until the
     * last generation is freed, which cannot happen during this call (the
     * control thread frees generations). */
    pthread_mutex_lock(&he_cache_g.mu);
    /* SSD first: a promotion in flight read the RAM epoch before its SSD
     * lookup, so it either missed the SSD copy or sees the RAM tier's
     * removal bump the epoch and drops its copy (he__oio_promote) */
    if (he_cache_g.store && he_cache_store_remove(he_cache_g.store, key) == 0) n++;
    if (he_cache_g.ram) n += he_cache_ram_remove(he_cache_g.ram, key);
    pthread_mutex_unlock(&he_cache_g.mu);
    free(key);
    return n;
}
