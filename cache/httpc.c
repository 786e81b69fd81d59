/* The origin client's HTTP/1.1 wire format: the head fields the cache
 * reads, over the shared response parser (segment/httpresp.h: llhttp with
 * framing, interim 1xx, obs-fold and line-length rules), and the request
 * builder. No I/O: bytes in, events out. Strict where a mistake would
 * store wrong bytes (a framing or caching header too long to read whole,
 * a Content-Encoding we could not send back as it came), lenient about
 * what does not matter (unknown headers, values too long for a field). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cache/fresh.h"
#include "cache/origin.h"

static int he_hc_field(void *ctx, const char *name, size_t nl, const char *v, size_t vl, bool over);

void he_cache_httpc_init(he_cache_httpc_t *p, bool head_request)
{
    memset(&p->resp, 0, sizeof(p->resp));
    p->resp.content_length = -1;
    p->resp.age_s = -1;
    he_httpresp_init(&p->hr, head_request, he_hc_field, p, p->value);
}

/* A value is kept whole or not at all: a cut ETag could match another
 * version's, a cut Content-Type would be served. */
static void he_hc_copy(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap) n = 0;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

/* The header fields the parser reads. A line longer than p->line is
 * skipped only when it is none of these: skipping a framing or caching
 * field would store what the origin did not mean. */
enum {
    HE_HC_H_OTHER = 0,
    HE_HC_H_CONTENT_LENGTH,
    HE_HC_H_TRANSFER_ENCODING,
    HE_HC_H_CONNECTION,
    HE_HC_H_CONTENT_TYPE,
    HE_HC_H_ETAG,
    HE_HC_H_LAST_MODIFIED,
    HE_HC_H_DATE,
    HE_HC_H_EXPIRES,
    HE_HC_H_CACHE_CONTROL,
    HE_HC_H_AGE,
    HE_HC_H_CONTENT_ENCODING,
    HE_HC_H_SET_COOKIE,
    HE_HC_H_VARY,
};

static int he_hc_header_id(const char *name, size_t n)
{
    static const char *const names[] = {
        [HE_HC_H_CONTENT_LENGTH] = "content-length",
        [HE_HC_H_TRANSFER_ENCODING] = "transfer-encoding",
        [HE_HC_H_CONNECTION] = "connection",
        [HE_HC_H_CONTENT_TYPE] = "content-type",
        [HE_HC_H_ETAG] = "etag",
        [HE_HC_H_LAST_MODIFIED] = "last-modified",
        [HE_HC_H_DATE] = "date",
        [HE_HC_H_EXPIRES] = "expires",
        [HE_HC_H_CACHE_CONTROL] = "cache-control",
        [HE_HC_H_AGE] = "age",
        [HE_HC_H_CONTENT_ENCODING] = "content-encoding",
        [HE_HC_H_SET_COOKIE] = "set-cookie",
        [HE_HC_H_VARY] = "vary",
    };
    for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strlen(names[i]) == n && strncasecmp(name, names[i], n) == 0) return i;
    return HE_HC_H_OTHER;
}

static bool he_hc_list_has(const char *v, size_t n, const char *tok, bool *last_is)
{
    bool any = false;
    size_t i = 0, tl = strlen(tok);
    *last_is = false;
    while (i < n) {
        size_t s, e;
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        s = i;
        while (i < n && v[i] != ',')
            i++;
        e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e == s) continue;
        *last_is = e - s == tl && strncasecmp(v + s, tok, tl) == 0;
        any |= *last_is;
    }
    return any;
}

/* Content-Encoding is served with the stored bytes, so it is kept exactly
 * (lines joined with ", ") or the response is refused: tokens and list
 * separators only, and it must fit. identity alone is no encoding. */
static int he_hc_content_encoding(he_cache_http_resp_t *r, const char *v, size_t n)
{
    size_t have = strlen(r->content_encoding);
    if (n == 0 || (n == 8 && strncasecmp(v, "identity", 8) == 0)) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c && strchr("!#$%&'*+-.^_`|~, \t", c))))
            return -EPROTO;
    }
    if (have + (have ? 2 : 0) + n >= sizeof(r->content_encoding)) return -EPROTO;
    if (have) {
        memcpy(r->content_encoding + have, ", ", 2);
        have += 2;
    }
    memcpy(r->content_encoding + have, v, n);
    r->content_encoding[have + n] = '\0';
    return 0;
}

/* Vary: the cache forwards none of the viewer's request headers; its own
 * request (Host, User-Agent, Accept-Encoding: identity, validators) is the
 * same for every viewer of a key, so the origin's answer cannot vary by
 * viewer and any field list may be stored (CDNs that forward no headers
 * do the same; refusing would uncache every CORS origin's Vary: Origin).
 * Only "*" (RFC 9111 4.1: never matches) makes it one not to store. */
static void he_hc_vary(he_cache_http_resp_t *r, const char *v, size_t n)
{
    bool last;
    if (he_hc_list_has(v, n, "*", &last)) r->vary = true;
}

