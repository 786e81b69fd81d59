/* Low-Latency HLS in front of an origin (draft-pantos-hls-rfc8216bis
 * 6.2.5.2, Appendix B.1). A live playlist request with _HLS_msn (and
 * _HLS_part) is answered from the worker's own copy of the playlist when
 * that copy holds what it asks for, and otherwise held on the playlist's
 * wait list (llhls_hold.c), whatever directives it carries. The copy is
 * kept current by one upstream request at a time per playlist:
 *   - an origin that says CAN-BLOCK-RELOAD gets one blocking reload for
 *     the part after the copy's last, and its answer releases every held
 *     request it satisfies: one origin request per playlist update however
 *     many viewers and directive variants wait;
 *   - one that does not is polled without directives, at most every
 *     PART-TARGET/2 (TD/2 without parts), one request in flight.
 * Upstream requests are fills like any miss (origin_io.c), for keys of
 * their own, so origin selection, timeouts and health apply; the copy is
 * parsed once per update, not per viewer. Nothing runs while nobody is
 * held: the loop stops with the last waiter, and a copy nobody asked for
 * for a while is dropped at the tick. The deltas, gzip and TTLs of the
 * answers are llhls.c's, as from root. While the copy is current, plain
 * requests for the playlist (viewers joining) are answered from it too.
 * Per worker, like every fill. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/log.h"
#include "server/handler/cache_glue.h"

#define HE_LLUP_BUCKETS 64
#define HE_LLUP_FIRST_HOLD_MS 30000 /* before the first copy, 3 TD are not known */
#define HE_LLUP_IDLE_MS 60000       /* an unasked copy is dropped after */
#define HE_LLUP_DIRS_MAX 4096       /* directories of LL playlists remembered */

typedef struct he_llup {
    struct he_llup *next;
    he_cache_waiter_t waiter; /* on the fill of the upstream request in flight */
    bool inflight, blocking;  /* a request is in flight; it holds at the origin */
    unsigned failures;        /* in a row: back off, reload without directives */
    he_llcopy_t *copy;        /* the newest answer, or NULL */
    uint64_t copy_ms;         /* when it came (monotonic) */
    uint64_t started_ms;      /* of the request in flight, or the last */
    uint64_t next_ms;         /* no new request before (polling, back-off) */
    uint64_t used_ms;         /* a viewer asked */
    char *target;             /* the viewer's target without directives */
    size_t key_len;
    char key[]; /* the playlist's cache key without directives: its wait list */
} he_llup_t;

/* A directory an LL playlist came from: the parts and segments beside it
 * get the TTLs of Appendix B.1 in its target durations. */
typedef struct he_llupdir {
    struct he_llupdir *next;
    double td;
    size_t len;
    char path[];
} he_llupdir_t;

typedef struct he_llups {
    he_llup_t *buckets[HE_LLUP_BUCKETS];
    he_llupdir_t *dirs[HE_LLUP_BUCKETS];
    unsigned ndirs;
} he_llups_t;

static void he_llup_kick(he_worker_t *w, he_llup_t *up);
static void he_llup_seed(he_worker_t *w, he_llup_t *up, const he_cache_key_t *key);

/* ---------------------------------------------------------------- entries */

static he_llups_t *he_llups(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    if (!wc->llups) wc->llups = calloc(1, sizeof(he_llups_t));
    return wc->llups;
}

/* target less every _HLS_ parameter (they are ours to send upstream),
 * into out (malloc'ed). */
static char *he_llup_strip(const char *target, size_t len, size_t *out_len)
{
    const char *q = memchr(target, '?', len), *end = target + len;
    char *out = malloc(len + 1), *o;
    if (!out) return NULL;
    size_t head = q ? (size_t)(q - target) : len;
    memcpy(out, target, head);
    o = out + head;
    for (const char *p = q ? q + 1 : end; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p)), *e = amp ? amp : end;
        if (e > p && !((size_t)(e - p) >= 5 && memcmp(p, "_HLS_", 5) == 0)) {
            char sep = o == out + head ? '?' : '&';
            *o++ = sep;
            memcpy(o, p, (size_t)(e - p));
            o += e - p;
        }
        p = amp ? amp + 1 : end;
    }
    *o = '\0';
    *out_len = (size_t)(o - out);
    return out;
}

