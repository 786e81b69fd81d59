/* Held blocking playlist reloads from root (draft-pantos-hls-rfc8216bis
 * 6.2.5.2). Each worker watches the directories of the live playlists it
 * serves with one inotify descriptor, read through the worker's ring (an
 * HE_OP_HOOK read always armed): a packager's write in place
 * (IN_CLOSE_WRITE) or rename into place (IN_MOVED_TO) makes the fd cache
 * forget the old copy and releases the requests held on that playlist,
 * all of them on that one event. Nothing polls: a held request that no
 * write satisfies gets 503 from the tick after three target durations. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/handler/handler.h"

#define HE_LLHOLD_DIRS_MAX 4096 /* watched directories per worker */
#define HE_LLHOLD_EVENTS 8192   /* bytes of inotify events one read takes */

typedef struct he_lldir {
    struct he_lldir *next;
    int wd;
    /* the last LL playlist seen here: its target duration (parts and
     * segments beside it get 6 TD) and its preload hint's path */
    double ll_td;
    char *hint;
    size_t len;
    char path[]; /* relative to root, "" for root itself */
} he_lldir_t;

typedef struct he_llwait {
    struct he_llwait *next, *prev;
    struct he_llpl *pl;
    he_req_t *r;
    he_llq_t q;
    uint64_t since_ms, deadline_ms;
    bool hint; /* a request for a preload hint's resource, not for the playlist */
} he_llwait_t;

/* A playlist with requests held on it: a file under root (its path), or
 * an origin's (its cache key, llhls_origin.c). */
typedef struct he_llpl {
    struct he_llpl *next;
    he_llwait_t *waiters;
    bool origin;
    size_t len;
    char path[];
} he_llpl_t;

typedef struct he_llhold {
    int ifd;          /* inotify, -1 when it could not be had */
    bool reading;     /* the read is in flight */
    bool cancel_sent; /* quiescing: its cancel is queued */
    uint32_t gen;
    he_lldir_t *dirs;
    unsigned ndirs;
    he_llpl_t *pls;
    /* answering runs protocol code that may end other held requests (a
     * stream reset, a connection closed): lists emptied meanwhile are freed
     * only when the outermost sweep ends */
    unsigned sweeping;
    char *events; /* HE_LLHOLD_EVENTS bytes the kernel writes into */
} he_llhold_t;

static inline he_llhold_t *he_llhold(he_worker_t *w)
{
    return w->hook_data[HE_HOOK_LLHLS];
}

static void he_llhold_arm(he_worker_t *w)
{
    he_llhold_t *h = he_llhold(w);
    struct io_uring_sqe *sqe;
    if (!h || h->ifd < 0 || h->reading || w->exiting || h->cancel_sent) return;
    if (!(sqe = he__worker_sqe(w))) return; /* SQ full: the next tick arms it */
    io_uring_prep_read(sqe, h->ifd, h->events, HE_LLHOLD_EVENTS, 0);
    sqe->user_data = he__worker_hook_ud(w, &he_llhls_worker_hooks, ++h->gen);
    h->reading = true;
}

/* ---------------------------------------------------------------- watches */

/* The watched directory of path, or NULL. */
static he_lldir_t *he_llhold_dir(he_llhold_t *h, const char *path, size_t len)
{
    const char *slash = memrchr(path, '/', len);
    size_t dl = slash ? (size_t)(slash - path) : 0;
    for (he_lldir_t *d = h ? h->dirs : NULL; d; d = d->next)
        if (d->len == dl && memcmp(d->path, path, dl) == 0) return d;
    return NULL;
}

