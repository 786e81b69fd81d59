/* conf: the typed configuration. Built-in defaults, YAML files parsed with
 * libyaml against one table of keys (name, type, default, range, setter),
 * errors that point at file:line:col. */
#ifndef HE_CONF_H
#define HE_CONF_H

#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "segment/segment.h"

#define HE_CONF_MAX_LISTEN 16
#define HE_CONF_MAX_CPUS 256
#define HE_CONF_ERR_MAX 512
#define HE_CONF_MAX_CERTS 16
#define HE_CONF_MAX_ORIGINS 8

/* origin.select: which origin a miss tries first. */
typedef enum he_conf_origin_select {
    HE_CONF_SELECT_ORDERED = 0, /* in the order of origin.urls */
    HE_CONF_SELECT_HASH         /* consistent hashing of the key's path */
} he_conf_origin_select_t;

/* cache.ram_huge_pages: what the RAM tier's arena is made of. */
typedef enum he_conf_ram_huge {
    HE_CONF_RAM_HUGE_AUTO = 0, /* huge pages unless kTLS listeners want the memfd's sendfile */
    HE_CONF_RAM_HUGE_ON,       /* anonymous transparent huge pages */
    HE_CONF_RAM_HUGE_OFF       /* the memfd (cache.ram_sendfile) or plain anonymous memory */
} he_conf_ram_huge_t;

/* An origin.urls entry is "URL" or "URL weight=N" (N in 1..HE_CONF_WEIGHT_MAX).
 * Splits it: *url_len is the URL's length, *weight its weight (1 when not
 * given). 0, or -EINVAL with *what saying what was expected. */
#define HE_CONF_WEIGHT_MAX 1000
int he_conf_origin_url_split(const char *s, size_t len, size_t *url_len, unsigned *weight,
                             const char **what);
#define HE_CONF_MAX_STORES 8
#define HE_CONF_MAX_KEY_PARAMS 8
#define HE_CONF_MAX_ALLOW 16
#define HE_CONF_TOKEN_MAX 255

typedef enum he_log_level {
    HE_LOG_ERROR = 0,
    HE_LOG_WARN,
    HE_LOG_INFO,
    HE_LOG_DEBUG
} he_log_level_t;

typedef enum he_access_log_format {
    HE_ACCESS_LOG_COMBINED = 0,
    HE_ACCESS_LOG_JSON
} he_access_log_format_t;

/* Kernel features that features.disable can force off, so that tests run
 * the fallbacks and an operator can step around a kernel that misbehaves.
 * The names are those of the server's probe (he_features_t, /stats); bit
 * HE_CONF_FEATURE_BIT(f) of he_conf_t.features_disabled is feature f. */
typedef enum he_conf_feature {
    HE_CONF_FEATURE_SINGLE_ISSUER = 0,
    HE_CONF_FEATURE_DEFER_TASKRUN,
    HE_CONF_FEATURE_COOP_TASKRUN,
    HE_CONF_FEATURE_MULTISHOT_ACCEPT,
    HE_CONF_FEATURE_RECV_MULTISHOT,
    HE_CONF_FEATURE_BUF_RING,
    HE_CONF_FEATURE_FIXED_FILES,
    HE_CONF_FEATURE_SEND_ZC,
    HE_CONF_FEATURE_ZC_REPORT_USAGE,
    HE_CONF_FEATURE_OPENAT2_BENEATH,
    HE_CONF_FEATURE_REUSEPORT_CBPF,
    HE_CONF_FEATURE_KTLS,
    HE_CONF_FEATURE_MIN_TIMEOUT,
    HE_CONF_FEATURE_COUNT
} he_conf_feature_t;

#define HE_CONF_FEATURE_BIT(f) ((uint32_t)1 << (f))
#define HE_CONF_FEATURES_ALL (HE_CONF_FEATURE_BIT(HE_CONF_FEATURE_COUNT) - 1)

/* "single_issuer", ... indexed by he_conf_feature_t, then NULL. */
extern const char *const he_conf_feature_names[];

typedef struct he_conf_listen {
    struct sockaddr_storage addr; /* AF_INET or AF_INET6, port set */
    socklen_t addrlen;
    char text[64]; /* as written, normalized: "127.0.0.1:8080", "[::1]:8080" */
} he_conf_listen_t;


/* auth: signed-URL rules (conf/auth.c), matched by path prefix, longest
 * first. Each rule names its scheme, where the token travels, the keys
 * that may have signed it (any one validates: rotation) and whether
 * playlists served under it carry the token into their URIs. */
