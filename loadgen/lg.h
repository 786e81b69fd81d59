/* loadgen: internal declarations shared by hlsedge-loadgen's files.
 *
 * Layout: args.c (command line -> he_lg_config_t), url.c (URLs, endpoints),
 * httpc.c (HTTP/1.1 response parser), hist.c (latency histograms), abr.c
 * (rendition choice), rand.c (rng, popularity, weighted mix), sweep.c,
 * conn.c (one client connection over the ring), tls.c (OpenSSL, memory BIOs),
 * engine.c (a thread's ring and loop), audience.c (joins and leaves: --ramp,
 * --churn), viewer.c (HLS player), llhls.c (its LL-HLS part: --llhls), urls.c
 * (URL-list client), verify.c (per-URL checksums), run.c (threads, live line), report.c
 * (summary, JSON), main.c.
 *
 * Errors are negative errno values; HE_LG_AGAIN means "need more input". */
#ifndef HE_LG_H
#define HE_LG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "segment/httpresp.h"

#define HE_LG_AGAIN 1 /* not an error: more input needed */

#define HE_LG_MAX_RENDITIONS 16
#define HE_LG_MAX_CPUS 256
#define HE_LG_URL_MAX 2048
#define HE_LG_HOST_MAX 256
#define HE_LG_MAX_ENDPOINTS 256

/* ---------------------------------------------------------------- rand.c */

typedef struct he_lg_rng {
    uint64_t s;
} he_lg_rng_t;

void he_lg_rng_seed(he_lg_rng_t *r, uint64_t seed);
uint64_t he_lg_rng_next(he_lg_rng_t *r);
double he_lg_rng_double(he_lg_rng_t *r); /* [0, 1) */

/* A discrete distribution over n items, sampled by inverse CDF. */
typedef struct he_lg_pick {
    double *cdf;
    size_t n;
} he_lg_pick_t;

/* Zipf with exponent s over n items (rank 1 most popular); s == 0 is uniform. */
int he_lg_pick_init_zipf(he_lg_pick_t *p, size_t n, double s);
/* Arbitrary non-negative weights, at least one positive. */
int he_lg_pick_init_weights(he_lg_pick_t *p, const double *w, size_t n);
size_t he_lg_pick_sample(const he_lg_pick_t *p, he_lg_rng_t *r);
double he_lg_pick_prob(const he_lg_pick_t *p, size_t i);
void he_lg_pick_free(he_lg_pick_t *p);

/* ---------------------------------------------------------------- hist.c */

/* Log-linear histogram in the manner of HdrHistogram: values below 2^SUB are
 * exact; above, each power of two is split into 2^SUB equal buckets, so a
 * bucket's width is at most value / 2^SUB (0.78% for SUB = 7). */
#define HE_LG_HIST_SUB_BITS 7
#define HE_LG_HIST_SUB (1u << HE_LG_HIST_SUB_BITS)
#define HE_LG_HIST_BUCKETS ((65 - HE_LG_HIST_SUB_BITS) * HE_LG_HIST_SUB)

typedef struct he_lg_hist {
    uint64_t *counts; /* HE_LG_HIST_BUCKETS */
    uint64_t count, min, max;
    double sum;
} he_lg_hist_t;

int he_lg_hist_init(he_lg_hist_t *h);
void he_lg_hist_free(he_lg_hist_t *h);
void he_lg_hist_reset(he_lg_hist_t *h);
void he_lg_hist_record(he_lg_hist_t *h, uint64_t v);
void he_lg_hist_merge(he_lg_hist_t *dst, const he_lg_hist_t *src);
/* Bucket of a value and the inclusive range of values a bucket holds. */
unsigned he_lg_hist_index(uint64_t v);
uint64_t he_lg_hist_bucket_lo(unsigned idx);
uint64_t he_lg_hist_bucket_hi(unsigned idx);
/* Value at percentile p (0..100]: the highest value equivalent to the
 * sample of rank ceil(p/100 * count), clamped to [min, max]. 0 if empty. */
uint64_t he_lg_hist_percentile(const he_lg_hist_t *h, double p);
double he_lg_hist_mean(const he_lg_hist_t *h);

