/* Building response heads: appends into a fixed buffer and remembers an
 * overflow instead of failing each call, so a head is built straight-line
 * and checked once. Shared by respond.c and respond_cache.c. */
#ifndef HE_HBUF_H
#define HE_HBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct he_hbuf {
    char *p;
    size_t len, cap;
    bool overflow;
} he_hbuf_t;

static inline void he_hb_mem(he_hbuf_t *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        b->overflow = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

#define he_hb_lit(b, s) he_hb_mem(b, s, sizeof(s) - 1)

static inline void he_hb_str(he_hbuf_t *b, const char *s)
{
    he_hb_mem(b, s, strlen(s));
}

static inline void he_hb_u64(he_hbuf_t *b, uint64_t v)
{
    char tmp[24];
    int i = sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    he_hb_mem(b, tmp + i, sizeof(tmp) - (size_t)i);
}

#endif
