/* Answering from the edge cache: RAM hits, SSD hits and origin fills.
 *
 * RAM bodies leave straight from the object's chunks, span by span:
 *   - a large span of the node arena (registered as fixed buffer 0) goes
 *     with IORING_OP_SEND_ZC + IORING_RECVSEND_FIXED_BUF: no copy, no page
 *     pinning per operation. The object reference is held until the
 *     notification (IORING_CQE_F_NOTIF) of every zero-copy send: both
 *     completions count in c->inflight, so neither the connection nor the
 *     object goes while the kernel may still read the memory;
 *   - smaller spans, the header, and everything when send_zc or the fixed
 *     buffer is unavailable, go with IORING_OP_SEND / SENDMSG (up to
 *     HE_CC_IOV chunks gathered per operation);
 *   - a small complete object is copied behind the header: one send.
 * Where the crossover lies: docs/performance.md ("send vs send_zc"); the
 * default below is the measured one, HE_CACHE_ZC_MIN overrides it.
 *
 * SSD hits are files: a he_file_t outside the open-file cache carries the
 * descriptor into respond.c's sendfile path (and, under userspace TLS, its
 * mmap path), and is closed when the response ends.
 *
 * Misses join the worker's fill for the key (one origin request however
 * many clients ask) and stream the body as it arrives, unless the response
 * turns out not to be storable: then only the request that made the fill
 * takes it, and each one that joined asks the origin itself
 * (hit-for-miss, he_rc_alone). A waiter whose
 * origin response has no Content-Length (chunked) waits for the whole
 * object and is then answered like a hit. A Range or conditional request
 * that arrives while the object is still filling is answered 200 with the
 * full body; complete objects honour both.
 *
 * Userspace TLS (no kTLS) cannot use the socket directly: those
 * connections get a copy of the complete object through respond.c's
 * memory-body path (they wait for the fill to finish first). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/base/hbuf.h"
#include "server/handler/cache_glue.h"
#include "server/http/http_util.h"
#include "server/base/log.h"
#include "server/net/tls.h"

/* Most bytes one ring operation sends before the worker looks at other
 * connections again. */
#define HE_CC_MAX_SEND (1u << 20)
/* Spans at least this long go zero-copy (when the kernel and the fixed
 * buffer allow). See docs/performance.md, "send vs send_zc". */
#define HE_CC_ZC_MIN_DEFAULT (256u << 10)

enum { HE_CC_OP_NONE = 0, HE_CC_OP_SEND, HE_CC_OP_ZC, HE_CC_OP_POLL };

static uint64_t he_rc_zc_min = HE_CC_ZC_MIN_DEFAULT;
/* Stop zero-copy on a connection once the kernel says it copied (the
 * route's device cannot do it: loopback, veth, no scatter-gather): a
 * copied SEND_ZC costs more than a plain send (docs/performance.md).
 * HE_CACHE_ZC_ADAPT=0 keeps zero-copy on, for measuring that cost. */
static bool he_rc_zc_adapt = true;

static inline he_cconn_t *he_rc_cc(he_worker_t *w, he_conn_t *c)
{
    return &w->cache->cc[c->slot];
}

/* ---------------------------------------------------------------- heads */

/* The head of a cache answer, into c->hdr. What the origin sent for the
 * representation (type, validators, encoding) and our own policy
 * (Cache-Control per type, CORS) - never the origin's hop-by-hop or
 * caching headers. */
typedef struct he_rc_head {
    int status;
    const char *ctype, *etag, *lm;
    const char *cenc; /* the stored bytes' Content-Encoding; "" or NULL: identity */
    uint64_t clen;
    bool range;
    uint64_t first, last, size;
    he_seg_type_t type;
} he_rc_head_t;