static uint32_t he_llup_hash(const char *s, size_t n)
{
    return (uint32_t)he_cache_hash(s, n) % HE_LLUP_BUCKETS;
}

static he_llup_t *he_llup_find(he_llups_t *ups, const he_cache_key_t *key)
{
    he_llup_t *up = ups->buckets[key->hash % HE_LLUP_BUCKETS];
    while (up && !(up->key_len == key->len && memcmp(up->key, key->s, key->len) == 0))
        up = up->next;
    return up;
}

/* r's playlist's entry, made on first use; NULL when r cannot have one
 * (a target the cache refuses, no memory). */
static he_llup_t *he_llup_get(he_worker_t *w, he_req_t *r)
{
    he_wcache_t *wc = he__wcache(w);
    he_llups_t *ups = he_llups(w);
    he_cache_key_t *key = NULL;
    he_llup_t *up = NULL;
    size_t blen, tn = he_auth_to_origin(w, r) ? r->auth_text_len : 0;
    char *base = ups ? he_llup_strip(r->url, r->url_len, &blen) : NULL;

    if (!base || !(key = malloc(sizeof(*key))) || he_cache_key_make(wc->conf, base, blen, key) < 0)
        goto out;
    if ((up = he_llup_find(ups, key)) || !(up = calloc(1, sizeof(*up) + key->len + 1))) goto out;
    /* the origin gets the target as the first viewer sent it (a token
     * only when its rule says to_origin), as for any fill */
    if (!(up->target = malloc(blen + tn + 2))) {
        free(up);
        up = NULL;
        goto out;
    }
    memcpy(up->target, base, blen);
    if (tn) {
        char sep = memchr(base, '?', blen) ? '&' : '?';
        up->target[blen++] = sep;
        memcpy(up->target + blen, r->auth_text, tn);
        blen += tn;
    }
    up->target[blen] = '\0';
    up->key_len = key->len;
    memcpy(up->key, key->s, key->len + 1);
    up->next = ups->buckets[key->hash % HE_LLUP_BUCKETS];
    ups->buckets[key->hash % HE_LLUP_BUCKETS] = up;
    he_llup_seed(w, up, key);
out:
    free(key);
    free(base);
    return up;
}

static void he_llup_free(he_llup_t *up)
{
    he_cache_fill_leave(&up->waiter);
    he__llcopy_unref(up->copy);
    free(up->target);
    free(up);
}

/* ---------------------------------------------------------------- directories */

/* The directory part of a key ("live/a/index.m3u8?x" -> "live/a"). */
static size_t he_llup_dir_len(const char *key, size_t len)
{
    size_t path = strcspn(key, "?");
    const char *slash = memrchr(key, '/', path < len ? path : len);
    return slash ? (size_t)(slash - key) : 0;
}

static he_llupdir_t *he_llup_dir(he_llups_t *ups, const char *key, size_t len)
{
    size_t dl = he_llup_dir_len(key, len);
    for (he_llupdir_t *d = ups->dirs[he_llup_hash(key, dl)]; d; d = d->next)
        if (d->len == dl && memcmp(d->path, key, dl) == 0) return d;
    return NULL;
}

static void he_llup_note_dir(he_llups_t *ups, const he_llup_t *up, const he_seg_ll_t *ll)
{
    he_llupdir_t *d = he_llup_dir(ups, up->key, up->key_len);
    size_t dl = he_llup_dir_len(up->key, up->key_len);
    if (!d) {
        if (ups->ndirs >= HE_LLUP_DIRS_MAX || !(d = malloc(sizeof(*d) + dl + 1))) return;
        d->len = dl;
        memcpy(d->path, up->key, dl);
        d->path[dl] = '\0';
        uint32_t b = he_llup_hash(d->path, dl);
        d->next = ups->dirs[b];
        ups->dirs[b] = d;
        ups->ndirs++;
    }
    d->td = ll->pl.endlist ? 0 : he__llhls_td(ll);
}

