/* Low-Latency HLS from root (draft-pantos-hls-rfc8216bis 6.2.5, Appendix
 * B.1): a live media playlist's request with delivery directives is
 * checked, answered now when the file already holds what it asks for, or
 * held (llhls_hold.c) until the packager's next write does. Answers go
 * out whole, as a delta update when asked (_HLS_skip), gzip-compressed
 * when the client accepts it, with the TTLs of Appendix B.1. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "server/base/log.h"
#include "server/handler/handler.h"

/* ---------------------------------------------------------------- snapshots */

int he__llsnap_load(he_worker_t *w, const char *path, size_t len, he_llsnap_t *s)
{
    he_fcache_t *fc = w->hook_data[HE_HOOK_FILE];
    int err = 0;
    bool hit;
    he_file_t *f = he_fcache_get(fc, path, len, w->now_ms, &err, &hit);
    if (!f) {
        memset(s, 0, sizeof(*s));
        return err ? err : -ENOENT;
    }
    return he__llsnap_from(w, f, s);
}

int he__llsnap_from(he_worker_t *w, he_file_t *f, he_llsnap_t *s)
{
    char err[160];
    int e = 0;
    memset(s, 0, sizeof(*s));
    s->f = f;
    s->buf = f->body;
    s->len = f->size;
    if (!s->buf && f->size) s->buf = he_fcache_map(w->hook_data[HE_HOOK_FILE], f, &e);
    if (!s->buf || he_seg_ll_parse(s->buf, s->len, &s->ll, err, sizeof(err)) < 0) {
        if (s->buf) he_log_info("worker %u: /%s: not an LL view: %s", w->id, f->path, err);
        he_fcache_put(w->hook_data[HE_HOOK_FILE], f);
        memset(s, 0, sizeof(*s));
        return -EINVAL;
    }
    s->ok = true;
    he__llhold_note(w, f->path, strlen(f->path), &s->ll);
    return 0;
}

static void he_llcopy_free_variants(he_llcopy_t *c)
{
    for (unsigned i = 0; i < 3; i++)
        for (unsigned j = 0; j < 2; j++)
            free(c->variants[i][j].own);
}

void he__llsnap_of_copy(he_llcopy_t *c, he_llsnap_t *s)
{
    memset(s, 0, sizeof(*s));
    c->refs++;
    s->copy = c;
    s->buf = c->body;
    s->len = c->len;
    s->ll = c->ll; /* the copy's parse, borrowed: freed with the copy */
    s->ok = true;
}

void he__llcopy_unref(he_llcopy_t *c)
{
    if (!c || --c->refs) return;
    he_llcopy_free_variants(c);
    he_seg_ll_free(&c->ll);
    free(c);
}

void he__llsnap_put(he_worker_t *w, he_llsnap_t *s)
{
    if (!s->ok) return;
    if (s->copy) {
        he__llcopy_unref(s->copy);
    } else {
        he_seg_ll_free(&s->ll);
        he_fcache_put(w->hook_data[HE_HOOK_FILE], s->f);
    }
    memset(s, 0, sizeof(*s));
}

/* ---------------------------------------------------------------- answers */

unsigned he__llhls_ttl(double td, double units)
{
    double s = floor(td * units + 0.5);
    return s < 1 ? 1 : s > 86400 ? 86400 : (unsigned)s;
}

static void he_llhls_free_body(void *ctx)
{
    free(ctx);
}

static void he_llhls_put_file(void *ctx)
{
    he_fcache_put(NULL, ctx);
}

static void he_llhls_put_copy(void *ctx)
{
    he__llcopy_unref(ctx);
}

/* RFC 9110 12.5.3: gzip unless the client gave it q=0. */
bool he__llhls_accepts_gzip(const he_req_t *r)
{
    const char *p = r->accept_enc, *end = r->accept_enc + r->accept_enc_len;
    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p)), *e = c ? c : end;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (e - p >= 4 && strncasecmp(p, "gzip", 4) == 0 &&
            (e - p == 4 || p[4] == ';' || p[4] == ' ')) {
            const char *q = memchr(p, '=', (size_t)(e - p));
            if (!q) return true;
            q++;
            while (q < e && *q == ' ')
                q++;
            /* "0", "0.", "0.0" ... refuse; anything else accepts */
            bool zero = q < e && *q == '0';
            for (const char *d = q + 1; zero && d < e && *d != ' '; d++)
                zero = *d == '.' || *d == '0';
            return !zero;
        }
        p = c ? c + 1 : end;
    }
    return false;
}

