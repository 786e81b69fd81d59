/* HTTP/1.1 request parsing with llhttp. The callbacks copy only what the
 * responder needs (method, target, a few headers) into he_req_t, so the
 * receive buffer can go back to the kernel as soon as it is parsed. The
 * parser pauses after each complete request: pipelined requests are
 * answered one at a time, in order. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "server/http/http.h"

#define HE_H1(p) ((he_http1_conn_t *)(p)->data)

/* The parsing worker's config and target buffer, for the callbacks. */
static __thread const he_conf_t *he_http1_conf;
static __thread char *he_http1_url; /* target buffer of the conn being parsed */
static __thread uint32_t he_http1_url_cap;

/* Most body bytes read (and dropped) for a request we answer only after
 * its body: a chunked one, whose framing must be checked first. */
#define HE_HTTP1_BODY_MAX (1u << 20)

static int he_http1_count(he_req_t *r, size_t n)
{
    r->header_bytes += (uint32_t)n;
    if (r->header_bytes > he_http1_conf->max_header_bytes) {
        if (!r->too_long) r->too_long = 31; /* 431 */
        return HPE_USER;
    }
    return 0;
}

static int he_http1_on_message_begin(llhttp_t *p)
{
    he_req_t *r = &HE_H1(p)->req;
    /* the fields up to the header buffers; the buffers count by length */
    memset(&r->method, 0, offsetof(he_req_t, range) - offsetof(he_req_t, method));
    r->url_len = 0;
    r->range_len = r->inm_len = r->ims_len = 0;
    r->im_len = r->ius_len = r->if_range_len = r->cookie_len = r->via_len = 0;
    r->authz_len = r->accept_enc_len = 0;
    r->has_origin = 0;
    r->auth_text = NULL;
    r->auth_text_len = 0;
    r->auth_propagate = false;
    r->t_start_ns = he__batch_ns;
    r->header_bytes = 0;
    r->too_long = 0;
    r->cur_hdr = HE_HDR_NONE;
    r->field_len = r->field_overflow = 0;
    r->value_more = false;
    r->host_seen = r->hdr_cut = 0;
    r->chunked = false;
    r->body_bytes = 0;
    return 0;
}

static int he_http1_on_url(llhttp_t *p, const char *at, size_t n)
{
    he_req_t *r = &HE_H1(p)->req;
    if (r->url_len + n > he_http1_conf->max_uri_bytes || r->url_len + n >= he_http1_url_cap) {
        r->too_long = 14; /* 414 */
        return HPE_USER;
    }
    memcpy(he_http1_url + r->url_len, at, n);
    r->url_len += (uint32_t)n;
    return he_http1_count(r, n);
}

static int he_http1_on_method(llhttp_t *p, const char *at, size_t n)
{
    return he_http1_count(&HE_H1(p)->req, n);
}

/* Known before the target: a 414 or 431 answer to HEAD has no body. */
static int he_http1_on_method_complete(llhttp_t *p)
{
    HE_H1(p)->req.method = (uint8_t)p->method;
    return 0;
}

/* Known before the headers: the access log's line for a 431 or a bad
 * header names the request's real version. */
static int he_http1_on_version_complete(llhttp_t *p)
{
    HE_H1(p)->req.http_major = p->http_major;
    HE_H1(p)->req.http_minor = p->http_minor;
    return 0;
}

/* RFC 9110 tchar: llhttp 8 lets some non-token bytes (such as a space)
 * through in field names; a name with them is a malformed request. A
 * table, as every byte of every field name passes here. */
static const bool he_http1_tchars[256] = {
    ['0' ... '9'] = true, ['a' ... 'z'] = true, ['A' ... 'Z'] = true,
    ['!'] = true, ['#'] = true, ['$'] = true, ['%'] = true, ['&'] = true, ['\''] = true,
    ['*'] = true, ['+'] = true, ['-'] = true, ['.'] = true, ['^'] = true, ['_'] = true,
    ['`'] = true, ['|'] = true, ['~'] = true,
};

