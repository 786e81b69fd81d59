/* The edge cache handler: RAM hits, SSD hits and origin fills.
 *
 * Each answer is a body source for the one send path (net/send.c):
 *   - a RAM object's chunks (he_rc_obj_ops), read while the fill that
 *     brings them is still running: the send path waits at the end of what
 *     has arrived and is resumed by the fill's DATA event. Large spans of
 *     the node arena leave by reference: by send_zc when it is registered
 *     as fixed buffer 0, else, for a hit, by sendfile or vmsplice (a
 *     fill's readers take copies);
 *   - an SSD hit's file range (he_rc_ssd_ops): sendfile, or a mapping of
 *     the file under userspace TLS; its read errors go to the store.
 *
 * Misses join the worker's fill for the key (one origin request however
 * many clients ask) and stream the body as it arrives, unless the response
 * turns out not to be storable: then only the request that made the fill
 * takes it, and each one that joined asks the origin itself
 * (hit-for-miss, he_rc_alone). A waiter whose origin response has no
 * Content-Length (chunked) waits for the whole object and is then answered
 * like a hit. A Range or conditional request that arrives while the object
 * is still filling is answered 200 with the full body; complete objects
 * honour both. Origin-first, a fill that fails declines the request to the
 * next handler (the library under root). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/handler/cache_glue.h"
#include "server/http/http_util.h"

/* ---------------------------------------------------------------- body sources */

static ssize_t he_rc_obj_peek(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem)
{
    he_cconn_t *cc = b->ctx;
    uint64_t avail = he_cache_obj_len(cc->obj), file_off;
    const char *mem;
    const void *p;
    int64_t fo;
    size_t n;
    int fd;

    if (avail > b->end) avail = b->end;
    if (cc->sendfile && !need_mem && off < avail &&
        (n = he_cache_obj_peek_file(cc->obj, off, &fd, &file_off, &mem))) {
        if (n > avail - off) n = (size_t)(avail - off);
        /* the arena punches a freed chunk out of its memfd (or drops it
         * from its huge pages) before it is filled again, so its mapping
         * may be vmspliced (net.h); a huge-page arena has no file (fd -1) */
        s->p = cc->splice ? mem : NULL;
        s->spliceable = cc->splice;
        s->file_too = cc->splice && fd >= 0;
        s->cache_ram = true;
        s->len = n;
        s->fd = fd;
        s->file_off = file_off;
        s->fixed_off = -1;
        s->mapped = false;
        return (ssize_t)n;
    }
    if (off >= avail || !(n = he_cache_obj_peek(cc->obj, off, &p, &fo)))
        return cc->failed ? -EIO : 0; /* 0: more comes with the fill's DATA */
    if (n > avail - off) n = (size_t)(avail - off);
    s->p = p;
    s->len = n;
    s->fd = -1;
    s->file_off = 0;
    s->fixed_off = cc->fixed_buf ? fo : -1;
    s->mapped = false;
    s->spliceable = s->file_too = s->cache_ram = false; /* an overflow chunk goes back to malloc */
    return (ssize_t)n;
}

void he__rc_release_cc(he_cconn_t *cc)
{
    if (cc->waiter.fill) he_cache_fill_leave(&cc->waiter);
    if (cc->obj) he_cache_obj_unref(cc->obj);
    cc->obj = NULL;
    if (cc->ssd_map) munmap(cc->ssd_map, cc->ssd_size);
    if (cc->ssd_path) { /* an SSD hit's file is open */
        close(cc->ssd_fd);
        free(cc->ssd_path);
    }
    cc->ssd_map = NULL;
    cc->ssd_path = NULL;
    cc->active = cc->waiting = cc->await_done = cc->failed = false;
}

static void he_rc_body_release(he_body_t *b)
{
    he__rc_release_cc(b->ctx);
}

static const he_body_ops_t he_rc_obj_ops = {
    .peek = he_rc_obj_peek,
    .release = he_rc_body_release,
};