int he__llhold_watch(he_worker_t *w, const char *path, size_t len)
{
    he_llhold_t *h = he_llhold(w);
    const char *slash = memrchr(path, '/', len);
    size_t dl = slash ? (size_t)(slash - path) : 0;
    char where[PATH_MAX + 32];
    he_lldir_t *d;

    if (!h || h->ifd < 0) return -ENOENT;
    for (d = h->dirs; d; d = d->next)
        if (d->len == dl && memcmp(d->path, path, dl) == 0) return 0;
    if (h->ndirs >= HE_LLHOLD_DIRS_MAX) return -ENOSPC;
    /* root by its descriptor: the directory the files were opened under */
    int n =
        snprintf(where, sizeof(where), "/proc/self/fd/%d/%.*s", w->server->root_fd, (int)dl, path);
    if (n < 0 || (size_t)n >= sizeof(where)) return -ENAMETOOLONG;
    int wd = inotify_add_watch(
        h->ifd, where, IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR);
    if (wd < 0) {
        int e = errno;
        he_log_error("worker %u: inotify on /%.*s: %s (live playlists there follow "
                     "cache.live_fraction; blocking reloads get 503)",
                     w->id, (int)dl, path, strerror(e));
        return -e;
    }
    for (d = h->dirs; d; d = d->next) /* another name of a directory watched already */
        if (d->wd == wd) return 0;
    if (!(d = malloc(sizeof(*d) + dl + 1))) return -ENOMEM;
    d->wd = wd;
    d->ll_td = 0;
    d->hint = NULL;
    d->len = dl;
    memcpy(d->path, path, dl);
    d->path[dl] = '\0';
    d->next = h->dirs;
    h->dirs = d;
    h->ndirs++;
    return 0;
}

/* ---------------------------------------------------------------- waiters */

static he_llpl_t *he_llhold_pl(he_llhold_t *h, const char *path, size_t len, bool origin,
                               bool create)
{
    he_llpl_t *p;
    for (p = h->pls; p; p = p->next)
        if (p->len == len && p->origin == origin && memcmp(p->path, path, len) == 0) return p;
    if (!create || !(p = calloc(1, sizeof(*p) + len + 1))) return NULL;
    p->origin = origin;
    p->len = len;
    memcpy(p->path, path, len);
    p->next = h->pls;
    h->pls = p;
    return p;
}

static void he_llhold_pl_drop_if_empty(he_llhold_t *h, he_llpl_t *pl)
{
    if (pl->waiters || h->sweeping) return;
    for (he_llpl_t **pp = &h->pls; *pp; pp = &(*pp)->next)
        if (*pp == pl) {
            *pp = pl->next;
            free(pl);
            return;
        }
}

static void he_llhold_unlink(he_llwait_t *wt)
{
    if (wt->prev)
        wt->prev->next = wt->next;
    else
        wt->pl->waiters = wt->next;
    if (wt->next) wt->next->prev = wt->prev;
    wt->next = wt->prev = NULL;
}

/* A held HTTP/2 stream went away (reset, connection closed). */
static void he_llhold_stream_free(he_worker_t *w, he_req_t *r)
{
    he_llwait_t *wt = r->hctx;
    he_llhold_t *h = he_llhold(w);
    if (!wt) return;
    he_llpl_t *pl = wt->pl;
    he_llhold_unlink(wt);
    free(wt);
    r->hctx = NULL;
    r->hctx_free = NULL;
    if (h) he_llhold_pl_drop_if_empty(h, pl);
}

/* On its playlist's list, and (HTTP/2) on its stream, so that a reset
 * takes it off. */
static void he_llhold_attach(he_llwait_t *wt)
{
    he_llpl_t *pl = wt->pl;
    wt->prev = NULL;
    wt->next = pl->waiters;
    if (pl->waiters) pl->waiters->prev = wt;
    pl->waiters = wt;
    if (wt->r->h2) {
        wt->r->hctx = wt;
        wt->r->hctx_free = he_llhold_stream_free;
    }
}

/* Off both before r is answered: the response may end (and its stream
 * go) before he_http_respond returns. */
static void he_llhold_detach(he_llwait_t *wt)
{
    he_llhold_unlink(wt);
    if (wt->r->h2) {
        wt->r->hctx = NULL;
        wt->r->hctx_free = NULL;
    }
}

static int he_llhold_add(he_worker_t *w, he_req_t *r, const char *path, size_t len, bool origin,
                         const he_llq_t *q, uint64_t deadline_ms)
{
    he_llhold_t *h = he_llhold(w);
    he_llwait_t *wt;
    he_llpl_t *pl;
    if (!h) return -ENOENT;
    if (r->h2 && r->hctx) return -EBUSY; /* the edge cache's state is on it */
    if (!(pl = he_llhold_pl(h, path, len, origin, true))) return -ENOMEM;
    if (!(wt = calloc(1, sizeof(*wt)))) {
        he_llhold_pl_drop_if_empty(h, pl);
        return -ENOMEM;
    }
    wt->pl = pl;
    wt->r = r;
    wt->q = *q;
    wt->since_ms = w->now_ms;
    wt->deadline_ms = deadline_ms;
    he_llhold_attach(wt);
    w->stats.llhls_held++;
    he_llhold_arm(w);
    return 0;
}

