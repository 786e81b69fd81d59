/* Origin fetches, SSD writes and unlinks on the worker's ring.
 *
 * Each is a job in a per-worker table; its ring operations carry
 * user_data HE_OP_JOB | job index | job generation, and worker.c hands
 * their completions here. One operation is in flight per job (the cache's
 * state machines want exactly that), and a job is freed only when none is.
 *
 * Timeouts: the fetch keeps the deadline of its operation in flight; the
 * worker's 100 ms tick asks he_cache_fetch_expired and cancels the
 * operation, whose -ECANCELED completion then counts as a timeout. That
 * costs no linked SQE per operation, and 100 ms is well inside the
 * configured origin timeouts (seconds).
 *
 * socket(2) and close(2) of origin connections run directly: they never
 * block and are cheaper than a ring round trip. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/handler/cache_glue.h"

static he_ojob_t *he_oio_job_new(he_wcache_t *wc, uint32_t *idx)
{
    he_ojob_t *j;
    if (wc->nfree_jobs == 0) {
        uint32_t n = wc->njobs ? wc->njobs * 2 : 64;
        he_ojob_t *t = realloc(wc->jobs, sizeof(*t) * n);
        uint32_t *f;
        if (!t) return NULL;
        wc->jobs = t;
        f = realloc(wc->free_jobs, sizeof(*f) * n);
        if (!f) return NULL;
        wc->free_jobs = f;
        memset(t + wc->njobs, 0, sizeof(*t) * (n - wc->njobs));
        for (uint32_t i = n; i > wc->njobs; i--)
            wc->free_jobs[wc->nfree_jobs++] = i - 1;
        wc->njobs = n;
    }
    *idx = wc->free_jobs[--wc->nfree_jobs];
    j = &wc->jobs[*idx];
    j->gen++;
    j->inflight = j->cancel_sent = j->parked = false;
    j->fetch = NULL;
    j->fill = NULL;
    j->sw = NULL;
    j->obj = NULL;
    j->fd = -1;
    j->iov = NULL;
    return j;
}

static void he_oio_job_free(he_wcache_t *wc, uint32_t idx)
{
    wc->jobs[idx].type = HE_OJOB_FREE;
    wc->free_jobs[wc->nfree_jobs++] = idx;
}

static void he_oio_submit(he_worker_t *w, he_ojob_t *j, uint32_t idx, struct io_uring_sqe *sqe)
{
    sqe->user_data = he__ud(HE_OP_JOB, idx, j->gen);
    j->inflight = true;
    j->cancel_sent = false;
}

/* ---------------------------------------------------------------- SSD */

static void he_oio_unlink_next(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    struct io_uring_sqe *sqe;
    he_ojob_t *j;
    uint32_t idx;
    if (!wc->store || wc->unlink_busy || w->exiting) return;
    if (!(sqe = he__worker_sqe(w))) return; /* SQ full: the next tick tries again */
    if (he_cache_store_unlink_step(wc->store, sqe) != HE_CACHE_AGAIN ||
        !(j = he_oio_job_new(wc, &idx))) {
        io_uring_prep_nop(sqe);
        sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
        return;
    }
    j->type = HE_OJOB_UNLINK;
    wc->unlink_busy = true;
    he_oio_submit(w, j, idx, sqe);
}

/* Runs a writer until it needs the ring or ends. */
static void he_oio_swrite_drive(he_worker_t *w, he_ojob_t *j, uint32_t idx)
{
    he_wcache_t *wc = he__wcache(w);
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    int rc;
    if (!sqe) { /* SQ full: a step depends on its state only, so it waits */
        j->parked = true;
        return;
    }
    j->parked = false;
    rc = he_cache_swrite_step(j->sw, sqe);
    if (rc == HE_CACHE_AGAIN) {
        he_oio_submit(w, j, idx, sqe);
        return;
    }
    io_uring_prep_nop(sqe);
    sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
    he_cache_swrite_free(j->sw);
    he_oio_job_free(wc, idx);
    he_oio_unlink_next(w); /* a write may have evicted files */
}

/* A purge tells writes in flight to drop their files (the store knows a
 * write from he_cache_swrite_new on), but one that came between a fill's
 * publication and the start of its write saw neither: such writes are
 * dropped here, whichever key the purge was for (only SSD copies lost). */