static ssize_t he_rc_ssd_peek(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem)
{
    he_cconn_t *cc = b->ctx;
    s->len = (size_t)(b->end - off);
    s->fixed_off = -1;
    s->fd = -1;
    s->file_off = 0;
    s->mapped = false;
    if (!need_mem) {
        s->p = NULL;
        s->fd = cc->ssd_fd;
        s->file_off = off;
        return (ssize_t)s->len;
    }
    if (!cc->ssd_map) {
        void *m = mmap(NULL, cc->ssd_size, PROT_READ, MAP_SHARED, cc->ssd_fd, 0);
        if (m == MAP_FAILED) return -errno;
        cc->ssd_map = m;
    }
    s->p = cc->ssd_map + off;
    s->mapped = true;
    return (ssize_t)s->len;
}

/* Sending the SSD-tier file failed on the file's side (a read error, or a
 * file that shrank: -EBADMSG): the store counts it, logs it once per cause
 * and drops the entry, so the next request refills from the origin. */
static void he_rc_ssd_error(he_body_t *b, he_worker_t *w, int err)
{
    he_cconn_t *cc = b->ctx;
    he_wcache_t *wc = he__wcache(w);
    he_req_t *r = cc->req;
    he_cache_key_t key;
    /* the request is still this one (the next is parsed after it ends), so
     * its key is the one the hit was found under */
    if (wc && wc->store && he_cache_key_make(wc->conf, r->url, r->url_len, &key) == 0)
        he_cache_store_error_file(wc->store, &key, cc->ssd_path, err, wc->st);
}

static const he_body_ops_t he_rc_ssd_ops = {
    .peek = he_rc_ssd_peek,
    .release = he_rc_body_release,
    .error = he_rc_ssd_error,
};

/* ---------------------------------------------------------------- heads */

/* The head of a cache answer: what the origin sent for the representation
 * (type, validators, encoding) and our own policy (Cache-Control per
 * type, or Appendix B.1's beside an LL playlist, CORS), never the
 * origin's hop-by-hop or caching headers. */
void he__rc_head(he_worker_t *w, he_req_t *r, const he_cache_key_t *key, he_http_head_t *h,
                 int status, const he_cache_meta_t *m, he_seg_type_t type, uint64_t clen)
{
    unsigned ll_ttl = he__llup_ttl(w, key, status, type);
    memset(h, 0, sizeof(*h));
    h->status = status;
    h->ctype = m->content_type[0] ? m->content_type : NULL;
    h->type = type;
    h->cenc = m->content_encoding;
    h->has_clen = status != 304;
    h->clen = clen;
    h->accept_ranges = status == 200 || status == 206;
    h->expose_headers = true;
    if (status < 300 || status == 304) {
        if (m->last_modified[0]) {
            h->last_modified = m->last_modified;
            h->last_modified_len = strlen(m->last_modified);
        }
        if (m->etag[0]) {
            h->etag = m->etag;
            h->etag_len = strlen(m->etag);
        }
        h->cache_control = true;
    }
    if (ll_ttl) { /* the line lives in r's cache state, as long as the head */
        he_cconn_t *cc = he__rc_cc(w, r);
        snprintf(cc->ttl, sizeof(cc->ttl), "Cache-Control: max-age=%u\r\n", ll_ttl);
        h->extra = cc->ttl;
        h->cache_control = false;
    }
}

void he__rc_age(he_http_head_t *h, int64_t stored_ms, int64_t wall_ms)
{
    /* stored_ms is when the response was generated (the parent's Age
     * already taken off, cache/fresh.c), so edges behind a shield see the
     * whole age */
    if (stored_ms <= 0) return;
    h->has_age = true;
    h->age_s = wall_ms > stored_ms ? (uint64_t)(wall_ms - stored_ms) / 1000 : 0;
}

/* A complete representation: conditionals and a single Range. Fills h
 * and [*first, *last]; returns the status, 412 for an error page. */
static int he_rc_head_complete(he_worker_t *w, he_req_t *r, const he_cache_key_t *key,
                               he_http_head_t *h, const he_cache_meta_t *m, uint64_t size,
                               he_seg_type_t type, uint64_t *first, uint64_t *last)
{
    int status = m->status ? m->status : 200;
    *first = 0;
    *last = size ? size - 1 : 0;
    if (status == 200) {
        time_t mtime = 0;
        if (m->last_modified[0])
            he_http_date_parse(m->last_modified, strlen(m->last_modified), &mtime);
        status = he_http_evaluate(r, m->etag, strlen(m->etag), mtime, mtime, size, first, last);
        if (status == 412) return 412;
    }
    he__rc_head(w, r, key, h, status, m, type, size && status != 416 ? *last - *first + 1 : 0);
    h->range = status == 206;
    h->unsatisfied = status == 416;
    h->first = *first;
    h->last = *last;
    h->size = size;
    return status;
}

