/* Responses, whatever answers them: the one head builder (a head's fields,
 * which each protocol spells: HTTP/1.1 here, HTTP/2 in http2_out.c), error pages,
 * conditionals and ranges against a representation, and the end of a
 * response (counters, latency histograms, the access log). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/base/buf.h"
#include "server/base/log.h"
#include "server/base/alog_ring.h"
#include "server/http/http.h"
#include "server/http/http_util.h"

/* ---------------------------------------------------------------- heads */

/* The fields' names as each protocol spells them, with their lengths, as
 * every response spells a dozen. */
#define HE_HTTP_NAME(s) {"" s, sizeof(s) - 1}
static const he_http_name_t he_http1_names[HE_HTTP_F_COUNT] = {
    [HE_HTTP_F_SERVER] = HE_HTTP_NAME("Server: "),
    [HE_HTTP_F_DATE] = HE_HTTP_NAME("Date: "),
    [HE_HTTP_F_ACAO] = HE_HTTP_NAME("Access-Control-Allow-Origin: "),
    [HE_HTTP_F_ACEH] = HE_HTTP_NAME("Access-Control-Expose-Headers: "),
    [HE_HTTP_F_TAO] = HE_HTTP_NAME("Timing-Allow-Origin: "),
    [HE_HTTP_F_EXTRA] = HE_HTTP_NAME(""),
    [HE_HTTP_F_CONTENT_TYPE] = HE_HTTP_NAME("Content-Type: "),
    [HE_HTTP_F_CONTENT_LENGTH] = HE_HTTP_NAME("Content-Length: "),
    [HE_HTTP_F_CONTENT_ENCODING] = HE_HTTP_NAME("Content-Encoding: "),
    [HE_HTTP_F_VARY] = HE_HTTP_NAME("Vary: "),
    [HE_HTTP_F_ACCEPT_RANGES] = HE_HTTP_NAME("Accept-Ranges: "),
    [HE_HTTP_F_CONTENT_RANGE] = HE_HTTP_NAME("Content-Range: "),
    [HE_HTTP_F_LAST_MODIFIED] = HE_HTTP_NAME("Last-Modified: "),
    [HE_HTTP_F_ETAG] = HE_HTTP_NAME("ETag: "),
    [HE_HTTP_F_AGE] = HE_HTTP_NAME("Age: "),
    [HE_HTTP_F_CACHE_CONTROL] = HE_HTTP_NAME("Cache-Control: "),
};

const he_http_name_t he__http_field_h2[HE_HTTP_F_COUNT] = {
    [HE_HTTP_F_SERVER] = HE_HTTP_NAME("server"),
    [HE_HTTP_F_DATE] = HE_HTTP_NAME("date"),
    [HE_HTTP_F_ACAO] = HE_HTTP_NAME("access-control-allow-origin"),
    [HE_HTTP_F_ACEH] = HE_HTTP_NAME("access-control-expose-headers"),
    [HE_HTTP_F_TAO] = HE_HTTP_NAME("timing-allow-origin"),
    [HE_HTTP_F_EXTRA] = HE_HTTP_NAME(""),
    [HE_HTTP_F_CONTENT_TYPE] = HE_HTTP_NAME("content-type"),
    [HE_HTTP_F_CONTENT_LENGTH] = HE_HTTP_NAME("content-length"),
    [HE_HTTP_F_CONTENT_ENCODING] = HE_HTTP_NAME("content-encoding"),
    [HE_HTTP_F_VARY] = HE_HTTP_NAME("vary"),
    [HE_HTTP_F_ACCEPT_RANGES] = HE_HTTP_NAME("accept-ranges"),
    [HE_HTTP_F_CONTENT_RANGE] = HE_HTTP_NAME("content-range"),
    [HE_HTTP_F_LAST_MODIFIED] = HE_HTTP_NAME("last-modified"),
    [HE_HTTP_F_ETAG] = HE_HTTP_NAME("etag"),
    [HE_HTTP_F_AGE] = HE_HTTP_NAME("age"),
    [HE_HTTP_F_CACHE_CONTROL] = HE_HTTP_NAME("cache-control"),
};

#define HE_HTTP_FIELD_LIT(fn, ctx, f, s) fn(ctx, f, "" s, sizeof(s) - 1)

/* The fields a head starts with, which depend on the worker's
 * configuration, the second and h->expose_headers alone. */