int he__llhold_add(he_worker_t *w, he_req_t *r, const char *path, size_t len, const he_llq_t *q,
                   uint64_t deadline_ms)
{
    he_llhold_t *h = he_llhold(w);
    if (!h || h->ifd < 0 || he__llhold_watch(w, path, len) < 0) return -ENOENT;
    return he_llhold_add(w, r, path, len, false, q, deadline_ms);
}

int he__llhold_add_origin(he_worker_t *w, he_req_t *r, const char *key, size_t len,
                          const he_llq_t *q, uint64_t deadline_ms)
{
    return he_llhold_add(w, r, key, len, true, q, deadline_ms);
}

/* ---------------------------------------------------------------- preload hints */

void he__llhold_note(he_worker_t *w, const char *path, size_t len, const he_seg_ll_t *ll)
{
    he_lldir_t *d = he_llhold_dir(he_llhold(w), path, len);
    char base[PATH_MAX + 1], ref[PATH_MAX], out[PATH_MAX];
    if (!d || ll->pl.endlist) return;
    d->ll_td = ll->part_target > 0 || ll->can_block_reload ? ll->pl.target_duration : 0;
    free(d->hint);
    d->hint = NULL;
    if (!ll->has_hint || ll->hint_uri_len >= sizeof(ref) || len >= PATH_MAX) return;
    /* the hint's URI against the playlist's own path, as a player does */
    snprintf(base, sizeof(base), "/%.*s", (int)len, path);
    memcpy(ref, ll->hint_uri, ll->hint_uri_len);
    ref[ll->hint_uri_len] = '\0';
    int n = he_seg_uri_resolve(base, ref, out, sizeof(out));
    char norm[PATH_MAX];
    int m = n > 0 && out[0] == '/' ? he_seg_url_normalize(out, (size_t)n, norm, sizeof(norm)) : -1;
    if (m > 0) d->hint = strndup(norm, (size_t)m);
}

bool he__llhold_hint(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    he_llhold_t *h = he_llhold(w);
    he_lldir_t *d = he_llhold_dir(h, path, len);
    he_llpl_t *pl;
    he_llwait_t *wt;
    if (!d || !d->hint || strlen(d->hint) != len || memcmp(d->hint, path, len) != 0) return false;
    if (r->h2 && r->hctx) return false;
    if (!(pl = he_llhold_pl(h, path, len, false, true))) return false;
    if (!(wt = calloc(1, sizeof(*wt)))) {
        he_llhold_pl_drop_if_empty(h, pl);
        return false;
    }
    wt->pl = pl;
    wt->r = r;
    wt->hint = true;
    wt->since_ms = w->now_ms;
    wt->q.td = d->ll_td > 0 ? d->ll_td : 1;
    /* 6.2.6: held until the part is there; three target durations
     * without it, and the hint was abandoned */
    wt->deadline_ms = w->now_ms + (uint64_t)(3 * wt->q.td * 1000);
    he_llhold_attach(wt);
    w->stats.llhls_held++;
    he_llhold_arm(w);
    return true;
}

bool he__llhold_blocking_404(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    he_lldir_t *d = he_llhold_dir(he_llhold(w), path, len);
    he_seg_ll_directives_t dir;
    if (!d || !(d->ll_td > 0) || he_seg_type_from_path(path, len) != HE_SEG_TYPE_M3U8) return false;
    if (he_seg_ll_directives(r->url, r->url_len, &dir) < 0 || !dir.has_msn) return false;
    he__llhls_error(w, r, 404, 4 * d->ll_td, NULL);
    return true;
}

unsigned he__llhold_part_ttl(he_worker_t *w, const char *path, size_t len)
{
    he_lldir_t *d = he_llhold_dir(he_llhold(w), path, len);
    if (!d || !(d->ll_td > 0)) return 0;
    return he__llhls_ttl(d->ll_td, 6); /* Appendix B.1: parts and segments, 6 TD */
}