/* ---------------------------------------------------------------- httpc.c */

typedef struct he_lg_http_head {
    int status;
    int minor;              /* HTTP/1.minor */
    int64_t content_length; /* -1 if absent */
    bool chunked;
    bool keep_alive;
    size_t head_len; /* bytes up to and including the blank line */
    he_httpresp_t hr; /* the parser, stopped after the head */
} he_lg_http_head_t;

/* Parses a response head from buf (segment/httpresp.h: interim 1xx heads
 * before it are skipped and counted in head_len). Returns HE_LG_AGAIN when
 * the blank line has not arrived, 0 with h filled, or -EINVAL for a
 * malformed head (bad status line, bad or repeated Content-Length, a bad
 * header line). */
int he_lg_http_parse_head(const char *buf, size_t len, he_lg_http_head_t *h);

typedef enum he_lg_body_mode {
    HE_LG_BODY_NONE = 0, /* 1xx, 204, 304: no body */
    HE_LG_BODY_LENGTH,
    HE_LG_BODY_CHUNKED,
    HE_LG_BODY_EOF /* read until the server closes */
} he_lg_body_mode_t;

typedef struct he_lg_body {
    he_lg_body_mode_t mode;
    uint64_t payload; /* decoded payload bytes so far */
    bool done;
    he_httpresp_t hr; /* the head's parser, going on with the body */
} he_lg_body_t;

typedef void (*he_lg_sink_fn)(void *ctx, const char *p, size_t n);

void he_lg_body_init(he_lg_body_t *b, const he_lg_http_head_t *h);
/* Feeds wire bytes of the body; payload goes to sink (may be NULL). Returns
 * the bytes consumed (fewer than n only once done: what follows is not this
 * response's), or -EINVAL for bad chunked framing. */
ssize_t he_lg_body_feed(he_lg_body_t *b, const char *p, size_t n, he_lg_sink_fn sink, void *ctx);
/* How many of the next wire bytes are pure payload that may be discarded
 * unseen (UINT64_MAX for read-until-close), and accounting for doing so. */
uint64_t he_lg_body_skippable(const he_lg_body_t *b);
void he_lg_body_skip(he_lg_body_t *b, uint64_t n);
/* The server closed: 0 if that ends the body, -EPIPE if it truncates it. */
int he_lg_body_eof(he_lg_body_t *b);

/* ---------------------------------------------------------------- url.c */

typedef struct he_lg_url {
    bool tls;
    char host[HE_LG_HOST_MAX]; /* without brackets for IPv6 */
    uint16_t port;
    char target[HE_LG_URL_MAX]; /* origin-form, "/" when the URL has no path */
    size_t target_len;
} he_lg_url_t;

/* Parses http://host[:port][/path][?query] or https://...; the target is
 * "/" when the URL has no path. -EINVAL, or -ENAMETOOLONG. */
int he_lg_url_parse(const char *s, he_lg_url_t *u);

typedef struct he_lg_endpoint {
    bool tls;
    char host[HE_LG_HOST_MAX];
    uint16_t port;
    char hosthdr[HE_LG_HOST_MAX + 16]; /* Host: header value */
    struct sockaddr_storage addr;
    socklen_t addrlen;
} he_lg_endpoint_t;

/* Process-wide endpoint table, resolved once per host:port. Returns an
 * index >= 0 or a negative errno (-EHOSTUNREACH when resolution fails). */
int he_lg_endpoint_get(const char *host, uint16_t port, bool tls);
const he_lg_endpoint_t *he_lg_endpoint_at(int idx);
void he_lg_endpoints_reset(void);

/* ---------------------------------------------------------------- abr.c */

typedef struct he_lg_ewma {
    double alpha, estimate, total_weight;
} he_lg_ewma_t;

typedef struct he_lg_abr {
    he_lg_ewma_t fast, slow;
    unsigned samples;
} he_lg_abr_t;

#define HE_LG_ABR_SAFETY 0.8      /* use 80% of the estimate */
#define HE_LG_ABR_UP_BUFFER_S 8.0 /* up-switch only with this much buffer */
#define HE_LG_ABR_MIN_SAMPLES 2