void he__oio_pull_writes(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_swrite_t *sw;
    if (!wc->store || w->exiting) return;
    wc->writes_left = true;
    while ((sw = he_cache_fills_next_write(wc->fills)) != NULL) {
        uint32_t idx;
        he_ojob_t *j;
        /* after the write began: a purge counted later finds it */
        if (he_cache_store_purges(wc->store) != wc->writes_mark) {
            he_cache_swrite_free(sw);
            continue;
        }
        if (!(j = he_oio_job_new(wc, &idx))) {
            he_cache_swrite_free(sw);
            return;
        }
        j->type = HE_OJOB_SWRITE;
        j->sw = sw;
        he_oio_swrite_drive(w, j, idx);
    }
    wc->writes_left = false;
}

/* ---------------------------------------------------------------- promotion
 *
 * An SSD hit that is hit again goes up to the RAM tier: the file's body is
 * read straight into a RAM object's chunks with IORING_OP_READV (up to
 * HE_OIO_PROMOTE_READ per operation), then published through
 * he_cache_ram_insert, so the RAM tier's own admission (S3-FIFO's small
 * queue and ghost) decides how long it stays. Why the ring and not a
 * pread: the file was just read by sendfile, so the read usually completes
 * inline at submission, but one whose pages went cold goes to the kernel's
 * io-wq instead of stalling every connection of this worker. Only the
 * second hit promotes (the SIEVE visited bit says the entry was hit
 * before): a one-hit wonder costs no second read of its file. */

#define HE_OIO_PROMOTE_IOV 64
#define HE_OIO_PROMOTE_READ (1u << 20)

static void he_oio_promote_end(he_worker_t *w, uint32_t idx, int err)
{
    he_wcache_t *wc = he__wcache(w);
    he_ojob_t *j = &wc->jobs[idx];
    he_cache_obj_t *o = j->obj;

    if (err == 0) {
        he_cache_obj_finish(o);
        /* a fill (any worker) may have published a newer copy meanwhile,
         * or a purge removed the file: checked under the node lock */
        if (he_cache_ram_insert_if_absent(wc->ram, o, wc->st, j->epoch) == 0) wc->st->promotions++;
    } else if (he__disk_errno(err)) {
        /* the file's fault: counted, logged once per cause, entry dropped */
        he_cache_store_error(wc->store, he_cache_obj_key(o), err, wc->st);
    }
    he_cache_obj_unref(o);
    close(j->fd);
    free(j->iov);
    he_oio_job_free(wc, idx);
}

static void he_oio_promote_next(he_worker_t *w, uint32_t idx)
{
    he_wcache_t *wc = he__wcache(w);
    he_ojob_t *j = &wc->jobs[idx];
    uint64_t want = j->left < HE_OIO_PROMOTE_READ ? j->left : HE_OIO_PROMOTE_READ;
    unsigned n = he_cache_obj_space_iov(j->obj, j->iov, HE_OIO_PROMOTE_IOV, want, wc->st);
    struct io_uring_sqe *sqe;

    if (!n) {
        he_oio_promote_end(w, idx, -ENOMEM);
        return;
    }
    if (!(sqe = he__worker_sqe(w))) { /* SQ full: a promotion is only a saving */
        he_oio_promote_end(w, idx, -EBUSY);
        return;
    }
    io_uring_prep_readv(sqe, j->fd, j->iov, n, j->off);
    he_oio_submit(w, j, idx, sqe);
}

static void he_oio_promote_complete(he_worker_t *w, uint32_t idx, int res)
{
    he_ojob_t *j = &he__wcache(w)->jobs[idx];
    /* no new read once the worker drains: it must stop with none in flight */
    bool stopping = w->exiting || w->draining || w->soft_drain;
    if (res <= 0 || stopping) {
        /* 0: the file ends before the length its header promised */
        he_oio_promote_end(w, idx, res < 0 ? res : res == 0 ? -EBADMSG : -ECANCELED);
        return;
    }
    he_cache_obj_commit(j->obj, (size_t)res);
    j->off += (uint64_t)res;
    j->left -= (uint64_t)res < j->left ? (uint64_t)res : j->left;
    if (j->left == 0)
        he_oio_promote_end(w, idx, 0);
    else
        he_oio_promote_next(w, idx);
}

