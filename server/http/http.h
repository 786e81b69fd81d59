/* http: requests and responses, whatever the protocol.
 *
 *   http1.c     HTTP/1.1 with llhttp: the protocol table net calls
 *               (he_http1_proto), pipelining, keep-alive, h2c's preface
 *   http2.c     HTTP/2 with nghttp2: the session, streams, input, limits
 *               and attacks (he_http2_proto); http2_out.c its output:
 *               heads as HPACK lists, DATA frames from the body sources,
 *               the units the send path pulls, priorities
 *   response.c  the one response-head builder, error pages, conditionals
 *               and ranges against a representation, the end of a response
 *               (counters, latency, access log)
 *   access.c    the access-log record of a response
 *   http_util.c pure helpers: ranges, validators, dates (http_util.h)
 *
 * A protocol turns wire bytes into a he_req_t and hands it to the
 * request handler (he_http_set_handler, by the layer above); handlers
 * answer through he_http_respond and never see the parser. */
#ifndef HE_HTTP_H
#define HE_HTTP_H

#include <llhttp.h>
#include <stdbool.h>
#include <stdint.h>

#include "segment/segment.h"
#include "server/net/net.h"

#define HE_HDR_SMALL 128

/* One request, protocol-neutral. */
typedef struct he_req {
    he_conn_t *conn;
    char *url; /* request-target as sent (origin form), not NUL-terminated */
    uint32_t url_len;
    uint8_t method; /* llhttp_method_t */
    uint8_t http_major, http_minor;
    bool keepalive;
    bool has_body;
    /* headers of interest; a value cut to its buffer is dropped when the
     * headers are complete (a cut Range or If-Range drops the range), so
     * a cut can only turn a conditional or range request into a full 200.
     * No protocol clears these buffers (range to authz, and accept_enc)
     * for a new request, only their lengths: keep other fields out of them */
    char range[HE_HDR_SMALL];
    char inm[256];
    char ims[40];
    char im[256];
    char ius[40];
    char if_range[HE_HDR_SMALL];
    char cookie[512]; /* Cookie lines joined by "; " (handler/auth.c: a token cookie) */
    char via[512];    /* Via: loops are refused (508), the rest goes to the origin */
    char authz[HE_CONF_TOKEN_MAX + 32]; /* Authorization (PURGE's bearer token) */
    uint16_t range_len, inm_len, ims_len, im_len, ius_len, if_range_len, cookie_len, via_len;
    char accept_enc[128]; /* Accept-Encoding (handler/llhls.c: gzip playlists) */
    uint16_t authz_len, accept_enc_len;
    uint8_t has_origin;
    uint64_t t_start_ns; /* first byte of the request seen */

    /* while the headers are read (any protocol feeds them the same way) */
    uint32_t header_bytes; /* request line + header bytes seen so far */
    uint8_t too_long;      /* 414 or 431 pending */
    int8_t cur_hdr;        /* which header the current value belongs to */
    char field[32];
    uint8_t field_len;
    uint8_t field_overflow;
    bool value_more;   /* the current header line's value already has bytes */
    bool chunked;      /* a chunked body, read (and so checked) before the answer */
    uint32_t body_bytes; /* of that body, so far */
    uint8_t host_seen; /* Host lines, counted up to 2 */
    uint16_t hdr_cut;  /* 1 << HE_HDR_x: that value was cut to its buffer */

    /* the answer */
    int status;
    uint16_t head_len;  /* of the bytes sent, the head (access log) */
    uint8_t kind;       /* he_seg_kind_t of what was served, for the counters */
    uint8_t cache_st;   /* he_alog cache status, for the access log */
    uint8_t route_next; /* handler/: the next handler to ask */
    bool origin_failed; /* handler/: the edge cache could not get it */
    /* handler/auth.c: a valid token's parameters, taken out of url
     * ("name=value[&name=value]" as sent, or "name=value" from a cookie),
     * for the playlist rewrite, the origin (a rule's to_origin) and the
     * access log (which shows each value as "-"); 0: none */
    const char *auth_text;
    uint16_t auth_text_len;
    bool auth_propagate; /* playlists answering r carry auth_text in their URIs */
    /* with auth_propagate: the rule that passed r, as an index into the
     * auth rules of configuration generation auth_gen */
    uint16_t auth_rule;
    unsigned auth_gen;

    /* kept across requests (never cleared by a protocol) */
    struct he_h2_stream *h2; /* HTTP/2: the stream r is; NULL on HTTP/1.x */
    /* A handler's per-request state (the edge cache's he_cconn_t), set by
     * that handler; on HTTP/1.x the connection's slot's, on HTTP/2 the
     * stream's, freed with the stream by hctx_free. */
    void *hctx;
    void (*hctx_free)(he_worker_t *w, struct he_req *r);
} he_req_t;

