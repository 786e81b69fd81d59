/* The server as the control thread sees it: the accessors declared in
 * server.h's "public API for the control thread". control/ never reads
 * he_server_t or he_worker_t itself, so the data path's structures can
 * change without touching it; this file is where the two meet. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/alog_ring.h"
#include "server/handler/cache_glue.h"
#include "server/http/http_util.h"
#include "server/net/tls.h"
#include "server/server.h"

int he_server_new(he_server_t **out, he_conf_t *conf, char *err, size_t errlen)
{
    he_server_t *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rc = he_server_init(s, conf, err, errlen);
    if (rc < 0) {
        he_server_free(s); /* no thread runs yet */
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void he_server_delete(he_server_t *s)
{
    if (!s) return;
    he_server_free(s);
    free(s);
}

const he_conf_t *he_server_conf(const he_server_t *s)
{
    return s->conf;
}

unsigned he_server_nworkers(const he_server_t *s)
{
    return s->nworkers;
}

void he_server_worker_view(const he_server_t *s, unsigned k, he_server_worker_view_t *out)
{
    he_worker_t *w = &s->workers[k];

    out->id = w->id;
    out->cpu = w->cpu;
    out->tid = atomic_load(&w->tid);
    out->running = w->thread != 0;
    out->exited = atomic_load(&w->exited) != 0;
    out->conf_ack = atomic_load(&w->conf_ack);
    out->stats = &w->stats;
}

/* ---------------------------------------------------------------- access log */

he_alog_ring_t *he_server_alog_ring(const he_server_t *s, unsigned k)
{
    return s->workers[k].alog;
}

void he_server_set_alog_notify(he_server_t *s, void *uv_async)
{
    s->alog_notify = uv_async;
}

void he_server_set_alog_enabled(he_server_t *s, bool on)
{
    for (unsigned k = 0; k < s->nworkers; k++)
        atomic_store(&s->workers[k].alog->enabled, on);
}

/* ---------------------------------------------------------------- listeners */

unsigned he_server_nlisteners(const he_server_t *s)
{
    return s->nlisten;
}

const char *he_server_listener_text(const he_server_t *s, unsigned li)
{
    return he__listener_conf(s, li, NULL)->text;
}

int he_server_listener_fd(const he_server_t *s, unsigned li, unsigned k)
{
    return s->listen_fds[li * s->nworkers + k];
}

void he_server_set_retiring(he_server_t *s)
{
    atomic_store(&s->retiring, 1);
}

/* ---------------------------------------------------------------- features, TLS */

const he_features_t *he_server_features(const he_server_t *s)
{
    return &s->features;
}

int he_server_tls_describe(const he_server_t *s, const he_stats_t *totals, char *buf, size_t cap)
{
    size_t len;

    if (cap < 2) return -ENOBUFS;
    he_tls_describe(s, totals, buf, cap);
    len = strlen(buf);
    return len < cap - 1 ? (int)len : -ENOBUFS; /* a full buffer may have been cut */
}

int he_server_tls_reload(he_server_t *s, const he_conf_t *conf, char *err, size_t errlen)
{
    return s->tls ? he_tls_reload(s->tls, conf, err, errlen) : 0;
}

/* ---------------------------------------------------------------- cache, HTTP */

bool he_server_cache_enabled(void)
{
    return he__cache_enabled();
}

const char *he_server_cache_ram_arena(void)
{
    return he__cache_ram_arena();
}

int he_server_purge(he_server_t *s, const char *target, size_t len)
{
    if (!s->cache) return -ENODEV;
    /* the generation's snapshot: cache keys are made as its workers make them */
    return he__cache_purge(&((he_scache_t *)s->cache)->conf, target, len);
}

unsigned he_server_parents(const he_server_t *s, he_server_parent_t *out, unsigned cap,
                           const char **select)
{
    const he_scache_t *sc = s->cache;
    uint64_t now_ms = he__now_ns() / 1000000;
    unsigned n;
    if (!sc) return 0;
    n = sc->norigins < cap ? sc->norigins : cap;
    *select = sc->conf.origin_select == HE_CONF_SELECT_HASH ? "hash" : "ordered";
    for (unsigned i = 0; i < n; i++) {
        he_cache_health_view_t v;
        const char *u = sc->conf.origin_urls[i], *sp = strchr(u, ' ');
        size_t ul = sp ? (size_t)(sp - u) : strlen(u);
        memset(&out[i], 0, sizeof(out[i]));
        snprintf(out[i].url, sizeof(out[i].url), "%.*s", (int)ul, u);
        out[i].weight = sc->origins[i].parent.weight;
        he_cache_health_get(sc->health, i, now_ms, &v);
        out[i].up = v.up;
        out[i].down_left_ms = v.down_left_ms;
        out[i].marked_down = v.marked_down;
    }
    return n;
}

const char *he_server_http_reason(int status)
{
    return he_http_reason(status);
}
