/* loadgen: the client side of HTTP/1.1: a response-head parser and a body
 * decoder (Content-Length, chunked, or until close). The decoder can say how
 * many coming bytes are pure payload so the engine may drop them in the
 * kernel (recv with MSG_TRUNC) without ever copying them. */
#include "loadgen/lg.h"
#include "segment/segment.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

enum {
    HE_LG_CH_SIZE = 0, /* hex digits of a chunk size */
    HE_LG_CH_EXT,      /* ";ext" up to CR */
    HE_LG_CH_SIZE_LF,
    HE_LG_CH_DATA,
    HE_LG_CH_DATA_CR,
    HE_LG_CH_DATA_LF,
    HE_LG_CH_TRAILER_START, /* start of a trailer line, or the final CRLF */
    HE_LG_CH_TRAILER,       /* inside a trailer line */
    HE_LG_CH_TRAILER_LF,
    HE_LG_CH_END_LF
};

#define HE_LG_MAX_CHUNK_LINE 4096
#define HE_LG_MAX_LENGTH (1ull << 62)

static bool he_lg_http_is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9') return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool he_lg_http_token_eq(const char *p, size_t n, const char *tok)
{
    return strlen(tok) == n && strncasecmp(p, tok, n) == 0;
}

/* Calls back for each comma-separated element of a header value. Returns
 * true if any element equals tok (case-insensitively); sets *last to whether
 * the last element does. */
static bool he_lg_http_list_has(const char *v, size_t n, const char *tok, bool *last)
{
    bool any = false;
    size_t i = 0;
    if (last) *last = false;
    while (i <= n) {
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (s < e && (v[s] == ' ' || v[s] == '\t'))
            s++;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        bool eq = he_lg_http_token_eq(v + s, e - s, tok);
        if (eq) any = true;
        if (e > s && last) *last = eq;
        i++;
    }
    return any;
}

static int he_lg_http_parse_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0) return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -EINVAL;
        v = v * 10 + (uint64_t)(p[i] - '0');
        if (v > HE_LG_MAX_LENGTH) return -EINVAL;
    }
    *out = v;
    return 0;
}

/* One header line [p, p+n) without its line ending. */
static int he_lg_http_header(he_lg_http_head_t *h, const char *p, size_t n, bool *conn_close,
                             bool *conn_keep)
{
    size_t i = 0;
    while (i < n && he_lg_http_is_tchar((unsigned char)p[i]))
        i++;
    if (i == 0 || i == n || p[i] != ':') return -EINVAL; /* also rejects obs-fold */
    const char *name = p;
    size_t nlen = i;
    i++;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    size_t e = n;
    while (e > i && (p[e - 1] == ' ' || p[e - 1] == '\t'))
        e--;
    const char *v = p + i;
    size_t vlen = e - i;
    for (size_t k = 0; k < vlen; k++)
        if ((unsigned char)v[k] < 0x20 && v[k] != '\t') return -EINVAL;

    if (he_lg_http_token_eq(name, nlen, "content-length")) {
        uint64_t cl;
        if (he_lg_http_parse_u64(v, vlen, &cl) < 0) return -EINVAL;
        if (h->content_length >= 0 && (uint64_t)h->content_length != cl) return -EINVAL;
        h->content_length = (int64_t)cl;
    } else if (he_lg_http_token_eq(name, nlen, "transfer-encoding")) {
        bool last;
        he_lg_http_list_has(v, vlen, "chunked", &last);
        h->chunked = last;
        if (!last) h->content_length = -2; /* encoded, not chunked: body until close */
    } else if (he_lg_http_token_eq(name, nlen, "connection")) {
        if (he_lg_http_list_has(v, vlen, "close", NULL)) *conn_close = true;
        if (he_lg_http_list_has(v, vlen, "keep-alive", NULL)) *conn_keep = true;
    }
    return 0;
}