unsigned he__llup_ttl(he_worker_t *w, const he_cache_key_t *key, int status, he_seg_type_t type)
{
    he_llups_t *ups = he__wcache(w)->llups;
    he_llupdir_t *d = ups ? he_llup_dir(ups, key->s, key->len) : NULL;
    double units;
    if (!d || !(d->td > 0)) return 0;
    if (status >= 400)
        units = 1;
    else if (type == HE_SEG_TYPE_M3U8)
        units = 0.5;
    else if (he_seg_kind_of(type, NULL, 0) == HE_SEG_KIND_SEGMENT) /* as from root */
        units = 6;
    else
        return 0;
    return he__llhls_ttl(d->td, units);
}

/* ---------------------------------------------------------------- copies */

/* The copy is what the playlist is now: while a blocking reload is in
 * flight (the origin answers it the moment the playlist moves), or for
 * half a target duration after it came (Appendix B.1's TTL for it). */
static bool he_llup_current(const he_worker_t *w, const he_llup_t *up)
{
    if (!up->copy) return false;
    if (up->inflight && up->blocking) return true;
    return w->now_ms - up->copy_ms < (uint64_t)(he__llhls_td(&up->copy->ll) * 500);
}

/* Where a is in the stream: its last part, or its last segment. */
static bool he_llup_newer(const he_seg_ll_t *a, const he_seg_ll_t *b)
{
    uint64_t am = a->has_parts ? a->last_part_msn : a->last_msn + 1;
    uint64_t bm = b->has_parts ? b->last_part_msn : b->last_msn + 1;
    if (am != bm) return am > bm;
    if (a->has_parts != b->has_parts) return a->has_parts; /* a part of the next segment */
    return a->has_parts ? a->last_part_index > b->last_part_index : a->last_msn > b->last_msn;
}

/* A copy of the complete 200 body of o; NULL when it is no LL-readable
 * media playlist (logged). */
static he_llcopy_t *he_llup_copy_of(he_worker_t *w, he_llup_t *up, he_cache_obj_t *o,
                                    uint64_t age_ms)
{
    const he_cache_meta_t *m = he_cache_obj_meta(o);
    const void *p;
    char *flat = NULL, err[160];
    size_t n = he_cache_obj_flat(o, &p, &flat);
    he_llcopy_t *c = m->content_encoding[0] ? NULL : malloc(sizeof(*c) + n + 1);
    if (!c) {
        free(flat);
        return NULL;
    }
    memset(c, 0, sizeof(*c));
    memcpy(c->body, p, n);
    c->body[n] = '\0';
    c->len = n;
    free(flat);
    c->refs = 1;
    snprintf(c->etag, sizeof(c->etag), "%s", m->etag);
    snprintf(c->last_modified, sizeof(c->last_modified), "%s", m->last_modified);
    c->stored_ms = w->now_ms - age_ms;
    if (he_seg_ll_parse(c->body, c->len, &c->ll, err, sizeof(err)) < 0) {
        he_log_info("worker %u: /%s from the origin: not an LL view: %s", w->id, up->key, err);
        free(c);
        return NULL;
    }
    return c;
}

/* A new entry starts from a fresh stored answer of the playlist, if the
 * RAM tier has one (a viewer's plain miss just filled it): no reload for
 * a first copy the edge already holds. */