/* Answers from cc->obj [off, end) with head h (the obj reference is the
 * body's from now on). */
void he__rc_send_obj(he_worker_t *w, he_req_t *r, const he_http_head_t *h, uint64_t off,
                     uint64_t end)
{
    he_cconn_t *cc = he__rc_cc(w, r);
    he_wcache_t *wc = he__wcache(w);
    he_body_t body;
    memset(&body, 0, sizeof(body));
    body.ops = &he_rc_obj_ops;
    body.ctx = cc;
    body.off = off;
    body.end = end;
    cc->active = true;
    cc->req = r;
    cc->fixed_buf = wc->fixed_buf;
    /* a small body goes with its head in one send; a large one as runs of
     * the arena (cache.zero_copy_min: where zero-copy starts to pay): by
     * sendfile from the memfd or vmsplice of its mapping, or by vmsplice of
     * the huge-page arena, which has no file (TLS reads that as memory).
     * A hit's only: a fill's readers (the miss that made it, those that
     * joined) take copies. Then an object that is never hit again was
     * never lent to the kernel, and its chunks are reused as they are when
     * it is evicted, with no drop and no fault-in (cache/ram.c); most cold
     * objects are such, and a copy costs their one reader no more. */
    cc->sendfile =
        end - off >= w->zc_min && he_cache_obj_complete(cc->obj) &&
        (wc->arena_sendfile || (wc->arena_huge && w->conf->cache_ram_splice && !r->conn->tls));
    cc->splice = cc->sendfile && w->conf->cache_ram_splice;
    he_auth_respond(w, r, h, &body);
}

/* A media playlist served: prefetch learns its segments, and the request's
 * raw target (escapes and query as sent), which a refresh must ask for.
 * Nothing to learn while prefetch is off. */
static void he_rc_playlist_seen(he_worker_t *w, he_req_t *r, he_cache_obj_t *o)
{
    size_t n = r->url_len;
    char t[HE_CACHE_KEY_MAX];
    bool have = n && n < sizeof(t) && r->url[0] == '/';
    if (!he__wcache(w)->conf->prefetch_segments) return;
    if (have) {
        memcpy(t, r->url, n);
        t[n] = 0;
    }
    he_cache_prefetch_playlist_obj(he__wcache(w)->pf, o, have ? t : NULL);
}

/* A cached 404 went out: a copy the cache kept answered, not a fill's
 * fresh one (counted once here, not at the tiers' lookups, whose hit may
 * still turn into a fill). */
static void he_rc_count_negative(he_worker_t *w, uint16_t status, uint8_t cst)
{
    if (status == 404 && cst != HE_ALOG_CACHE_MISS && cst != HE_ALOG_CACHE_COALESCED &&
        cst != HE_ALOG_CACHE_NONE)
        he__wcache(w)->st->negative_hits++;
}

/* A complete object (a hit, a stale copy, a fill that ended): answers r.
 * Takes over the caller's reference. */
void he__rc_serve_obj(he_worker_t *w, he_req_t *r, he_cache_obj_t *o, uint8_t cst)
{
    he_cconn_t *cc = he__rc_cc(w, r);
    const he_cache_meta_t *m = he_cache_obj_meta(o);
    const he_cache_key_t *key = he_cache_obj_key(o);
    he_seg_type_t type = he_seg_type_from_path(key->s, key->path_len);
    uint64_t size = he_cache_obj_len(o), first, last;
    he_http_head_t h;
    int status;

    r->cache_st = cst;
    r->kind = m->kind;
    he_rc_count_negative(w, m->status, cst);
    status = he_rc_head_complete(w, r, key, &h, m, size, type, &first, &last);
    {
        he_cache_fresh_t fr;
        he_cache_obj_fresh(o, &fr);
        he__rc_age(&h, fr.stored_ms, he__cache_wall_ms(w));
    }
    if (status == 412) {
        he_cache_obj_unref(o);
        he_http_respond_error(w, r, 412);
        return;
    }
    if (cc->obj) he_cache_obj_unref(cc->obj);
    cc->obj = o;
    if (status == 200 && m->kind == HE_SEG_KIND_MEDIA) he_rc_playlist_seen(w, r, o);
    if (status == 200 && m->kind == HE_SEG_KIND_SEGMENT) he__oio_prefetch(w, key);
    he__rc_send_obj(w, r, &h, first, size ? last + 1 : 0);
}

