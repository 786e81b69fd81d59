/* segment: the HTTP/1.1 response parser over llhttp (see httpresp.h).
 * llhttp frames the message; its callbacks add the rules it leaves to us
 * and turn its callbacks into one event per call: each event pauses the
 * parser (HPE_PAUSED) where it happened, so the caller gets a body span
 * and how many bytes it used, and resumes with the rest. */
#include "segment/httpresp.h"

#include <errno.h>
#include <llhttp.h>
#include <string.h>

_Static_assert(sizeof(llhttp_t) <= HE_HTTPRESP_LL_SIZE, "HE_HTTPRESP_LL_SIZE too small");

enum { HE_HR_HEAD = 0, HE_HR_BODY, HE_HR_DONE };

/* a body length past this is no length we would store or count */
#define HE_HR_MAX_LEN (1ull << 62)

static bool he_hr_tchar(unsigned char c)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return true;
    return c && memchr(extra, c, sizeof(extra) - 1) != NULL;
}

static llhttp_t *he_hr_ll(he_httpresp_t *p)
{
    return (llhttp_t *)p->ll.bytes;
}

static const llhttp_t *he_hr_cll(const he_httpresp_t *p)
{
    return (const llhttp_t *)p->ll.bytes;
}

static he_httpresp_t *he_hr(llhttp_t *ll)
{
    return ll->data;
}

static bool he_hr_interim(const llhttp_t *ll)
{
    return ll->status_code < 200;
}

static int he_hr_fail(he_httpresp_t *p, int err)
{
    if (!p->err) p->err = err;
    return -1;
}

/* Absolute stream offset of a pointer into the current call's buffer. */
static uint64_t he_hr_off(const he_httpresp_t *p, const char *at)
{
    return p->fed + (uint64_t)(at - p->buf);
}

static int he_hr_on_status_complete(llhttp_t *ll)
{
    he_httpresp_t *p = he_hr(ll);
    /* llhttp takes any three digits and HTTP/2.0; neither is a response
     * to our HTTP/1.1 request */
    if (ll->http_major != 1 || ll->http_minor > 1 || ll->status_code < 100)
        return he_hr_fail(p, -EPROTO);
    if (ll->status_code == 101) return he_hr_fail(p, -EPROTO); /* we never ask to upgrade */
    return 0;
}

static int he_hr_on_header_field(llhttp_t *ll, const char *at, size_t n)
{
    he_httpresp_t *p = he_hr(ll);
    if (!p->in_field) {
        p->in_field = true;
        p->line_start = he_hr_off(p, at);
        p->nlen = 0;
        p->vlen = 0;
        p->name_over = p->line_over = p->value_seen = false;
    }
    /* llhttp lets a space into a name ("Bad Name: x"); RFC 9110 5.1 */
    for (size_t i = 0; i < n; i++)
        if (!he_hr_tchar((unsigned char)at[i])) return he_hr_fail(p, -EPROTO);
    if (p->name_over || p->nlen + n > HE_HTTPRESP_NAME_MAX) {
        p->name_over = true;
        return 0;
    }
    memcpy(p->name + p->nlen, at, n);
    p->nlen = (uint8_t)(p->nlen + n);
    return 0;
}

static int he_hr_on_header_value(llhttp_t *ll, const char *at, size_t n)
{
    he_httpresp_t *p = he_hr(ll);
    /* a second span of one value is a continuation only when the first
     * ended with the previous call and this one starts the new call;
     * otherwise llhttp joined an obs-fold line (RFC 9112 5.2: a proxy
     * may discard the message) */
    if (p->value_seen && !(p->vcont && at == p->buf)) return he_hr_fail(p, -EPROTO);
    p->value_seen = true;
    p->vcont = at + n == p->buf_end;
    if (he_hr_off(p, at + n) - p->line_start > HE_HTTPRESP_LINE_MAX) p->line_over = true;
    if (!p->field || p->line_over || he_hr_interim(ll)) return 0;
    memcpy(p->value + p->vlen, at, n);
    p->vlen += (uint32_t)n;
    return 0;
}