static void he_http_head_lead(const he_worker_t *w, const he_http_head_t *h, he_http_field_fn fn,
                              void *ctx)
{
    const char *cors = w->conf->cors_allow_origin, *tao = w->conf->cors_timing_allow_origin;

    HE_HTTP_FIELD_LIT(fn, ctx, HE_HTTP_F_SERVER, "hlsedge");
    fn(ctx, HE_HTTP_F_DATE, w->date, 29);
    if (cors[0]) {
        fn(ctx, HE_HTTP_F_ACAO, cors, strlen(cors));
        if (h->expose_headers)
            HE_HTTP_FIELD_LIT(fn, ctx, HE_HTTP_F_ACEH, "Content-Length, Content-Range, ETag");
    }
    /* a player page on another origin reads its fetches' timings and
     * protocol (Resource Timing) only with it: QoE telemetry */
    if (tao[0]) fn(ctx, HE_HTTP_F_TAO, tao, strlen(tao));
}

/* The fields that follow the lead: the response's own. Inlined where the
 * spelling is known, so HTTP/1.1's field writes are direct, not calls
 * through fn (they were 1.3 % of a playlist worker's profile). */
static inline __attribute__((always_inline)) void
he_http_head_rest(const he_worker_t *w, const he_http_head_t *h, he_http_field_fn fn, void *ctx)
{
    char num[64];
    he_buf_t b;

    if (h->extra) fn(ctx, HE_HTTP_F_EXTRA, h->extra, strlen(h->extra));
    if (h->status != 304 && !h->no_ctype) {
        const char *ct = h->ctype && h->ctype[0] ? h->ctype : he_seg_type_mime(h->type);
        fn(ctx, HE_HTTP_F_CONTENT_TYPE, ct, strlen(ct));
    }
    if (h->has_clen) {
        he_buf_fixed(&b, num, sizeof(num));
        he_buf_u64(&b, h->clen);
        fn(ctx, HE_HTTP_F_CONTENT_LENGTH, num, b.len);
    }
    if (h->cenc && h->cenc[0]) {
        if (h->status != 416 && h->status != 304)
            fn(ctx, HE_HTTP_F_CONTENT_ENCODING, h->cenc, strlen(h->cenc));
        /* the origin chose the encoding, not the client's Accept-Encoding:
         * shared caches downstream must not hand it to one that cannot
         * decode it */
        HE_HTTP_FIELD_LIT(fn, ctx, HE_HTTP_F_VARY, "Accept-Encoding");
    }
    if (h->accept_ranges) HE_HTTP_FIELD_LIT(fn, ctx, HE_HTTP_F_ACCEPT_RANGES, "bytes");
    if (h->range || h->unsatisfied) {
        he_buf_fixed(&b, num, sizeof(num));
        if (h->range) {
            he_buf_lit(&b, "bytes ");
            he_buf_u64(&b, h->first);
            he_buf_lit(&b, "-");
            he_buf_u64(&b, h->last);
            he_buf_lit(&b, "/");
        } else {
            he_buf_lit(&b, "bytes */");
        }
        he_buf_u64(&b, h->size);
        fn(ctx, HE_HTTP_F_CONTENT_RANGE, num, b.len);
    }
    if (h->last_modified)
        fn(ctx, HE_HTTP_F_LAST_MODIFIED, h->last_modified, h->last_modified_len);
    if (h->etag) fn(ctx, HE_HTTP_F_ETAG, h->etag, h->etag_len);
    if (h->has_age) { /* served from cache (RFC 9111 5.1) */
        he_buf_fixed(&b, num, sizeof(num));
        he_buf_u64(&b, h->age_s);
        fn(ctx, HE_HTTP_F_AGE, num, b.len);
    }
    if (h->cache_control && w->conf->cache_control[h->type][0]) {
        const char *cc = w->conf->cache_control[h->type];
        fn(ctx, HE_HTTP_F_CACHE_CONTROL, cc, strlen(cc));
    }
}

/* What h says, field by field: the one description of a head. */
void he__http_head_fields(const he_worker_t *w, const he_http_head_t *h, he_http_field_fn fn,
                          void *ctx)
{
    he_http_head_lead(w, h, fn, ctx);
    he_http_head_rest(w, h, fn, ctx);
}

/* HTTP/1.1's spelling of one field. */
static inline __attribute__((always_inline)) void he_http1_field(void *ctx, he_http_field_t f,
                                                                 const char *v, size_t n)
{
    he_buf_t *b = ctx;
    if (f == HE_HTTP_F_EXTRA) { /* whole lines */
        he_buf_put(b, v, n);
        return;
    }
    he_buf_put(b, he_http1_names[f].name, he_http1_names[f].len);
    he_buf_put(b, v, n);
    he_buf_lit(b, "\r\n");
}

static void he_http1_status_line(he_buf_t *b, int status)
{
    he_buf_lit(b, "HTTP/1.1 ");
    he_buf_u64(b, (uint64_t)status);
    he_buf_lit(b, " ");
    he_buf_str(b, he_http_reason(status));
    he_buf_lit(b, "\r\n");
}

