/* Coalesced origin fills. Concurrent misses for one key on a worker share
 * one fill and one origin request; the response body goes into a RAM-tier
 * object as it arrives and every waiter streams from that object at its
 * own pace (read-while-fill), so none waits for the whole object.
 *
 * Per-worker fills: each worker coalesces its own clients. With
 * SO_REUSEPORT spreading viewers over W workers, a cold segment costs at
 * most W origin requests instead of one per viewer; a node-wide fill would
 * need other workers to be woken (eventfd/MSG_RING) on every chunk and to
 * read a growing chunk table under concurrency. That is phase 2 material:
 * the object is already shareable (its chunks never move once written
 * and its length is published with a release store), only the chunk table
 * growth and the cross-ring wake-ups are missing.
 *
 * A fill that fails midway ends its waiters with ERROR (the server closes
 * those connections) and publishes nothing: its partial object is released
 * with the last waiter. A revalidation (stale object given) that gets 304
 * refreshes and serves the stale object; one that fails while the object
 * is within its stale-if-error (or stale-while-revalidate) window serves
 * it stale.
 *
 * A purge of the key while a fill runs: the fill is known to both tiers
 * from its start (the RAM partition's fills, the store's writes in
 * flight), the purge marks it and counts it as found, and the fill then
 * publishes nothing (its waiters still get their bytes) and leaves the
 * table, so a later request asks the origin again.
 *
 * Hit-for-miss (Varnish's name): a response that may not be stored and is
 * one viewer's (private, Set-Cookie, 401, 403, 407: an expired token's
 * answer) answers only the request that made the fill. Requests that
 * joined it may differ in what the key leaves out (a token), so each makes
 * its own origin request (he_cache_fill_shared, he_cache_fill_alone) and
 * the fill leaves the table. Other answers that are not stored (a 404 with
 * no-cache, a 429, a redirect, no-store) go to every request that joined:
 * the origin would answer each of them the same, and a burst of viewers
 * at a live segment not produced yet must not become a burst of origin
 * requests. Such keys are not remembered: a live segment that 404s
 * no-cache until it is produced would then go uncoalesced to the origin
 * once it exists. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache/fill.h"
#include "cache/fresh.h"
#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/origin.h"
#include "cache/stats.h"
#include "cache/store.h"

#define HE__CACHE_FILL_BUCKETS 256

struct he_cache_fill {
    he_cache_fills_t *fs;
    he_cache_fill_t *hnext;
    he_cache_waiter_t *waiters;
    he_cache_obj_t *obj;   /* what waiters read: being filled, or the stale one */
    he_cache_obj_t *stale; /* being revalidated */
    he_cache_http_resp_t resp;
    int status;
    bool active; /* in the table, fetch running */
    bool done, failed, serving_stale, prefetch;
    bool shared_known, shared; /* he_cache_fill_shared's verdict */
    he_cache_waiter_t *owner;  /* the request it is for; NULL: prefetch, refresh */
    unsigned holds;            /* notifications running: do not free */
    he__cache_rfill_t rfill;   /* known to the RAM tier's purges */
    he__cache_pending_t spend; /* known to the store's purges */
    he_cache_key_t key;
};

struct he_cache_fills {
    he_cache_fills_opts_t o;
    he_cache_fill_t *buckets[HE__CACHE_FILL_BUCKETS];
    unsigned active;
    /* finished objects waiting for the SSD writer */
    he_cache_obj_t **writes;
    unsigned nwrites, cap_writes;
};

he_cache_fills_t *he_cache_fills_new(const he_cache_fills_opts_t *o)
{
    he_cache_fills_t *fs = calloc(1, sizeof(*fs));
    if (fs) fs->o = *o;
    return fs;
}

void he_cache_fills_free(he_cache_fills_t *fs)
{
    if (!fs) return;
    for (unsigned i = 0; i < fs->nwrites; i++)
        he_cache_obj_unref(fs->writes[i]);
    free(fs->writes);
    free(fs);
}

unsigned he_cache_fills_active(const he_cache_fills_t *fs)
{
    return fs->active;
}

/* A purge of the key came while the fill runs. */
static bool he_cache_fill_purged(he_cache_fill_t *f)
{
    return atomic_load(&f->rfill.in.purged) || atomic_load(&f->spend.purged);
}

