/* segment: the HTTP/1.1 response parser shared by the origin client
 * (cache/httpc.c) and loadgen (loadgen/httpc.c): llhttp in HTTP_RESPONSE
 * mode plus the rules llhttp leaves to its user, checked in its callbacks:
 *   - interim 1xx responses (100 Continue, 103 Early Hints) are skipped,
 *     101 is refused (neither client asks to upgrade);
 *   - only HTTP/1.0 and HTTP/1.1, status 100..999, a response starts with
 *     its status line (no leading empty lines);
 *   - header names are tokens, obs-fold is refused (RFC 9112 5.2);
 *   - a field line longer than HE_HTTPRESP_LINE_MAX is handed to the
 *     caller as "over" (no value), who decides whether it may be skipped;
 *   - all heads of one exchange, interim ones included, fit in
 *     HE_HTTPRESP_HEAD_MAX bytes;
 *   - chunk data ends in CRLF (RFC 9112 7.1; llhttp's default, loose build
 *     skips any two bytes there);
 *   - Content-Length over 2^62 is refused; llhttp itself refuses two
 *     Content-Lengths, bad chunk framing and bad characters.
 * Transfer-Encoding overrides Content-Length (RFC 9112 6.3 item 3); a
 * Transfer-Encoding whose last coding is not chunked runs to the close.
 *
 * No I/O and no copies of the body: bytes in, events out, body events
 * are spans of the caller's buffer. Incremental: input may be cut
 * anywhere. */
#ifndef HE_HTTPRESP_H
#define HE_HTTPRESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HE_HTTPRESP_HEAD_MAX 16384
#define HE_HTTPRESP_LINE_MAX 1022 /* longest field line (name: value) read whole */
#define HE_HTTPRESP_NAME_MAX 32   /* longer names are nobody's: passed as "" */

typedef enum he_httpresp_ev {
    HE_HTTPRESP_MORE = 0, /* all input used, need more */
    HE_HTTPRESP_HEADERS,  /* the final head is parsed: see p->head */
    HE_HTTPRESP_BODY,     /* *body, *body_len hold payload bytes */
    HE_HTTPRESP_DONE      /* the response is complete */
} he_httpresp_ev_t;

typedef struct he_httpresp_head {
    int status;
    int minor;              /* HTTP/1.minor */
    int64_t content_length; /* -1 when absent or overridden by Transfer-Encoding */
    bool chunked;
    bool keepalive;
    bool no_body;     /* HEAD request, 204, 304, Content-Length: 0 */
    bool until_close; /* the body ends when the peer closes */
} he_httpresp_head_t;

/* One field line of the final response (not of interim ones), with
 * surrounding whitespace trimmed. over: the line was longer than
 * HE_HTTPRESP_LINE_MAX and value is NULL. name is "" when longer than
 * HE_HTTPRESP_NAME_MAX. Returns 0, or a negative errno to fail the parse. */
typedef int (*he_httpresp_field_fn)(void *ctx, const char *name, size_t nlen, const char *value,
                                    size_t vlen, bool over);

/* llhttp's parser state, kept opaque so users need not see llhttp.h (the
 * size is checked in httpresp.c); the struct may be copied between calls. */
#define HE_HTTPRESP_LL_SIZE 128

typedef struct he_httpresp {
    union {
        unsigned char bytes[HE_HTTPRESP_LL_SIZE];
        void *align_p;
        uint64_t align_u;
    } ll;
    he_httpresp_head_t head;
    he_httpresp_field_fn field; /* NULL: fields are not wanted (no value copies) */
    void *ctx;
    bool head_request;
    uint8_t phase; /* HE_HR_* in httpresp.c */
    bool started;  /* a byte of the response arrived */
    bool head_pending, done_pending;
    int err; /* set by a callback */
    int ev;  /* the event a callback paused for */
    uint32_t head_bytes;
    uint64_t payload; /* body bytes delivered (and skipped) */
    /* the current execute call and span, for spans cut by a call */
    const char *buf, *buf_end, *body;
    size_t body_len;
    bool vcont;        /* the last value span ended at its call's end */
    bool in_chunk;     /* inside a chunk's data */
    uint8_t crlf_left; /* bytes of the CRLF after chunk data not yet seen */
    bool in_field;     /* between a field line's first name byte and its end */
    uint64_t fed;      /* bytes fed before this call */
    uint64_t line_start;
    uint32_t vlen;
    uint8_t nlen;
    bool name_over, value_seen, line_over;
    char name[HE_HTTPRESP_NAME_MAX + 1];
    char *value; /* HE_HTTPRESP_LINE_MAX + 1 bytes, the caller's, when field is set */
} he_httpresp_t;

/* value: a buffer of HE_HTTPRESP_LINE_MAX + 1 bytes for field values (NULL
 * with field NULL). */
void he_httpresp_init(he_httpresp_t *p, bool head_request, he_httpresp_field_fn field, void *ctx,
                      char *value);
/* Consumes up to len bytes (*used says how many) and returns the next
 * event, or -EPROTO (malformed), -E2BIG (heads too large), or the field
 * callback's error. Call again with the rest after HEADERS and BODY; with
 * len 0 it still reports a completion the last bytes made. Bytes after
 * DONE are not consumed (the next response's). */
int he_httpresp_feed(he_httpresp_t *p, const char *data, size_t len, size_t *used,
                     const char **body, size_t *body_len);
/* The peer closed: DONE if that ends the body, else -EPIPE. */
int he_httpresp_eof(he_httpresp_t *p);
/* How many of the next bytes are payload that may be dropped unseen (the
 * kernel's MSG_TRUNC): the rest of a Content-Length body or of the current
 * chunk, UINT64_MAX until close, else 0; and accounting for having done so
 * (n at most that). */
uint64_t he_httpresp_skippable(const he_httpresp_t *p);
void he_httpresp_skip(he_httpresp_t *p, uint64_t n);

#endif
