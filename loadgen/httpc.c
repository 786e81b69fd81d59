/* loadgen: the client side of HTTP/1.1 over the shared response parser
 * (segment/httpresp.h, llhttp): a response-head parser and a body decoder
 * (Content-Length, chunked, or until close). The decoder can say how many
 * coming bytes are pure payload so the engine may drop them in the kernel
 * (recv with MSG_TRUNC) without ever copying them. */
#include "loadgen/lg.h"

#include <errno.h>
#include <string.h>

int he_lg_http_parse_head(const char *buf, size_t len, he_lg_http_head_t *h)
{
    const char *b;
    size_t used, bl;
    /* a fresh parser each time: heads are small and arrive whole */
    memset(h, 0, sizeof(*h));
    he_httpresp_init(&h->hr, false, NULL, NULL, NULL);
    int ev = he_httpresp_feed(&h->hr, buf, len, &used, &b, &bl);
    if (ev < 0) return -EINVAL;
    if (ev != HE_HTTPRESP_HEADERS) return HE_LG_AGAIN;
    const he_httpresp_head_t *r = &h->hr.head;
    h->status = r->status;
    h->minor = r->minor;
    h->content_length = r->content_length;
    h->chunked = r->chunked;
    h->keep_alive = r->keepalive;
    h->head_len = used;
    return 0;
}

void he_lg_body_init(he_lg_body_t *b, const he_lg_http_head_t *h)
{
    memset(b, 0, sizeof(*b));
    b->hr = h->hr;
    if (h->status < 200 || h->status == 204 || h->status == 304) {
        b->mode = HE_LG_BODY_NONE;
        b->done = true;
    } else if (h->chunked) {
        b->mode = HE_LG_BODY_CHUNKED;
    } else if (h->content_length >= 0) {
        b->mode = HE_LG_BODY_LENGTH;
        b->done = h->content_length == 0;
    } else {
        b->mode = HE_LG_BODY_EOF;
    }
}

ssize_t he_lg_body_feed(he_lg_body_t *b, const char *p, size_t n, he_lg_sink_fn sink, void *ctx)
{
    size_t off = 0;
    if (b->done) return 0;
    for (;;) {
        const char *s;
        size_t used, sl;
        int ev = he_httpresp_feed(&b->hr, p + off, n - off, &used, &s, &sl);
        if (ev < 0) return -EINVAL;
        off += used;
        if (ev == HE_HTTPRESP_BODY) {
            if (sink) sink(ctx, s, sl);
            b->payload += sl;
            continue;
        }
        if (ev == HE_HTTPRESP_DONE) b->done = true;
        return (ssize_t)off; /* MORE: all of it used; DONE: what follows is not ours */
    }
}

uint64_t he_lg_body_skippable(const he_lg_body_t *b)
{
    return b->done ? 0 : he_httpresp_skippable(&b->hr);
}

void he_lg_body_skip(he_lg_body_t *b, uint64_t n)
{
    uint64_t max = he_lg_body_skippable(b);
    if (n > max) n = max;
    b->payload += n;
    he_httpresp_skip(&b->hr, n);
    if (he_httpresp_skippable(&b->hr) == 0 && b->mode == HE_LG_BODY_LENGTH) b->done = true;
}

int he_lg_body_eof(he_lg_body_t *b)
{
    if (b->done) return 0;
    if (he_httpresp_eof(&b->hr) != HE_HTTPRESP_DONE) return -EPIPE;
    b->done = true;
    return 0;
}