static void he_llhold_sweep_begin(he_llhold_t *h)
{
    h->sweeping++;
}

static void he_llhold_sweep_end(he_llhold_t *h)
{
    if (--h->sweeping) return;
    for (he_llpl_t **pp = &h->pls, *pl; (pl = *pp);) {
        if (pl->waiters) {
            pp = &pl->next;
            continue;
        }
        *pp = pl->next;
        free(pl);
    }
}

typedef bool (*he_llhold_pick_fn)(const he_llwait_t *wt, const void *ctx);

/* The first waiter of pl that pick wants, taken off the list (and its
 * stream). Looked for from the head each time: answering the previous
 * one may have ended others. */
static he_llwait_t *he_llhold_take(he_llpl_t *pl, he_llhold_pick_fn pick, const void *ctx)
{
    for (he_llwait_t *wt = pl->waiters; wt; wt = wt->next)
        if (pick(wt, ctx)) {
            he_llhold_detach(wt);
            return wt;
        }
    return NULL;
}

static bool he_llhold_pick_hint(const he_llwait_t *wt, const void *ctx)
{
    (void)ctx;
    return wt->hint;
}

static bool he_llhold_pick_ready(const he_llwait_t *wt, const void *ctx)
{
    return !wt->hint && he__llhls_ready(&wt->q, ctx);
}

/* A hinted resource was written: its held requests are served now, by
 * the file handler (or the next source, when it vanished again). */
static void he_llhold_release_hint(he_worker_t *w, he_llpl_t *pl)
{
    char path[PATH_MAX];
    size_t len = pl->len < sizeof(path) ? pl->len : sizeof(path) - 1;
    he_llwait_t *wt;
    memcpy(path, pl->path, len);
    path[len] = '\0';
    while ((wt = he_llhold_take(pl, he_llhold_pick_hint, NULL))) {
        he_req_t *r = wt->r;
        free(wt);
        w->stats.llhls_released++;
        if (he_file_handle(w, r, path, len) == HE_HANDLER_DECLINED) he_route_next(w, r);
    }
}

/* The playlist changed: one look at the new file answers every request
 * it now satisfies (6.2.5.2); the others go on waiting. */
static void he_llhold_release(he_worker_t *w, he_llpl_t *pl)
{
    he_llhold_t *h = he_llhold(w);
    he_llwait_t *wt;
    he_llsnap_t s;
    he_llhold_sweep_begin(h);
    he_llhold_release_hint(w, pl);
    if (pl->waiters && he__llsnap_load(w, pl->path, pl->len, &s) == 0) {
        while ((wt = he_llhold_take(pl, he_llhold_pick_ready, &s))) {
            w->stats.llhls_released++;
            he__llhls_answer(w, wt->r, &wt->q, &s);
            free(wt);
        }
        he__llsnap_put(w, &s);
    } /* else gone for now: the packager renames the next one in */
    he_llhold_sweep_end(h);
}

/* ---------------------------------------------------------------- an origin's playlists */

bool he__llhold_waiting(he_worker_t *w, const char *key, size_t len)
{
    he_llhold_t *h = he_llhold(w);
    he_llpl_t *pl = h ? he_llhold_pl(h, key, len, true, false) : NULL;
    return pl && pl->waiters;
}

/* Held before any copy was known: now that one is, the directives are
 * checked (6.2.5.2) and the hold gets its deadline of three TD. */
static bool he_llhold_pick_refused(const he_llwait_t *wt, const void *ctx)
{
    const he_llsnap_t *s = ctx;
    return wt->q.td == 0 && he__llhls_refuse(&wt->q, false, &s->ll);
}