static bool he_rc_head(he_worker_t *w, he_conn_t *c, const he_rc_head_t *h)
{
    he_hbuf_t b = {c->hdr, 0, HE_CONN_HDR_CAP, false};
    const char *cc = w->conf->cache_control[h->type];

    c->status = h->status;
    he_hb_lit(&b, "HTTP/1.1 ");
    he_hb_u64(&b, (uint64_t)h->status);
    he_hb_lit(&b, " ");
    he_hb_str(&b, he_http_reason(h->status));
    he_hb_lit(&b, "\r\nServer: hlsedge\r\nDate: ");
    he_hb_mem(&b, w->date, 29);
    he_hb_lit(&b, "\r\n");
    if (w->conf->cors_allow_origin[0]) {
        he_hb_lit(&b, "Access-Control-Allow-Origin: ");
        he_hb_str(&b, w->conf->cors_allow_origin);
        he_hb_lit(&b, "\r\nAccess-Control-Expose-Headers: Content-Length, Content-Range, ETag\r\n");
    }
    if (h->status != 304) {
        he_hb_lit(&b, "Content-Type: ");
        he_hb_str(&b, h->ctype && h->ctype[0] ? h->ctype : he_seg_type_mime(h->type));
        he_hb_lit(&b, "\r\nContent-Length: ");
        he_hb_u64(&b, h->clen);
        he_hb_lit(&b, "\r\n");
        if (h->cenc && h->cenc[0] && h->status != 416) {
            he_hb_lit(&b, "Content-Encoding: ");
            he_hb_str(&b, h->cenc);
            he_hb_lit(&b, "\r\n");
        }
    }
    /* the origin chose the encoding, not the client's Accept-Encoding:
     * shared caches downstream must not hand it to one that cannot
     * decode it */
    if (h->cenc && h->cenc[0]) he_hb_lit(&b, "Vary: Accept-Encoding\r\n");
    if (h->status == 200 || h->status == 206) he_hb_lit(&b, "Accept-Ranges: bytes\r\n");
    if (h->range) {
        he_hb_lit(&b, "Content-Range: bytes ");
        he_hb_u64(&b, h->first);
        he_hb_lit(&b, "-");
        he_hb_u64(&b, h->last);
        he_hb_lit(&b, "/");
        he_hb_u64(&b, h->size);
        he_hb_lit(&b, "\r\n");
    } else if (h->status == 416) {
        he_hb_lit(&b, "Content-Range: bytes */");
        he_hb_u64(&b, h->size);
        he_hb_lit(&b, "\r\n");
    }
    if (h->status < 300 || h->status == 304) {
        if (h->lm && h->lm[0]) {
            he_hb_lit(&b, "Last-Modified: ");
            he_hb_str(&b, h->lm);
            he_hb_lit(&b, "\r\n");
        }
        if (h->etag && h->etag[0]) {
            he_hb_lit(&b, "ETag: ");
            he_hb_str(&b, h->etag);
            he_hb_lit(&b, "\r\n");
        }
        if (cc[0]) {
            he_hb_lit(&b, "Cache-Control: ");
            he_hb_str(&b, cc);
            he_hb_lit(&b, "\r\n");
        }
    }
    if (c->close_after || w->draining) {
        c->close_after = true;
        he_hb_lit(&b, "Connection: close\r\n\r\n");
    } else if (c->req.http_major == 1 && c->req.http_minor == 0) {
        he_hb_lit(&b, "Connection: keep-alive\r\n\r\n");
    } else {
        he_hb_lit(&b, "\r\n");
    }
    c->hdr_len = (uint32_t)b.len;
    c->hdr_sent = 0;
    if (b.overflow) {
        he_log_error("worker %u: cache response header over %d bytes", w->id, HE_CONN_HDR_CAP);
        return false;
    }
    return true;
}

/* Head for a complete representation: conditionals and a single Range.
 * Returns the status (200, 206, 304, 416), or 412 (not built: the caller
 * answers with an error page). [*first, *last] is the body range. */
static int he_rc_head_complete(he_worker_t *w, he_conn_t *c, const he_cache_meta_t *m,
                               uint64_t size, he_seg_type_t type, uint64_t *first, uint64_t *last)
{
    he_req_t *r = &c->req;
    he_rc_head_t h;
    he_http_range_result_t range = HE_HTTP_RANGE_NONE;
    int status = m->status ? m->status : 200;

    memset(&h, 0, sizeof(h));
    h.ctype = m->content_type;
    h.etag = m->etag;
    h.lm = m->last_modified;
    h.cenc = m->content_encoding;
    h.type = type;
    h.size = size;
    *first = 0;
    *last = size ? size - 1 : 0;
    if (status == 200) {
        he_http_cond_t cond;
        time_t mtime = 0;
        size_t elen = strlen(m->etag);
        if (m->last_modified[0])
            he_http_date_parse(m->last_modified, strlen(m->last_modified), &mtime);
        memset(&cond, 0, sizeof(cond));
        if (r->inm_len) cond.if_none_match = r->inm, cond.if_none_match_len = r->inm_len;
        if (r->ims_len && mtime)
            cond.if_modified_since = r->ims, cond.if_modified_since_len = r->ims_len;
        if (r->im_len) cond.if_match = r->im, cond.if_match_len = r->im_len;
        if (r->ius_len && mtime)
            cond.if_unmodified_since = r->ius, cond.if_unmodified_since_len = r->ius_len;
        switch (he_http_cond_eval(&cond, m->etag, elen, mtime)) {
        case HE_HTTP_COND_NOT_MODIFIED:
            h.status = 304;
            he_rc_head(w, c, &h);
            return 304;
        case HE_HTTP_COND_PRECONDITION_FAILED:
            return 412;
        default:
            break;
        }
        if (r->range_len && (!r->if_range_len || he_http_if_range_ok(r->if_range, r->if_range_len,
                                                                     m->etag, elen, mtime)))
            range = he_http_range_parse(r->range, r->range_len, size, first, last);
        if (range == HE_HTTP_RANGE_UNSATISFIABLE) {
            h.status = 416;
            he_rc_head(w, c, &h);
            return 416;
        }
    }
    h.status = range == HE_HTTP_RANGE_OK ? 206 : status;
    h.range = range == HE_HTTP_RANGE_OK;
    h.first = *first;
    h.last = *last;
    h.clen = size ? *last - *first + 1 : 0;
    if (!he_rc_head(w, c, &h)) return 500;
    return h.status;
}