void he__oio_promote(he_worker_t *w, const he_cache_key_t *key, const he_cache_store_hit_t *hit,
                     int fd, uint64_t epoch)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_meta_t m = hit->meta;
    he_ojob_t *j;
    uint32_t idx;

    if (!wc->ram || !wc->store || w->exiting || w->draining || w->soft_drain ||
        hit->body_len == 0 || hit->body_len > he_cache_ram_object_max(wc->ram))
        return;
    if (he_cache_fill_find(wc->fills, key)) return; /* the fill publishes it */
    for (uint32_t i = 0; i < wc->njobs; i++) {
        const he_ojob_t *p = &wc->jobs[i];
        if (p->type == HE_OJOB_PROMOTE && he_cache_obj_key(p->obj)->hash == key->hash &&
            strcmp(he_cache_obj_key(p->obj)->s, key->s) == 0)
            return; /* already on its way */
    }
    j = he_oio_job_new(wc, &idx);
    if (!j) return;
    j->iov = malloc(sizeof(*j->iov) * HE_OIO_PROMOTE_IOV);
    j->obj = he_cache_obj_new(wc->ram, wc->node, key, hit->body_len);
    j->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (!j->iov || !j->obj || j->fd < 0) {
        if (j->obj) he_cache_obj_unref(j->obj);
        if (j->fd >= 0) close(j->fd);
        free(j->iov);
        he_oio_job_free(wc, idx);
        return;
    }
    j->type = HE_OJOB_PROMOTE;
    j->epoch = epoch;
    j->off = hit->body_off;
    j->left = hit->body_len;
    m.prefetched = false;
    he_cache_obj_set_meta(j->obj, &m);
    he_oio_promote_next(w, idx);
}

/* ---------------------------------------------------------------- fetches */

static void he_oio_prefetch(he_worker_t *w, const char *path, bool refresh);

/* A fresh copy of a media playlist was parsed: the prefetch that waited
 * for it (he_oio_playlist_refresh) goes on from it. */
static void he_oio_prefetch_pending(he_worker_t *w, he_cache_obj_t *playlist)
{
    const he_cache_key_t *k = he_cache_obj_key(playlist);
    char *path = malloc(2 * HE_CACHE_KEY_MAX), *seg = path + HE_CACHE_KEY_MAX;

    if (!path) return;
    memcpy(path, k->s, k->path_len);
    path[k->path_len] = 0;
    if (he_cache_prefetch_take_pending(he__wcache(w)->pf, path, seg, HE_CACHE_KEY_MAX) == 1 &&
        he__wcache(w)->conf->prefetch_segments && !w->draining && !w->soft_drain)
        he_oio_prefetch(w, seg, false);
    free(path);
}

static void he_oio_fetch_done(he_worker_t *w, he_ojob_t *j, uint32_t idx)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_oerr_t cause = HE_CACHE_OERR_IO;
    he_cache_fill_t *fill = j->fill;
    he_cache_fetch_t *fetch = j->fetch; /* freed last: its target is the playlist's */
    he_cache_obj_t *o;
    int res = he_cache_fetch_result(fetch, &cause);
    /* a viewer's target may be up to limits.uri_bytes long; prefetch keeps
     * targets it can resolve segments against (as he_rc_playlist_seen) */
    const char *target = he_cache_fetch_target(fetch);
    if (strlen(target) >= HE_CACHE_KEY_MAX) target = NULL;

    he_oio_job_free(wc, idx);
    o = he_cache_fill_obj(fill);
    if (o) he_cache_obj_ref(o);
    /* Before the publication. Writes queued earlier and not pulled yet
     * keep the older mark: a fetch that ends inside fill_end's callbacks
     * (a waiter's next miss failing at once) comes here again before the
     * outer pull, and a newer mark would hide a purge from those writes. */
    if (!wc->writes_left && !he_cache_fills_pending_writes(wc->fills))
        wc->writes_mark = he_cache_store_purges(wc->store);
    he_cache_fill_end(fill, res, cause, he__cache_wall_ms(w));
    if (o) {
        /* a media playlist filled: remember where its segments are */
        if (res == 0 && he_cache_obj_complete(o) &&
            he_cache_obj_meta(o)->kind == HE_SEG_KIND_MEDIA &&
            he_cache_obj_meta(o)->status == 200 &&
            he_cache_prefetch_playlist_obj(wc->pf, o, target) == 0)
            he_oio_prefetch_pending(w, o);
        he_cache_obj_unref(o);
    }
    he_cache_fetch_free(fetch);
    he__oio_pull_writes(w);
}

/* j is looked up again after every call into the fetch: its sink runs
 * waiters' callbacks, which may start jobs and move the table. */