void he__llhold_release_copy(he_worker_t *w, const char *key, size_t len, const he_llsnap_t *s)
{
    he_llhold_t *h = he_llhold(w);
    he_llpl_t *pl = h ? he_llhold_pl(h, key, len, true, false) : NULL;
    he_llwait_t *wt;
    double td = he__llhls_td(&s->ll);
    if (!pl) return;
    he_llhold_sweep_begin(h);
    while ((wt = he_llhold_take(pl, he_llhold_pick_refused, s))) {
        w->stats.llhls_rejected++;
        he__llhls_error(w, wt->r, 400, td, he__llhls_refuse(&wt->q, false, &s->ll));
        free(wt);
    }
    for (wt = pl->waiters; wt; wt = wt->next)
        if (wt->q.td == 0) {
            wt->q.td = td;
            wt->deadline_ms = wt->since_ms + (uint64_t)(3 * td * 1000);
        }
    while ((wt = he_llhold_take(pl, he_llhold_pick_ready, s))) {
        w->stats.llhls_released++;
        he__llhls_answer(w, wt->r, &wt->q, s);
        free(wt);
    }
    he_llhold_sweep_end(h);
}

static bool he_llhold_pick_any(const he_llwait_t *wt, const void *ctx)
{
    (void)wt;
    (void)ctx;
    return true;
}

void he__llhold_fail_origin(he_worker_t *w, const char *key, size_t len, int status, double ttl_s)
{
    he_llhold_t *h = he_llhold(w);
    he_llpl_t *pl = h ? he_llhold_pl(h, key, len, true, false) : NULL;
    he_llwait_t *wt;
    if (!pl) return;
    he_llhold_sweep_begin(h);
    while ((wt = he_llhold_take(pl, he_llhold_pick_any, NULL))) {
        he__llhls_error(w, wt->r, status, ttl_s, NULL);
        free(wt);
    }
    he_llhold_sweep_end(h);
}

/* ---------------------------------------------------------------- events */

static void he_llhold_event(he_worker_t *w, const struct inotify_event *ev)
{
    he_llhold_t *h = he_llhold(w);
    char path[PATH_MAX];
    he_lldir_t *d;
    if (ev->mask & IN_Q_OVERFLOW) { /* events were lost: every held playlist looks again */
        he_llhold_sweep_begin(h);
        for (he_llpl_t *pl = h->pls; pl; pl = pl->next) {
            if (pl->origin) continue;
            he_fcache_forget(w->hook_data[HE_HOOK_FILE], pl->path, pl->len);
            he_llhold_release(w, pl);
        }
        he_llhold_sweep_end(h);
        return;
    }
    if (ev->mask & IN_IGNORED) { /* the directory went: a new one is watched on use */
        for (he_lldir_t **pp = &h->dirs; (d = *pp); pp = &d->next)
            if (d->wd == ev->wd) {
                *pp = d->next;
                free(d->hint);
                free(d);
                h->ndirs--;
                break;
            }
        return;
    }
    if (!ev->len) return;
    for (d = h->dirs; d && d->wd != ev->wd; d = d->next)
        ;
    if (!d) return;
    size_t nl = strnlen(ev->name, ev->len);
    int n = snprintf(path, sizeof(path), "%s%s%.*s", d->path, d->len ? "/" : "", (int)nl, ev->name);
    if (n < 0 || (size_t)n >= sizeof(path)) return;
    w->stats.llhls_events++;
    he_fcache_forget(w->hook_data[HE_HOOK_FILE], path, (size_t)n);
    he_llpl_t *pl = he_llhold_pl(h, path, (size_t)n, false, false);
    if (pl && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))) he_llhold_release(w, pl);
}

static void he_llhold_on_cqe(he_worker_t *w, struct io_uring_cqe *cqe)
{
    he_llhold_t *h = he_llhold(w);
    if (!h || he__ud_gen(cqe->user_data) != h->gen) return;
    h->reading = false;
    if (w->exiting || h->cancel_sent) return;
    if (cqe->res > 0) {
        for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t)cqe->res;) {
            const struct inotify_event *ev = (const void *)(h->events + off);
            size_t sz = sizeof(*ev) + ev->len;
            if (off + sz > (size_t)cqe->res) break;
            he_llhold_event(w, ev);
            off += sz;
        }
    } else if (cqe->res < 0 && cqe->res != -EINTR && cqe->res != -EAGAIN) {
        he_log_error("worker %u: reading inotify: %s", w->id, strerror(-cqe->res));
        return; /* the tick tries again: no tight loop on a broken descriptor */
    }
    he_llhold_arm(w);
}