/* ---------------------------------------------------------------- SSD */

/* cst: how the answer counts; promote: the copy is fresh, so a RAM copy
 * of it may serve the next hits */
bool he__rc_serve_ssd(he_worker_t *w, he_req_t *r, const he_cache_key_t *key,
                      const he_cache_store_hit_t *hit, uint8_t cst, bool promote, uint64_t epoch)
{
    he_wcache_t *wc = he__wcache(w);
    he_cconn_t *cc = he__rc_cc(w, r);
    he_seg_type_t type = he_seg_type_from_path(key->s, key->path_len);
    uint64_t first, last;
    he_http_head_t h;
    he_body_t body;
    struct stat sb;
    char *path;
    int fd, status;

    /* openat is synchronous like the open-file cache's (2 us with a warm
     * dentry cache, tests/bench/open_cost.c); the body goes by sendfile */
    fd = openat(hit->dirfd, hit->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        /* by file: ENOENT may mean a newer version replaced this one */
        he_cache_store_error_file(wc->store, key, hit->path, -errno, wc->st);
        return false;
    }
    if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < hit->body_off + hit->body_len) {
        close(fd);
        he_cache_store_error_file(wc->store, key, hit->path, -EBADMSG, wc->st);
        return false;
    }
    if (!(path = strdup(hit->path))) {
        close(fd);
        return false;
    }
    r->cache_st = cst;
    r->kind = hit->meta.kind;
    he_rc_count_negative(w, hit->meta.status, cst);
    status = he_rc_head_complete(w, r, key, &h, &hit->meta, hit->body_len, type, &first, &last);
    he__rc_age(&h, hit->meta.fresh.stored_ms, he__cache_wall_ms(w));
    if (status == 412) {
        close(fd);
        free(path);
        he_http_respond_error(w, r, 412);
        return true;
    }
    cc->ssd_fd = fd;
    cc->ssd_path = path;
    cc->ssd_size = hit->body_off + hit->body_len;
    cc->req = r;
    cc->active = true;
    memset(&body, 0, sizeof(body));
    body.ops = &he_rc_ssd_ops;
    body.ctx = cc;
    body.off = hit->body_off + first;
    body.end = hit->body_len ? hit->body_off + last + 1 : body.off;
    body.name = cc->ssd_path;
    if (status == 200 && hit->meta.kind == HE_SEG_KIND_SEGMENT) he__oio_prefetch(w, key);
    /* the second hit (SIEVE's visited bit) moves it up: before the send,
     * which may end the response and close fd */
    if (promote && hit->revisit && hit->meta.status == 200) he__oio_promote(w, key, hit, fd, epoch);
    he_auth_respond(w, r, &h, &body);
    return true;
}

/* ---------------------------------------------------------------- entry */

