/* he_buf_t: the one text buffer. Appends never fail on their own: a
 * failure (no room in a fixed buffer, no memory for a growing one) is
 * remembered, later appends are dropped, and the caller checks once
 * (he_buf_ok) after building straight-line.
 *
 * Two modes:
 *   growing  zero-initialised (he_buf_t b = {0}); memory from realloc,
 *            released by he_buf_free. A failed allocation fails it.
 *   fixed    he_buf_fixed over caller memory of cap bytes; never grows.
 *            What does not fit is cut (like snprintf) and fails it.
 * In both, p[len] is a NUL whenever p is set, so text holds at most
 * cap - 1 bytes. */
#ifndef HE_BUF_H
#define HE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct he_buf {
    char *p;     /* text, NUL-terminated; NULL for a growing buffer never written */
    size_t len;  /* bytes of text */
    size_t cap;  /* bytes at p */
    bool failed; /* something was cut or dropped */
    bool fixed;  /* p is the caller's: never reallocated or freed */
} he_buf_t;

/* Starts b as a fixed buffer over mem (cap bytes, cap >= 1), empty. */
void he_buf_fixed(he_buf_t *b, char *mem, size_t cap);
/* Empties b (keeps its memory and mode) and forgets a failure. */
void he_buf_clear(he_buf_t *b);
/* A growing buffer's memory goes back; b is an empty growing buffer
 * again. For a fixed buffer: he_buf_clear. */
void he_buf_free(he_buf_t *b);

static inline bool he_buf_ok(const he_buf_t *b)
{
    return !b->failed;
}

void he__buf_put_slow(he_buf_t *b, const char *s, size_t n);

/* n bytes of s. Inline when they fit: building a head costs no calls. */
static inline void he_buf_put(he_buf_t *b, const char *s, size_t n)
{
    if (!b->failed && b->cap - b->len > n) { /* room for the NUL too */
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
        return;
    }
    he__buf_put_slow(b, s, n);
}

/* A string literal, its length known at compile time. */
#define he_buf_lit(b, s) he_buf_put(b, "" s, sizeof(s) - 1)

static inline void he_buf_str(he_buf_t *b, const char *s)
{
    he_buf_put(b, s, strlen(s));
}

/* v in decimal. */
void he_buf_u64(he_buf_t *b, uint64_t v);
void he_buf_printf(he_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string (quotes included); a byte that is not part of valid
 * UTF-8 (a file name may hold any) becomes \ufffd. */
void he_buf_json_str(he_buf_t *b, const char *s);

/* The length of the valid UTF-8 sequence s starts with (1-4), or 0 when it
 * is not one (a stray or truncated byte, an overlong form, a surrogate, a
 * code point past U+10FFFF). */
size_t he__utf8_len(const unsigned char *s);

#endif
