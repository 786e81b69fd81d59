/* Fuzz target for cache/httpc.c, the origin response parser (its fields
 * over segment/httpresp.c, the llhttp wrapper loadgen shares). The input is
 * parsed twice, in one piece and split at a step taken from its first
 * byte; both runs must agree on the outcome, the status and every body
 * byte, must never consume more than they were given, and a response
 * framed by Content-Length must deliver exactly that many bytes.
 *
 * The same bytes then drive the origin fetch state machine (fetch.c) as
 * what its RECV operations return, in pieces of the same step, with the
 * other operations completed as successful: it must end, deliver the head
 * at most once and never more body bytes than it was given, and a
 * Content-Length body that completes is exactly that long. When the
 * input's first byte says so, the sink offers room to receive the body in
 * place (READV, in two iovecs), which must keep to the same rules. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache/origin.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

typedef struct outcome {
    int ev;
    int status;
    size_t blen;
    int64_t clen;
    bool chunked;
    uint8_t body[65536];
} outcome_t;

static void parse(const uint8_t *d, size_t n, size_t step, bool head, outcome_t *o)
{
    he_cache_httpc_t p;
    size_t off = 0;
    int ev = HE_CACHE_HTTPC_MORE;
    he_cache_httpc_init(&p, head);
    o->blen = 0;
    while (ev >= 0 && ev != HE_CACHE_HTTPC_DONE) {
        size_t avail = n - off < step ? n - off : step, used;
        const char *b;
        size_t bl;
        ev = he_cache_httpc_parse(&p, (const char *)d + off, avail, &used, &b, &bl);
        if (used > avail) abort();
        if (ev == HE_CACHE_HTTPC_BODY) {
            if (bl > used || b < (const char *)d + off || b + bl > (const char *)d + off + used)
                abort();
            memcpy(o->body + o->blen, b, bl);
            o->blen += bl;
        }
        if (ev == HE_CACHE_HTTPC_MORE && used != avail) abort();
        off += used;
        if (ev == HE_CACHE_HTTPC_MORE && off == n) {
            ev = he_cache_httpc_eof(&p);
            break;
        }
    }
    o->ev = ev;
    o->status = p.resp.status;
    o->clen = p.resp.content_length;
    o->chunked = p.resp.chunked;
}

typedef struct fsink {
    int heads;
    size_t body;
    int64_t clen;
    bool no_body;
    uint8_t room[4096];
} fsink_t;

static int fs_head(void *ctx, const he_cache_http_resp_t *r)
{
    fsink_t *s = ctx;
    s->heads++;
    s->clen = r->chunked ? -1 : r->content_length;
    s->no_body = r->no_body;
    return 0;
}

static unsigned fs_space(void *ctx, struct iovec *iov, unsigned max, size_t want)
{
    fsink_t *s = ctx;
    size_t half = sizeof(s->room) / 2;
    if (max < 2 || want == 0) return 0;
    iov[0].iov_base = s->room;
    iov[0].iov_len = want < half ? want : half;
    if (want <= half) return 1;
    iov[1].iov_base = s->room + half;
    iov[1].iov_len = want - half < half ? want - half : half;
    return 2;
}

static int fs_placed(void *ctx, size_t n)
{
    ((fsink_t *)ctx)->body += n;
    return 0;
}

static int fs_body(void *ctx, const char *p, size_t n)
{
    (void)p;
    ((fsink_t *)ctx)->body += n;
    return 0;
}

static void fetch_run(const uint8_t *d, size_t n, size_t step, bool head, bool in_place)
{
    static he_cache_origins_t *o;
    static he_conf_t conf;
    he_cache_io_t io;
    fsink_t fs = {0};
    he_cache_sink_t sink = {&fs, fs_head, fs_body, in_place ? fs_space : NULL,
                            in_place ? fs_placed : NULL};
    he_cache_fetch_req_t req = {.path = "/a.ts", .head = head};
    size_t off = 0;
    int steps = 0;
    if (!o) {
        he_cache_origin_t org;
        char err[128];
        he_conf_defaults(&conf);
        conf.origin_pool = 0;
        conf.origin_retries = 0;
        he_cache_origin_parse("http://127.0.0.1:1", &org, err, sizeof(err));
        he_cache_origins_opts_t oo = {.conf = &conf, .origins = &org, .norigins = 1};
        if (he_cache_origins_new(&o, &oo, err, sizeof(err)) < 0) abort();
    }
    he_cache_fetch_t *f = he_cache_fetch_new(o, &conf, &req, &sink, 1, NULL);
    if (!f) abort();
    while (he_cache_fetch_next(f, 1, &io) != HE_CACHE_IO_DONE) {
        int res = 0;
        if (++steps > 100000) abort(); /* it must end */
        switch (io.op) {
        case HE_CACHE_IO_SOCKET:
            res = 1000; /* never really used: CLOSE is completed by hand */
            break;
        case HE_CACHE_IO_SEND:
            res = (int)io.len;
            break;
        case HE_CACHE_IO_RECV: {
            size_t k = n - off < step ? n - off : step;
            if (k > io.len) k = io.len;
            memcpy(io.buf, d + off, k);
            off += k;
            res = (int)k;
            break;
        }
        case HE_CACHE_IO_READV: {
            size_t k = n - off < step ? n - off : step, got = 0;
            if (!in_place) abort();
            for (unsigned i = 0; i < io.iovcnt && got < k; i++) {
                size_t c = k - got < io.iov[i].iov_len ? k - got : io.iov[i].iov_len;
                memcpy(io.iov[i].iov_base, d + off + got, c);
                got += c;
            }
            off += got;
            res = (int)got;
            break;
        }
        default:
            break;
        }
        he_cache_fetch_complete(f, res, 1);
    }
    if (fs.heads > 1 || fs.body > n) abort();
    if (he_cache_fetch_result(f, NULL) == 0 && fs.heads != 1) abort();
    if (he_cache_fetch_result(f, NULL) == 0 && fs.clen >= 0 && !fs.no_body &&
        fs.body != (size_t)fs.clen)
        abort();
    he_cache_fetch_free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static outcome_t a, b;
    if (n < 1 || n > sizeof(a.body)) return 0;
    size_t step = 1 + d[0] % 17;
    bool head = d[0] & 0x80;
    d++;
    n--;
    parse(d, n, n ? n : 1, head, &a);
    parse(d, n, step, head, &b);
    if (a.ev != b.ev || a.blen != b.blen || memcmp(a.body, b.body, a.blen) != 0) abort();
    if (a.ev == HE_CACHE_HTTPC_DONE) {
        if (a.status != b.status || a.status < 200) abort();
        if (!a.chunked && a.clen >= 0 && !head && a.status != 204 && a.status != 304 &&
            (int64_t)a.blen != a.clen)
            abort();
    }
    fetch_run(d, n, step, head, false);
    fetch_run(d, n, step, head, true);
    return 0;
}