/* ---------------------------------------------------------------- sending */

static void he_rc_release(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    if (cc->waiter.fill) he_cache_fill_leave(&cc->waiter);
    if (cc->obj) he_cache_obj_unref(cc->obj);
    cc->obj = NULL;
    cc->off = cc->end = 0;
    cc->active = cc->waiting = cc->await_done = cc->head_only = cc->failed = false;
    cc->finish_wait = cc->copy_mode = false;
    c->cache_busy = false;
}

static void he_rc_finish(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    if (cc->zc_pending) { /* the kernel may still read the object */
        cc->finish_wait = true;
        return;
    }
    he_rc_release(w, c);
    he__respond_finish(w, c);
}

static void he_rc_close(he_worker_t *w, he_conn_t *c, int err)
{
    if (err == -ECONNRESET || err == -EPIPE) w->stats.errors[HE_STATS_ERR_RESET]++;
    he__conn_close(w, c);
}

static void he_rc_arm_poll(he_worker_t *w, he_conn_t *c)
{
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
    he__worker_sqe_conn(w, sqe, c, HE_OP_CSEND);
    he_rc_cc(w, c)->op = HE_CC_OP_POLL;
}

/* Sends what is available: one operation in flight per connection; the
 * completion calls back here. */
static void he_rc_pump(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    uint32_t hrem = c->hdr_len - c->hdr_sent;
    uint64_t avail, off, total = hrem;
    struct io_uring_sqe *sqe;
    unsigned niov = 0;

    if (cc->op != HE_CC_OP_NONE || c->closing || !cc->active) return;
    avail = cc->end;
    if (cc->obj && he_cache_obj_len(cc->obj) < avail) avail = he_cache_obj_len(cc->obj);
    if (hrem == 0 && cc->off >= cc->end) {
        he_rc_finish(w, c);
        return;
    }
    if (hrem == 0 && cc->off >= avail) {
        if (cc->failed) he__conn_close(w, c); /* the client sees a short body */
        return;                               /* more comes with the next DATA */
    }
    if (w->cache->fixed_buf && !c->tls && !cc->zc_copies && cc->off < avail) {
        const void *p, *q;
        int64_t fo, fq;
        size_t n = he_cache_obj_peek(cc->obj, cc->off, &p, &fo), m;
        if (n > avail - cc->off) n = (size_t)(avail - cc->off);
        /* adjacent chunks of the arena make one span */
        while (fo >= 0 && n < HE_CC_MAX_SEND && cc->off + n < avail &&
               (m = he_cache_obj_peek(cc->obj, cc->off + n, &q, &fq)) > 0 &&
               q == (const char *)p + n && fq == fo + (int64_t)n) {
            if (m > avail - cc->off - n) m = (size_t)(avail - cc->off - n);
            n += m;
        }
        if (n > HE_CC_MAX_SEND) n = HE_CC_MAX_SEND;
        if (fo >= 0 && n >= he_rc_zc_min && hrem) {
            /* the header alone first: gathered with the body it would
             * take the first MiB along as a copy */
            sqe = he__worker_sqe(w);
            io_uring_prep_send(sqe, c->fd, c->hdr + c->hdr_sent, hrem, MSG_NOSIGNAL | MSG_MORE);
            he__worker_sqe_conn(w, sqe, c, HE_OP_CSEND);
            cc->op = HE_CC_OP_SEND;
            return;
        }
        if (fo >= 0 && n >= he_rc_zc_min) {
            sqe = he__worker_sqe(w);
            io_uring_prep_send_zc_fixed(sqe, c->fd, (void *)p, n, MSG_NOSIGNAL, 0, 0);
            /* the notification says whether the kernel copied after all:
             * counted, so an operator sees whether zero-copy happens */
            if (w->cache->zc_usage) sqe->ioprio |= HE_SEND_ZC_REPORT_USAGE;
            he__worker_sqe_conn(w, sqe, c, HE_OP_CSEND);
            c->inflight++; /* the notification */
            cc->zc_pending++;
            cc->op = HE_CC_OP_ZC;
            return;
        }
    }
    if (hrem) {
        cc->iov[0].iov_base = c->hdr + c->hdr_sent;
        cc->iov[0].iov_len = hrem;
        niov = 1;
    }
    off = cc->off;
    while (niov < HE_CC_IOV && off < avail && total < HE_CC_MAX_SEND) {
        const void *p;
        size_t n = he_cache_obj_peek(cc->obj, off, &p, NULL);
        if (!n) break;
        if (n > avail - off) n = (size_t)(avail - off);
        if (niov > (hrem ? 1u : 0u) &&
            (const char *)cc->iov[niov - 1].iov_base + cc->iov[niov - 1].iov_len == p) {
            cc->iov[niov - 1].iov_len += n;
        } else {
            cc->iov[niov].iov_base = (void *)p;
            cc->iov[niov].iov_len = n;
            niov++;
        }
        off += n;
        total += n;
    }
    sqe = he__worker_sqe(w);
    if (niov == 1) {
        io_uring_prep_send(sqe, c->fd, cc->iov[0].iov_base, cc->iov[0].iov_len, MSG_NOSIGNAL);
    } else {
        memset(&cc->msg, 0, sizeof(cc->msg));
        cc->msg.msg_iov = cc->iov;
        cc->msg.msg_iovlen = niov;
        io_uring_prep_sendmsg(sqe, c->fd, &cc->msg, MSG_NOSIGNAL);
    }
    he__worker_sqe_conn(w, sqe, c, HE_OP_CSEND);
    cc->op = HE_CC_OP_SEND;
}