he_cache_fill_t *he_cache_fill_find(he_cache_fills_t *fs, const he_cache_key_t *key)
{
    he_cache_fill_t **pp = &fs->buckets[key->hash % HE__CACHE_FILL_BUCKETS], *f;
    while ((f = *pp) != NULL) {
        if (he__cache_key_eq(&f->key, key)) {
            if (!he_cache_fill_purged(f)) return f;
            /* purged: it runs on for its waiters, later requests start anew */
            *pp = f->hnext;
            f->hnext = NULL;
            continue;
        }
        pp = &f->hnext;
    }
    return NULL;
}

static void he_cache_fill_unlink(he_cache_fill_t *f)
{
    he_cache_fill_t **pp = &f->fs->buckets[f->key.hash % HE__CACHE_FILL_BUCKETS];
    for (; *pp; pp = &(*pp)->hnext)
        if (*pp == f) {
            *pp = f->hnext;
            break;
        }
    f->active = false;
    f->fs->active--;
}

static void he_cache_fill_maybe_free(he_cache_fill_t *f)
{
    if (f->active || f->waiters || f->holds) return;
    if (f->obj) he_cache_obj_unref(f->obj);
    if (f->stale) he_cache_obj_unref(f->stale);
    free(f);
}

static void he_cache_fill_add_waiter(he_cache_fill_t *f, he_cache_waiter_t *w)
{
    w->fill = f;
    w->prev = NULL;
    w->next = f->waiters;
    if (f->waiters) f->waiters->prev = w;
    f->waiters = w;
}

/* A new fill, in the table unless alone (a hit-for-miss request's own). */
static he_cache_fill_t *he_cache_fill_new(he_cache_fills_t *fs, const he_cache_key_t *key,
                                          he_cache_waiter_t *w, he_cache_obj_t *stale,
                                          bool prefetch, bool alone)
{
    he_cache_fill_t *f = calloc(1, sizeof(*f));
    if (!f) return NULL;
    f->fs = fs;
    he_cache_key_set(&f->key, key->s, key->len);
    f->active = true;
    f->prefetch = prefetch && !w;
    f->owner = w;
    if (stale) {
        he_cache_obj_ref(stale);
        f->stale = stale;
    }
    if (fs->o.ram) he__cache_ram_fill_add(fs->o.ram, fs->o.node, &f->rfill, &f->key);
    if (fs->o.store) {
        f->spend.key = &f->key;
        he__cache_store_pending_add(he__cache_store_dir_for(fs->o.store, f->key.hash), &f->spend,
                                    0);
    }
    if (!alone) {
        f->hnext = fs->buckets[key->hash % HE__CACHE_FILL_BUCKETS];
        fs->buckets[key->hash % HE__CACHE_FILL_BUCKETS] = f;
    }
    fs->active++;
    if (w) he_cache_fill_add_waiter(f, w);
    if (fs->o.stats) {
        fs->o.stats->fills++;
        if (stale) fs->o.stats->revalidations++;
        if (f->prefetch) fs->o.stats->prefetch_issued++;
    }
    return f;
}

he_cache_fill_t *he_cache_fill_join(he_cache_fills_t *fs, const he_cache_key_t *key,
                                    he_cache_waiter_t *w, he_cache_obj_t *stale, bool prefetch,
                                    bool *created)
{
    he_cache_fill_t *f = he_cache_fill_find(fs, key);
    *created = false;
    if (f) {
        if (w) {
            he_cache_fill_add_waiter(f, w);
            if (fs->o.stats) fs->o.stats->coalesced_waiters++;
        }
        return f;
    }
    f = he_cache_fill_new(fs, key, w, stale, prefetch, false);
    *created = f != NULL;
    return f;
}

/* Out of the table (if still there): later requests start their own. */
static void he_cache_fill_detach(he_cache_fill_t *f)
{
    he_cache_fill_t **pp = &f->fs->buckets[f->key.hash % HE__CACHE_FILL_BUCKETS];
    for (; *pp; pp = &(*pp)->hnext)
        if (*pp == f) {
            *pp = f->hnext;
            f->hnext = NULL;
            return;
        }
}