static void he_llup_seed(he_worker_t *w, he_llup_t *up, const he_cache_key_t *key)
{
    he_wcache_t *wc = he__wcache(w);
    he_cache_obj_t *o = wc->ram ? he_cache_ram_lookup(wc->ram, wc->node, key, NULL) : NULL;
    he_cache_fresh_t fr;
    int64_t wall = he__cache_wall_ms(w);
    if (!o) return;
    he_cache_obj_fresh(o, &fr);
    if (he_cache_fresh_state(&fr, wall) == HE_CACHE_FRESH && he_cache_obj_meta(o)->status == 200 &&
        he_cache_obj_complete(o)) {
        uint64_t age_ms = wall > fr.stored_ms ? (uint64_t)(wall - fr.stored_ms) : 0;
        if (age_ms > w->now_ms) age_ms = w->now_ms;
        if ((up->copy = he_llup_copy_of(w, up, o, age_ms))) {
            up->copy_ms = w->now_ms - age_ms;
            he_llup_note_dir(he__wcache(w)->llups, up, &up->copy->ll);
        }
    }
    he_cache_obj_unref(o);
}

/* ---------------------------------------------------------------- upstream */

static void he_llup_failed(he_worker_t *w, he_llup_t *up)
{
    double td = up->copy ? he__llhls_td(&up->copy->ll) : 1;
    uint64_t backoff = 250ull << (up->failures < 4 ? up->failures : 4);
    up->failures++;
    if (backoff > (uint64_t)(td * 500)) backoff = (uint64_t)(td * 500);
    up->next_ms = w->now_ms + (backoff < 100 ? 100 : backoff);
}

/* The upstream request's fill ended (DONE or ERROR). */
static void he_llup_on_end(he_worker_t *w, he_llup_t *up, he_cache_fill_ev_t ev)
{
    he_cache_fill_t *f = up->waiter.fill;
    he_cache_obj_t *o = ev == HE_CACHE_FILL_EV_DONE ? he_cache_fill_obj(f) : NULL;
    int status = o ? he_cache_fill_status(f) : 0;
    bool stale = he_cache_fill_stale(f), blocking = up->blocking;
    he_llcopy_t *c = NULL;

    if (o && status == 200 && !stale && he_cache_obj_complete(o)) {
        /* generated when it left the origin, less the origin's own Age */
        int64_t age_s = he_cache_fill_resp(f)->age_s;
        c = he_llup_copy_of(w, up, o, age_s > 0 ? (uint64_t)age_s * 1000 : 0);
    }
    he_cache_fill_leave(&up->waiter);
    up->inflight = false;
    if (w->exiting) {
        he__llcopy_unref(c);
        return;
    }
    if (!c) {
        if (status == 404 || status == 410) { /* Appendix B.1: a blocking 404 lives 4 TD */
            /* the TD of this playlist, or of an LL one beside it */
            he_llupdir_t *d = he_llup_dir(he__wcache(w)->llups, up->key, up->key_len);
            double td = up->copy ? he__llhls_td(&up->copy->ll) : d && d->td > 0 ? d->td : 1;
            he__llhold_fail_origin(w, up->key, up->key_len, 404, 4 * td);
        }
        he_llup_failed(w, up);
        he_llup_kick(w, up);
        return;
    }
    up->failures = 0;
    double pt = c->ll.part_target > 0 ? c->ll.part_target : he__llhls_td(&c->ll);
    bool moved = !up->copy || he_llup_newer(&c->ll, &up->copy->ll);
    /* polling, or an origin that answered a blocking reload at once with
     * nothing new: the next request waits PART-TARGET/2 from this one */
    if (!blocking || !moved) up->next_ms = up->started_ms + (uint64_t)(pt * 500);
    if (moved || !up->copy) {
        he__llcopy_unref(up->copy);
        up->copy = c;
        up->copy_ms = w->now_ms;
        he_llup_note_dir(he__wcache(w)->llups, up, &c->ll);
    } else {
        he__llcopy_unref(c);
        up->copy_ms = w->now_ms; /* the same playlist, known to be current */
    }
    he_llsnap_t s;
    he__llsnap_of_copy(up->copy, &s);
    he__llhold_release_copy(w, up->key, up->key_len, &s);
    he__llsnap_put(w, &s);
    he_llup_kick(w, up);
}