static int he_hr_on_header_value_complete(llhttp_t *ll)
{
    he_httpresp_t *p = he_hr(ll);
    p->in_field = false;
    p->value_seen = false;
    if (!p->field || he_hr_interim(ll)) return 0;
    size_t vl = p->vlen;
    while (vl && (p->value[vl - 1] == ' ' || p->value[vl - 1] == '\t'))
        vl--;
    p->value[vl] = '\0';
    p->name[p->name_over ? 0 : p->nlen] = '\0';
    int rc = p->field(p->ctx, p->name, p->name_over ? 0 : p->nlen, p->line_over ? NULL : p->value,
                      p->line_over ? 0 : vl, p->line_over);
    return rc < 0 ? he_hr_fail(p, rc) : 0;
}

/* 0: go on; 1: no body follows (llhttp's "skip body"); HPE_PAUSED: report
 * the head before the body. */
static int he_hr_on_headers_complete(llhttp_t *ll)
{
    he_httpresp_t *p = he_hr(ll);
    he_httpresp_head_t *h = &p->head;
    uint16_t fl = ll->flags;
    bool te = fl & F_TRANSFER_ENCODING, cl = fl & F_CONTENT_LENGTH;
    if (he_hr_interim(ll)) return 1; /* 1xx has no content (RFC 9110 15.2) */
    if (cl && ll->content_length > HE_HR_MAX_LEN) return he_hr_fail(p, -EPROTO);
    h->status = ll->status_code;
    h->minor = ll->http_minor;
    h->chunked = fl & F_CHUNKED;
    h->content_length = cl && !te ? (int64_t)ll->content_length : -1;
    h->no_body =
        p->head_request || h->status == 204 || h->status == 304 || (h->content_length == 0 && !te);
    h->until_close = !h->no_body && (te ? !h->chunked : !cl);
    h->keepalive = h->minor >= 1 ? !(fl & F_CONNECTION_CLOSE) : (fl & F_CONNECTION_KEEP_ALIVE);
    if (h->until_close) h->keepalive = false; /* the close ends the body */
    p->phase = HE_HR_BODY;
    p->head_pending = true;
    p->ev = HE_HTTPRESP_HEADERS;
    return h->no_body ? 1 : HPE_PAUSED;
}

/* The CRLF that ends chunk data, from at to the call's end: llhttp (built
 * loose, as the server's request parser is) skips those two bytes unread. */
static int he_hr_check_crlf(he_httpresp_t *p, const char *at)
{
    while (p->crlf_left && at < p->buf_end) {
        if (*at++ != "\r\n"[2 - p->crlf_left]) return -EPROTO;
        p->crlf_left--;
    }
    return 0;
}

static int he_hr_on_body(llhttp_t *ll, const char *at, size_t n)
{
    he_httpresp_t *p = he_hr(ll);
    if (p->in_chunk && ll->content_length == 0 && !p->crlf_left) {
        /* the chunk's data ends here: with n, the pause below makes the
         * next call start at the CRLF, which he_httpresp_feed checks */
        p->crlf_left = 2;
        if (n == 0 && he_hr_check_crlf(p, at) < 0) return he_hr_fail(p, -EPROTO);
    }
    if (n == 0) return 0;
    p->body = at;
    p->body_len = n;
    p->payload += n;
    p->ev = HE_HTTPRESP_BODY;
    return HPE_PAUSED;
}

static int he_hr_on_chunk_header(llhttp_t *ll)
{
    he_hr(ll)->in_chunk = ll->content_length > 0;
    return 0;
}

static int he_hr_on_chunk_complete(llhttp_t *ll)
{
    he_hr(ll)->in_chunk = false;
    return 0;
}

static int he_hr_on_message_complete(llhttp_t *ll)
{
    he_httpresp_t *p = he_hr(ll);
    if (p->phase == HE_HR_HEAD) return 0; /* an interim response: the real one follows */
    p->phase = HE_HR_DONE;
    if (p->ev != HE_HTTPRESP_HEADERS) p->ev = HE_HTTPRESP_DONE;
    return HPE_PAUSED; /* what follows is the next response's */
}