enum {
    HE_HDR_NONE = -1,
    HE_HDR_RANGE = 0,
    HE_HDR_INM,
    HE_HDR_IMS,
    HE_HDR_IM,
    HE_HDR_IUS,
    HE_HDR_IF_RANGE,
    HE_HDR_ORIGIN,
    HE_HDR_HOST,
    HE_HDR_COOKIE,
    HE_HDR_VIA,
    HE_HDR_AUTHZ,
    HE_HDR_ACCEPT_ENCODING,
    HE_HDR_COUNT
};

/* HTTP/1.1's per-connection state (he_conn_t.proto). h2c_checked: the
 * first bytes were looked at for h2c's preface (http2.h2c). */
typedef struct he_http1_conn {
    llhttp_t parser;
    /* the head's line ends as they go by (he_http1_scan_head) */
    bool head_done;  /* past the head's blank line: the rest is llhttp's */
    bool head_bytes; /* the head has begun (CRLFs before it are ignored) */
    bool prev_cr;
    uint8_t crlfs; /* line ends in a row */
    bool h2c_checked;
    he_req_t req;
    char url[]; /* max_uri_bytes + 1 */
} he_http1_conn_t;

static inline he_req_t *he_http_req(he_conn_t *c)
{
    return &((he_http1_conn_t *)c->proto)->req;
}

/* ---------------------------------------------------------------- protocols */

extern const he_proto_t he_http1_proto;
/* HTTP/2 (http2.c): the server's proto_h2, for ALPN h2 and h2c. */
extern const he_proto_t he_http2_proto;
/* The Date header's clock: a worker hook for net (setup and tick). */
extern const he_worker_hooks_t he_http_worker_hooks;

/* Who answers requests: handler/'s router, set once at start-up. */
typedef void (*he_http_handler_fn)(he_worker_t *w, he_req_t *r);
void he_http_set_handler(he_http_handler_fn fn);

/* http1.c, exposed for the unit test and the fuzz target */
void he__http1_init(he_conn_t *c);
/* Parses data; returns bytes consumed. Stops after a complete request
 * (*req_ready set) or on error (*err set to the status to answer, 400,
 * 414 or 431). */
size_t he__http1_parse(he_worker_t *w, he_conn_t *c, const char *data, size_t len, bool *req_ready,
                       int *err);
/* The request was answered: the parser reads on. */
void he__http1_next(he_conn_t *c);
/* Any protocol: a piece of the value of header r->cur_hdr (HE_HDR_x),
 * appended to its buffer (a repeated field joins its list with ","); and,
 * once the headers are complete, values that were cut dropped. */
void he__http_req_value(he_req_t *r, const char *at, size_t n);
/* Any protocol: the HE_HDR_x of a field name (any case), or HE_HDR_NONE. */
int8_t he__http_hdr_id(const char *name, size_t len);
void he__http_req_drop_cut(he_req_t *r);
/* Any protocol: hands a parsed request to the handler (the router). */
void he__http_handle(he_worker_t *w, he_req_t *r);

/* ---------------------------------------------------------------- responses */

/* What a response head says; he_http_respond spells it for the protocol.
 * Fields left zero are not sent. */
