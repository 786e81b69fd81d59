/* Per-worker statistics. Each worker writes only its own he_stats_t (cache
 * line aligned, plain stores, no atomics on the hot path); the control
 * thread reads and sums them. Aligned 64-bit loads and stores do not tear
 * on x86-64 and arm64, which is all monitoring needs. */
#ifndef HE_STATS_H
#define HE_STATS_H

#include <stdint.h>

#include "cache/stats.h"
#include "segment/segment.h"

typedef enum he_stats_method {
    HE_STATS_METHOD_GET = 0,
    HE_STATS_METHOD_HEAD,
    HE_STATS_METHOD_OPTIONS,
    HE_STATS_METHOD_OTHER,
    HE_STATS_METHOD_COUNT
} he_stats_method_t;

typedef enum he_stats_err {
    HE_STATS_ERR_TIMEOUT_HEADER = 0,
    HE_STATS_ERR_TIMEOUT_KEEPALIVE,
    HE_STATS_ERR_TIMEOUT_SEND,
    HE_STATS_ERR_BAD_REQUEST,
    HE_STATS_ERR_RESET,
    HE_STATS_ERR_COUNT
} he_stats_err_t;

/* Log-linear latency histogram (HdrHistogram-like): values in
 * microseconds; each power-of-two range [2^k, 2^(k+1)) is split into
 * HE_HIST_SUB linear buckets, so any recorded value is known to within
 * 1/HE_HIST_SUB (3.1%). Values below HE_HIST_SUB us are exact. Covers up
 * to 2^HE_HIST_MAX_EXP us (about 18 minutes); larger values land in the
 * last bucket. See server/hist.c. */
#define HE_HIST_SUB_BITS 5
#define HE_HIST_SUB (1u << HE_HIST_SUB_BITS)
#define HE_HIST_MAX_EXP 30
#define HE_HIST_BUCKETS ((HE_HIST_MAX_EXP - HE_HIST_SUB_BITS + 2) * HE_HIST_SUB)

typedef struct he_hist {
    uint64_t count;
    uint64_t sum_us;
    uint64_t buckets[HE_HIST_BUCKETS];
} he_hist_t;

void he_hist_record(he_hist_t *h, uint64_t us);
/* Bucket index of a value, and the [lo, hi] value range of a bucket. */
unsigned he_hist_bucket(uint64_t us);
void he_hist_bucket_range(unsigned b, uint64_t *lo, uint64_t *hi);
/* Adds src into dst (the control thread sums workers this way). */
void he_hist_merge(he_hist_t *dst, const he_hist_t *src);
/* Value at quantile q (0..1): the upper bound of the bucket holding it. */
uint64_t he_hist_quantile(const he_hist_t *h, double q);

/* Why a TLS connection ended before or during its handshake
 * (tls_errors[]; each also counts in tls_handshake_errors). */
typedef enum he_stats_tls_err {
    HE_STATS_TLS_ERR_PLAIN_HTTP = 0, /* plain HTTP sent to a TLS port (answered 400) */
    HE_STATS_TLS_ERR_GARBAGE,        /* not a TLS record, or a malformed handshake message */
    HE_STATS_TLS_ERR_TRUNCATED,      /* ClientHello/handshake cut short: EOF, reset or timeout */
    HE_STATS_TLS_ERR_PROTOCOL,       /* no common version, suite, group or signature */
    HE_STATS_TLS_ERR_OTHER,
    HE_STATS_TLS_ERR_COUNT
} he_stats_tls_err_t;

/* What the signed-URL check (handler/auth.c) made of a request under an
 * auth rule: ok, or why it was refused (403; expired: 410). */
typedef enum he_stats_auth {
    HE_STATS_AUTH_OK = 0,
    HE_STATS_AUTH_MISSING,       /* no token */
    HE_STATS_AUTH_MALFORMED,     /* bad syntax, a duplicate field, two tokens */
    HE_STATS_AUTH_BAD_SIGNATURE, /* no key of the rule signed it (tampered, wrong key) */
    HE_STATS_AUTH_ACL,           /* signed, but for other paths */
    HE_STATS_AUTH_IP,            /* signed for another client address */
    HE_STATS_AUTH_NOT_YET_VALID, /* before its st */
    HE_STATS_AUTH_EXPIRED,       /* past its exp */
    HE_STATS_AUTH_COUNT
} he_stats_auth_t;
/* What a playlist rewrite found among the worker's kept outputs
 * (handler/auth_cache.c). */
typedef enum he_stats_auth_kept {
    HE_STATS_AUTH_KEPT_HIT = 0, /* sent as kept: no rewrite */
    HE_STATS_AUTH_KEPT_MISS,    /* not kept yet: rewritten (and kept, room and token allowing) */
    HE_STATS_AUTH_KEPT_BYPASS,  /* not keepable: a master, no ETag, auth_cache.entries 0 */
    HE_STATS_AUTH_KEPT_COUNT
} he_stats_auth_kept_t;
/* Why the server sent an HTTP/2 GOAWAY (http/http2.c). */
typedef enum he_stats_h2_goaway {
    HE_STATS_H2_GOAWAY_NO_ERROR = 0, /* shutdown, reload */
    HE_STATS_H2_GOAWAY_PROTOCOL,     /* invalid frames (RFC 9113 PROTOCOL_ERROR) */
    HE_STATS_H2_GOAWAY_FLOW_CONTROL, /* a window overrun */
    HE_STATS_H2_GOAWAY_COMPRESSION,  /* HPACK that does not decode */
    HE_STATS_H2_GOAWAY_RAPID_RESET,  /* streams opened and reset too fast (CVE-2023-44487) */
    HE_STATS_H2_GOAWAY_FLOOD,        /* SETTINGS/PING/PRIORITY/empty frames, CONTINUATION */
    HE_STATS_H2_GOAWAY_HEADERS,      /* a header list over http2.max_header_list */
    HE_STATS_H2_GOAWAY_STALL,        /* no DATA moved for http2.stall_timeout (zero window) */
    HE_STATS_H2_GOAWAY_OTHER,
    HE_STATS_H2_GOAWAY_COUNT
} he_stats_h2_goaway_t;