/* gzip (RFC 1952) of n bytes at p, malloc'ed; NULL when zlib fails. */
static char *he_llhls_gzip(const char *p, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return NULL;
    uLong cap = deflateBound(&z, (uLong)n);
    char *out = malloc(cap);
    if (!out) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)(uintptr_t)p;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* A short error page with the TTL of Appendix B.1 for it. */
void he__llhls_error(he_worker_t *w, he_req_t *r, int status, double ttl_s, const char *why)
{
    static const char *const pages[] = {"400 Bad Request\n", "404 Not Found\n",
                                        "503 Service Unavailable\n"};
    const char *page = status == 400 ? pages[0] : status == 404 ? pages[1] : pages[2];
    char extra[96];
    he_http_head_t h;
    he_body_t body;

    if (why) he_log_info("worker %u: %.*s: %d: %s", w->id, (int)r->url_len, r->url, status, why);
    snprintf(extra, sizeof(extra), "Cache-Control: max-age=%u\r\n", he__llhls_ttl(ttl_s, 1));
    memset(&h, 0, sizeof(h));
    h.status = status;
    h.ctype = "text/plain";
    h.has_clen = true;
    h.clen = strlen(page);
    h.extra = extra;
    he__body_mem(&body, page, strlen(page), NULL, NULL);
    he_http_respond(w, r, &h, &body);
}

/* The bytes of one answer variant of s: whole, the delta skip asks for,
 * gzipped; own is what was allocated for it (or NULL). */
static void he_llhls_make(const he_llsnap_t *s, he_seg_ll_skip_t skip, bool gzip, he_llvariant_t *v)
{
    const he_seg_ll_t *ll = &s->ll;
    memset(v, 0, sizeof(*v));
    v->p = s->buf;
    v->n = s->len;
    /* 6.2.5.1: a delta from the edge's own full copy, when the playlist
     * says how much may be skipped; a delta already is passed as it is */
    if (skip != HE_SEG_LL_SKIP_NONE && ll->can_skip_until > 0 && !ll->is_delta) {
        char *delta;
        size_t dl;
        if (he_seg_ll_delta(s->buf, s->len, ll, skip, NULL, &delta, &dl) == 0) {
            v->own = delta, v->p = delta, v->n = dl;
            v->delta = true;
        }
    }
    if (gzip && v->n > 0) {
        size_t zl;
        char *z = he_llhls_gzip(v->p, v->n, &zl);
        if (z) {
            free(v->own);
            v->own = z, v->p = z, v->n = zl;
            v->gzip = true;
        }
    }
    v->made = true;
}

/* Answers r from s: whole, or the delta it asked for, maybe gzipped. An
 * origin's copy keeps each variant it made: its viewers ask for the same
 * few, one update at a time. */
void he__llhls_answer(he_worker_t *w, he_req_t *r, const he_llq_t *q, const he_llsnap_t *s)
{
    const he_seg_ll_t *ll = &s->ll;
    const he_file_t *f = s->f;
    he_llcopy_t *c = s->copy;
    char extra[128];
    he_http_head_t h;
    he_body_t body;
    he_llvariant_t mine = {.made = false}, *v = &mine;
    bool gzip = q->gzip && !r->auth_propagate;

    if (c) v = &c->variants[q->d.skip][gzip]; /* made by the first answer that asked */
    if (!v->made) he_llhls_make(s, q->d.skip, gzip, v);
    const char *p = v->p;
    size_t n = v->n;
    bool whole = !v->delta && !v->gzip;
    if (v->delta) w->stats.llhls_deltas++;
    memset(&h, 0, sizeof(h));
    if (v->gzip) {
        h.cenc = "gzip";
        w->stats.llhls_gzip++;
    }
    /* Appendix B.1: a blocking answer may be cached for 6 TD (it never
     * changes), a plain one for half a TD */
    double units = q->d.has_msn ? 6 : 0.5;
    snprintf(extra, sizeof(extra), "Cache-Control: max-age=%u\r\nVary: Accept-Encoding\r\n",
             he__llhls_ttl(ll->pl.target_duration, units));
    h.status = 200;
    h.type = HE_SEG_TYPE_M3U8;
    h.has_clen = true;
    h.clen = n;
    if (c) { /* the origin's validators; an answer from a cache says its Age */
        if (c->last_modified[0]) {
            h.last_modified = c->last_modified;
            h.last_modified_len = strlen(c->last_modified);
        }
        if (whole && c->etag[0]) {
            h.etag = c->etag;
            h.etag_len = strlen(c->etag);
        }
        h.has_age = true;
        h.age_s = w->now_ms > c->stored_ms ? (w->now_ms - c->stored_ms) / 1000 : 0;
    } else {
        h.last_modified = f->last_modified;
        h.last_modified_len = 29;
        if (whole) { /* the file's own bytes: the file's tag */
            h.etag = f->etag;
            h.etag_len = f->etag_len;
        }
    }
    h.expose_headers = true;
    h.extra = extra;
    r->kind = HE_SEG_KIND_MEDIA;
    if (v == &mine && mine.own) {
        he__body_mem(&body, mine.own, n, he_llhls_free_body, mine.own);
    } else if (c) { /* the body holds a reference of its own */
        c->refs++;
        he__body_mem(&body, p, n, he_llhls_put_copy, c);
    } else {
        he_file_t *fr = (he_file_t *)f;
        fr->refs++;
        he__body_mem(&body, p, n, he_llhls_put_file, fr);
    }
    he_auth_respond(w, r, &h, &body);
}