void he__rcache_on_cqe(he_worker_t *w, he_conn_t *c, struct io_uring_cqe *cqe)
{
    he_cconn_t *cc;
    uint8_t op;
    int res = cqe->res;

    if (!w->cache) return;
    cc = he_rc_cc(w, c);
    if (cqe->flags & IORING_CQE_F_NOTIF) {
        bool copied = (uint32_t)res & HE_NOTIF_USAGE_ZC_COPIED;
        if (cc->zc_nosend && (copied || !w->cache->zc_usage)) {
            /* a send that sent nothing (reset, EAGAIN ...) is reported
             * "copied" too (!zc_used): not a send, and no reason to stop
             * zero-copy. Notifications may come out of order, but every
             * nothing-sent one has the copied bit, and those all count
             * alike, so taking any copied one for it keeps the totals. */
            cc->zc_nosend--;
        } else {
            w->stats.cache.zc_sends++;
            if (copied) {
                w->stats.cache.zc_copied++;
                cc->zc_copies = he_rc_zc_adapt;
            }
        }
        cc->zc_pending--;
        if (!cc->zc_pending && cc->finish_wait && !c->closing) he_rc_finish(w, c);
        return;
    }
    op = cc->op;
    cc->op = HE_CC_OP_NONE;
    if (op == HE_CC_OP_ZC && !(cqe->flags & IORING_CQE_F_MORE)) {
        cc->zc_pending--; /* no notification will follow */
        c->inflight--;
    } else if (op == HE_CC_OP_ZC && res <= 0) {
        cc->zc_nosend++; /* its notification follows: see above */
    }
    if (c->closing || !cc->active) return;
    if (op == HE_CC_OP_POLL) {
        if ((res < 0 && res != -ECANCELED) ||
            (res > 0 && (res & (POLLERR | POLLHUP)) && !(res & POLLOUT))) {
            he_rc_close(w, c, -ECONNRESET);
            return;
        }
        he_rc_pump(w, c);
        return;
    }
    if (res == -EAGAIN) {
        he_rc_arm_poll(w, c);
        return;
    }
    if (res < 0) {
        he_rc_close(w, c, res);
        return;
    }
    if (!c->t_first_byte_ns) c->t_first_byte_ns = he__batch_ns;
    c->bytes_sent += (uint64_t)res;
    if (res) he__conn_timer_set(w, c, HE_TIMER_SEND);
    if (c->hdr_sent < c->hdr_len) {
        uint32_t h = c->hdr_len - c->hdr_sent;
        if ((uint32_t)res < h) h = (uint32_t)res;
        c->hdr_sent += h;
        res -= (int)h;
    }
    cc->off += (uint64_t)res;
    he_rc_pump(w, c);
}

/* Userspace TLS: the complete object, copied, through respond.c. */
static void he_rc_send_copy(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    uint64_t n = cc->end > cc->off ? cc->end - cc->off : 0, done = 0;
    he_file_t *f = calloc(1, sizeof(*f));
    if (!f || !(f->body = malloc(n ? n : 1)) || !(f->path = strdup("(cache)"))) {
        if (f) free(f->body);
        free(f);
        he_rc_release(w, c);
        he__conn_close(w, c);
        return;
    }
    while (done < n) {
        const void *p;
        size_t k = he_cache_obj_peek(cc->obj, cc->off + done, &p, NULL);
        if (!k) break;
        if (k > n - done) k = (size_t)(n - done);
        memcpy(f->body + done, p, k);
        done += k;
    }
    f->fd = -1;
    f->refs = 1;
    f->size = n;
    f->kind = HE_SEG_KIND_OTHER;
    he_rc_release(w, c);
    c->file = f;
    c->body_off = 0;
    c->body_end = n;
    c->body_kind = n ? HE_BODY_MEM : HE_BODY_NONE;
    he__respond_send(w, c);
}

