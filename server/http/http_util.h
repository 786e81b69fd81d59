/* HTTP helpers that need no connection state: byte ranges, validators,
 * dates and conditional-request evaluation (RFC 9110). Pure functions, so
 * they are unit-tested and fuzzed on their own. */
#ifndef HE_HTTP_UTIL_H
#define HE_HTTP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The reason phrase of a status code (RFC 9110); for a code not listed,
 * one naming its class ("Client Error"), so an origin's status passes. */
const char *he_http_reason(int status);

typedef enum he_http_range_result {
    HE_HTTP_RANGE_NONE = 0,     /* no usable Range: serve the whole body (200) */
    HE_HTTP_RANGE_OK,           /* one satisfiable range: 206 */
    HE_HTTP_RANGE_UNSATISFIABLE /* 416 with Content-Range: bytes *\/size */
} he_http_range_result_t;

/* Parses a Range header value against a representation of size bytes.
 * Handles "bytes=a-b", "bytes=a-" and "bytes=-n" (suffix); last is clamped
 * to size-1. Syntactically invalid values, other units and multiple ranges
 * yield NONE (RFC 9110 allows ignoring Range). first/last are inclusive. */
he_http_range_result_t he_http_range_parse(const char *v, size_t len, uint64_t size,
                                           uint64_t *first, uint64_t *last);

/* Added: buffer sizes for he_http_etag (always fits) and
 * he_http_date_format (29 chars + NUL). */
#define HE_HTTP_ETAG_MAX 40
#define HE_HTTP_DATE_LEN 29

/* Strong ETag from file identity, like nginx: "\"<mtime hex>-<size hex>\"".
 * Returns the length written (always < cap when cap >= 40). */
size_t he_http_etag(char *out, size_t cap, time_t mtime, uint64_t size);

/* IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"): writes 29 chars + NUL. */
size_t he_http_date_format(time_t t, char out[30]);
/* Parses IMF-fixdate, RFC 850 and asctime forms. 0 or -EINVAL. */
int he_http_date_parse(const char *s, size_t len, time_t *out);

typedef struct he_http_cond {
    const char *if_none_match;
    size_t if_none_match_len; /* NULL if absent */
    const char *if_modified_since;
    size_t if_modified_since_len;
    const char *if_match;
    size_t if_match_len;
    const char *if_unmodified_since;
    size_t if_unmodified_since_len;
} he_http_cond_t;

typedef enum he_http_cond_result {
    HE_HTTP_COND_PROCEED = 0,        /* send the representation */
    HE_HTTP_COND_NOT_MODIFIED,       /* 304 */
    HE_HTTP_COND_PRECONDITION_FAILED /* 412 */
} he_http_cond_result_t;

/* RFC 9110 section 13.2.2 order: If-Match, If-Unmodified-Since,
 * If-None-Match (weak comparison, "*" matches), If-Modified-Since (only
 * when If-None-Match is absent; an unparsable date is ignored). */
he_http_cond_result_t he_http_cond_eval(const he_http_cond_t *c, const char *etag, size_t etag_len,
                                        time_t mtime);

/* If-Range: true when the Range may be honoured (the validator matches the
 * strong ETag, or the date equals mtime exactly). */
bool he_http_if_range_ok(const char *v, size_t len, const char *etag, size_t etag_len,
                         time_t mtime);

#endif