/* One field line of the final response (see he_httpresp_field_fn).
 * Framing (Content-Length, Transfer-Encoding, Connection) is llhttp's; a
 * line too long to read whole is skipped only when it is none of the
 * fields read here or by llhttp: skipping a framing or caching field would
 * store what the origin did not mean. */
static int he_hc_field(void *ctx, const char *name, size_t nl, const char *v, size_t vl, bool over)
{
    he_cache_httpc_t *p = ctx;
    he_cache_http_resp_t *r = &p->resp;
    int id = he_hc_header_id(name, nl);
    /* fields that only forbid storing: a cut one forbids it too */
    if (id == HE_HC_H_SET_COOKIE) r->set_cookie = true;
    if (over && id == HE_HC_H_VARY) r->vary = true;
    if (over)
        return id == HE_HC_H_OTHER || id == HE_HC_H_SET_COOKIE || id == HE_HC_H_VARY ? 0 : -EPROTO;
    switch (id) {
    case HE_HC_H_CONTENT_TYPE:
        he_hc_copy(r->content_type, sizeof(r->content_type), v, vl);
        break;
    case HE_HC_H_ETAG:
        he_hc_copy(r->etag, sizeof(r->etag), v, vl);
        break;
    case HE_HC_H_LAST_MODIFIED:
        he_hc_copy(r->last_modified, sizeof(r->last_modified), v, vl);
        break;
    case HE_HC_H_DATE:
        he_hc_copy(r->date, sizeof(r->date), v, vl);
        break;
    case HE_HC_H_EXPIRES:
        /* too long for any date format: invalid, which means expired */
        if (vl >= sizeof(r->expires)) v = "0", vl = 1;
        he_hc_copy(r->expires, sizeof(r->expires), v, vl);
        break;
    case HE_HC_H_CACHE_CONTROL:
        he_cache_cc_parse(&r->cc, v, vl); /* each line adds its directives */
        break;
    case HE_HC_H_CONTENT_ENCODING:
        return he_hc_content_encoding(r, v, vl);
    case HE_HC_H_VARY:
        he_hc_vary(r, v, vl);
        break;
    case HE_HC_H_AGE: {
        int64_t x = 0;
        for (size_t i = 0; i < vl && x < 1000000000; i++) {
            if (v[i] < '0' || v[i] > '9') return 0; /* ignore a bad Age */
            x = x * 10 + (v[i] - '0');
        }
        if (vl) r->age_s = x;
        break;
    }
    default:
        break;
    }
    return 0;
}

int he_cache_httpc_parse(he_cache_httpc_t *p, const char *data, size_t len, size_t *used,
                         const char **body, size_t *body_len)
{
    int ev = he_httpresp_feed(&p->hr, data, len, used, body, body_len);
    if (ev == HE_HTTPRESP_HEADERS) {
        const he_httpresp_head_t *h = &p->hr.head;
        he_cache_http_resp_t *r = &p->resp;
        r->status = h->status;
        r->content_length = h->content_length;
        r->chunked = h->chunked;
        r->keepalive = h->keepalive;
        r->no_body = p->hr.head_request || h->status == 204 || h->status == 304;
    }
    return ev;
}

int he_cache_httpc_eof(he_cache_httpc_t *p)
{
    return he_httpresp_eof(&p->hr);
}

uint64_t he_cache_httpc_payload_left(const he_cache_httpc_t *p)
{
    return he_httpresp_skippable(&p->hr);
}

void he_cache_httpc_payload_taken(he_cache_httpc_t *p, uint64_t n)
{
    he_httpresp_skip(&p->hr, n);
}

int he_cache_httpc_request_via(char *out, size_t cap, const char *method, const char *host,
                               const char *path, const char *inm, const char *ims, const char *via)
{
    int n;
    /* a path or header with CR/LF would smuggle a second request */
    if (strpbrk(method, "\r\n ") || strpbrk(path, "\r\n ") || strpbrk(host, "\r\n") ||
        (inm && strpbrk(inm, "\r\n")) || (ims && strpbrk(ims, "\r\n")) ||
        (via && strpbrk(via, "\r\n")))
        return -EINVAL;
    n = snprintf(out, cap,
                 "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: hlsedge\r\n"
                 "Accept-Encoding: identity\r\n%s%s%s%s%s%s%s%s%s\r\n",
                 method, path, host, inm && *inm ? "If-None-Match: " : "", inm && *inm ? inm : "",
                 inm && *inm ? "\r\n" : "", ims && *ims ? "If-Modified-Since: " : "",
                 ims && *ims ? ims : "", ims && *ims ? "\r\n" : "", via && *via ? "Via: " : "",
                 via && *via ? via : "", via && *via ? "\r\n" : "");
    if (n < 0 || (size_t)n >= cap) return -ENOSPC;
    return n;
}

int he_cache_httpc_request_method(char *out, size_t cap, const char *method, const char *host,
                                  const char *path, const char *inm, const char *ims)
{
    return he_cache_httpc_request_via(out, cap, method, host, path, inm, ims, NULL);
}

int he_cache_httpc_request(char *out, size_t cap, const char *host, const char *path,
                           const char *inm, const char *ims)
{
    return he_cache_httpc_request_method(out, cap, "GET", host, path, inm, ims);
}