/* The status line and the lead fields of the statuses a file or a cache
 * hit answers with, spelled once a second rather than field by field for
 * every response (a fifth of the user time of a playlist request went to
 * spelling heads). Per worker thread, like the parser's state; the
 * configuration's address and generation say when a reload changed it. */
#define HE_HTTP1_LEAD_CAP 512
typedef struct he_http1_lead {
    const he_conf_t *conf;
    unsigned generation;
    time_t date_sec;
    uint16_t len; /* 0: it did not fit (a long CORS value): spelled each time */
    char text[HE_HTTP1_LEAD_CAP];
} he_http1_lead_t;
static __thread he_http1_lead_t he_http1_leads[2][3]; /* [expose_headers][200, 206, 304] */

static const he_http1_lead_t *he_http1_lead(const he_worker_t *w, const he_http_head_t *h)
{
    int i = h->status == 200 ? 0 : h->status == 206 ? 1 : h->status == 304 ? 2 : -1;
    he_http1_lead_t *l;
    he_buf_t b;

    if (i < 0) return NULL;
    l = &he_http1_leads[h->expose_headers][i];
    if (l->conf != w->conf || l->generation != w->conf->generation || l->date_sec != w->date_sec) {
        l->conf = w->conf;
        l->generation = w->conf->generation;
        l->date_sec = w->date_sec;
        he_buf_fixed(&b, l->text, sizeof(l->text));
        he_http1_status_line(&b, h->status);
        he_http_head_lead(w, h, he_http1_field, &b);
        l->len = he_buf_ok(&b) ? (uint16_t)b.len : 0;
    }
    return l->len ? l : NULL;
}

/* HTTP/1.1's spelling of h into c->hdr; false when it does not fit. */
static bool he_http1_head(he_worker_t *w, he_conn_t *c, const he_req_t *r, const he_http_head_t *h)
{
    const he_http1_lead_t *lead = he_http1_lead(w, h);
    he_buf_t b;

    he_buf_fixed(&b, c->hdr, HE_CONN_HDR_CAP);
    if (lead) {
        he_buf_put(&b, lead->text, lead->len);
    } else {
        he_http1_status_line(&b, h->status);
        he_http_head_lead(w, h, he_http1_field, &b);
    }
    he_http_head_rest(w, h, he_http1_field, &b);
    if (c->close_after || w->draining) {
        c->close_after = true;
        he_buf_lit(&b, "Connection: close\r\n\r\n");
    } else if (r->http_major == 1 && r->http_minor == 0) {
        he_buf_lit(&b, "Connection: keep-alive\r\n\r\n");
    } else {
        he_buf_lit(&b, "\r\n");
    }
    c->hdr_len = (uint32_t)b.len;
    c->hdr_sent = 0;
    return he_buf_ok(&b);
}

void he_http_respond(he_worker_t *w, he_req_t *r, const he_http_head_t *h, he_body_t *body)
{
    he_conn_t *c = r->conn;

    if (r->h2) {
        he__h2_respond(w, r, h, body);
        return;
    }
    r->status = h->status;
    /* no body for HEAD, nor after a 204, 304 or 416 head (RFC 9110 15) */
    if (body && body->ops && r->method != HTTP_HEAD && body->end > body->off &&
        h->status != 204 && h->status != 304 && h->status != 416) {
        c->body = *body;
    } else {
        if (body) he__body_release(body); /* HEAD, 304, 416, empty: no body */
        memset(&c->body, 0, sizeof(c->body));
    }
    if (body) memset(body, 0, sizeof(*body)); /* the response's now */
    if (!he_http1_head(w, c, r, h)) {
        he_log_error("worker %u: response head for %.*s over %d bytes", w->id,
                     (int)(r->url_len > 200 ? 200 : r->url_len), r->url, HE_CONN_HDR_CAP);
        he__body_release(&c->body);
        he__conn_close(w, c);
        return;
    }
    r->head_len = (uint16_t)c->hdr_len; /* for the access log's body bytes */
    he__send_start(w, c);
}

void he_http_respond_error(he_worker_t *w, he_req_t *r, int status)
{
    he_conn_t *c = r->conn;
    he_http_head_t h;
    char body[HE_HTTP_ERROR_BODY];
    int blen = snprintf(body, sizeof(body), "%d %s\n", status, he_http_reason(status));

    memset(&h, 0, sizeof(h));
    h.status = status;
    h.ctype = "text/plain";
    h.has_clen = true;
    h.clen = (uint64_t)blen;
    if (status == 405) h.extra = "Allow: GET, HEAD, OPTIONS\r\n";
    if (status == 401) h.extra = "WWW-Authenticate: Bearer\r\n"; /* PURGE without its token */
    if (r->h2) { /* a stream's error: the connection goes on */
        he__h2_respond_error(w, r, &h, body, (size_t)blen);
        return;
    }
    if (status == 400 || status == 414 || status == 431) c->close_after = true;
    r->status = status;
    memset(&c->body, 0, sizeof(c->body));
    if (!he_http1_head(w, c, r, &h)) {
        he__conn_close(w, c);
        return;
    }
    r->head_len = (uint16_t)c->hdr_len;
    /* the parser records the method first thing, so even a request cut
     * short by a 400, 414 or 431 is known to be HEAD */
    if (r->method != HTTP_HEAD && c->hdr_len + (uint32_t)blen <= HE_CONN_HDR_CAP) {
        memcpy(c->hdr + c->hdr_len, body, (size_t)blen);
        c->hdr_len += (uint32_t)blen;
    }
    he__send_start(w, c);
}