static const llhttp_settings_t he_hr_settings = {
    .on_status_complete = he_hr_on_status_complete,
    .on_header_field = he_hr_on_header_field,
    .on_header_value = he_hr_on_header_value,
    .on_header_value_complete = he_hr_on_header_value_complete,
    .on_headers_complete = he_hr_on_headers_complete,
    .on_body = he_hr_on_body,
    .on_chunk_header = he_hr_on_chunk_header,
    .on_chunk_complete = he_hr_on_chunk_complete,
    .on_message_complete = he_hr_on_message_complete,
};

void he_httpresp_init(he_httpresp_t *p, bool head_request, he_httpresp_field_fn field, void *ctx,
                      char *value)
{
    memset(p, 0, sizeof(*p));
    llhttp_init(he_hr_ll(p), HTTP_RESPONSE, &he_hr_settings);
    /* Transfer-Encoding overrides Content-Length (RFC 9112 6.3 item 3) */
    llhttp_set_lenient_chunked_length(he_hr_ll(p), 1);
    p->head_request = head_request;
    p->field = value ? field : NULL;
    p->ctx = ctx;
    p->value = value;
    p->head.content_length = -1;
}

int he_httpresp_feed(he_httpresp_t *p, const char *data, size_t len, size_t *used,
                     const char **body, size_t *body_len)
{
    size_t n = len, took;
    enum llhttp_errno e;
    *used = 0;
    *body = NULL;
    *body_len = 0;
    if (p->err) return p->err;
    if (p->phase == HE_HR_DONE) return HE_HTTPRESP_DONE;
    if (p->phase == HE_HR_HEAD && n > HE_HTTPRESP_HEAD_MAX + 1 - p->head_bytes)
        n = HE_HTTPRESP_HEAD_MAX + 1 - p->head_bytes;
    /* llhttp skips empty lines before a message; a response has none */
    if (!p->started && n) {
        if (data[0] != 'H') return p->err = -EPROTO;
        p->started = true;
    }
    he_hr_ll(p)->data = p; /* the struct may have been copied */
    p->buf = data;
    p->buf_end = data + n;
    if (p->crlf_left && he_hr_check_crlf(p, data) < 0) return p->err = -EPROTO;
    p->ev = HE_HTTPRESP_MORE;
    e = llhttp_execute(he_hr_ll(p), data, n);
    if (e == HPE_PAUSED) {
        took = (size_t)(llhttp_get_error_pos(he_hr_ll(p)) - data);
        llhttp_resume(he_hr_ll(p));
    } else if (e == HPE_OK) {
        took = n;
    } else {
        return p->err = p->err ? p->err : -EPROTO;
    }
    if (p->head_pending || p->phase == HE_HR_HEAD) {
        p->head_bytes += (uint32_t)took;
        if (p->head_bytes > HE_HTTPRESP_HEAD_MAX) return p->err = -E2BIG;
    }
    p->head_pending = false;
    p->fed += took;
    *used = took;
    if (p->ev == HE_HTTPRESP_BODY) {
        *body = p->body;
        *body_len = p->body_len;
    }
    return p->ev;
}

int he_httpresp_eof(he_httpresp_t *p)
{
    if (p->phase == HE_HR_BODY && p->head.until_close) p->phase = HE_HR_DONE;
    return p->phase == HE_HR_DONE && !p->err ? HE_HTTPRESP_DONE : -EPIPE;
}

uint64_t he_httpresp_skippable(const he_httpresp_t *p)
{
    if (p->phase != HE_HR_BODY || p->err) return 0;
    if (p->head.until_close) return UINT64_MAX;
    if (p->head.chunked) return p->in_chunk ? he_hr_cll(p)->content_length : 0;
    return he_hr_cll(p)->content_length;
}

/* llhttp's content_length counts the body or chunk bytes still to come
 * (consume_content_length takes them from it), so bytes the kernel dropped
 * are taken from it too; a Content-Length body they end is complete. */
void he_httpresp_skip(he_httpresp_t *p, uint64_t n)
{
    uint64_t max = he_httpresp_skippable(p);
    if (n > max) n = max;
    p->payload += n;
    if (p->head.until_close) return;
    he_hr_ll(p)->content_length -= n;
    if (!p->head.chunked && he_hr_ll(p)->content_length == 0) p->phase = HE_HR_DONE;
}