static void he_llup_notify(he_cache_waiter_t *wt, he_cache_fill_ev_t ev)
{
    if (ev == HE_CACHE_FILL_EV_DONE || ev == HE_CACHE_FILL_EV_ERROR)
        he_llup_on_end(he__cache_w, wt->ctx, ev);
}

/* One request upstream when requests are held and none is in flight: a
 * blocking reload for the part after the copy's last, or a plain reload
 * (no copy yet, an origin that cannot block, after a failure). */
static void he_llup_kick(he_worker_t *w, he_llup_t *up)
{
    he_wcache_t *wc = he__wcache(w);
    const he_llcopy_t *c = up->copy;
    he_cache_key_t *key;
    he_cache_fill_t *f;
    char *target;
    bool created;
    size_t n = strlen(up->target);

    if (up->inflight || w->exiting || !he__llhold_waiting(w, up->key, up->key_len)) return;
    bool blocking = c && c->ll.can_block_reload && !c->ll.pl.endlist && !up->failures;
    if (w->now_ms < up->next_ms) return; /* the tick comes back */
    if (!(key = malloc(sizeof(*key))) || !(target = malloc(n + 64))) {
        free(key);
        return;
    }
    memcpy(target, up->target, n + 1);
    if (blocking) {
        const he_seg_ll_t *ll = &c->ll;
        char sep = memchr(target, '?', n) ? '&' : '?';
        if (ll->has_parts) /* the next part: an index past the segment's last is the next's 0 */
            snprintf(target + n, 64, "%c_HLS_msn=%llu&_HLS_part=%u", sep,
                     (unsigned long long)ll->last_part_msn, ll->last_part_index + 1);
        else if (ll->part_target > 0)
            snprintf(target + n, 64, "%c_HLS_msn=%llu&_HLS_part=0", sep,
                     (unsigned long long)ll->last_msn + 1);
        else
            snprintf(target + n, 64, "%c_HLS_msn=%llu", sep, (unsigned long long)ll->last_msn + 1);
    }
    if (he_cache_key_make(wc->conf, target, strlen(target), key) < 0) goto out;
    memset(&up->waiter, 0, sizeof(up->waiter));
    up->waiter.notify = he_llup_notify;
    up->waiter.ctx = up;
    if (!(f = he_cache_fill_join(wc->fills, key, &up->waiter, NULL, false, &created))) goto out;
    up->inflight = true;
    up->blocking = blocking;
    up->started_ms = w->now_ms;
    if (blocking)
        w->stats.llhls_origin_blocking++;
    else
        w->stats.llhls_origin_polls++;
    /* a fill of that key already running (a viewer's plain miss) is joined */
    if (created && he__oio_fetch_start(w, f, target, NULL, NULL) < 0)
        he_cache_fill_end(f, -ENOMEM, HE_CACHE_OERR_IO, he__cache_wall_ms(w));
out:
    free(target);
    free(key);
}

/* ---------------------------------------------------------------- requests */