static int he_http1_on_header_field(llhttp_t *p, const char *at, size_t n)
{
    he_req_t *r = &HE_H1(p)->req;
    for (size_t i = 0; i < n; i++)
        if (!he_http1_tchars[(unsigned char)at[i]]) return HPE_USER;
    size_t room = sizeof(r->field) - r->field_len;
    if (n > room) {
        r->field_overflow = 1;
        n = room;
    }
    memcpy(r->field + r->field_len, at, n);
    r->field_len += (uint8_t)n;
    return he_http1_count(r, n + 4); /* ": " and CRLF */
}

/* The request fields a handler reads, by name (any case): HTTP/1.1's
 * field names and HTTP/2's (lowercase) go through this one table, so both
 * protocols capture the same set. */
int8_t he__http_hdr_id(const char *name, size_t len)
{
    static const struct {
        const char *name;
        uint8_t len;
        int8_t id;
    } known[] = {
        {"range", 5, HE_HDR_RANGE},
        {"if-none-match", 13, HE_HDR_INM},
        {"if-modified-since", 17, HE_HDR_IMS},
        {"if-match", 8, HE_HDR_IM},
        {"if-unmodified-since", 19, HE_HDR_IUS},
        {"if-range", 8, HE_HDR_IF_RANGE},
        {"origin", 6, HE_HDR_ORIGIN},
        {"host", 4, HE_HDR_HOST},
        {"cookie", 6, HE_HDR_COOKIE},
        {"via", 3, HE_HDR_VIA},
        {"authorization", 13, HE_HDR_AUTHZ},
        {"accept-encoding", 15, HE_HDR_ACCEPT_ENCODING},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (known[i].len == len && strncasecmp(known[i].name, name, len) == 0) return known[i].id;
    return HE_HDR_NONE;
}

static int he_http1_on_header_field_complete(llhttp_t *p)
{
    he_req_t *r = &HE_H1(p)->req;
    r->cur_hdr = r->field_overflow ? HE_HDR_NONE : he__http_hdr_id(r->field, r->field_len);
    if (r->cur_hdr == HE_HDR_HOST && r->host_seen < 2) r->host_seen++;
    r->field_len = 0;
    r->field_overflow = 0;
    r->value_more = false;
    return 0;
}

/* Returns false when the value was cut to the buffer. */
static bool he_http1_append(char *dst, uint16_t *len, size_t cap, const char *at, size_t n)
{
    bool whole = n <= cap - 1 - *len;
    if (!whole) n = cap - 1 - *len;
    memcpy(dst + *len, at, n);
    *len = (uint16_t)(*len + n);
    dst[*len] = 0;
    return whole;
}

void he__http_req_value(he_req_t *r, const char *at, size_t n)
{
    char *dst;
    uint16_t *len;
    size_t cap;

    switch (r->cur_hdr) {
    case HE_HDR_RANGE:
        dst = r->range, len = &r->range_len, cap = sizeof(r->range);
        break;
    case HE_HDR_INM:
        dst = r->inm, len = &r->inm_len, cap = sizeof(r->inm);
        break;
    case HE_HDR_IMS:
        dst = r->ims, len = &r->ims_len, cap = sizeof(r->ims);
        break;
    case HE_HDR_IM:
        dst = r->im, len = &r->im_len, cap = sizeof(r->im);
        break;
    case HE_HDR_IUS:
        dst = r->ius, len = &r->ius_len, cap = sizeof(r->ius);
        break;
    case HE_HDR_IF_RANGE:
        dst = r->if_range, len = &r->if_range_len, cap = sizeof(r->if_range);
        break;
    case HE_HDR_COOKIE:
        dst = r->cookie, len = &r->cookie_len, cap = sizeof(r->cookie);
        /* several Cookie lines are one list joined by "; " (RFC 6265 5.4) */
        if (*len && !r->value_more && !he_http1_append(dst, len, cap, "; ", 2))
            r->hdr_cut |= (uint16_t)(1u << r->cur_hdr);
        r->value_more = true;
        break;
    case HE_HDR_VIA:
        dst = r->via, len = &r->via_len, cap = sizeof(r->via);
        break;
    case HE_HDR_AUTHZ:
        dst = r->authz, len = &r->authz_len, cap = sizeof(r->authz);
        break;
    case HE_HDR_ACCEPT_ENCODING:
        dst = r->accept_enc, len = &r->accept_enc_len, cap = sizeof(r->accept_enc);
        break;
    case HE_HDR_ORIGIN:
        r->has_origin = 1;
        /* fall through */
    default:
        return;
    }
    /* Another line of the same field continues its list (RFC 9110 5.3);
     * for the single-valued ones the result fails to parse, as it should. */
    if (*len && !r->value_more && !he_http1_append(dst, len, cap, ",", 1))
        r->hdr_cut |= (uint16_t)(1u << r->cur_hdr);
    if (!he_http1_append(dst, len, cap, at, n)) r->hdr_cut |= (uint16_t)(1u << r->cur_hdr);
    r->value_more = true;
}

static int he_http1_on_header_value(llhttp_t *p, const char *at, size_t n)
{
    he_req_t *r = &HE_H1(p)->req;
    he__http_req_value(r, at, n);
    return he_http1_count(r, n);
}

static int he_http1_on_header_value_complete(llhttp_t *p)
{
    HE_H1(p)->req.cur_hdr = HE_HDR_NONE;
    return 0;
}

/* A value cut to its buffer could read as a different one (a shorter
 * If-Match list fails where the whole would match; a Range list cut
 * after its first member asks for less): it counts as absent. A cut
 * If-Range cannot be checked, so the Range goes with it. */
void he__http_req_drop_cut(he_req_t *r)
{
    if (r->hdr_cut & (1u << HE_HDR_INM)) r->inm_len = 0;
    if (r->hdr_cut & (1u << HE_HDR_IMS)) r->ims_len = 0;
    if (r->hdr_cut & (1u << HE_HDR_IM)) r->im_len = 0;
    if (r->hdr_cut & (1u << HE_HDR_IUS)) r->ius_len = 0;
    if (r->hdr_cut & (1u << HE_HDR_COOKIE)) r->cookie_len = 0;
    if (r->hdr_cut & (1u << HE_HDR_AUTHZ)) r->authz_len = 0; /* no token is that long */
    if (r->hdr_cut & (1u << HE_HDR_ACCEPT_ENCODING)) r->accept_enc_len = 0; /* identity */
    if (r->hdr_cut & (1u << HE_HDR_RANGE | 1u << HE_HDR_IF_RANGE))
        r->range_len = r->if_range_len = 0;
    /* a cut Via keeps its whole entries (the loop check reads them all) */
    if (r->hdr_cut & (1u << HE_HDR_VIA)) {
        char *comma = memrchr(r->via, ',', r->via_len);
        r->via_len = comma ? (uint16_t)(comma - r->via) : 0;
        r->via[r->via_len] = 0;
    }
}

/* RFC 9112 3.2.2: a server must accept absolute-form. One site is served
 * whatever the authority, so "http://host/p?q" becomes "/p?q" in place
 * (the cache key, the origin request and the access log all want origin
 * form). Returns -EINVAL for an http(s) URI without a host (RFC 9110
 * 4.2.1) or with userinfo (4.2.4: treated as an error). */
static int he_http1_absolute_form(char *url, uint32_t *len)
{
    size_t n = *len, skip, i;

    if (n >= 7 && strncasecmp(url, "http://", 7) == 0)
        skip = 7;
    else if (n >= 8 && strncasecmp(url, "https://", 8) == 0)
        skip = 8;
    else
        return 0;
    for (i = skip; i < n && url[i] != '/' && url[i] != '?' && url[i] != '#'; i++)
        if (url[i] == '@') return -EINVAL;
    if (i == skip) return -EINVAL;
    if (i == n || url[i] != '/') url[--i] = '/'; /* an empty path is "/" */
    memmove(url, url + i, n - i);
    *len = (uint32_t)(n - i);
    return 0;
}

static int he_http1_on_headers_complete(llhttp_t *p)
{
    he_req_t *r = &HE_H1(p)->req;
    r->method = (uint8_t)p->method;
    r->http_major = p->http_major;
    r->http_minor = p->http_minor;
    r->keepalive = llhttp_should_keep_alive(p);
    r->has_body =
        (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0);
    /* We never switch protocols: Upgrade (h2c, websocket) is ignored, as
     * RFC 9110 7.8 allows, and CONNECT gets an error. llhttp reads this
     * after the callback; left set, it would take the bytes after the
     * request for another protocol and fail the next request. */
    p->upgrade = 0;
    /* a CONNECT client may send tunnel bytes right behind the request */
    if (r->method == HTTP_CONNECT) r->keepalive = false;
    /* RFC 9112 3.2: exactly one Host in HTTP/1.1, never two in any version */
    if (r->host_seen > 1 || (!r->host_seen && (r->http_major > 1 || r->http_minor > 0)))
        return HPE_USER;
    if (he_http1_absolute_form(he_http1_url, &r->url_len) < 0) return HPE_USER;
    he__http_req_drop_cut(r);
    if (p->flags & (F_CHUNKED | F_TRANSFER_ENCODING)) {
        /* a body on a method that has none: no reading of it can be
         * right for every parser in the path */
        if (r->method == HTTP_GET || r->method == HTTP_HEAD || r->method == HTTP_OPTIONS)
            return HPE_USER;
        /* Its framing is read, and checked by llhttp, before the answer:
         * answered at once, a bad chunk size would go unnoticed. */
        r->chunked = true;
        return 0;
    }
    if (r->has_body) {
        /* We serve no method with a body. Answer now and close rather than
         * read a body we would throw away. */
        return HPE_PAUSED;
    }
    return 0;
}

/* The body of a chunked request: dropped, bounded. */
static int he_http1_on_body(llhttp_t *p, const char *at, size_t n)
{
    he_req_t *r = &HE_H1(p)->req;
    (void)at;
    r->body_bytes += (uint32_t)(n < HE_HTTP1_BODY_MAX ? n : HE_HTTP1_BODY_MAX);
    if (r->body_bytes > HE_HTTP1_BODY_MAX) {
        r->too_long = 13; /* 413 */
        return HPE_USER;
    }
    return 0;
}

static int he_http1_on_message_complete(llhttp_t *p)
{
    he_http1_conn_t *hc = HE_H1(p);
    /* the next request's head is checked from its first byte */
    hc->head_done = hc->head_bytes = hc->prev_cr = false;
    hc->crlfs = 0;
    return HPE_PAUSED;
}

#define HE_HTTP1_ONES 0x0101010101010101ull
#define HE_HTTP1_HAS_ZERO(v) (((v) - HE_HTTP1_ONES) & ~(v) & (HE_HTTP1_ONES << 7))

/* How many bytes from p on are none of NUL, CR and LF: eight at a time,
 * as most of a head is such bytes and each costs a branch per byte
 * otherwise. */
static size_t he_http1_plain_run(const unsigned char *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if (HE_HTTP1_HAS_ZERO(v) | HE_HTTP1_HAS_ZERO(v ^ (HE_HTTP1_ONES * '\r')) |
            HE_HTTP1_HAS_ZERO(v ^ (HE_HTTP1_ONES * '\n')))
            break;
    }
    while (i < n && p[i] && p[i] != '\r' && p[i] != '\n') i++;
    return i;
}