void he_cache_fill_leave(he_cache_waiter_t *w)
{
    he_cache_fill_t *f = w->fill;
    if (!f) return;
    if (w->prev)
        w->prev->next = w->next;
    else
        f->waiters = w->next;
    if (w->next) w->next->prev = w->prev;
    if (f->owner == w) f->owner = NULL; /* its slot may join again for another request */
    w->fill = NULL;
    w->prev = w->next = NULL;
    he_cache_fill_maybe_free(f);
}

/* A callback may leave its own waiter (and only its own). */
static void he_cache_fill_notify(he_cache_fill_t *f, he_cache_fill_ev_t ev)
{
    he_cache_waiter_t *w = f->waiters, *next;
    f->holds++;
    for (; w; w = next) {
        next = w->next;
        if (w->notify) w->notify(w, ev);
    }
    f->holds--;
}

/* Encoded bytes (gzip ...) are not read: a playlist's kind is then the
 * default (media), and its lifetime is not capped by its contents. */
static he_seg_kind_t he_cache_fill_kind(he_cache_fill_t *f, he_cache_obj_t *o)
{
    const void *p = NULL;
    size_t n = f->resp.content_encoding[0] ? 0 : he_cache_obj_peek(o, 0, &p, NULL);
    he_seg_type_t t = he_seg_type_from_path(f->key.s, f->key.path_len);
    return he_seg_kind_of(t, n ? p : NULL, n);
}

/* Serves the stale object to the waiters (304, or an origin failure). */
static void he_cache_fill_serve_stale(he_cache_fill_t *f)
{
    if (f->obj) he_cache_obj_unref(f->obj);
    he_cache_obj_ref(f->stale);
    f->obj = f->stale;
    f->status = f->stale->meta.status;
    f->serving_stale = true;
    he_cache_fill_notify(f, HE_CACHE_FILL_EV_HEADERS);
}

static int he_cache_fill_on_headers(void *ctx, const he_cache_http_resp_t *r)
{
    he_cache_fill_t *f = ctx;
    he_cache_fills_t *fs = f->fs;
    f->resp = *r;
    if (r->status == 304 && f->stale) {
        if (fs->o.stats) fs->o.stats->revalidated_304++;
        he_cache_fill_serve_stale(f);
        return 0;
    }
    f->obj = he_cache_obj_new(fs->o.ram, fs->o.node, &f->key,
                              r->content_length > 0 ? (uint64_t)r->content_length : 0);
    if (!f->obj) return -ENOMEM;
    f->status = r->status;
    he_cache_fill_notify(f, HE_CACHE_FILL_EV_HEADERS);
    return 0;
}

/* n more body bytes are in the object, copied or received in place */
static void he_cache_fill_arrived(he_cache_fill_t *f, size_t n)
{
    if (f->fs->o.stats) f->fs->o.stats->bytes_filled += n;
    he_cache_fill_notify(f, HE_CACHE_FILL_EV_DATA);
}

static int he_cache_fill_on_body(void *ctx, const char *p, size_t n)
{
    he_cache_fill_t *f = ctx;
    int rc;
    if (f->serving_stale || !n) return 0; /* a 304 has no body */
    rc = he_cache_obj_append(f->obj, p, n, f->fs->o.stats);
    if (rc < 0) return rc;
    he_cache_fill_arrived(f, n);
    return 0;
}

static unsigned he_cache_fill_on_space(void *ctx, struct iovec *iov, unsigned max, size_t want)
{
    he_cache_fill_t *f = ctx;
    if (f->serving_stale || !f->obj) return 0;
    return he_cache_obj_space_iov(f->obj, iov, max, want, f->fs->o.stats);
}

static int he_cache_fill_on_placed(void *ctx, size_t n)
{
    he_cache_fill_t *f = ctx;
    he_cache_obj_commit(f->obj, n);
    he_cache_fill_arrived(f, n);
    return 0;
}

he_cache_sink_t he_cache_fill_sink(he_cache_fill_t *f)
{
    he_cache_sink_t s = {f, he_cache_fill_on_headers, he_cache_fill_on_body, he_cache_fill_on_space,
                         he_cache_fill_on_placed};
    return s;
}

