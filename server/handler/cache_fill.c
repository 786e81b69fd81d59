/* The edge cache handler's misses: joining the worker's fill for a key,
 * the fill's events (head, data, done, error), hit-for-miss, and what a
 * fill that fails falls back to (a stale SSD copy, the next handler, or
 * 502). See respond_cache.c for the whole. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/log.h"
#include "server/handler/cache_glue.h"

/* A fill failed before its head: a copy on the SSD tier that is still
 * within its stale-if-error window answers, as a RAM copy does through
 * the fill (only RAM objects back a fill). True if it did. */
static bool he_rc_ssd_fallback(he_worker_t *w, he_req_t *r)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_key_t key; /* the request is still r: the key the fill was for */
    he_cache_store_hit_t hit;
    he_cache_freshness_t fs;

    if (!wc->store || he_cache_key_make(wc->conf, r->url, r->url_len, &key) < 0) return false;
    /* uncounted: the request's own lookup counted this hit */
    if (he_cache_store_lookup(wc->store, &key, &hit, NULL) < 0) return false;
    fs = he_cache_fresh_state(&hit.meta.fresh, he__cache_wall_ms(w));
    if (fs == HE_CACHE_EXPIRED ||
        !he__rc_serve_ssd(w, r, &key, &hit,
                          fs == HE_CACHE_FRESH ? HE_ALOG_CACHE_HIT_SSD : HE_ALOG_CACHE_STALE, false,
                          0))
        return false;
    if (fs != HE_CACHE_FRESH) wc->st->stale_serves++; /* fresh: written meanwhile */
    return true;
}

static void he_rc_fail_before_head(he_worker_t *w, he_req_t *r)
{
    he__rc_release_cc(he__rc_cc(w, r));
    if (he_rc_ssd_fallback(w, r)) return;
    r->origin_failed = true;
    if (he__wcache(w)->conf->origin_first) {
        he_route_next(w, r); /* origin-first: the library under root is the fallback */
        return;
    }
    he_http_respond_error(w, r, 502);
}

static void he_rc_fetch(he_worker_t *w, he_req_t *r, he_cache_fill_t *f, he_cache_obj_t *stale);

/* Hit-for-miss: the fill r joined brings a response that is not stored,
 * so it is not r's to take (r may differ in what the key leaves out: a
 * signature token, a cookie). r asks the origin itself, with its own
 * target, on a fill nobody else joins. */
static void he_rc_alone(he_worker_t *w, he_req_t *r)
{
    he_cconn_t *cc = he__rc_cc(w, r);
    he_cache_fill_t *f = he_cache_fill_alone(&cc->waiter);
    if (!f) {
        he__rc_release_cc(cc);
        he_http_respond_error(w, r, 503);
        return;
    }
    cc->waiting = true;
    r->cache_st = HE_ALOG_CACHE_MISS;
    he_rc_fetch(w, r, f, NULL);
}

static void he_rc_on_headers(he_worker_t *w, he_req_t *r)
{
    he_cconn_t *cc = he__rc_cc(w, r);
    he_cache_fill_t *f = cc->waiter.fill;
    he_cache_obj_t *o = he_cache_fill_obj(f);
    const he_cache_http_resp_t *resp = he_cache_fill_resp(f);
    const he_cache_key_t *key;
    he_http_head_t h;
    he_cache_meta_t m;
    he_seg_type_t type;

    cc->waiting = false;
    if (!o) {
        he_rc_fail_before_head(w, r);
        return;
    }
    if (!he_cache_fill_shared(f, &cc->waiter)) {
        he_rc_alone(w, r);
        return;
    }
    he_cache_obj_ref(o);
    if (he_cache_fill_stale(f)) { /* 304 from the origin, or stale-if-error */
        uint8_t cst = resp->status == 304 ? HE_ALOG_CACHE_REVALIDATED : HE_ALOG_CACHE_STALE;
        he_cache_fill_leave(&cc->waiter);
        he__rc_serve_obj(w, r, o, cst);
        return;
    }
    if (resp->content_length >= 0 && !resp->chunked && !resp->no_body &&
        he_cache_obj_len(o) >= (uint64_t)resp->content_length) {
        /* every byte is here (a small object, or a request that joined
         * late: pipelined behind the one that filled it, whose response
         * ended before the fill published): answered like the hit it is
         * about to be, Range and conditionals honoured */
        he_cache_fill_leave(&cc->waiter);
        if (r->cache_st == HE_ALOG_CACHE_COALESCED) r->cache_st = HE_ALOG_CACHE_HIT_RAM;
        he__rc_serve_obj(w, r, o, r->cache_st);
        return;
    }
    cc->obj = o;
    key = he_cache_obj_key(o);
    type = he_seg_type_from_path(key->s, key->path_len);
    /* a playlist to carry a token is rewritten whole (auth.c) */
    if (resp->content_length < 0 || resp->chunked ||
        (r->auth_propagate && type == HE_SEG_TYPE_M3U8)) {
        cc->await_done = true; /* answered whole, like a hit, at DONE */
        return;
    }
    memset(&m, 0, sizeof(m));
    snprintf(m.content_type, sizeof(m.content_type), "%s", resp->content_type);
    snprintf(m.etag, sizeof(m.etag), "%s", resp->etag);
    snprintf(m.last_modified, sizeof(m.last_modified), "%s", resp->last_modified);
    snprintf(m.content_encoding, sizeof(m.content_encoding), "%s", resp->content_encoding);
    he__rc_head(w, r, key, &h, he_cache_fill_status(f), &m, type, (uint64_t)resp->content_length);
    /* a miss: the parent's own Age, if it said one */
    h.has_age = resp->age_s >= 0;
    h.age_s = resp->age_s > 0 ? (uint64_t)resp->age_s : 0;
    if (h.status == 200 && type != HE_SEG_TYPE_M3U8) he__oio_prefetch(w, key);
    r->kind = he_seg_kind_of(type, NULL, 0); /* a playlist is taken for media until DONE */
    he__rc_send_obj(w, r, &h, 0, r->method == HTTP_HEAD || resp->no_body ? 0 : h.clen);
}

