/* he_buf_t: see buf.h. The inline put covers the common case (it fits);
 * everything that may cut, grow or fail is here. */
#include "server/base/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define HE_BUF_FIRST 4096 /* a growing buffer's first allocation */

void he_buf_fixed(he_buf_t *b, char *mem, size_t cap)
{
    b->p = mem;
    b->len = 0;
    b->cap = cap;
    b->failed = cap == 0;
    b->fixed = true;
    if (cap) mem[0] = 0;
}

void he_buf_clear(he_buf_t *b)
{
    b->len = 0;
    b->failed = b->fixed && b->cap == 0;
    if (b->p) b->p[0] = 0;
}

void he_buf_free(he_buf_t *b)
{
    if (b->fixed) {
        he_buf_clear(b);
        return;
    }
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* Room for n more bytes and the NUL in a growing buffer. */
static bool he_buf_grow(he_buf_t *b, size_t n)
{
    size_t need, cap;
    char *p;

    if (n > SIZE_MAX / 2 - b->len) return false;
    need = b->len + n + 1;
    if (need <= b->cap) return true;
    cap = b->cap ? b->cap : HE_BUF_FIRST;
    while (cap < need)
        cap *= 2;
    p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

void he__buf_put_slow(he_buf_t *b, const char *s, size_t n)
{
    size_t room;

    if (b->failed) return;
    if (!b->fixed) {
        if (!he_buf_grow(b, n)) {
            b->failed = true;
            return;
        }
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
        return;
    }
    room = b->cap - b->len - 1; /* he_buf_fixed: cap >= 1, len < cap */
    if (n > room) {
        n = room;
        b->failed = true;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void he_buf_u64(he_buf_t *b, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    he_buf_put(b, tmp + i, sizeof(tmp) - i);
}

void he_buf_printf(he_buf_t *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    int n;

    if (b->failed) return;
    if (b->fixed) { /* straight in: vsnprintf cuts at the end */
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        n = vsnprintf(b->p + b->len, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->p[b->len] = 0;
            b->failed = true;
        } else if ((size_t)n >= room) {
            b->len = b->cap - 1;
            b->failed = true;
        } else {
            b->len += (size_t)n;
        }
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        he_buf_put(b, small, (size_t)n);
        return;
    }
    if (!he_buf_grow(b, (size_t)n)) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

size_t he__utf8_len(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    size_t n;

    if (s[0] < 0x80) return 1;
    if (s[0] < 0xc2 || s[0] > 0xf4) return 0; /* continuation, overlong lead, past U+10FFFF */
    n = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
    if (s[0] == 0xe0)
        lo = 0xa0; /* overlong */
    else if (s[0] == 0xed)
        hi = 0x9f; /* surrogates */
    else if (s[0] == 0xf0)
        lo = 0x90; /* overlong */
    else if (s[0] == 0xf4)
        hi = 0x8f; /* past U+10FFFF */
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++) /* a NUL ends the check too */
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

void he_buf_json_str(he_buf_t *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;

    he_buf_lit(b, "\"");
    while (*p) {
        size_t n = he__utf8_len(p);
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            he_buf_put(b, esc, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            char esc[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            he_buf_put(b, esc, 6);
        } else if (n) {
            he_buf_put(b, (const char *)p, n);
        } else {
            he_buf_lit(b, "\\ufffd");
        }
        p += n ? n : 1;
    }
    he_buf_lit(b, "\"");
}