static void he_cache_fill_queue_write(he_cache_fills_t *fs, he_cache_obj_t *o)
{
    if (fs->nwrites == fs->cap_writes) {
        unsigned cap = fs->cap_writes ? fs->cap_writes * 2 : 16;
        he_cache_obj_t **t = realloc(fs->writes, sizeof(*t) * cap);
        if (!t) return; /* not written to SSD: only a lost optimisation */
        fs->writes = t;
        fs->cap_writes = cap;
    }
    he_cache_obj_ref(o);
    fs->writes[fs->nwrites++] = o;
}

/* The freshness of complete object o answered by r: a media playlist's
 * body goes along unless encoded, so a live one's lifetime stays capped
 * (without memory for a copy it is parsed as no body at all). */
static bool he_cache_fill_fresh(he_cache_fill_t *f, he_cache_obj_t *o, he_seg_kind_t kind,
                                bool encoded, const he_cache_http_resp_t *r, int64_t wall_ms,
                                he_cache_fresh_t *fr)
{
    const void *body = NULL;
    char *flat = NULL;
    size_t len = 0;
    bool ok;
    if (kind == HE_SEG_KIND_MEDIA && !encoded) len = he_cache_obj_flat(o, &body, &flat);
    ok = he_cache_fresh_compute(f->fs->o.conf, kind, r, body, body ? len : 0, wall_ms, fr);
    free(flat);
    return ok;
}

/* The store's part of the purge check: true if a purge of the key came
 * since the fill began (the store is purged before the RAM tier). */
static bool he_cache_fill_store_purged(he_cache_fill_t *f)
{
    if (f->spend.linked)
        he__cache_store_pending_del(he__cache_store_dir_for(f->fs->o.store, f->key.hash),
                                    &f->spend);
    return atomic_load(&f->spend.purged);
}

/* The fill ends without publishing: true if its key was purged meanwhile. */
static bool he_cache_fill_unregister(he_cache_fill_t *f)
{
    bool purged = he_cache_fill_store_purged(f);
    return he__cache_ram_fill_del(&f->rfill) || purged;
}

/* The response is complete: describe, publish, queue for the SSD. */
static void he_cache_fill_publish(he_cache_fill_t *f, int64_t wall_ms)
{
    he_cache_fills_t *fs = f->fs;
    he_cache_obj_t *o = f->obj;
    he_cache_meta_t m;
    he_seg_kind_t kind = he_cache_fill_kind(f, o);
    bool cacheable;

    memset(&m, 0, sizeof(m));
    cacheable =
        he_cache_fill_fresh(f, o, kind, f->resp.content_encoding[0], &f->resp, wall_ms, &m.fresh);
    m.status = (uint16_t)f->resp.status;
    m.kind = (uint8_t)kind;
    m.prefetched = f->prefetch && !f->waiters;
    if (f->resp.content_type[0])
        memcpy(m.content_type, f->resp.content_type, sizeof(m.content_type));
    else
        strncpy(m.content_type, he_seg_type_mime(he_seg_type_from_path(f->key.s, f->key.path_len)),
                sizeof(m.content_type) - 1);
    memcpy(m.etag, f->resp.etag, sizeof(m.etag));
    memcpy(m.last_modified, f->resp.last_modified, sizeof(m.last_modified));
    memcpy(m.content_encoding, f->resp.content_encoding, sizeof(m.content_encoding));
    he_cache_obj_set_meta(o, &m);
    he_cache_obj_finish(o);
    if (!cacheable) {
        he_cache_fill_unregister(f);
        if (fs->o.stats) fs->o.stats->ram_rejected++;
        return;
    }
    /* a purge since the fill began answered already: publish nothing. The
     * RAM check and insert are one locked step (a purge after it finds the
     * object); one after the store check is the SSD writer's to catch
     * (he_cache_store_purges) */
    if (he_cache_fill_store_purged(f)) {
        he__cache_ram_fill_del(&f->rfill);
        return;
    }
    if (he__cache_ram_insert_fill(fs->o.ram, o, fs->o.stats, &f->rfill) == -ESTALE) return;
    if (fs->o.store && m.status == 200) he_cache_fill_queue_write(fs, o);
}