/* Starts the body of a head already in c->hdr, from cc->obj [off, end). */
static void he_rc_start(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    cc->active = true;
    c->cache_busy = true;
    if (he__tls_userspace(c)) {
        he_rc_send_copy(w, c);
        return;
    }
    /* small and all there: behind the header, one send */
    if (cc->obj && cc->end > cc->off && he_cache_obj_len(cc->obj) >= cc->end &&
        c->hdr_len + (cc->end - cc->off) <= HE_CONN_HDR_CAP) {
        while (cc->off < cc->end) {
            const void *p;
            size_t k = he_cache_obj_peek(cc->obj, cc->off, &p, NULL);
            if (!k) break;
            if (k > cc->end - cc->off) k = (size_t)(cc->end - cc->off);
            memcpy(c->hdr + c->hdr_len, p, k);
            c->hdr_len += (uint32_t)k;
            cc->off += k;
        }
    }
    he_rc_pump(w, c);
}

/* A media playlist served: prefetch learns its segments, and the request's
 * raw target (escapes and query as sent), which a refresh must ask for.
 * Nothing to learn while prefetch is off. */
static void he_rc_playlist_seen(he_worker_t *w, he_conn_t *c, he_cache_obj_t *o)
{
    size_t n = c->req.url_len;
    char t[HE_CACHE_KEY_MAX];
    bool have = n && n < sizeof(t) && c->url[0] == '/';
    if (!w->cache->conf->prefetch_segments) return;
    if (have) {
        memcpy(t, c->url, n);
        t[n] = 0;
    }
    he_cache_prefetch_playlist_obj(w->cache->pf, o, have ? t : NULL);
}

/* A complete object (a hit, a stale copy, a fill that ended): answers c.
 * Takes over the caller's reference. */
static void he_rc_serve_obj(he_worker_t *w, he_conn_t *c, he_cache_obj_t *o, uint8_t cst)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    const he_cache_meta_t *m = he_cache_obj_meta(o);
    const he_cache_key_t *key = he_cache_obj_key(o);
    he_seg_type_t type = he_seg_type_from_path(key->s, key->path_len);
    uint64_t size = he_cache_obj_len(o), first, last;
    int status;

    c->cache_st = cst;
    if (m->status == 404) w->cache->st->negative_hits++;
    status = he_rc_head_complete(w, c, m, size, type, &first, &last);
    if (status == 412 || status == 500) {
        he_cache_obj_unref(o);
        if (status == 500)
            he__conn_close(w, c);
        else
            he__respond_error(w, c, 412);
        return;
    }
    if (cc->obj) he_cache_obj_unref(cc->obj);
    cc->obj = o;
    cc->off = first;
    cc->end = size ? last + 1 : 0;
    if (status == 304 || status == 416 || c->req.method == HTTP_HEAD) cc->end = cc->off;
    if (status == 200 && m->kind == HE_SEG_KIND_MEDIA) he_rc_playlist_seen(w, c, o);
    if (status == 200 && m->kind == HE_SEG_KIND_SEGMENT) he__oio_prefetch(w, key);
    he_rc_start(w, c);
}

/* ---------------------------------------------------------------- fills */

static bool he_rc_serve_ssd(he_worker_t *w, he_conn_t *c, const he_cache_key_t *key,
                            const he_cache_store_hit_t *hit, uint8_t cst, bool promote,
                            uint64_t epoch);

/* A fill failed before its head: a copy on the SSD tier that is still
 * within its stale-if-error window answers, as a RAM copy does through
 * the fill (only RAM objects back a fill). True if it did. */
static bool he_rc_ssd_fallback(he_worker_t *w, he_conn_t *c)
{
    he_wcache_t *wc = w->cache;
    he_cache_key_t key; /* the request is still c's: the key the fill was for */
    he_cache_store_hit_t hit;
    he_cache_freshness_t fs;

    if (!wc->store || he_cache_key_make(wc->conf, c->url, c->req.url_len, &key) < 0) return false;
    /* uncounted: the request's own lookup counted this hit */
    if (he_cache_store_lookup(wc->store, &key, &hit, NULL) < 0) return false;
    fs = he_cache_fresh_state(&hit.meta.fresh, he__cache_wall_ms(w));
    if (fs == HE_CACHE_EXPIRED ||
        !he_rc_serve_ssd(w, c, &key, &hit, fs == HE_CACHE_FRESH ? HE_ALOG_CACHE_HIT_SSD : HE_ALOG_CACHE_STALE,
                         false, 0))
        return false;
    if (fs != HE_CACHE_FRESH) wc->st->stale_serves++; /* fresh: written meanwhile */
    return true;
}