/* ---------------------------------------------------------------- conditionals */

int he_http_evaluate(const he_req_t *r, const char *etag, size_t etag_len, time_t mtime,
                     time_t range_mtime, uint64_t size, uint64_t *first, uint64_t *last)
{
    he_http_cond_t cond;
    he_http_range_result_t range = HE_HTTP_RANGE_NONE;

    *first = 0;
    *last = size ? size - 1 : 0;
    memset(&cond, 0, sizeof(cond));
    if (r->inm_len) cond.if_none_match = r->inm, cond.if_none_match_len = r->inm_len;
    if (r->ims_len && mtime)
        cond.if_modified_since = r->ims, cond.if_modified_since_len = r->ims_len;
    if (r->im_len) cond.if_match = r->im, cond.if_match_len = r->im_len;
    if (r->ius_len && mtime)
        cond.if_unmodified_since = r->ius, cond.if_unmodified_since_len = r->ius_len;
    switch (he_http_cond_eval(&cond, etag, etag_len, mtime)) {
    case HE_HTTP_COND_NOT_MODIFIED:
        return 304;
    case HE_HTTP_COND_PRECONDITION_FAILED:
        return 412;
    default:
        break;
    }
    if (r->range_len && (!r->if_range_len || he_http_if_range_ok(r->if_range, r->if_range_len, etag,
                                                                 etag_len, range_mtime)))
        range = he_http_range_parse(r->range, r->range_len, size, first, last);
    if (range == HE_HTTP_RANGE_UNSATISFIABLE) return 416;
    if (range == HE_HTTP_RANGE_OK) return 206;
    *first = 0;
    *last = size ? size - 1 : 0;
    return 200;
}

/* ---------------------------------------------------------------- the end */

/* The last byte of a response went to the kernel: the counters, both
 * latency histograms, the access log record. */
void he__http_response_end(he_worker_t *w, he_conn_t *c, he_req_t *r)
{
    he_stats_t *st = &w->stats;
    if (r->status >= 100 && r->status < 600) st->status_class[r->status / 100]++;
    st->bytes_out += c->bytes_sent;
    st->kind[r->kind < HE_SEG_KIND_COUNT ? r->kind : HE_SEG_KIND_OTHER]++;
    if (!w->stats_off || he_alog_ring_on(w->alog)) {
        /* The batch's clock, like t_start_ns and t_first_byte_ns: one clock
         * read per batch of completions, not per request. */
        uint64_t now = he__batch_ns, t0 = r->t_start_ns, fb, ttfb_us = 0, total_us = 0;
        /* answered in the batch that brought the request (userspace TLS
         * writes at once): that clock has not moved, and would read 0 */
        if (now <= t0) now = he__now_ns();
        fb = c->t_first_byte_ns && c->t_first_byte_ns < now ? c->t_first_byte_ns : now;
        if (t0 && now >= t0) {
            total_us = (now - t0) / 1000;
            ttfb_us = fb >= t0 ? (fb - t0) / 1000 : 0;
        }
        if (!w->stats_off) {
            he_hist_record(&st->ttfb, ttfb_us);
            he_hist_record(&st->total, total_us);
        }
        if (he_alog_ring_on(w->alog)) he__http_alog_push(w, c, r, now, ttfb_us, total_us);
    }
    c->bytes_sent = 0;
}

/* ---------------------------------------------------------------- the date */

static void he_http_refresh_date(he_worker_t *w)
{
    time_t now = time(NULL);
    if (now != w->date_sec) {
        w->date_sec = now;
        he_http_date_format(now, w->date);
    }
}

static int he_http_worker_setup(he_worker_t *w)
{
    he_http_refresh_date(w);
    return 0;
}

const he_worker_hooks_t he_http_worker_hooks = {
    .name = "http",
    .setup = he_http_worker_setup,
    .tick = he_http_refresh_date,
};

void he_http_resume(he_worker_t *w, he_req_t *r)
{
    if (r->h2)
        he__h2_resume(w, r);
    else
        he__send_resume(w, r->conn);
}