static void he_rc_notify(he_cache_waiter_t *wt, he_cache_fill_ev_t ev)
{
    he_worker_t *w = he__cache_w;
    he_req_t *r = wt->ctx;
    he_conn_t *c = r->conn;
    he_cconn_t *cc = he__rc_cc(w, r);

    if (w->exiting || c->closing) {
        he_cache_fill_leave(wt);
        return;
    }
    switch (ev) {
    case HE_CACHE_FILL_EV_HEADERS:
        he_rc_on_headers(w, r);
        break;
    case HE_CACHE_FILL_EV_DATA:
        if (cc->active && !cc->await_done) he_http_resume(w, r);
        break;
    case HE_CACHE_FILL_EV_DONE:
        he_cache_fill_leave(wt);
        if (cc->waiting) {
            he_rc_fail_before_head(w, r);
        } else if (cc->await_done) {
            he_cache_obj_t *o = cc->obj;
            cc->obj = NULL;
            cc->await_done = false;
            he__rc_serve_obj(w, r, o, r->cache_st);
        } else {
            /* the body is whole: a playlist's kind (master or media) is
             * known now, for the counters at the response's end */
            if (cc->obj) r->kind = he_cache_obj_meta(cc->obj)->kind;
            he_http_resume(w, r);
        }
        break;
    case HE_CACHE_FILL_EV_ERROR:
        he_cache_fill_leave(wt);
        if (cc->waiting || cc->await_done) {
            he_rc_fail_before_head(w, r);
        } else {
            cc->failed = true; /* the send path closes once caught up */
            he_http_resume(w, r);
        }
        break;
    }
}

/* Starts the origin request of a fill r created, for the target exactly as
 * r sent it (escapes and every query parameter the key leaves out), however
 * long; never one rebuilt from the key, which names another resource. A
 * signed-URL token is no longer in it (auth.c took it out) and goes back
 * only when its rule says to_origin. A fill that cannot start ends at once
 * (its waiters get an error). */
static void he_rc_fetch(he_worker_t *w, he_req_t *r, he_cache_fill_t *f, he_cache_obj_t *stale)
{
    size_t n = r->url_len, tn = he_auth_to_origin(w, r) ? r->auth_text_len : 0;
    char *target = malloc(n + tn + 2);
    int rc = -ENOMEM;
    if (target) {
        memcpy(target, r->url, n);
        if (tn) {
            target[n++] = memchr(r->url, '?', r->url_len) ? '&' : '?';
            memcpy(target + n, r->auth_text, tn);
            n += tn;
        }
        target[n] = 0;
        rc = he__oio_fetch_start(w, f, target, stale, r->via_len ? r->via : NULL);
        free(target);
    }
    if (rc < 0) he_cache_fill_end(f, rc, HE_CACHE_OERR_IO, he__cache_wall_ms(w));
}

void he__rc_join(he_worker_t *w, he_req_t *r, const he_cache_key_t *key, he_cache_obj_t *stale)
{
    he_cconn_t *cc = he__rc_cc(w, r);
    he_cache_fill_t *f;
    bool created;

    memset(&cc->waiter, 0, sizeof(cc->waiter));
    cc->waiter.notify = he_rc_notify;
    cc->waiter.ctx = r;
    f = he_cache_fill_join(he__wcache(w)->fills, key, &cc->waiter, stale, false, &created);
    if (!f) {
        he_http_respond_error(w, r, 503);
        return;
    }
    cc->active = true;
    cc->waiting = true;
    cc->req = r;
    r->cache_st = created ? (stale ? HE_ALOG_CACHE_REVALIDATED : HE_ALOG_CACHE_MISS)
                          : HE_ALOG_CACHE_COALESCED;
    if (created) {
        he_rc_fetch(w, r, f, stale);
        return;
    }
    if (he_cache_fill_status(f) && he_cache_fill_obj(f)) he_rc_on_headers(w, r);
}

/* Serves a stale object and refreshes it behind the client's back. */
void he__rc_refresh(he_worker_t *w, he_req_t *r, const he_cache_key_t *key, he_cache_obj_t *stale)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_fill_t *f;
    bool created;
    if (he_cache_fill_find(wc->fills, key)) return;
    f = he_cache_fill_join(wc->fills, key, NULL, stale, false, &created);
    if (f && created) he_rc_fetch(w, r, f, stale);
}