/* Every field is a uint64_t counter, the histograms too: the control
 * thread sums workers as arrays of uint64_t (he_metrics_stats_add), so a
 * new counter needs no summing code, only its line in server/metrics.c. */
typedef struct he_stats {
    uint64_t conn_accepted;
    uint64_t conn_refused;
    uint64_t purge_refused; /* PURGE on the viewer port: not loopback, no valid token */
    uint64_t conn_closed;
    uint64_t requests[HE_STATS_METHOD_COUNT];
    uint64_t status_class[6]; /* index 1..5 = 1xx..5xx */
    uint64_t kind[HE_SEG_KIND_COUNT];
    uint64_t bytes_out;
    uint64_t errors[HE_STATS_ERR_COUNT];
    uint64_t fcache_hits;
    uint64_t fcache_misses;
    uint64_t file_vmsplice_bytes; /* file bodies vmspliced, from a mapping or a copy (send.file_splice) */
    uint64_t file_copy_bytes;     /* of those, from a copy in huge pages (fd_cache.memory) */
    uint64_t slices_spent;        /* batches that outran ring.slice_us: new input went first */
    uint64_t turns_deferred;      /* bodies' next turns that waited behind new input */
    /* LL-HLS from root (handler/llhls*.c) */
    uint64_t llhls_held;     /* blocking reloads that waited for the playlist */
    uint64_t llhls_released; /* of those, answered when it changed */
    uint64_t llhls_timeouts; /* of those, 503 after three target durations */
    uint64_t llhls_rejected; /* 400: directives out of range (6.2.5.2) */
    uint64_t llhls_deltas;   /* delta updates made here (_HLS_skip) */
    uint64_t llhls_gzip;     /* playlists sent gzip-compressed */
    uint64_t llhls_events;   /* inotify events read for watched directories */
    uint64_t llhls_origin_blocking; /* blocking reloads sent to an origin */
    uint64_t llhls_origin_polls;    /* plain reloads sent to an origin for held requests */

    /* TLS (filled by the TLS listener) */
    uint64_t tls_handshakes;
    uint64_t tls_handshake_errors;
    uint64_t tls_conn_ktls;      /* connections whose sends went through kTLS */
    uint64_t tls_conn_userspace; /* connections on SSL_write */
    uint64_t tls_bytes_ktls;
    uint64_t tls_bytes_userspace;
    uint64_t tls_resumed;            /* handshakes that resumed a session (ticket or cache) */
    uint64_t tls_conn_ktls_fallback; /* kTLS was on but this cipher was not offloaded */
    uint64_t tls_errors[HE_STATS_TLS_ERR_COUNT];
    uint64_t tls_write_buffers_taken; /* tls.write_buffer: held = taken - freed */
    uint64_t tls_write_buffers_freed;
    uint64_t tls_conn_sealed; /* userspace connections whose records hlsedge sealed */

    /* HTTP/2 (http/http2.c); HTTP/1.x is the rest of conn_accepted and requests */
    uint64_t h2_conns;          /* connections that spoke h2 (ALPN or h2c) */
    uint64_t h2_conns_h2c;      /* of those, prior-knowledge h2c on a plain listener */
    uint64_t h2_requests;       /* streams answered */
    uint64_t h2_streams_opened; /* streams open = opened - closed */
    uint64_t h2_streams_closed;
    uint64_t h2_goaway[HE_STATS_H2_GOAWAY_COUNT];
    uint64_t h2_flow_stalls;    /* a stream had data and no flow-control window */
    uint64_t h2_stall_timeouts; /* connections closed: streams open, no DATA moved */
    uint64_t h2_stream_stalls;  /* streams reset: window at zero, nothing sent (stall_timeout) */
    uint64_t h2_refused;        /* streams refused past http2.max_concurrent_streams */

    /* access log ring */
    uint64_t log_dropped;

    /* signed URLs (handler/auth.c) */
    uint64_t auth[HE_STATS_AUTH_COUNT];
    uint64_t auth_rewrites; /* playlists sent with the token in their URIs */
    uint64_t auth_kept[HE_STATS_AUTH_KEPT_COUNT];
    uint64_t auth_kept_entries, auth_kept_bytes; /* gauges: what the worker keeps now */

    /* edge cache (server/cache_glue.h): zero without origin.urls */
    he_cache_stats_t cache;

    he_hist_t ttfb;  /* request parsed -> first response byte handed to the kernel */
    he_hist_t total; /* request parsed -> last byte handed to the kernel */
} __attribute__((aligned(64))) he_stats_t;

#endif