/* The wait list of r's playlist: its cache key without directives. */
bool he__llup_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    const char *qm = memchr(r->url, '?', r->url_len);
    he_llq_t q;
    he_llup_t *up;

    if (!w->conf->llhls_enabled || he_seg_type_from_path(path, len) != HE_SEG_TYPE_M3U8) return false;
    if (r->method != HTTP_GET && r->method != HTTP_HEAD) return false;
    if (!qm || !memmem(qm, (size_t)(r->url + r->url_len - qm), "_HLS_", 5)) return false;
    memset(&q, 0, sizeof(q));
    bool malformed = he_seg_ll_directives(r->url, r->url_len, &q.d) < 0;
    /* _HLS_skip alone asks for no hold: the cache path, and an origin's
     * own delta is passed through under its key */
    if (!malformed && !q.d.has_msn && !q.d.has_part) return false;
    if (!(up = he_llup_get(w, r))) return false;
    up->used_ms = w->now_ms;
    q.gzip = w->conf->llhls_gzip && he__llhls_accepts_gzip(r);

    const he_seg_ll_t *ll = up->copy ? &up->copy->ll : NULL;
    double td = ll ? he__llhls_td(ll) : 1;
    const char *bad = he__llhls_refuse(&q, malformed, ll);
    if (bad) {
        w->stats.llhls_rejected++;
        he__llhls_error(w, r, 400, td, bad);
        return true;
    }
    if (he_llup_current(w, up)) {
        he_llsnap_t s;
        he__llsnap_of_copy(up->copy, &s);
        bool ready = he__llhls_ready(&q, &s);
        if (ready) {
            r->cache_st = HE_ALOG_CACHE_HIT_RAM;
            he__llhls_answer(w, r, &q, &s);
        }
        he__llsnap_put(w, &s);
        if (ready) return true;
    }
    /* held; 6.2.5.2: 503 after three target durations (set by the first
     * copy when none is known yet, q.td 0) */
    q.td = ll ? td : 0;
    uint64_t hold_ms = ll ? (uint64_t)(3 * td * 1000) : HE_LLUP_FIRST_HOLD_MS;
    r->cache_st = HE_ALOG_CACHE_COALESCED;
    int rc = he__llhold_add_origin(w, r, up->key, up->key_len, &q, w->now_ms + hold_ms);
    if (rc < 0) {
        he__llhls_error(w, r, 503, td, rc == -EBUSY ? "cannot hold" : "out of memory");
        return true;
    }
    he_llup_kick(w, up);
    return true;
}

bool he__llup_plain(he_worker_t *w, he_req_t *r, const he_cache_key_t *key)
{
    he_llups_t *ups = he__wcache(w)->llups;
    he_llup_t *up;
    he_llq_t q;
    he_llsnap_t s;
    if (!ups || (r->method != HTTP_GET && r->method != HTTP_HEAD)) return false;
    if (!(up = he_llup_find(ups, key)) || !he_llup_current(w, up)) return false;
    up->used_ms = w->now_ms;
    memset(&q, 0, sizeof(q));
    q.gzip = w->conf->llhls_gzip && he__llhls_accepts_gzip(r);
    q.td = he__llhls_td(&up->copy->ll);
    he__llsnap_of_copy(up->copy, &s);
    r->cache_st = HE_ALOG_CACHE_HIT_RAM;
    he__llhls_answer(w, r, &q, &s);
    he__llsnap_put(w, &s);
    return true;
}

/* Pacing and back-off end here; idle entries go. */
void he__llup_tick(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    he_llups_t *ups = wc->llups;
    if (!ups) return;
    for (unsigned b = 0; b < HE_LLUP_BUCKETS; b++)
        for (he_llup_t **pp = &ups->buckets[b], *up; (up = *pp);) {
            he_llup_kick(w, up);
            if (!up->inflight && w->now_ms - up->used_ms > HE_LLUP_IDLE_MS &&
                !he__llhold_waiting(w, up->key, up->key_len)) {
                *pp = up->next;
                he_llup_free(up);
                continue;
            }
            pp = &up->next;
        }
}

/* After the fills were ended (he__oio_cleanup). */
void he__llup_cleanup(he_worker_t *w)
{
    he_wcache_t *wc = he__wcache(w);
    he_llups_t *ups = wc->llups;
    if (!ups) return;
    for (unsigned b = 0; b < HE_LLUP_BUCKETS; b++)
        while (ups->buckets[b]) {
            he_llup_t *up = ups->buckets[b];
            ups->buckets[b] = up->next;
            he_llup_free(up);
        }
    for (unsigned b = 0; b < HE_LLUP_BUCKETS; b++)
        while (ups->dirs[b]) {
            he_llupdir_t *d = ups->dirs[b];
            ups->dirs[b] = d->next;
            free(d);
        }
    free(ups);
    wc->llups = NULL;
}