static void he_rc_fail_before_head(he_worker_t *w, he_conn_t *c)
{
    he_rc_release(w, c);
    if (he_rc_ssd_fallback(w, c)) return;
    if (w->cache->conf->origin_first && !c->cache_skip) {
        /* origin-first: the local library is the fallback */
        c->cache_skip = true;
        c->cache_st = HE_ALOG_CACHE_NONE;
        he__respond(w, c);
        return;
    }
    he__respond_error(w, c, 502);
}

static void he_rc_fetch(he_worker_t *w, he_conn_t *c, he_cache_fill_t *f, he_cache_obj_t *stale);

/* Hit-for-miss: the fill c joined brings a response that is not stored,
 * so it is not c's to take (c's request may differ in what the key leaves
 * out: a signature token, a cookie). c asks the origin itself, with its
 * own target, on a fill nobody else joins. */
static void he_rc_alone(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    he_cache_fill_t *f = he_cache_fill_alone(&cc->waiter);
    if (!f) {
        he_rc_release(w, c);
        he__respond_error(w, c, 503);
        return;
    }
    cc->waiting = true;
    c->cache_st = HE_ALOG_CACHE_MISS;
    he_rc_fetch(w, c, f, NULL);
}

static void he_rc_on_headers(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    he_cache_fill_t *f = cc->waiter.fill;
    he_cache_obj_t *o = he_cache_fill_obj(f);
    const he_cache_http_resp_t *r = he_cache_fill_resp(f);
    const he_cache_key_t *key;
    he_rc_head_t h;

    cc->waiting = false;
    if (!o) {
        he_rc_fail_before_head(w, c);
        return;
    }
    if (!he_cache_fill_shared(f, &cc->waiter)) {
        he_rc_alone(w, c);
        return;
    }
    he_cache_obj_ref(o);
    if (he_cache_fill_stale(f)) { /* 304 from the origin, or stale-if-error */
        uint8_t cst = r->status == 304 ? HE_ALOG_CACHE_REVALIDATED : HE_ALOG_CACHE_STALE;
        he_cache_fill_leave(&cc->waiter);
        he_rc_serve_obj(w, c, o, cst);
        return;
    }
    cc->obj = o;
    cc->off = 0;
    if (r->content_length < 0 || r->chunked || he__tls_userspace(c)) {
        cc->await_done = true; /* answered whole, like a hit, at DONE */
        return;
    }
    key = he_cache_obj_key(o);
    memset(&h, 0, sizeof(h));
    h.status = he_cache_fill_status(f);
    h.ctype = r->content_type;
    h.etag = r->etag;
    h.lm = r->last_modified;
    h.cenc = r->content_encoding;
    h.clen = (uint64_t)r->content_length;
    h.type = he_seg_type_from_path(key->s, key->path_len);
    if (!he_rc_head(w, c, &h)) {
        he_rc_release(w, c);
        he__conn_close(w, c);
        return;
    }
    cc->end = c->req.method == HTTP_HEAD || r->no_body ? 0 : h.clen;
    if (h.status == 200 && h.type != HE_SEG_TYPE_M3U8) he__oio_prefetch(w, key);
    he_rc_start(w, c);
}

static void he_rc_notify(he_cache_waiter_t *wt, he_cache_fill_ev_t ev)
{
    he_worker_t *w = he__cache_w;
    he_conn_t *c = wt->ctx;
    he_cconn_t *cc = he_rc_cc(w, c);

    if (w->cache->exiting || c->closing) {
        he_cache_fill_leave(wt);
        return;
    }
    switch (ev) {
    case HE_CACHE_FILL_EV_HEADERS:
        he_rc_on_headers(w, c);
        break;
    case HE_CACHE_FILL_EV_DATA:
        if (cc->active && !cc->await_done) he_rc_pump(w, c);
        break;
    case HE_CACHE_FILL_EV_DONE:
        he_cache_fill_leave(wt);
        if (cc->waiting) {
            he_rc_fail_before_head(w, c);
        } else if (cc->await_done) {
            he_cache_obj_t *o = cc->obj;
            cc->obj = NULL;
            cc->await_done = false;
            he_rc_serve_obj(w, c, o, c->cache_st);
        } else {
            he_rc_pump(w, c);
        }
        break;
    case HE_CACHE_FILL_EV_ERROR:
        he_cache_fill_leave(wt);
        if (cc->waiting || cc->await_done) {
            he_rc_fail_before_head(w, c);
        } else {
            cc->failed = true;
            if (cc->op == HE_CC_OP_NONE) he_rc_pump(w, c);
        }
        break;
    }
}