void he_cache_fill_end(he_cache_fill_t *f, int res, he_cache_oerr_t cause, int64_t wall_ms)
{
    he_cache_fills_t *fs = f->fs;
    he_cache_stats_t *st = fs->o.stats;
    (void)cause; /* the fetch counted it per attempt */
    he_cache_fill_unlink(f);
    f->holds++; /* keep it alive through the notifications below */
    if (res == 0 && f->obj) {
        if (f->serving_stale) {
            /* 304: the stale object is fresh again, for as long as its
             * body allows (a live playlist's cap), unless it was purged */
            he_cache_fresh_t fr;
            he_cache_http_resp_t r = f->resp;
            r.status = 200;
            if (!he_cache_fill_unregister(f) &&
                he_cache_fill_fresh(f, f->stale, (he_seg_kind_t)f->stale->meta.kind,
                                    f->stale->meta.content_encoding[0], &r, wall_ms, &fr)) {
                he_cache_obj_refresh(f->stale, &fr);
                he_cache_store_refresh(fs->o.store, &f->key, &f->stale->meta, &fr);
            }
        } else {
            he_cache_fill_publish(f, wall_ms);
        }
        f->done = true;
        he_cache_fill_notify(f, HE_CACHE_FILL_EV_DONE);
    } else if (res < 0 && !f->status && f->stale) {
        he_cache_fresh_t fr;
        he_cache_fill_unregister(f);
        he_cache_obj_fresh(f->stale, &fr);
        he_cache_freshness_t s = he_cache_fresh_state(&fr, wall_ms);
        if (s == HE_CACHE_STALE_REVALIDATE || s == HE_CACHE_STALE_IF_ERROR) {
            if (st) {
                st->stale_serves++;
                st->fills_failed++;
            }
            he_cache_fill_serve_stale(f);
            f->done = true;
            he_cache_fill_notify(f, HE_CACHE_FILL_EV_DONE);
        } else {
            goto fail;
        }
    } else {
        goto fail;
    }
    f->holds--;
    he_cache_fill_maybe_free(f);
    return;
fail:
    /* nothing is published: the partial object dies with the last waiter */
    he_cache_fill_unregister(f);
    if (st) st->fills_failed++;
    f->failed = true;
    he_cache_fill_notify(f, HE_CACHE_FILL_EV_ERROR);
    f->holds--;
    he_cache_fill_maybe_free(f);
}

int he_cache_fill_status(const he_cache_fill_t *f)
{
    return f->status;
}

const he_cache_key_t *he_cache_fill_key(const he_cache_fill_t *f)
{
    return &f->key;
}

he_cache_obj_t *he_cache_fill_obj(const he_cache_fill_t *f)
{
    return f->obj;
}

const he_cache_http_resp_t *he_cache_fill_resp(const he_cache_fill_t *f)
{
    return &f->resp;
}

bool he_cache_fill_stale(const he_cache_fill_t *f)
{
    return f->serving_stale;
}

bool he_cache_fill_shared(he_cache_fill_t *f, const he_cache_waiter_t *w)
{
    if (!f->status || f->serving_stale) return true; /* a stored object answers */
    if (!f->shared_known) {
        /* one viewer's answer; he_cache_fresh_compute never stores these
         * (private, Set-Cookie, or a status other than 200/203/404) */
        const he_cache_http_resp_t *r = &f->resp;
        f->shared = !(r->status == 401 || r->status == 403 || r->status == 407 || r->cc.private_ ||
                      r->set_cookie);
        f->shared_known = true;
        if (!f->shared) he_cache_fill_detach(f);
    }
    return f->shared || (w && w == f->owner);
}

he_cache_fill_t *he_cache_fill_alone(he_cache_waiter_t *w)
{
    he_cache_fill_t *old = w->fill;
    /* before leaving: the old fill may go with w, and its key with it */
    he_cache_fill_t *f = he_cache_fill_new(old->fs, &old->key, NULL, NULL, false, true);
    he_cache_fill_leave(w);
    if (!f) return NULL;
    f->owner = w;
    he_cache_fill_add_waiter(f, w);
    return f;
}

unsigned he_cache_fills_pending_writes(const he_cache_fills_t *fs)
{
    return fs->nwrites;
}

he_cache_swrite_t *he_cache_fills_next_write(he_cache_fills_t *fs)
{
    while (fs->nwrites) {
        he_cache_obj_t *o = fs->writes[--fs->nwrites];
        he_cache_swrite_t *w = he_cache_swrite_new(fs->o.store, o, fs->o.stats);
        he_cache_obj_unref(o);
        if (w) return w;
    }
    return NULL;
}