static void he_oio_fetch_drive(he_worker_t *w, uint32_t idx)
{
    for (;;) {
        he_ojob_t *j = &he__wcache(w)->jobs[idx];
        he_cache_io_t io;
        he_cache_io_op_t op = he_cache_fetch_next(j->fetch, w->now_ms, &io);
        struct io_uring_sqe *sqe;
        int res;

        switch (op) {
        case HE_CACHE_IO_DONE:
        case HE_CACHE_IO_NONE:
            he_oio_fetch_done(w, j, idx);
            return;
        case HE_CACHE_IO_SOCKET:
            res = socket(io.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            he_cache_fetch_complete(j->fetch, res < 0 ? -errno : res, w->now_ms);
            continue;
        case HE_CACHE_IO_CLOSE:
            close(io.fd);
            he_cache_fetch_complete(j->fetch, 0, w->now_ms);
            continue;
        default:
            if (!(sqe = he__worker_sqe(w))) {
                /* SQ full and the submit failed: this step fails like an
                 * I/O error (the next origin, or the fill's error path) */
                he_cache_fetch_complete(j->fetch, -EBUSY, w->now_ms);
                continue;
            }
            he_cache_io_prep(&io, sqe);
            he_oio_submit(w, j, idx, sqe);
            return;
        }
    }
}

int he__oio_fetch_start(he_worker_t *w, he_cache_fill_t *f, const char *target,
                        he_cache_obj_t *stale, const char *via_in)
{
    const he_cache_key_t *key = he_cache_fill_key(f);
    he_wcache_t *wc = he__wcache(w);
    he_cache_fetch_req_t req;
    he_cache_sink_t sink = he_cache_fill_sink(f);
    he_ojob_t *j;
    uint32_t idx;

    memset(&req, 0, sizeof(req));
    req.path = target;
    req.select_hash = he_cache_select_key(key->s, key->path_len);
    req.via_in = via_in;
    if (stale) he_cache_fetch_req_validators(&req, stale);
    j = he_oio_job_new(wc, &idx);
    if (!j) return -ENOMEM;
    j->fetch = he_cache_fetch_new(wc->origins, wc->conf, &req, &sink, w->now_ms, wc->st);
    if (!j->fetch) {
        he_oio_job_free(wc, idx);
        return -ENOMEM;
    }
    j->type = HE_OJOB_FETCH;
    j->fill = f;
    he_oio_fetch_drive(w, idx);
    return 0;
}

/* ---------------------------------------------------------------- completions */

void he__oio_on_cqe(he_worker_t *w, struct io_uring_cqe *cqe)
{
    he_wcache_t *wc = he__wcache(w);
    uint32_t idx = he__ud_slot(cqe->user_data);
    he_ojob_t *j;

    if (!wc || idx >= wc->njobs || wc->jobs[idx].gen != he__ud_gen(cqe->user_data) ||
        !wc->jobs[idx].inflight) {
        he_log_error("worker %u: stale origin completion job %u", w->id, idx);
        return;
    }
    j = &wc->jobs[idx];
    j->inflight = false;
    switch (j->type) {
    case HE_OJOB_FETCH:
        he_cache_fetch_complete(j->fetch, cqe->res, w->now_ms);
        he_oio_fetch_drive(w, idx);
        break;
    case HE_OJOB_SWRITE:
        he_cache_swrite_complete(j->sw, cqe->res, wc->st);
        he_oio_swrite_drive(w, j, idx);
        break;
    case HE_OJOB_UNLINK:
        he_oio_job_free(wc, idx);
        wc->unlink_busy = false;
        he_oio_unlink_next(w);
        break;
    case HE_OJOB_PROMOTE:
        he_oio_promote_complete(w, idx, cqe->res);
        break;
    default:
        break;
    }
}

void he__oio_tick(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    for (uint32_t i = 0; i < wc->njobs; i++) {
        he_ojob_t *j = &wc->jobs[i];
        if (j->type == HE_OJOB_SWRITE && j->parked) {
            he_oio_swrite_drive(w, j, i);
            continue;
        }
        if (j->type != HE_OJOB_FETCH || !j->inflight || j->cancel_sent) continue;
        if (he_cache_fetch_expired(j->fetch, w->now_ms)) {
            struct io_uring_sqe *sqe = he__worker_sqe(w);
            if (!sqe) break; /* SQ full: cancelled at the next tick */
            io_uring_prep_cancel64(sqe, he__ud(HE_OP_JOB, i, j->gen), 0);
            sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
            j->cancel_sent = true;
        }
    }
    he__oio_pull_writes(w);
    he_oio_unlink_next(w);
}

/* The ring is gone (io_uring_queue_exit): nothing is in flight any more.
 * Fetches end as failures (their waiters are being closed anyway). */
void he__oio_cleanup(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    for (uint32_t i = 0; i < wc->njobs; i++) {
        he_ojob_t *j = &wc->jobs[i];
        switch (j->type) {
        case HE_OJOB_FETCH:
            he_cache_fetch_free(j->fetch);
            he_cache_fill_end(j->fill, -ECANCELED, HE_CACHE_OERR_IO, he__cache_wall_ms(w));
            break;
        case HE_OJOB_SWRITE:
            he_cache_swrite_free(j->sw);
            break;
        case HE_OJOB_PROMOTE:
            /* a read the ring's exit did not wait for (he__oio_quiesce gave
             * up) may still write into its chunks: leaked, not handed back
             * to the process-wide arena for another worker to reuse */
            if (j->inflight) {
                he_log_warn("worker %u: promotion read still in flight at exit: %llu bytes leaked",
                            w->id, (unsigned long long)he_cache_obj_len(j->obj));
            } else {
                he_cache_obj_unref(j->obj);
                free(j->iov);
            }
            close(j->fd); /* the read holds its own reference to the file */
            break;
        default:
            break;
        }
        j->type = HE_OJOB_FREE;
    }
    /* queued writes: their objects are released by he_cache_fills_free */
}

unsigned he__oio_quiesce(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    unsigned n = 0;
    for (uint32_t i = 0; wc && i < wc->njobs; i++) {
        he_ojob_t *j = &wc->jobs[i];
        if (j->type != HE_OJOB_PROMOTE || !j->inflight) continue;
        n++;
        if (!j->cancel_sent) {
            struct io_uring_sqe *sqe = he__worker_sqe(w);
            if (!sqe) continue; /* SQ full: asked again on the next turn */
            io_uring_prep_cancel64(sqe, he__ud(HE_OP_JOB, i, j->gen), 0);
            sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
            j->cancel_sent = true;
        }
    }
    return n;
}

/* ---------------------------------------------------------------- prefetch */

/* The rendition's playlist expired: one fill of it, like a miss (joined
 * if a viewer's fill of it runs); he_oio_fetch_done prefetches after
 * seg_path again once the fresh copy is parsed. */
static void he_oio_playlist_refresh(he_worker_t *w, const char *seg_path)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_prefetch_item_t *it = malloc(sizeof(*it));
    he_cache_fill_t *f;
    bool created;

    if (!it) return;
    if (he_cache_prefetch_refresh(wc->pf, seg_path, it) == 0) {
        f = he_cache_fill_join(wc->fills, &it->key, NULL, NULL, false, &created);
        if (f && created && he__oio_fetch_start(w, f, it->target, NULL, NULL) < 0)
            he_cache_fill_end(f, -ENOMEM, HE_CACHE_OERR_IO, he__cache_wall_ms(w));
    }
    free(it);
}