void he_lg_abr_init(he_lg_abr_t *a);
/* One download: bytes in ns, weighted by the seconds of media it holds. */
void he_lg_abr_sample(he_lg_abr_t *a, uint64_t bytes, uint64_t ns, double media_s);
double he_lg_abr_estimate(const he_lg_abr_t *a); /* bits/s, 0 if unknown */
/* Next rendition given each rendition's BANDWIDTH (any order), the current
 * one and the buffer level in seconds (buffer_s < 0: no player buffer, as at
 * line rate). */
int he_lg_abr_choose(const he_lg_abr_t *a, const uint64_t *bw, size_t n, int cur, double buffer_s,
                     double buffer_max_s);

/* ---------------------------------------------------------------- args.c */

typedef enum he_lg_mode { HE_LG_MODE_AUTO = 0, HE_LG_MODE_HLS, HE_LG_MODE_URLS } he_lg_mode_t;
typedef enum he_lg_pace { HE_LG_PACE_REALTIME = 0, HE_LG_PACE_LINERATE } he_lg_pace_t;
typedef enum he_lg_rend { HE_LG_REND_ABR = 0, HE_LG_REND_FIXED, HE_LG_REND_MIX } he_lg_rend_t;
typedef enum he_lg_sla_metric { HE_LG_SLA_TOTAL = 0, HE_LG_SLA_TTFB } he_lg_sla_metric_t;

typedef struct he_lg_config {
    he_lg_mode_t mode;
    char **urls;
    size_t nurls;
    unsigned viewers;
    unsigned connections;
    unsigned threads;
    int cpus[HE_LG_MAX_CPUS];
    unsigned ncpus;
    double duration_s; /* 0: bounded by requests only */
    uint64_t max_requests;
    he_lg_pace_t pace;
    bool pace_set;
    he_lg_rend_t rend;
    unsigned rend_fixed;
    double rend_weights[HE_LG_MAX_RENDITIONS];
    unsigned nrend_weights;
    /* --popularity given: in --mode urls each request is drawn, not walked in turn */
    bool popularity_set;
    double zipf_s; /* 0: uniform */
    int live;      /* -1 from the playlist, 0 VOD, 1 live */
    double buffer_s;
    double timeout_s;
    bool verify, json, quiet, no_trunc, insecure;
    bool http2; /* --http2: each connection's requests are streams of one HTTP/2 session */
    bool sweep;
    unsigned sweep_start, sweep_end, sweep_step;
    double sla_ms;
    he_lg_sla_metric_t sla_metric;
    uint64_t seed;
    char *url_file;
    double ramp_s;  /* --ramp: first joins spread over this long (0: at once) */
    double churn_s; /* --churn: mean session length (0: viewers stay) */
    bool llhls;     /* --llhls: blocking reloads and parts (LL-HLS) */
} he_lg_config_t;

/* Parses argv into cfg (defaults first). Returns 0, 1 when help was asked
 * for (printed to out), or -EINVAL with a one-line message in err. */
int he_lg_args_parse(int argc, char **argv, he_lg_config_t *cfg, char *err, size_t errlen,
                     FILE *out);
void he_lg_args_free(he_lg_config_t *cfg);
void he_lg_args_usage(FILE *f);
/* Parses a CPU list "1", "0-3", "1,3,5-6". Returns the count or -EINVAL. */
int he_lg_parse_cpus(const char *s, int *cpus, unsigned cap);
/* Parses a duration "10", "10s", "500ms", "2m", "1h" into seconds. */
int he_lg_parse_duration(const char *s, double *out);

/* ---------------------------------------------------------------- sweep.c */

typedef struct he_lg_sweep_point {
    unsigned clients;
    double gbps;
    double rps;
    double p99_ms;
    uint64_t errors;
} he_lg_sweep_point_t;

int he_lg_sweep_parse(const char *s, unsigned *start, unsigned *end, unsigned *step);
/* Index of the point with the highest throughput (Gbit/s, then req/s) whose
 * p99 is at most sla_ms and that had no errors; -1 if none qualifies. */
int he_lg_sweep_best(const he_lg_sweep_point_t *pts, size_t n, double sla_ms);

#endif