#define HE_CONF_MAX_AUTH 16
#define HE_CONF_AUTH_MAX_KEYS 8
#define HE_CONF_AUTH_KEY_MAX 64 /* bytes, once hex-decoded */
#define HE_CONF_AUTH_MAX_HOSTS 8

typedef enum he_conf_auth_scheme {
    HE_CONF_AUTH_EDGEAUTH = 0, /* Akamai EdgeAuth 2.0 tokens, HMAC-SHA256 */
    HE_CONF_AUTH_SECURE_LINK,  /* nginx secure_link_md5 */
} he_conf_auth_scheme_t;

typedef struct he_conf_auth {
    char prefix[256]; /* "/live/": the request paths the rule covers */
    unsigned scheme;  /* he_conf_auth_scheme_t */
    char param[64];   /* edgeauth: the query parameter (and cookie) of the token */
    unsigned char keys[HE_CONF_AUTH_MAX_KEYS][HE_CONF_AUTH_KEY_MAX];
    unsigned key_len[HE_CONF_AUTH_MAX_KEYS];
    unsigned nkeys;
    bool propagate; /* playlists carry the token into every URI */
    bool cookie;    /* edgeauth: also from a cookie named param */
    bool to_origin; /* the token goes on to the origin (default: stripped) */
    unsigned clock_skew_ms;
    /* secure_link: the MD5 input, over $expires $uri $remote_addr $secret */
    char template_[256];
    char md5_param[64], expires_param[64];
    /* absolute URIs to these hosts get the token too (others never) */
    char propagate_hosts[HE_CONF_AUTH_MAX_HOSTS][256];
    unsigned npropagate_hosts;
} he_conf_auth_t;