/* Starts the origin request of a fill c created, for the target exactly as
 * c sent it (escapes and every query parameter: a signature the key leaves
 * out is still the origin's business), however long; never one rebuilt
 * from the key, which names another resource. A fill that cannot start
 * ends at once (its waiters get an error). */
static void he_rc_fetch(he_worker_t *w, he_conn_t *c, he_cache_fill_t *f, he_cache_obj_t *stale)
{
    size_t n = c->req.url_len;
    char *target = malloc(n + 1);
    int rc = -ENOMEM;
    if (target) {
        memcpy(target, c->url, n);
        target[n] = 0;
        rc = he__oio_fetch_start(w, f, target, stale);
        free(target);
    }
    if (rc < 0) he_cache_fill_end(f, rc, HE_CACHE_OERR_IO, he__cache_wall_ms(w));
}

static void he_rc_join(he_worker_t *w, he_conn_t *c, const he_cache_key_t *key,
                       he_cache_obj_t *stale)
{
    he_cconn_t *cc = he_rc_cc(w, c);
    he_cache_fill_t *f;
    bool created;

    memset(&cc->waiter, 0, sizeof(cc->waiter));
    cc->waiter.notify = he_rc_notify;
    cc->waiter.ctx = c;
    f = he_cache_fill_join(w->cache->fills, key, &cc->waiter, stale, false, &created);
    if (!f) {
        he__respond_error(w, c, 503);
        return;
    }
    cc->active = true;
    cc->waiting = true;
    c->cache_busy = true;
    c->cache_st = created ? (stale ? HE_ALOG_CACHE_REVALIDATED : HE_ALOG_CACHE_MISS) : HE_ALOG_CACHE_COALESCED;
    if (created) {
        he_rc_fetch(w, c, f, stale);
        return;
    }
    if (he_cache_fill_status(f) && he_cache_fill_obj(f)) he_rc_on_headers(w, c);
}

/* Serves a stale object and refreshes it behind the client's back. */
static void he_rc_refresh(he_worker_t *w, he_conn_t *c, const he_cache_key_t *key,
                          he_cache_obj_t *stale)
{
    bool created;
    he_cache_fill_t *f;
    if (he_cache_fill_find(w->cache->fills, key)) return;
    f = he_cache_fill_join(w->cache->fills, key, NULL, stale, false, &created);
    if (f && created) he_rc_fetch(w, c, f, stale);
}

/* ---------------------------------------------------------------- SSD */

/* cst: how the answer counts; promote: the copy is fresh, so a RAM copy
 * of it may serve the next hits */
static bool he_rc_serve_ssd(he_worker_t *w, he_conn_t *c, const he_cache_key_t *key,
                            const he_cache_store_hit_t *hit, uint8_t cst, bool promote,
                            uint64_t epoch)
{
    he_wcache_t *wc = w->cache;
    he_seg_type_t type = he_seg_type_from_path(key->s, key->path_len);
    uint64_t first, last;
    struct stat sb;
    he_file_t *f;
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
    f = calloc(1, sizeof(*f));
    if (!f || !(f->path = strdup(hit->path))) {
        free(f);
        close(fd);
        return false;
    }
    f->fd = fd;
    f->refs = 1;
    f->ssd = true;
    f->size = hit->body_off + hit->body_len;
    f->type = type;
    f->kind = (he_seg_kind_t)hit->meta.kind;
    c->cache_st = cst;
    if (hit->meta.status == 404) wc->st->negative_hits++;
    status = he_rc_head_complete(w, c, &hit->meta, hit->body_len, type, &first, &last);
    if (status == 412 || status == 500) {
        he_fcache_put(w->fcache, f);
        if (status == 500)
            he__conn_close(w, c);
        else
            he__respond_error(w, c, 412);
        return true;
    }
    c->file = f;
    c->body_off = hit->body_off + first;
    c->body_end = hit->body_len ? hit->body_off + last + 1 : c->body_off;
    if (status == 304 || status == 416 || c->req.method == HTTP_HEAD) c->body_end = c->body_off;
    c->body_kind = c->body_end > c->body_off ? HE_BODY_FILE : HE_BODY_NONE;
    if (status == 200 && hit->meta.kind == HE_SEG_KIND_SEGMENT) he__oio_prefetch(w, key);
    /* the second hit (SIEVE's visited bit) moves it up: before the send,
     * which may end the response and close fd */
    if (promote && hit->revisit && hit->meta.status == 200) he__oio_promote(w, key, hit, fd, epoch);
    he__respond_send(w, c);
    return true;
}

bool he__rcache_disk_errno(int err)
{
    switch (-err) {
    case EIO:
    case ENODATA:
    case ESTALE:
    case ENXIO:
    case EOVERFLOW:
    case EBADMSG:
        return true;
    default:
        return false; /* the socket's (EPIPE, ECONNRESET, ...) or ours */
    }
}

