/* The playlist grammar's pieces (RFC 8216 4.2), shared by the parser
 * (playlist.c) and its low-latency view (playlist_ll.c) so that both read
 * numbers and attribute lists the same way. Internal to segment/. */
#ifndef HE_SEG_PLAYLIST_SYNTAX_H
#define HE_SEG_PLAYLIST_SYNTAX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One AttributeName=AttributeValue of an attribute list. */
typedef struct he__seg_attr {
    const char *name, *val;
    size_t name_len, val_len;
    bool quoted;
} he__seg_attr_t;

/* Drops surrounding spaces, tabs and the CR of a CRLF line ending. */
void he__seg_trim(const char **s, size_t *n);
/* decimal-integer in 0 .. 2^64-1: 0, or -1. */
int he__seg_parse_u64(const char *s, size_t n, uint64_t *out);
/* decimal-floating-point: 0, or -1. */
int he__seg_parse_decimal(const char *s, size_t n, double *out);
/* The next attribute of a list: 1 with *a filled, 0 at the end, -1 on
 * bad syntax. Quoted values come back without their quotes. */
int he__seg_attr_next(const char **pp, const char *end, he__seg_attr_t *a);
bool he__seg_attr_is(const he__seg_attr_t *a, const char *name);
bool he__seg_val_is(const he__seg_attr_t *a, const char *val);

#endif
