/* server: one generation of workers, its lifecycle, and all the control
 * thread may know of it. server.c builds a generation from the layers:
 * net/ (workers, listeners, TLS), http/ (the protocol) and handler/ (the
 * router, the file handler, the edge cache); server_view.c answers the
 * control thread's questions. The structure itself is net/'s (net.h):
 * this header keeps it opaque, so control/ cannot reach into it. */
#ifndef HE_SERVER_H
#define HE_SERVER_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "conf/conf.h"
#include "server/base/alog_ring.h"
#include "server/base/features.h"
#include "server/base/stats.h"

/* ================================================================
 * public API for the control thread
 *
 * control/ knows a server (one generation of workers) only through the
 * declarations in this header. It never reads the fields of he_server_t
 * or he_worker_t: they are the data path's (net/net.h) and change with
 * it. Implemented in server.c and server_view.c.
 * ================================================================ */

typedef struct he_server he_server_t;

/* Allocates a generation for conf and initialises it (he_server_init:
 * sockets bound, nothing running). 0, or -errno with err set and *out
 * NULL. */
int he_server_new(he_server_t **out, he_conf_t *conf, char *err, size_t errlen);
/* he_server_free and the memory: after he_server_wait (or a failed start
 * followed by drain and wait). NULL is ignored. */
void he_server_delete(he_server_t *s);
/* The configuration the generation was last given (start or publish). */
const he_conf_t *he_server_conf(const he_server_t *s);
unsigned he_server_nworkers(const he_server_t *s);

/* One worker, as read at the call (the atomics loaded once). */
typedef struct he_server_worker_view {
    unsigned id;
    int cpu;                 /* pinned to, -1 = not pinned */
    int tid;                 /* kernel thread id; 0 until the thread runs */
    bool running;            /* its thread was started and not yet joined */
    bool exited;             /* the thread left its loop and freed its ring */
    unsigned conf_ack;       /* configuration generation it serves */
    const he_stats_t *stats; /* its live counters: the worker keeps writing */
} he_server_worker_view_t;

/* k < he_server_nworkers(s). */
void he_server_worker_view(const he_server_t *s, unsigned k, he_server_worker_view_t *out);

/* Worker k's access log ring (the control thread is its consumer). */
he_alog_ring_t *he_server_alog_ring(const he_server_t *s, unsigned k);
/* The uv_async_t producers wake when a ring fills up; before start. */
void he_server_set_alog_notify(he_server_t *s, void *uv_async);
/* Whether workers record requests: a log is open. */
void he_server_set_alog_enabled(he_server_t *s, bool on);

/* Listen addresses: conf->listen, then conf->tls_listen. Each has one
 * SO_REUSEPORT socket per worker. */
unsigned he_server_nlisteners(const he_server_t *s);
const char *he_server_listener_text(const he_server_t *s, unsigned li);
int he_server_listener_fd(const he_server_t *s, unsigned li, unsigned k);
/* The control thread is about to shut the listeners (a reload's
 * hand-over): an accept that fails then is not re-armed. */
void he_server_set_retiring(he_server_t *s);

const he_features_t *he_server_features(const he_server_t *s);
/* How s's workers wait for completions under conf's ring.* ("for up to 64
 * completions or 200 us"), as the start-up and reload logs say it. */
void he_server_describe_waits(const he_server_t *s, const he_conf_t *conf, char *buf, size_t len);

/* The TLS configuration and counters as JSON ({"enabled":false} without
 * TLS), with totals (NULL: the generation's own). Its length, or
 * -ENOBUFS when cap was too small (buf then holds a cut string). */
int he_server_tls_describe(const he_server_t *s, const he_stats_t *totals, char *buf, size_t cap);
/* Certificates from conf for new handshakes; 0 without TLS, or -errno
 * with err set (the certificates in use stay). */
int he_server_tls_reload(he_server_t *s, const he_conf_t *conf, char *err, size_t errlen);

/* Whether the process has an edge cache (origin.urls). */
bool he_server_cache_enabled(void);
/* What the RAM tier's arena is made of: "huge_pages" (cache.ram_huge_pages),
 * "memfd" or "anonymous"; NULL without a cache. */
const char *he_server_cache_ram_arena(void);
/* Removes target's entries from both cache tiers, its key made as s's
 * workers make it: how many went, -ENODEV when s has no cache, -EINVAL
 * for a target that makes no key, -ENOMEM. */
int he_server_purge(he_server_t *s, const char *target, size_t len);

/* One origin (parent) of a generation's edge cache, for /metrics and
 * /stats: as configured, and its health (shared by the workers). */
typedef struct he_server_parent {
    char url[512]; /* without its weight */
    unsigned weight;
    bool up;
    uint64_t down_left_ms; /* 0 when up */
    uint64_t marked_down;  /* times it went down */
} he_server_parent_t;
/* s's origins in origin.urls order (at most cap) and *select, the name of
 * origin.select; 0 without a cache. */
unsigned he_server_parents(const he_server_t *s, he_server_parent_t *out, unsigned cap,
                           const char **select);

/* The reason phrase the server answers status with. */
const char *he_server_http_reason(int status);

/* ---------------------------------------------------------------- lifecycle */

/* Fills an allocated generation (he_server_new does both). */
int he_server_init(he_server_t *s, he_conf_t *conf, char *err, size_t errlen);
/* The CPUs the process may run on, as they were before the control thread
 * pinned itself (its first call is in the first he_server_init). */
void he_server_cpus_allowed(cpu_set_t *set);
int he_server_start(he_server_t *s, char *err, size_t errlen);
void he_server_drain(he_server_t *s);
/* The drain timeout a later he_server_drain or he_server_retire bounds
 * connections by, when it is not the generation's own configuration's
 * (a generation retired by a reload keeps its configuration). A drain
 * already running is cut short to it, never lengthened. */
void he_server_set_drain_timeout(he_server_t *s, unsigned ms);
/* Drains a generation replaced by a reload: connections stay open until
 * their next response (sent with Connection: close) or the drain timeout.
 * Call after its listeners stopped accepting. */
void he_server_retire(he_server_t *s);
/* Publishes a new configuration that needs no new sockets or threads. */
void he_server_publish_conf(he_server_t *s, he_conf_t *conf);
/* True once every worker thread has returned (he_server_wait won't block). */
bool he_server_exited(const he_server_t *s);
void he_server_wait(he_server_t *s);
void he_server_free(he_server_t *s);

#endif