/* llhttp 8 ends a line at a bare LF, takes obs-fold (a header line that
 * starts with a space or tab continues the one before, RFC 9112 5.2) as
 * more of the value, and lets a NUL through in some places. RFC 9112
 * allows a server the first; but a proxy in front may frame such a head
 * differently, or read a folded line as a header of its own (request
 * smuggling). So the head's bytes are checked before llhttp reads them,
 * across buffers: every LF after a CR, every CR before an LF, no NUL, no
 * line that starts with whitespace, up to the blank line that ends the
 * head. A body is llhttp's alone. Returns false on a bad byte. */
static bool he_http1_scan_head(he_http1_conn_t *hc, const char *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n && !hc->head_done; i++) {
        unsigned char ch = p[i];
        if (ch == 0 || hc->prev_cr != (ch == '\n')) return false;
        if ((ch == ' ' || ch == '\t') && hc->crlfs == 1 && hc->head_bytes) return false;
        hc->prev_cr = ch == '\r';
        if (ch == '\n') {
            if (++hc->crlfs == 2 && hc->head_bytes) hc->head_done = true;
        } else if (ch != '\r') {
            /* inside a line: the rest of it up to its CR changes nothing */
            hc->crlfs = 0;
            hc->head_bytes = true;
            i += he_http1_plain_run(p + i + 1, n - i - 1);
        }
    }
    return true;
}