typedef struct he_conf {
    char file[PATH_MAX]; /* "" when running on built-in defaults */
    unsigned generation; /* bumped by the caller on each successful reload */

    /* listen: a list (or one string) of "host:port"; IPv6 as "[::]:8080" */
    he_conf_listen_t listen[HE_CONF_MAX_LISTEN];
    unsigned nlisten;

    /* workers: positive integer or "auto" (0 here = one per online CPU) */
    unsigned workers;
    /* cpus: "auto" (ncpus 0: worker i on the i-th allowed CPU) or a list */
    int cpus[HE_CONF_MAX_CPUS];
    unsigned ncpus;
    bool pin; /* pin worker threads to their CPU */
    /* control_cpus: "auto" (ncontrol_cpus 0: the allowed CPUs no worker is
     * pinned to, or all of them when workers use every one) or a list */
    int control_cpus[HE_CONF_MAX_CPUS];
    unsigned ncontrol_cpus;
    bool numa; /* allocate worker memory on the CPU's NUMA node */

    char root[PATH_MAX]; /* library directory */

    /* limits */
    unsigned max_connections;  /* whole server; split evenly across workers */
    unsigned max_header_bytes; /* request line + headers */
    unsigned max_uri_bytes;    /* request-target */

    /* timeouts, milliseconds */
    unsigned header_timeout_ms;
    unsigned keepalive_timeout_ms;
    unsigned send_timeout_ms;
    unsigned drain_timeout_ms;

    char cors_allow_origin[256];                /* "" = no CORS headers */
    char cors_timing_allow_origin[256];         /* "" = no Timing-Allow-Origin */
    char cache_control[HE_SEG_TYPE_COUNT][128]; /* "" = no header */

    he_log_level_t log_level;
    char error_log[PATH_MAX];  /* "" = stderr */
    char access_log[PATH_MAX]; /* "" = off */
    he_access_log_format_t access_log_format;

    he_conf_listen_t admin_listen; /* admin.listen; port 0 = off */
    /* admin.allow: who may talk to the admin listener (he_conf_addr_allowed) */
    char admin_allow[HE_CONF_MAX_ALLOW][64];
    unsigned nadmin_allow;
    /* admin.token_file, and the bearer token read from it when the
     * configuration loads ("" = none): guards POST /purge and PURGE from
     * other than loopback */
    char admin_token_file[PATH_MAX];
    char admin_token[HE_CONF_TOKEN_MAX + 1];
    bool stats_latency;            /* stats.latency: per-worker latency histograms */

    unsigned fd_cache_entries;  /* per worker */
    unsigned fd_cache_valid_ms; /* revalidate (stat) an open file after this */
    uint64_t fd_cache_memory;   /* copies of files in huge pages, all workers together; 0 = none */
    unsigned auth_cache_entries; /* tokenised playlists kept per worker (handler/auth_cache.c) */
    uint64_t auth_cache_bytes;   /* and the memory they may take */

    /* tls: HTTPS listeners. Each certificate file is PEM holding the chain
     * and its private key (the first one is the default for clients without
     * SNI); SNI names come from the certificates themselves. An OCSP
     * response in DER next to a certificate, "<file>.ocsp", is stapled. */
    he_conf_listen_t tls_listen[HE_CONF_MAX_LISTEN];
    unsigned ntls_listen;
    char tls_certs[HE_CONF_MAX_CERTS][PATH_MAX];
    unsigned ntls_certs;
    bool tls_ktls;                     /* tls.ktls: use kernel TLS when available */
    bool tls_seal_records;             /* tls.seal_records: seal records without kTLS */
    bool tls_tickets;                  /* tls.session_tickets */
    unsigned tls_ticket_rotate_ms;     /* tls.ticket_rotate: new ticket key this often */
    unsigned tls_session_cache;        /* tls.session_cache: entries, 0 = off */
    unsigned tls_handshake_timeout_ms; /* tls.handshake_timeout */
    uint64_t tls_first_record;         /* tls.first_record: bytes in a connection's first
                                        * record and the first after 1 s idle; 0 = off */
    uint64_t tls_write_buffer;         /* tls.write_buffer: userspace TLS records gathered
                                        * into writes of this size; 0 = a write each */

    /* cache: the RAM and SSD tiers */
    uint64_t cache_ram_bytes;      /* cache.ram_size, split across NUMA nodes; 0 = no RAM tier */
    uint64_t cache_ram_object_max; /* cache.ram_object_max: larger objects skip RAM */
    char cache_stores[HE_CONF_MAX_STORES][PATH_MAX]; /* cache.ssd: directories */
    uint64_t cache_store_bytes[HE_CONF_MAX_STORES];  /* their size limits */
    unsigned ncache_stores;
    bool cache_admission; /* cache.admission: keep one-hit wonders out */

    /* origin: where misses come from */
    char origin_urls[HE_CONF_MAX_ORIGINS][512]; /* origin.urls: http:// or https:// bases */
    unsigned norigin_urls;
    bool origin_first; /* sources: origin before root (default root first) */
    unsigned origin_connect_timeout_ms;
    unsigned origin_read_timeout_ms;
    unsigned origin_total_timeout_ms;
    unsigned origin_retries; /* further origins to try after a failure */
    unsigned origin_pool;    /* keep-alive connections per worker per origin */
    /* origin.tls_ca_file: CAs (PEM) for https:// origins; "" = the system's store */
    char origin_tls_ca_file[PATH_MAX];
    /* parent selection (beyond one box): origin.select, origin.down_time */
    unsigned origin_select;       /* he_conf_origin_select_t */
    unsigned origin_down_time_ms; /* a failed parent is skipped this long */
    unsigned cache_negative_ttl_ms; /* cache.negative_ttl: 404s */
    unsigned cache_stale_while_revalidate_ms;
    unsigned cache_stale_if_error_ms;
    unsigned cache_live_fraction_pct; /* live media playlists fresh for this % of target duration */
    bool llhls_enabled; /* llhls.enabled: blocking reloads and deltas from root */
    bool llhls_gzip;    /* llhls.gzip: gzip live playlists when accepted */
    /* cache.ttl.<kind>: override the origin's freshness; 0 = use the origin's */
    unsigned cache_ttl_ms[HE_SEG_KIND_COUNT];
    char cache_key_params[HE_CONF_MAX_KEY_PARAMS][64]; /* query parameters in the cache key */
    unsigned ncache_key_params;
    unsigned prefetch_segments; /* cache.prefetch: segments N+1..N+k */
    /* RAM-tier spans at least cache.zero_copy_min bytes long go with SEND_ZC */
    uint64_t cache_zero_copy_min;
    bool cache_zero_copy_adapt; /* cache.zero_copy_adapt: plain sends once the kernel copied */
    bool cache_ram_sendfile;    /* cache.ram_sendfile: the RAM tier in a memfd, hits by sendfile */
    bool cache_ram_splice;      /* cache.ram_splice: plain-TCP hits by vmsplice of its mapping */
    he_conf_ram_huge_t cache_ram_huge_pages; /* cache.ram_huge_pages */
    uint64_t send_sendfile_chunk; /* send.sendfile_chunk: most one sendfile moves; 0 = what the socket takes */
    bool send_cork;               /* send.cork: TCP_CORK while a file body goes out */
    bool send_file_splice;        /* send.file_splice: file bodies by vmsplice of a mapping */
    uint64_t send_notsent_lowat;  /* send.notsent_lowat: TCP_NOTSENT_LOWAT; 0 = the kernel's */
    unsigned ring_batch;          /* ring.batch: completions a busy worker wakes for */
    unsigned ring_batch_wait_us;  /* ring.batch_wait_us: the most it waits for them; 0 = none */
    unsigned ring_slice_us;       /* ring.slice_us: bodies' turns before new input; 0 = no end */

    /* http2: HTTP/2 for viewers */
    bool http2_tls;                  /* http2.tls: offer h2 by ALPN on TLS listeners */
    bool http2_h2c;                  /* http2.h2c: prior-knowledge h2c on plain listeners */
    unsigned http2_max_streams;      /* http2.max_concurrent_streams */
    uint64_t http2_max_header_list;  /* http2.max_header_list: bytes, RFC 9113 6.5.2 */
    uint64_t http2_stream_window;    /* http2.stream_window: our initial window per stream */
    uint64_t http2_conn_window;      /* http2.connection_window */
    unsigned http2_idle_timeout_ms;  /* http2.idle_timeout: no stream open */
    unsigned http2_stall_timeout_ms; /* http2.stall_timeout: streams open, no DATA moved */
    unsigned http2_max_resets;       /* http2.max_resets: streams reset or refused per second */
    unsigned http2_max_control;      /* http2.max_control_frames: per second */

    /* features.disable: HE_CONF_FEATURE_BIT()s the probe reports as absent */
    uint32_t features_disabled;

    /* auth: the rules, in file order (he_conf_auth_match picks the longest) */
    he_conf_auth_t auth[HE_CONF_MAX_AUTH];
    unsigned nauth;
} he_conf_t;

