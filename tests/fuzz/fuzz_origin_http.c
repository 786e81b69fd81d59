/* Fuzz target for cache/httpc.c, the origin response parser. The input is
 * parsed twice, in one piece and split at a step taken from its first
 * byte; both runs must agree on the outcome, the status and every body
 * byte, must never consume more than they were given, and a response
 * framed by Content-Length must deliver exactly that many bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"

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
    return 0;
}