static const llhttp_settings_t *he_http1_settings(void)
{
    static llhttp_settings_t s;
    static int init;
    if (!init) {
        llhttp_settings_init(&s);
        s.on_message_begin = he_http1_on_message_begin;
        s.on_url = he_http1_on_url;
        s.on_method = he_http1_on_method;
        s.on_method_complete = he_http1_on_method_complete;
        s.on_version_complete = he_http1_on_version_complete;
        s.on_header_field = he_http1_on_header_field;
        s.on_header_field_complete = he_http1_on_header_field_complete;
        s.on_header_value = he_http1_on_header_value;
        s.on_header_value_complete = he_http1_on_header_value_complete;
        s.on_headers_complete = he_http1_on_headers_complete;
        s.on_message_complete = he_http1_on_message_complete;
        s.on_body = he_http1_on_body;
        init = 1;
    }
    return &s;
}

void he__http1_init(he_conn_t *c)
{
    he_http1_conn_t *hc = c->proto;
    llhttp_init(&hc->parser, HTTP_REQUEST, he_http1_settings());
    hc->parser.data = hc;
    hc->head_done = hc->head_bytes = hc->prev_cr = false;
    hc->crlfs = 0;
    memset(&hc->req, 0, sizeof(hc->req));
    hc->req.conn = c;
    hc->req.url = hc->url;
    hc->h2c_checked = false;
}