/* Fills c with the built-in defaults (valid on their own). */
void he_conf_defaults(he_conf_t *c);

/* Loads path on top of the defaults. Returns 0, or a negative errno with a
 * message in err such as
 *   "hlsedge.yaml:12:3: workers: expected a positive integer or \"auto\"".
 * Unknown keys, wrong types, values out of range and duplicate keys are
 * errors. On error c is left as the defaults. */
int he_conf_load(he_conf_t *c, const char *path, char *err, size_t errlen);

/* Same, from memory; name is used in messages in place of a file name. */
int he_conf_load_string(he_conf_t *c, const char *name, const char *yaml, size_t len, char *err,
                        size_t errlen);

/* Where loads report warnings: what a file may say and still be valid,
 * but is most likely not what was meant, such as
 *   "/etc/hlsedge.yaml is empty: running on built-in defaults".
 * fn gets each one (msg lives for the call only) from a load that
 * succeeded; with fn NULL (the default) warnings are dropped. One handler
 * for the process, since any load may warn: set it before the first load,
 * not while another thread loads. */
typedef void (*he_conf_warn_fn)(void *arg, const char *msg);
void he_conf_set_warn(he_conf_warn_fn fn, void *arg);

/* Parses "host:port" / "[v6]:port" / ":port" / "port" into l. 0 or -EINVAL. */
int he_conf_parse_listen(const char *s, he_conf_listen_t *l);

/* Parses a duration: "250ms", "10s", "2m", "1h", "1d", or a bare number of
 * seconds. 0 or -EINVAL / -ERANGE. */
int he_conf_parse_duration_ms(const char *s, unsigned *ms);

const char *he_conf_log_level_name(he_log_level_t l);

/* The auth rule whose prefix is the longest one starting path, a
 * normalized path without its leading '/' ("a/b.ts" for prefix "/a/"), or
 * NULL. */
const he_conf_auth_t *he_conf_auth_match(const he_conf_t *c, const char *path, size_t len);

/* Whether features.disable names the feature called name ("send_zc"); an
 * unknown name is never disabled. */
bool he_conf_feature_disabled(const he_conf_t *c, const char *name);

/* admin.allow entries (conf/access.c): an address, an address/bits range,
 * or "loopback". */
typedef struct he_conf_cidr {
    int family; /* AF_INET, AF_INET6; 0 for loopback */
    uint8_t addr[16];
    unsigned bits;
    bool loopback;
} he_conf_cidr_t;
int he_conf_cidr_parse(const char *s, size_t len, he_conf_cidr_t *out);
/* Whether admin.allow lets sa (the peer of an admin connection) in. */
bool he_conf_addr_allowed(const he_conf_t *c, const struct sockaddr *sa);
/* Whether an Authorization value ("Bearer <token>", len bytes) carries
 * admin.token_file's token (compared in constant time); false when no
 * token is configured. */
bool he_conf_bearer_ok(const he_conf_t *c, const char *authz, size_t len);

#endif
