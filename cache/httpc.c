/* The origin client's HTTP/1.1 wire format: an incremental response parser
 * (status line, the headers the cache needs, Content-Length, chunked and
 * read-until-close bodies, interim 1xx responses skipped) and the request
 * builder. No I/O: bytes in, events out. Strict where a mistake would
 * store wrong bytes (lengths, chunk sizes, conflicting Content-Length, a
 * framing or caching header too long to read whole), lenient about what
 * does not matter (unknown headers, bare LF). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cache/fresh.h"
#include "cache/origin.h"

enum {
    HE_HC_STATUS = 0,
    HE_HC_HEADER,
    HE_HC_BODY_LEN,
    HE_HC_BODY_CLOSE,
    HE_HC_CHUNK_SIZE,
    HE_HC_CHUNK_DATA,
    HE_HC_CHUNK_CRLF,
    HE_HC_TRAILER,
    HE_HC_DONE,
    HE_HC_BODY_START /* HEADERS was returned; the body state is next */
};

#define HE_HC_MAX_LEN (1ll << 60)

void he_cache_httpc_init(he_cache_httpc_t *p, bool head_request)
{
    memset(p, 0, sizeof(*p));
    p->head_request = head_request;
    p->resp.content_length = -1;
    p->resp.age_s = -1;
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

static int he_hc_status_line(he_cache_httpc_t *p, const char *l, size_t n)
{
    int st = 0;
    if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ')
        return -EPROTO;
    for (int i = 9; i < 12; i++) {
        if (l[i] < '0' || l[i] > '9') return -EPROTO;
        st = st * 10 + (l[i] - '0');
    }
    if (st < 100 || (n > 12 && l[12] != ' ')) return -EPROTO;
    p->resp.status = st;
    p->resp.keepalive = l[7] == '1';
    return 0;
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

/* One header line; over: it was longer than p->line, which holds its
 * start. */
static int he_hc_header_line(he_cache_httpc_t *p, const char *l, size_t n, bool over)
{
    he_cache_http_resp_t *r = &p->resp;
    const char *colon = memchr(l, ':', n), *v;
    size_t nl, vl;
    bool last;
    int id;
    if (!colon) return over ? 0 : -EPROTO; /* over: a name too long to be one of ours */
    if (colon == l) return -EPROTO;
    nl = (size_t)(colon - l);
    if (l[nl - 1] == ' ' || l[nl - 1] == '\t') return -EPROTO; /* RFC 9112 5.1 */
    id = he_hc_header_id(l, nl);
    /* fields that only forbid storing: a cut one forbids it too */
    if (id == HE_HC_H_SET_COOKIE) r->set_cookie = true;
    if (over && id == HE_HC_H_VARY) r->vary = true;
    if (over)
        return id == HE_HC_H_OTHER || id == HE_HC_H_SET_COOKIE || id == HE_HC_H_VARY ? 0 : -EPROTO;
    v = colon + 1;
    vl = n - nl - 1;
    while (vl && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    switch (id) {
    case HE_HC_H_CONTENT_LENGTH: {
        int64_t x = 0;
        if (vl == 0) return -EPROTO;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9' || x > HE_HC_MAX_LEN / 10) return -EPROTO;
            x = x * 10 + (v[i] - '0');
        }
        if (r->content_length >= 0 && r->content_length != x) return -EPROTO;
        r->content_length = x;
        break;
    }
    case HE_HC_H_TRANSFER_ENCODING:
        he_hc_list_has(v, vl, "chunked", &last);
        r->chunked = last;               /* chunked must be the final coding */
        if (!last) r->keepalive = false; /* then the body runs to close */
        p->remaining = -2;               /* remember: Transfer-Encoding seen */
        break;
    case HE_HC_H_CONNECTION:
        if (he_hc_list_has(v, vl, "close", &last)) r->keepalive = false;
        if (he_hc_list_has(v, vl, "keep-alive", &last)) r->keepalive = true;
        break;
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

/* End of the head: decide how the body is framed. */
static int he_hc_head_done(he_cache_httpc_t *p)
{
    he_cache_http_resp_t *r = &p->resp;
    bool te = p->remaining == -2;
    p->remaining = 0;
    if (r->status >= 100 && r->status < 200) {
        if (r->status == 101) return -EPROTO; /* we never ask to upgrade */
        bool head = p->head_request;
        uint32_t hb = p->head_bytes;
        he_cache_httpc_init(p, head); /* skip interim responses */
        p->head_bytes = hb;
        return HE_CACHE_HTTPC_MORE;
    }
    if (p->head_request || r->status == 204 || r->status == 304) {
        r->no_body = true;
        p->state = HE_HC_DONE;
    } else if (r->chunked) {
        r->content_length = -1;
        p->state = HE_HC_CHUNK_SIZE;
    } else if (te) {
        r->content_length = -1;
        p->state = HE_HC_BODY_CLOSE;
    } else if (r->content_length >= 0) {
        p->remaining = r->content_length;
        p->state = r->content_length ? HE_HC_BODY_LEN : HE_HC_DONE;
    } else {
        r->keepalive = false;
        p->state = HE_HC_BODY_CLOSE;
    }
    if (p->state != HE_HC_DONE) {
        p->remaining = p->state == HE_HC_BODY_LEN ? r->content_length : 0;
        p->line_len = 0;
        p->body_state = p->state;
        p->state = HE_HC_BODY_START;
        p->line_overflow = false;
    }
    return HE_CACHE_HTTPC_HEADERS;
}

static int he_hc_chunk_size(he_cache_httpc_t *p, const char *l, size_t n)
{
    int64_t x = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char c = l[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            break;
        if (x > HE_HC_MAX_LEN / 16) return -EPROTO;
        x = x * 16 + d;
    }
    if (i == 0) return -EPROTO;
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i < n && l[i] != ';') return -EPROTO;
    p->remaining = x;
    p->state = x ? HE_HC_CHUNK_DATA : HE_HC_TRAILER;
    return 0;
}

int he_cache_httpc_parse(he_cache_httpc_t *p, const char *data, size_t len, size_t *used,
                         const char **body, size_t *body_len)
{
    size_t i = 0;
    int rc;
    *used = 0;
    *body = NULL;
    *body_len = 0;
    while (i < len || p->state == HE_HC_BODY_START || p->state == HE_HC_DONE) {
        switch (p->state) {
        case HE_HC_DONE:
            *used = i;
            return HE_CACHE_HTTPC_DONE;
        case HE_HC_BODY_START:
            p->state = p->body_state;
            continue;
        case HE_HC_BODY_LEN:
        case HE_HC_CHUNK_DATA:
        case HE_HC_BODY_CLOSE: {
            size_t n = len - i;
            if (p->state != HE_HC_BODY_CLOSE && (int64_t)n > p->remaining) n = (size_t)p->remaining;
            *body = data + i;
            *body_len = n;
            i += n;
            if (p->state != HE_HC_BODY_CLOSE) {
                p->remaining -= (int64_t)n;
                if (p->remaining == 0)
                    p->state = p->state == HE_HC_BODY_LEN ? HE_HC_DONE : HE_HC_CHUNK_CRLF;
            }
            *used = i;
            return HE_CACHE_HTTPC_BODY;
        }
        case HE_HC_CHUNK_CRLF: {
            char c = data[i++];
            if (c == '\r') continue;
            if (c != '\n') return -EPROTO;
            p->state = HE_HC_CHUNK_SIZE;
            continue;
        }
        default: {
            /* line-based states: status, headers, chunk sizes, trailers */
            const char *nl = memchr(data + i, '\n', len - i);
            size_t take = nl ? (size_t)(nl - (data + i)) + 1 : len - i;
            if (p->state == HE_HC_STATUS || p->state == HE_HC_HEADER) {
                p->head_bytes += (uint32_t)take;
                if (p->head_bytes > HE_CACHE_HTTPC_HEAD_MAX) return -E2BIG;
            }
            size_t copy = nl ? take - 1 : take;
            if (p->line_len + copy >= sizeof(p->line)) {
                p->line_overflow = true;
                copy = sizeof(p->line) - 1 - p->line_len;
            }
            memcpy(p->line + p->line_len, data + i, copy);
            p->line_len += (uint32_t)copy;
            i += take;
            if (!nl) continue;
            size_t ll = p->line_len;
            if (ll && p->line[ll - 1] == '\r') ll--;
            bool over = p->line_overflow;
            p->line_len = 0;
            p->line_overflow = false;
            if (memchr(p->line, '\0', ll) || (ll && memchr(p->line, '\r', ll))) return -EPROTO;
            switch (p->state) {
            case HE_HC_STATUS:
                if (over) return -EPROTO;
                if ((rc = he_hc_status_line(p, p->line, ll)) < 0) return rc;
                p->state = HE_HC_HEADER;
                break;
            case HE_HC_HEADER:
                if (ll == 0) {
                    rc = he_hc_head_done(p);
                    if (rc < 0) return rc;
                    if (rc == HE_CACHE_HTTPC_HEADERS) {
                        *used = i;
                        return rc;
                    }
                    break;
                }
                if (p->line[0] == ' ' || p->line[0] == '\t') return -EPROTO; /* obs-fold */
                if ((rc = he_hc_header_line(p, p->line, ll, over)) < 0) return rc;
                break;
            case HE_HC_CHUNK_SIZE:
                if (over) return -EPROTO;
                if ((rc = he_hc_chunk_size(p, p->line, ll)) < 0) return rc;
                break;
            case HE_HC_TRAILER:
                if (ll == 0) p->state = HE_HC_DONE;
                break;
            }
        }
        }
    }
    *used = i;
    return HE_CACHE_HTTPC_MORE;
}

int he_cache_httpc_eof(he_cache_httpc_t *p)
{
    if (p->state == HE_HC_BODY_CLOSE || p->state == HE_HC_DONE) {
        p->state = HE_HC_DONE;
        return HE_CACHE_HTTPC_DONE;
    }
    if (p->state == HE_HC_BODY_START && p->body_state == HE_HC_BODY_CLOSE) {
        p->state = HE_HC_DONE;
        return HE_CACHE_HTTPC_DONE;
    }
    return -EPIPE;
}

int he_cache_httpc_request_via(char *out, size_t cap, const char *method, const char *host,
                               const char *path, const char *inm, const char *ims,
                               const char *via)
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