typedef struct he_http_head {
    int status;
    const char *ctype;  /* NULL: from type */
    he_seg_type_t type; /* Cache-Control policy and default Content-Type */
    bool no_ctype;      /* no Content-Type (204, a file's 416); never on a 304 */
    bool has_clen;
    uint64_t clen;
    const char *cenc; /* the stored bytes' Content-Encoding; NULL or "": identity */
    bool accept_ranges;
    bool range;       /* Content-Range: bytes first-last/size */
    bool unsatisfied; /* Content-Range: bytes * /size (416) */
    uint64_t first, last, size;
    const char *etag; /* NULL: none */
    size_t etag_len;
    const char *last_modified; /* NULL: none */
    size_t last_modified_len;
    bool cache_control;  /* our Cache-Control for type */
    bool expose_headers; /* CORS: Access-Control-Expose-Headers */
    const char *extra;   /* whole header lines, CRLF-terminated */
    bool has_age;        /* Age: age_s (RFC 9111 5.1), on answers from a cache */
    uint64_t age_s;
} he_http_head_t;

/* Sends head and body (NULL: none) as the answer to r. The body source
 * is the response's from now on (released when it ends). On a head too
 * large for the protocol the connection closes. */
void he_http_respond(he_worker_t *w, he_req_t *r, const he_http_head_t *h, he_body_t *body);
/* A short text/plain page for status (400, 403, 404, 405, 412, 502 ...). */
void he_http_respond_error(he_worker_t *w, he_req_t *r, int status);
#define HE_HTTP_ERROR_BODY 128
/* The body source of r's response has more bytes (a fill's DATA) or
 * failed: sending goes on. */
void he_http_resume(he_worker_t *w, he_req_t *r);

/* The fields of a head, in the order HTTP/1.1 sends them, for the
 * protocols to spell (HE_HTTP_F_EXTRA: whole CRLF-terminated lines). */
typedef enum he_http_field {
    HE_HTTP_F_SERVER = 0,
    HE_HTTP_F_DATE,
    HE_HTTP_F_ACAO,
    HE_HTTP_F_ACEH,
    HE_HTTP_F_TAO,
    HE_HTTP_F_EXTRA,
    HE_HTTP_F_CONTENT_TYPE,
    HE_HTTP_F_CONTENT_LENGTH,
    HE_HTTP_F_CONTENT_ENCODING,
    HE_HTTP_F_VARY,
    HE_HTTP_F_ACCEPT_RANGES,
    HE_HTTP_F_CONTENT_RANGE,
    HE_HTTP_F_LAST_MODIFIED,
    HE_HTTP_F_ETAG,
    HE_HTTP_F_AGE,
    HE_HTTP_F_CACHE_CONTROL,
    HE_HTTP_F_COUNT
} he_http_field_t;
typedef struct he_http_name {
    const char *name; /* "content-type" */
    uint8_t len;
} he_http_name_t;
extern const he_http_name_t he__http_field_h2[HE_HTTP_F_COUNT];
typedef void (*he_http_field_fn)(void *ctx, he_http_field_t f, const char *v, size_t n);
void he__http_head_fields(const he_worker_t *w, const he_http_head_t *h, he_http_field_fn fn,
                          void *ctx);

/* http2_out.c: he_http_respond, he_http_respond_error (body: the page)
 * and he_http_resume for a stream. */
void he__h2_respond(he_worker_t *w, he_req_t *r, const he_http_head_t *h, he_body_t *body);
void he__h2_respond_error(he_worker_t *w, he_req_t *r, const he_http_head_t *h, const char *body,
                          size_t len);
void he__h2_resume(he_worker_t *w, he_req_t *r);

/* A representation's validators and size against r's conditionals and
 * Range (RFC 9110 13.2.2, 14.2): 304, 412, 416, 206 (with [*first,
 * *last]) or 200 (the whole: [0, size-1]). mtime 0: not known (date
 * conditions are skipped); range_mtime: the strong date If-Range matches. */
int he_http_evaluate(const he_req_t *r, const char *etag, size_t etag_len, time_t mtime,
                     time_t range_mtime, uint64_t size, uint64_t *first, uint64_t *last);

/* response.c: the response to r on c ended (the protocol's sent()):
 * counters, latency histograms, the access log. */
void he__http_response_end(he_worker_t *w, he_conn_t *c, he_req_t *r);

/* access.c: the access-log record of the response c just finished. */
void he__http_alog_push(he_worker_t *w, const he_conn_t *c, const he_req_t *r, uint64_t end_ns,
                        uint64_t ttfb_us, uint64_t total_us);

#endif