he_handler_result_t he_cache_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_key_t key_buf, *key = &key_buf; /* on the stack: no malloc per request */
    he_cache_store_hit_t hit;
    he_cache_fresh_t fr;
    he_cache_obj_t *o;
    int64_t wall = he__cache_wall_ms(w);
    uint64_t epoch;

    if (he__llup_handle(w, r, path, len)) return HE_HANDLER_DONE;
    if (he_cache_key_make(wc->conf, r->url, r->url_len, key) < 0) return HE_HANDLER_DECLINED;
    if (he__llup_plain(w, r, key)) return HE_HANDLER_DONE;
    if (!he__rc_attach(w, r)) {
        he_http_respond_error(w, r, 503);
        return HE_HANDLER_DONE;
    }
    o = he_cache_ram_lookup(wc->ram, wc->node, key, wc->st);
    if (o) {
        he_cache_obj_fresh(o, &fr);
        switch (he_cache_fresh_state(&fr, wall)) {
        case HE_CACHE_FRESH:
            he__rc_serve_obj(w, r, o,
                             he_cache_obj_meta(o)->prefetched ? HE_ALOG_CACHE_PREFETCHED
                                                              : HE_ALOG_CACHE_HIT_RAM);
            break;
        case HE_CACHE_STALE_REVALIDATE:
            wc->st->stale_serves++;
            he__rc_refresh(w, r, key, o);
            he__rc_serve_obj(w, r, o, HE_ALOG_CACHE_STALE);
            break;
        default:
            he__rc_join(w, r, key, o);
            he_cache_obj_unref(o);
            break;
        }
        return HE_HANDLER_DONE;
    }
    /* before the SSD lookup: a purge after it makes a promotion drop its copy */
    epoch = wc->ram ? he_cache_ram_epoch(wc->ram) : 0;
    if (wc->store && he_cache_store_lookup(wc->store, key, &hit, wc->st) == 0) {
        he_cache_freshness_t fs = he_cache_fresh_state(&hit.meta.fresh, wall);
        if (fs == HE_CACHE_FRESH || fs == HE_CACHE_STALE_REVALIDATE) {
            if (fs == HE_CACHE_STALE_REVALIDATE) {
                wc->st->stale_serves++;
                he__rc_refresh(w, r, key, NULL);
            }
            if (he__rc_serve_ssd(w, r, key, &hit,
                                 fs == HE_CACHE_FRESH ? HE_ALOG_CACHE_HIT_SSD : HE_ALOG_CACHE_STALE,
                                 fs == HE_CACHE_FRESH, epoch))
                return HE_HANDLER_DONE;
        }
    }
    /* expired (stale-if-error at most): the fill's failure falls back to
     * the SSD copy (he_rc_ssd_fallback) */
    he__rc_join(w, r, key, NULL);
    return HE_HANDLER_DONE;
}

/* HTTP/1.x: the slot's state goes with the connection. */
static void he_rc_conn_dispose(he_worker_t *w, he_conn_t *c)
{
    he_wcache_t *wc = he__wcache(w);
    if (!wc || !wc->cc) return;
    he__rc_release_cc(&wc->cc[c->slot]);
}

/* HTTP/2: a stream's own state goes with the stream. */
static void he_rc_stream_free(he_worker_t *w, he_req_t *r)
{
    (void)w;
    if (!r->hctx) return;
    he__rc_release_cc(r->hctx);
    free(r->hctx);
    r->hctx = NULL;
}

bool he__rc_attach(he_worker_t *w, he_req_t *r)
{
    if (r->hctx) return true;
    if (!r->h2) {
        r->hctx = &he__wcache(w)->cc[r->conn->slot];
        return true;
    }
    if (!(r->hctx = calloc(1, sizeof(he_cconn_t)))) return false;
    r->hctx_free = he_rc_stream_free;
    return true;
}

/* ---------------------------------------------------------------- PURGE */

static bool he_rc_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a)) return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

/* PURGE on the viewer port: from loopback, or with admin.token_file's
 * bearer token. Without a token configured others get 405, as if the
 * method did not exist; with one, 401. Refusals are counted. */
void he_cache_handle_purge(he_worker_t *w, he_req_t *r)
{
    int n;
    if (!he_rc_loopback(&r->conn->peer) &&
        !he_conf_bearer_ok(w->conf, r->authz, r->authz_len)) {
        w->stats.purge_refused++;
        he_http_respond_error(w, r, w->conf->admin_token[0] ? 401 : 405);
        return;
    }
    n = he__cache_purge(he__wcache(w)->conf, r->url, r->url_len);
    he_log_info("worker %u: PURGE %.*s: %d entries", w->id, (int)r->url_len, r->url, n);
    he_http_respond_error(w, r, n > 0 ? 200 : n == 0 ? 404 : 400);
}

const he_worker_hooks_t he_cache_worker_hooks = {
    .name = "cache",
    .setup = he__cache_worker_setup,
    .tick = he__cache_tick,
    .job = he__oio_on_cqe,
    .quiesce = he__oio_quiesce,
    .cleanup = he__cache_worker_cleanup,
    .conn_dispose = he_rc_conn_dispose,
};