size_t he__http1_parse(he_worker_t *w, he_conn_t *c, const char *data, size_t len, bool *req_ready,
                       int *err)
{
    he_http1_conn_t *hc = c->proto;
    llhttp_errno_t e;
    size_t used;

    *req_ready = false;
    *err = 0;
    he_http1_conf = w->conf;
    he_http1_url_cap = (uint32_t)(w->proto_size - sizeof(he_http1_conn_t));
    he_http1_url = hc->url;
    if (!he_http1_scan_head(hc, data, len)) {
        *err = 400;
        return len;
    }
    e = llhttp_execute(&hc->parser, data, len);
    if (e == HPE_OK) return len;
    if (e == HPE_PAUSED) {
        used = (size_t)(llhttp_get_error_pos(&hc->parser) - data);
        *req_ready = true;
        return used;
    }
    if (hc->req.too_long == 14)
        *err = 414;
    else if (hc->req.too_long == 13)
        *err = 413;
    else if (hc->req.too_long == 31)
        *err = 431;
    else
        *err = 400;
    return len;
}

void he__http1_next(he_conn_t *c)
{
    llhttp_resume(&((he_http1_conn_t *)c->proto)->parser);
}

/* ---------------------------------------------------------------- the protocol table */

static he_http_handler_fn he_http1_handler;