int he_lg_http_parse_head(const char *buf, size_t len, he_lg_http_head_t *h)
{
    /* find the end of the head first so a partial head costs one scan */
    size_t end = 0;
    bool found = false;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n') continue;
        if (i + 1 < len && buf[i + 1] == '\n') {
            end = i + 2;
            found = true;
            break;
        }
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
            end = i + 3;
            found = true;
            break;
        }
    }
    if (!found) return HE_LG_AGAIN;

    memset(h, 0, sizeof(*h));
    h->content_length = -1;
    bool conn_close = false, conn_keep = false;
    size_t pos = 0, line_no = 0;
    bool te_seen = false;
    while (pos < end) {
        size_t e = pos;
        while (e < end && buf[e] != '\n')
            e++;
        size_t next = e + 1;
        if (e > pos && buf[e - 1] == '\r') e--;
        const char *l = buf + pos;
        size_t n = e - pos;
        if (n == 0) break; /* the blank line */
        if (line_no == 0) {
            /* HTTP/1.x SP 3DIGIT [SP reason] */
            if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || l[7] < '0' || l[7] > '9' || l[8] != ' ')
                return -EINVAL;
            for (int k = 9; k < 12; k++)
                if (l[k] < '0' || l[k] > '9') return -EINVAL;
            if (n > 12 && l[12] != ' ') return -EINVAL;
            h->minor = l[7] - '0';
            h->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
            if (h->status < 100) return -EINVAL;
        } else {
            int64_t before = h->content_length;
            if (he_lg_http_header(h, l, n, &conn_close, &conn_keep) < 0) return -EINVAL;
            if (h->content_length == -2) {
                te_seen = true;
                h->content_length = before;
            } else if (h->chunked) {
                te_seen = true;
            }
        }
        line_no++;
        pos = next;
    }
    if (line_no == 0) return -EINVAL;
    if (te_seen && !h->chunked) h->content_length = -1; /* unknown coding: until close */
    if (h->chunked) h->content_length = -1;             /* chunked wins over a length */
    h->keep_alive = h->minor >= 1 ? !conn_close : (conn_keep && !conn_close);
    if (!h->chunked && h->content_length < 0 &&
        !(h->status < 200 || h->status == 204 || h->status == 304))
        h->keep_alive = false; /* the close ends the body */
    h->head_len = end;
    return 0;
}

void he_lg_body_init(he_lg_body_t *b, const he_lg_http_head_t *h)
{
    memset(b, 0, sizeof(*b));
    if (h->status < 200 || h->status == 204 || h->status == 304) {
        b->mode = HE_LG_BODY_NONE;
        b->done = true;
    } else if (h->chunked) {
        b->mode = HE_LG_BODY_CHUNKED;
        b->state = HE_LG_CH_SIZE;
    } else if (h->content_length >= 0) {
        b->mode = HE_LG_BODY_LENGTH;
        b->remaining = (uint64_t)h->content_length;
        b->done = b->remaining == 0;
    } else {
        b->mode = HE_LG_BODY_EOF;
    }
}