/* refresh: the playlist may be fetched again if it expired (not when this
 * runs because a fresh copy just arrived: an origin that sends playlists
 * already expired must not make this loop) */
static void he_oio_prefetch(he_worker_t *w, const char *path, bool refresh)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_present_ctx_t pc = {wc->ram, wc->node, wc->store, wc->fills};
    he_cache_prefetch_item_t *items;
    bool stale = false;
    int n;

    items = malloc(sizeof(*items) * 8);
    if (!items) return;
    n = he_cache_prefetch_next(wc->pf, path, he__cache_wall_ms(w), he_cache_present, &pc, items, 8,
                               &stale);
    for (int i = 0; i < n; i++) {
        bool created;
        he_cache_fill_t *f =
            he_cache_fill_join(wc->fills, &items[i].key, NULL, NULL, true, &created);
        if (f && created && he__oio_fetch_start(w, f, items[i].target, NULL, NULL) < 0)
            he_cache_fill_end(f, -ENOMEM, HE_CACHE_OERR_IO, he__cache_wall_ms(w));
    }
    free(items);
    if (stale && refresh) he_oio_playlist_refresh(w, path);
}

void he__oio_prefetch(he_worker_t *w, const he_cache_key_t *key)
{
    he_wcache_t *wc = he__wcache(w);
    char path[HE_CACHE_KEY_MAX];

    if (!wc->conf->prefetch_segments || w->draining || w->soft_drain) return;
    memcpy(path, key->s, key->path_len);
    path[key->path_len] = 0;
    he_oio_prefetch(w, path, true);
}