void he_http_set_handler(he_http_handler_fn fn)
{
    he_http1_handler = fn;
}

void he__http_handle(he_worker_t *w, he_req_t *r)
{
    he_http1_handler(w, r);
}

static size_t he_http1_conn_size(const he_conf_t *conf)
{
    return sizeof(he_http1_conn_t) + conf->max_uri_bytes + 1;
}

static void he_http1_open(he_worker_t *w, he_conn_t *c)
{
    (void)w;
    he__http1_init(c);
}

/* A parse error is answered like a request (c->busy), then the
 * connection closes: what follows cannot be framed. */
static __thread int he_http1_error;

/* RFC 9113 3.4: a prior-knowledge h2c connection opens with this. */
static const char he_http1_h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static size_t he_http1_data(he_worker_t *w, he_conn_t *c, const char *p, size_t n, bool *ready)
{
    he_http1_conn_t *hc = c->proto;
    int err;
    size_t used;

    /* http2.h2c on a plain listener: the first bytes decide. Fewer than
     * the preface's 24 that match it are kept (returning 0 buffers them)
     * until there are enough to tell. */
    if (!hc->h2c_checked && !c->tls && w->conf->http2_h2c && w->server->proto_h2) {
        size_t plen = sizeof(he_http1_h2_preface) - 1, m = n < plen ? n : plen;
        if (memcmp(p, he_http1_h2_preface, m) == 0) {
            if (n < plen) {
                *ready = false;
                return 0;
            }
            he__conn_switch(w, c, w->server->proto_h2);
            return c->protocol->data(w, c, p, n, ready);
        }
    }
    hc->h2c_checked = true;
    used = he__http1_parse(w, c, p, n, ready, &err);
    if (err) {
        w->stats.errors[HE_STATS_ERR_BAD_REQUEST]++;
        c->close_after = true;
        he_http1_error = err;
        *ready = true;
    }
    return used;
}

static void he_http1_request(he_worker_t *w, he_conn_t *c)
{
    he_req_t *r = he_http_req(c);
    int err = he_http1_error;
    he_http1_error = 0;
    c->t_first_byte_ns = 0;
    c->bytes_sent = 0;
    r->kind = HE_SEG_KIND_OTHER; /* until a handler knows better */
    if (err) {
        /* everything buffered after the bad bytes goes with the connection */
        c->in_off = c->in_len = 0;
        he_http_respond_error(w, r, err);
        return;
    }
    he_http1_handler(w, r);
}

static void he_http1_eof(he_worker_t *w, he_conn_t *c)
{
    he__conn_close_if_done(w, c);
}

/* A drain and no response under way: shutdown closes now; a reload's
 * retirement lets the next response announce Connection: close, since
 * closing an idle keep-alive connection races with a request the client
 * may be sending. */
static void he_http1_idle(he_worker_t *w, he_conn_t *c, bool hard)
{
    if (hard)
        he__conn_close(w, c);
    else
        c->close_after = true;
}

static void he_http1_sent(he_worker_t *w, he_conn_t *c)
{
    he_http1_conn_t *hc = c->proto;
    uint32_t gen = c->gen;
    he__http_response_end(w, c, &hc->req);
    he__http1_next(c);
    he__conn_request_done(w, c);
    /* Retired by a reload while this response was under way: its head did
     * not say Connection: close, so the connection stays for one more
     * request, which will. (A pipelined response already started again
     * does this when it finishes.) */
    if (w->soft_drain && c->gen == gen && c->in_use && !c->closing && !c->busy)
        c->close_after = true;
}

const he_proto_t he_http1_proto = {
    .name = "http/1.1",
    .conn_size = he_http1_conn_size,
    .open = he_http1_open,
    .data = he_http1_data,
    .request = he_http1_request,
    .eof = he_http1_eof,
    .idle = he_http1_idle,
    .sent = he_http1_sent,
};