/* ---------------------------------------------------------------- worker hooks */

static int he_llhold_setup(he_worker_t *w)
{
    he_llhold_t *h = calloc(1, sizeof(*h));
    if (!h || !(h->events = aligned_alloc(8, HE_LLHOLD_EVENTS))) {
        free(h);
        return -ENOMEM;
    }
    /* blocking: the ring waits for readiness itself instead of -EAGAIN */
    h->ifd = w->server->root_fd >= 0 ? inotify_init1(IN_CLOEXEC) : -1;
    if (w->server->root_fd >= 0 && h->ifd < 0)
        he_log_error("worker %u: inotify: %s (live playlists follow cache.live_fraction; "
                     "blocking reloads get 503)",
                     w->id, strerror(errno));
    w->hook_data[HE_HOOK_LLHLS] = h;
    return 0;
}

static bool he_llhold_pick_expired(const he_llwait_t *wt, const void *ctx)
{
    const he_worker_t *w = ctx;
    return w->now_ms >= wt->deadline_ms || w->draining;
}

/* 6.2.5.2: after three target durations, 503. */
static void he_llhold_tick(he_worker_t *w)
{
    he_llhold_t *h = he_llhold(w);
    he_llwait_t *wt;
    if (!h) return;
    he_llhold_arm(w);
    he_llhold_sweep_begin(h);
    for (he_llpl_t *pl = h->pls; pl; pl = pl->next) /* none is freed during the sweep */
        while ((wt = he_llhold_take(pl, he_llhold_pick_expired, w))) {
            w->stats.llhls_timeouts++;
            /* an abandoned hint is 404; a playlist that did not move, 503 */
            he__llhls_error(w, wt->r, wt->hint ? 404 : 503, wt->q.td,
                            wt->hint ? "hinted part never came" : "held three target durations");
            free(wt);
        }
    he_llhold_sweep_end(h);
}

/* The read must be reaped before the ring goes: its buffer is ours. */
static unsigned he_llhold_quiesce(he_worker_t *w)
{
    he_llhold_t *h = he_llhold(w);
    struct io_uring_sqe *sqe;
    if (!h || !h->reading) return 0;
    if (!h->cancel_sent && (sqe = he__worker_sqe(w))) {
        io_uring_prep_cancel64(sqe, he__worker_hook_ud(w, &he_llhls_worker_hooks, h->gen), 0);
        sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
        h->cancel_sent = true;
    }
    return 1;
}

/* HTTP/1.x: a held request goes with its connection. */
static void he_llhold_conn_dispose(he_worker_t *w, he_conn_t *c)
{
    he_llhold_t *h = he_llhold(w);
    if (!h) return;
    for (he_llpl_t *pl = h->pls, *pnext; pl; pl = pnext) {
        pnext = pl->next;
        for (he_llwait_t *wt = pl->waiters, *next; wt; wt = next) {
            next = wt->next;
            if (wt->r->conn != c || wt->r->h2) continue;
            he_llhold_unlink(wt);
            free(wt);
        }
        he_llhold_pl_drop_if_empty(h, pl);
    }
}

static void he_llhold_cleanup(he_worker_t *w)
{
    he_llhold_t *h = he_llhold(w);
    if (!h) return;
    while (h->pls) {
        he_llpl_t *pl = h->pls;
        while (pl->waiters) { /* their connections went first: r is not touched */
            he_llwait_t *wt = pl->waiters;
            he_llhold_unlink(wt);
            free(wt);
        }
        h->pls = pl->next;
        free(pl);
    }
    while (h->dirs) {
        he_lldir_t *d = h->dirs;
        h->dirs = d->next;
        free(d->hint);
        free(d);
    }
    if (h->ifd >= 0) close(h->ifd);
    free(h->events);
    free(h);
    w->hook_data[HE_HOOK_LLHLS] = NULL;
}

const he_worker_hooks_t he_llhls_worker_hooks = {
    .name = "llhls",
    .setup = he_llhold_setup,
    .tick = he_llhold_tick,
    .quiesce = he_llhold_quiesce,
    .cleanup = he_llhold_cleanup,
    .conn_dispose = he_llhold_conn_dispose,
    .op = he_llhold_on_cqe,
};