bool he__llhls_ready(const he_llq_t *q, const he_llsnap_t *s)
{
    /* 6.2.5.2: held until the playlist holds that segment or part, or a
     * later one; a playlist that ended answers every directive */
    return !q->d.has_msn || s->ll.pl.endlist ||
           he_seg_ll_holds(&s->ll, q->d.msn, q->d.has_part ? q->d.part : -1);
}

double he__llhls_td(const he_seg_ll_t *ll)
{
    return ll->pl.target_duration > 0 ? ll->pl.target_duration : 1;
}

const char *he__llhls_refuse(const he_llq_t *q, bool malformed, const he_seg_ll_t *ll)
{
    if (malformed) return "_HLS_msn or _HLS_part is no decimal-integer";
    if (q->d.has_part && !q->d.has_msn) return "_HLS_part without _HLS_msn"; /* 6.2.5.2 */
    if (!ll || ll->pl.endlist) return NULL; /* directives on an ended playlist are ignored */
    if (q->d.has_msn && ll->has_segments && q->d.msn > ll->last_msn + 2)
        return "_HLS_msn more than two past the last segment";
    if (q->d.has_part &&
        he_seg_ll_parts_ahead(ll, q->d.msn, q->d.part) > he_seg_ll_advance_part_limit(ll))
        return "_HLS_part past the Advance Part Limit";
    return NULL;
}

/* ---------------------------------------------------------------- requests */

bool he__llhls_file(he_worker_t *w, he_req_t *r, const char *path, size_t len, he_file_t *f)
{
    he_llq_t q;
    he_llsnap_t s;
    if (f->type != HE_SEG_TYPE_M3U8 || f->kind != HE_SEG_KIND_MEDIA || !f->live) return false;
    if (!w->conf->llhls_enabled) return false;
    /* the packager's writes are seen as they happen: the fd cache forgets
     * the old copy at once (a failed watch leaves live_fraction revalidation) */
    (void)he__llhold_watch(w, path, len);

    memset(&q, 0, sizeof(q));
    bool malformed = he_seg_ll_directives(r->url, r->url_len, &q.d) < 0;
    q.gzip = w->conf->llhls_gzip && he__llhls_accepts_gzip(r);
    bool directives = malformed || q.d.has_msn || q.d.has_part || q.d.skip != HE_SEG_LL_SKIP_NONE;
    if (!directives && !f->ll && !q.gzip) return false; /* plain live, as ever */
    if (r->method != HTTP_GET && r->method != HTTP_HEAD) return false;
    if (he__llsnap_from(w, f, &s) < 0) return false; /* f was put: served as a file */

    double td = he__llhls_td(&s.ll);
    q.td = td;
    const char *bad = he__llhls_refuse(&q, malformed, &s.ll);
    if (bad) {
        he__llsnap_put(w, &s);
        w->stats.llhls_rejected++;
        he__llhls_error(w, r, 400, td, bad);
        return true;
    }
    if (he__llhls_ready(&q, &s)) {
        he__llhls_answer(w, r, &q, &s);
        he__llsnap_put(w, &s);
        return true;
    }
    he__llsnap_put(w, &s);
    /* 6.2.5.2: 503 once it was held for three target durations */
    int rc = he__llhold_add(w, r, path, len, &q, w->now_ms + (uint64_t)(3 * td * 1000));
    if (rc < 0) he__llhls_error(w, r, 503, td, rc == -EBUSY ? "cannot hold" : "cannot watch");
    return true;
}