static ssize_t he_lg_body_chunked(he_lg_body_t *b, const char *p, size_t n, he_lg_sink_fn sink,
                                  void *ctx)
{
    size_t i = 0;
    while (i < n && !b->done) {
        char c = p[i];
        switch (b->state) {
        case HE_LG_CH_SIZE: {
            int d = he_seg_hex_digit((unsigned char)c);
            if (d >= 0) {
                if (b->remaining >> 56) return -EINVAL; /* absurd size */
                b->remaining = b->remaining * 16 + (uint64_t)d;
                b->line++;
            } else if (b->line == 0) {
                return -EINVAL;
            } else if (c == ';' || c == ' ' || c == '\t') {
                b->state = HE_LG_CH_EXT;
            } else if (c == '\r') {
                b->state = HE_LG_CH_SIZE_LF;
            } else {
                return -EINVAL;
            }
            i++;
            break;
        }
        case HE_LG_CH_EXT:
            if (c == '\r')
                b->state = HE_LG_CH_SIZE_LF;
            else if (c == '\n' || ++b->line > HE_LG_MAX_CHUNK_LINE)
                return -EINVAL;
            i++;
            break;
        case HE_LG_CH_SIZE_LF:
            if (c != '\n') return -EINVAL;
            i++;
            b->line = 0;
            b->state = b->remaining ? HE_LG_CH_DATA : HE_LG_CH_TRAILER_START;
            break;
        case HE_LG_CH_DATA: {
            size_t k = n - i;
            if (k > b->remaining) k = (size_t)b->remaining;
            if (sink && k) sink(ctx, p + i, k);
            b->payload += k;
            b->remaining -= k;
            i += k;
            if (!b->remaining) b->state = HE_LG_CH_DATA_CR;
            break;
        }
        case HE_LG_CH_DATA_CR:
            if (c != '\r') return -EINVAL;
            b->state = HE_LG_CH_DATA_LF;
            i++;
            break;
        case HE_LG_CH_DATA_LF:
            if (c != '\n') return -EINVAL;
            b->state = HE_LG_CH_SIZE;
            b->line = 0;
            i++;
            break;
        case HE_LG_CH_TRAILER_START:
            b->line = 0;
            b->state = c == '\r' ? HE_LG_CH_END_LF : HE_LG_CH_TRAILER;
            if (c == '\n') return -EINVAL;
            i++;
            break;
        case HE_LG_CH_TRAILER:
            if (c == '\r')
                b->state = HE_LG_CH_TRAILER_LF;
            else if (c == '\n' || ++b->line > HE_LG_MAX_CHUNK_LINE)
                return -EINVAL;
            i++;
            break;
        case HE_LG_CH_TRAILER_LF:
            if (c != '\n') return -EINVAL;
            b->state = HE_LG_CH_TRAILER_START;
            i++;
            break;
        case HE_LG_CH_END_LF:
            if (c != '\n') return -EINVAL;
            b->done = true;
            i++;
            break;
        default:
            return -EINVAL;
        }
    }
    return (ssize_t)i;
}

ssize_t he_lg_body_feed(he_lg_body_t *b, const char *p, size_t n, he_lg_sink_fn sink, void *ctx)
{
    if (b->done) return 0;
    switch (b->mode) {
    case HE_LG_BODY_LENGTH: {
        size_t k = n;
        if (k > b->remaining) k = (size_t)b->remaining;
        if (sink && k) sink(ctx, p, k);
        b->payload += k;
        b->remaining -= k;
        b->done = b->remaining == 0;
        return (ssize_t)k;
    }
    case HE_LG_BODY_EOF:
        if (sink && n) sink(ctx, p, n);
        b->payload += n;
        return (ssize_t)n;
    case HE_LG_BODY_CHUNKED:
        return he_lg_body_chunked(b, p, n, sink, ctx);
    default:
        return 0;
    }
}

uint64_t he_lg_body_skippable(const he_lg_body_t *b)
{
    if (b->done) return 0;
    switch (b->mode) {
    case HE_LG_BODY_LENGTH:
        return b->remaining;
    case HE_LG_BODY_EOF:
        return UINT64_MAX;
    case HE_LG_BODY_CHUNKED:
        return b->state == HE_LG_CH_DATA ? b->remaining : 0;
    default:
        return 0;
    }
}

void he_lg_body_skip(he_lg_body_t *b, uint64_t n)
{
    uint64_t max = he_lg_body_skippable(b);
    if (n > max) n = max;
    b->payload += n;
    if (b->mode == HE_LG_BODY_EOF) return;
    b->remaining -= n;
    if (b->remaining == 0) {
        if (b->mode == HE_LG_BODY_LENGTH)
            b->done = true;
        else
            b->state = HE_LG_CH_DATA_CR;
    }
}

int he_lg_body_eof(he_lg_body_t *b)
{
    if (b->done) return 0;
    if (b->mode == HE_LG_BODY_EOF) {
        b->done = true;
        return 0;
    }
    return -EPIPE;
}