int he__rcache_sendfile_disk_error(int fd, uint64_t off, int err)
{
    char b;
    ssize_t n;
    if (!he__rcache_disk_errno(err)) return 0;
    /* one byte where the send failed: readable, the socket failed; on an
     * error path only, so the possible disk wait is no concern */
    n = pread(fd, &b, 1, (off_t)off);
    if (n == 1) return 0;
    return n == 0 ? -EBADMSG : -errno; /* 0: short of the promised length */
}

void he__rcache_file_error(he_worker_t *w, he_conn_t *c, int err)
{
    he_cache_key_t key;
    if (!w->cache || !w->cache->store) return;
    /* the request is still c's (the next is parsed after this one ends),
     * so its key is the one the hit was found under */
    if (he_cache_key_make(w->cache->conf, c->url, c->req.url_len, &key) == 0)
        he_cache_store_error_file(w->cache->store, &key, c->file ? c->file->path : NULL, err,
                                  w->cache->st);
}

/* ---------------------------------------------------------------- entry */

bool he__rcache_respond(he_worker_t *w, he_conn_t *c)
{
    he_wcache_t *wc = w->cache;
    he_cache_key_t key_buf, *key = &key_buf; /* on the stack: no malloc per request */
    he_cache_store_hit_t hit;
    he_cache_fresh_t fr;
    he_cache_obj_t *o;
    int64_t wall = he__cache_wall_ms(w);
    uint64_t epoch;

    if (he_cache_key_make(wc->conf, c->url, c->req.url_len, key) < 0) return false;
    o = he_cache_ram_lookup(wc->ram, wc->node, key, wc->st);
    if (o) {
        he_cache_obj_fresh(o, &fr);
        switch (he_cache_fresh_state(&fr, wall)) {
        case HE_CACHE_FRESH:
            he_rc_serve_obj(w, c, o,
                            he_cache_obj_meta(o)->prefetched ? HE_ALOG_CACHE_PREFETCHED : HE_ALOG_CACHE_HIT_RAM);
            break;
        case HE_CACHE_STALE_REVALIDATE:
            wc->st->stale_serves++;
            he_rc_refresh(w, c, key, o);
            he_rc_serve_obj(w, c, o, HE_ALOG_CACHE_STALE);
            break;
        default:
            he_rc_join(w, c, key, o);
            he_cache_obj_unref(o);
            break;
        }
        return true;
    }
    /* before the SSD lookup: a purge after it makes a promotion drop its copy */
    epoch = wc->ram ? he_cache_ram_epoch(wc->ram) : 0;
    if (wc->store && he_cache_store_lookup(wc->store, key, &hit, wc->st) == 0) {
        he_cache_freshness_t fs = he_cache_fresh_state(&hit.meta.fresh, wall);
        if (fs == HE_CACHE_FRESH || fs == HE_CACHE_STALE_REVALIDATE) {
            if (fs == HE_CACHE_STALE_REVALIDATE) {
                wc->st->stale_serves++;
                he_rc_refresh(w, c, key, NULL);
            }
            if (he_rc_serve_ssd(w, c, key, &hit,
                                fs == HE_CACHE_FRESH ? HE_ALOG_CACHE_HIT_SSD : HE_ALOG_CACHE_STALE,
                                fs == HE_CACHE_FRESH, epoch))
                return true;
        }
    }
    /* expired (stale-if-error at most): the fill's failure falls back to
     * the SSD copy (he_rc_ssd_fallback) */
    he_rc_join(w, c, key, NULL);
    return true;
}

void he__rcache_conn_free(he_worker_t *w, he_conn_t *c)
{
    he_cconn_t *cc;
    if (!w->cache || !w->cache->cc) return;
    cc = he_rc_cc(w, c);
    he_rc_release(w, c);
    cc->op = HE_CC_OP_NONE;
    cc->zc_pending = 0;
    cc->zc_nosend = 0;
    cc->zc_copies = false; /* the next connection may take another route */
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

void he__rcache_purge(he_worker_t *w, he_conn_t *c)
{
    int n;
    if (!he_rc_loopback(&c->peer)) {
        he__respond_error(w, c, 405);
        return;
    }
    n = he__cache_purge(w->cache->conf, c->url, c->req.url_len);
    he_log_info("worker %u: PURGE %.*s: %d entries", w->id, (int)c->req.url_len, c->url, n);
    he__respond_error(w, c, n > 0 ? 200 : n == 0 ? 404 : 400);
}

__attribute__((constructor)) static void he_rc_init(void)
{
    const char *e = getenv("HE_CACHE_ZC_MIN");
    if (e && *e) he_rc_zc_min = strtoull(e, NULL, 0);
    e = getenv("HE_CACHE_ZC_ADAPT");
    if (e && strcmp(e, "0") == 0) he_rc_zc_adapt = false;
}
