/* conf/keys.c: every configuration key, declared once. A key's row gives
 * its YAML path, type, field, range, default and doc; the defaults, the
 * parsing of a file and the "expected ..." part of each error all come from
 * these rows, so adding a key is adding a row (and a line in hlsedge.yaml,
 * which a unit test compares with the defaults). The setters are in set.c
 * and set_list.c, the rules that span keys in check.c; this file is only
 * the table and its lookups, so it stays one table however many keys. */
#include <stddef.h>
#include <string.h>

#include "conf/internal.h"

/* Enums are stored through an unsigned, so they must have its size (a
 * two-way choice may instead be a bool: origin.sources). */
_Static_assert(sizeof(he_log_level_t) == sizeof(unsigned), "he_log_level_t size");
_Static_assert(sizeof(he_access_log_format_t) == sizeof(unsigned), "format size");
_Static_assert(HE_SEG_TYPE_COUNT == 8, "a new content type needs a cache_control row below");
_Static_assert(HE_SEG_KIND_COUNT == 4, "a new kind needs a cache.ttl row below");
/* List counts are read and written through an unsigned. */
_Static_assert(sizeof(((he_conf_t *)0)->nlisten) == sizeof(unsigned), "nlisten");
_Static_assert(sizeof(((he_conf_t *)0)->ncpus) == sizeof(unsigned), "ncpus");
_Static_assert(sizeof(((he_conf_t *)0)->ncontrol_cpus) == sizeof(unsigned), "ncontrol_cpus");
_Static_assert(sizeof(((he_conf_t *)0)->ntls_listen) == sizeof(unsigned), "ntls_listen");
_Static_assert(sizeof(((he_conf_t *)0)->ntls_certs) == sizeof(unsigned), "ntls_certs");
_Static_assert(sizeof(((he_conf_t *)0)->ncache_stores) == sizeof(unsigned), "ncache_stores");
_Static_assert(sizeof(((he_conf_t *)0)->norigin_urls) == sizeof(unsigned), "norigin_urls");
_Static_assert(sizeof(((he_conf_t *)0)->ncache_key_params) == sizeof(unsigned), "key_params");
_Static_assert(sizeof(((he_conf_t *)0)->cache_store_bytes[0]) == sizeof(uint64_t), "stores");
_Static_assert(sizeof(((he_conf_t *)0)->features_disabled) == sizeof(uint32_t), "flags");
_Static_assert(HE_CONF_FEATURE_COUNT <= 32, "features_disabled holds one bit per feature");

const char *const he__conf_log_level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const he_conf_access_format_names[] = {"combined", "json", NULL};
/* Stored as the bool origin_first: index 1 is true. */
static const char *const he_conf_sources_names[] = {"root-first", "origin-first", NULL};
static const char *const he_conf_select_names[] = {[HE_CONF_SELECT_ORDERED] = "ordered",
                                                   [HE_CONF_SELECT_HASH] = "hash", NULL};
_Static_assert(sizeof(he_conf_origin_select_t) == sizeof(unsigned), "origin.select size");
static const char *const he_conf_ram_huge_names[] = {[HE_CONF_RAM_HUGE_AUTO] = "auto",
                                                     [HE_CONF_RAM_HUGE_ON] = "true",
                                                     [HE_CONF_RAM_HUGE_OFF] = "false",
                                                     NULL};
_Static_assert(sizeof(he_conf_ram_huge_t) == sizeof(unsigned), "cache.ram_huge_pages size");
const char *const he_conf_feature_names[] = {
    [HE_CONF_FEATURE_SINGLE_ISSUER] = "single_issuer",
    [HE_CONF_FEATURE_DEFER_TASKRUN] = "defer_taskrun",
    [HE_CONF_FEATURE_COOP_TASKRUN] = "coop_taskrun",
    [HE_CONF_FEATURE_MULTISHOT_ACCEPT] = "multishot_accept",
    [HE_CONF_FEATURE_RECV_MULTISHOT] = "recv_multishot",
    [HE_CONF_FEATURE_BUF_RING] = "buf_ring",
    [HE_CONF_FEATURE_FIXED_FILES] = "fixed_files",
    [HE_CONF_FEATURE_SEND_ZC] = "send_zc",
    [HE_CONF_FEATURE_ZC_REPORT_USAGE] = "zc_report_usage",
    [HE_CONF_FEATURE_OPENAT2_BENEATH] = "openat2_beneath",
    [HE_CONF_FEATURE_REUSEPORT_CBPF] = "reuseport_cbpf",
    [HE_CONF_FEATURE_KTLS] = "ktls",
    [HE_CONF_FEATURE_MIN_TIMEOUT] = "min_timeout",
    [HE_CONF_FEATURE_COUNT] = NULL,
};
_Static_assert(sizeof(he_conf_feature_names) / sizeof(he_conf_feature_names[0]) ==
                   HE_CONF_FEATURE_COUNT + 1,
               "a name per feature");

#define HE_CONF_SECOND_MS 1000u
#define HE_CONF_MINUTE_MS 60000u
#define HE_CONF_HOUR_MS 3600000u
#define HE_CONF_DAY_MS 86400000u
#define HE_CONF_KIB 1024ull
#define HE_CONF_MIB (1024ull * 1024)
#define HE_CONF_TIB (1024ull * 1024 * 1024 * 1024)

#define HE_CONF_NELEM(f) (sizeof(((he_conf_t *)0)->f) / sizeof(((he_conf_t *)0)->f[0]))

#define HE_CONF_K_SECTION(n, d)                                                                    \
    {                                                                                              \
        .name = n, .type = HE__CONF_SECTION, .doc = d                                              \
    }
#define HE_CONF_K_UINT(n, f, lo, hi, dv, d)                                                        \
    {                                                                                              \
        .name = n, .type = HE__CONF_UINT, .off = offsetof(he_conf_t, f), .min = lo, .max = hi,     \
        .def = dv, .doc = d                                                                        \
    }
#define HE_CONF_K_DURATION(n, f, lo, hi, dv, d)                                                    \
    {                                                                                              \
        .name = n, .type = HE__CONF_DURATION, .off = offsetof(he_conf_t, f), .min = lo, .max = hi, \
        .def = dv, .doc = d                                                                        \
    }
#define HE_CONF_K_BOOL(n, f, dv, d)                                                                \
    {                                                                                              \
        .name = n, .type = HE__CONF_BOOL, .off = offsetof(he_conf_t, f), .def = dv, .doc = d       \
    }
#define HE_CONF_K_STR(n, f, fl, dv, d)                                                             \
    {                                                                                              \
        .name = n, .type = HE__CONF_STR, .flags = fl, .off = offsetof(he_conf_t, f),               \
        .size = sizeof(((he_conf_t *)0)->f), .def = dv, .doc = d                                   \
    }
#define HE_CONF_K_ENUM(n, f, nm, dv, d)                                                            \
    {                                                                                              \
        .name = n, .type = HE__CONF_ENUM, .off = offsetof(he_conf_t, f),                           \
        .size = sizeof(((he_conf_t *)0)->f), .names = nm, .def = dv, .doc = d                      \
    }
#define HE_CONF_K_SIZE(n, f, lo, hi, dv, d)                                                        \
    {                                                                                              \
        .name = n, .type = HE__CONF_SIZE, .off = offsetof(he_conf_t, f), .min = lo, .max = hi,     \
        .def = dv, .doc = d                                                                        \
    }
/* A list: the array f, its count cnt; one, many or (EMPTY_OK) no entries. */
#define HE_CONF_K_LISTEN(n, f, cnt, fl, dv, d)                                                     \
    {                                                                                              \
        .name = n, .type = HE__CONF_LISTEN, .flags = fl, .off = offsetof(he_conf_t, f),            \
        .cnt_off = offsetof(he_conf_t, cnt), .nmax = HE_CONF_NELEM(f), .item = "address",          \
        .items = "addresses", .def = dv, .doc = d                                                  \
    }
#define HE_CONF_K_STRS(n, f, cnt, fl, it, its, dv, d)                                              \
    {                                                                                              \
        .name = n, .type = HE__CONF_STRS, .flags = fl, .off = offsetof(he_conf_t, f),              \
        .size = sizeof(((he_conf_t *)0)->f[0]), .cnt_off = offsetof(he_conf_t, cnt),               \
        .nmax = HE_CONF_NELEM(f), .item = it, .items = its, .def = dv, .doc = d                    \
    }
#define HE_CONF_K_TTL(k, n, dv)                                                                    \
    HE_CONF_K_DURATION("cache.ttl." n, cache_ttl_ms[k], 0, 30 * HE_CONF_DAY_MS, dv,                \
                       "freshness of " n " responses; 0 = the origin's")
#define HE_CONF_K_CACHE(t, n, dv)                                                                  \
    HE_CONF_K_STR("cache_control." n, cache_control[t], HE__CONF_F_HEADER, dv,                     \
                  "Cache-Control for content type " n)

#define HE_CONF_K_CPUS(n, f, cnt, d)                                                               \
    {                                                                                              \
        .name = n, .type = HE__CONF_CPUS, .off = offsetof(he_conf_t, f),                           \
        .cnt_off = offsetof(he_conf_t, cnt), .nmax = HE_CONF_NELEM(f), .max = HE_CONF_MAX_CPUS - 1, \
        .def = "auto", .doc = d                                                                    \
    }

/* Sections come before their keys; the order is the order of hlsedge.yaml
 * and of the key lists in error messages. */
const he__conf_key_t he__conf_keys[] = {
    HE_CONF_K_LISTEN("listen", listen, nlisten, 0, "0.0.0.0:8080", "addresses to accept HTTP on"),
    {.name = "workers",
     .type = HE__CONF_WORKERS,
     .off = offsetof(he_conf_t, workers),
     .min = 1,
     .max = 1024,
     .def = "auto",
     .doc = "worker threads; auto = one per allowed CPU"},
    HE_CONF_K_CPUS("cpus", cpus, ncpus, "CPUs to run workers on"),
    HE_CONF_K_BOOL("pin", pin, "true", "pin each worker to its CPU"),
    HE_CONF_K_CPUS("control_cpus", control_cpus, ncontrol_cpus,
                   "CPUs for the control thread; auto = those no worker is pinned to"),
    HE_CONF_K_BOOL("numa", numa, "true", "allocate worker memory on the worker's NUMA node"),
    HE_CONF_K_STR("root", root, HE__CONF_F_NONEMPTY, "demo/library", "library directory"),

    HE_CONF_K_SECTION("limits", "request and connection limits"),
    HE_CONF_K_UINT("limits.max_connections", max_connections, 1, 10000000, "10000", "whole server"),
    HE_CONF_K_UINT("limits.header_bytes", max_header_bytes, 256, 1048576, "8192",
                   "request line + headers"),
    HE_CONF_K_UINT("limits.uri_bytes", max_uri_bytes, 16, 1048576, "4096", "request-target"),

    HE_CONF_K_SECTION("timeouts", "durations: 250ms, 10s, 2m, 1h or a number of seconds"),
    HE_CONF_K_DURATION("timeouts.header", header_timeout_ms, 100, HE_CONF_HOUR_MS, "10s",
                       "to receive a request's headers"),
    HE_CONF_K_DURATION("timeouts.keepalive", keepalive_timeout_ms, 0, HE_CONF_HOUR_MS, "75s",
                       "idle time between requests; 0 closes after each response"),
    HE_CONF_K_DURATION("timeouts.send", send_timeout_ms, 100, HE_CONF_HOUR_MS, "30s",
                       "without any progress sending a response"),
    HE_CONF_K_DURATION("timeouts.drain", drain_timeout_ms, 0, HE_CONF_HOUR_MS, "10s",
                       "on shutdown, for in-flight responses"),

    HE_CONF_K_SECTION("cors", "cross-origin resource sharing"),
    HE_CONF_K_STR("cors.allow_origin", cors_allow_origin, HE__CONF_F_HEADER, "*",
                  "Access-Control-Allow-Origin; \"\" sends no CORS headers"),
    HE_CONF_K_STR("cors.timing_allow_origin", cors_timing_allow_origin, HE__CONF_F_HEADER, "",
                  "Timing-Allow-Origin (Resource Timing for player pages); \"\" sends none"),

    HE_CONF_K_SECTION("cache_control", "Cache-Control per content type; \"\" sends none"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_OTHER, "other", "public, max-age=3600"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_M3U8, "m3u8", "public, max-age=1"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_TS, "ts", "public, max-age=86400, immutable"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_M4S, "m4s", "public, max-age=86400, immutable"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_MP4, "mp4", "public, max-age=86400, immutable"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_AAC, "aac", "public, max-age=86400, immutable"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_VTT, "vtt", "public, max-age=86400"),
    HE_CONF_K_CACHE(HE_SEG_TYPE_KEY, "key", "private, max-age=300"),

    HE_CONF_K_SECTION("log", "error and access logs"),
    HE_CONF_K_ENUM("log.level", log_level, he__conf_log_level_names, "info", "error log verbosity"),
    HE_CONF_K_STR("log.file", error_log, 0, "", "error log path; \"\" = stderr"),
    HE_CONF_K_STR("log.access", access_log, 0, "", "access log path; \"\" = off"),
    HE_CONF_K_ENUM("log.access_format", access_log_format, he_conf_access_format_names, "combined",
                   "access log line format"),

    HE_CONF_K_SECTION("admin", "statistics and control endpoint"),
    {.name = "admin.listen",
     .type = HE__CONF_ADDR,
     .off = offsetof(he_conf_t, admin_listen),
     .def = "127.0.0.1:9090",
     .doc = "admin address; \"\" or off disables"},
    HE_CONF_K_STRS("admin.allow", admin_allow, nadmin_allow, HE__CONF_F_CIDR, "address range",
                   "address ranges", "loopback", "who may use the admin listener (others: 403)"),
    HE_CONF_K_STR("admin.token_file", admin_token_file, 0, "",
                  "file with the bearer token for purges; \"\" = none"),

    HE_CONF_K_SECTION("stats", "what the workers measure for the admin endpoint"),
    HE_CONF_K_BOOL("stats.latency", stats_latency, "true",
                   "latency histograms (time to first and last byte); off only to measure them"),

    HE_CONF_K_SECTION("fd_cache", "open file descriptors kept per worker"),
    HE_CONF_K_UINT("fd_cache.entries", fd_cache_entries, 16, 1048576, "1024", "per worker"),
    HE_CONF_K_DURATION("fd_cache.valid", fd_cache_valid_ms, 0, HE_CONF_HOUR_MS, "5s",
                       "revalidate an open file's stat after this"),
    HE_CONF_K_SIZE("fd_cache.memory", fd_cache_memory, 0, HE_CONF_TIB, "256m",
                   "copies of files of 1-16 MiB in huge pages, shared by the workers, sent "
                   "by vmsplice over plain TCP; 0 = off"),

    HE_CONF_K_SECTION("auth_cache", "tokenised playlists kept per worker for their token's next request"),
    HE_CONF_K_UINT("auth_cache.entries", auth_cache_entries, 0, 65536, "64",
                   "outputs kept per worker; 0 rewrites every time"),
    HE_CONF_K_SIZE("auth_cache.bytes", auth_cache_bytes, 0, HE_CONF_TIB, "16m",
                   "memory they may take per worker"),

    HE_CONF_K_SECTION("llhls", "Low-Latency HLS for live playlists served from root"),
    HE_CONF_K_BOOL("llhls.enabled", llhls_enabled, "true",
                   "hold blocking reloads (_HLS_msn/_HLS_part), make deltas (_HLS_skip)"),
    HE_CONF_K_BOOL("llhls.gzip", llhls_gzip, "true",
                   "gzip live playlists for clients that send Accept-Encoding: gzip"),

    HE_CONF_K_SECTION("tls", "HTTPS listeners"),
    HE_CONF_K_LISTEN("tls.listen", tls_listen, ntls_listen, HE__CONF_F_EMPTY_OK, "",
                     "addresses to accept HTTPS on; none by default"),
    /* Only the paths: the TLS module opens the files and reports its own
     * errors, with the reasons OpenSSL gives. */
    HE_CONF_K_STRS("tls.certificates", tls_certs, ntls_certs, HE__CONF_F_EMPTY_OK,
                   "certificate file", "certificate files", "",
                   "PEM files, chain and key; the first is the default"),
    HE_CONF_K_BOOL("tls.ktls", tls_ktls, "true", "kernel TLS when the kernel and cipher allow"),
    HE_CONF_K_BOOL("tls.seal_records", tls_seal_records, "true",
                   "without kTLS, hlsedge seals AES-GCM records from the file's pages itself "
                   "(read at start)"),
    HE_CONF_K_BOOL("tls.session_tickets", tls_tickets, "true", "resumption by session tickets"),
    HE_CONF_K_DURATION("tls.ticket_rotate", tls_ticket_rotate_ms, HE_CONF_MINUTE_MS,
                       24 * HE_CONF_HOUR_MS, "1h", "new ticket key this often"),
    HE_CONF_K_UINT("tls.session_cache", tls_session_cache, 0, 10000000, "20480",
                   "sessions kept for resumption; 0 = off"),
    HE_CONF_K_DURATION("tls.handshake_timeout", tls_handshake_timeout_ms, 100, HE_CONF_HOUR_MS,
                       "10s", "to complete a TLS handshake"),
    HE_CONF_K_SIZE("tls.first_record", tls_first_record, 0, 16384, "1360",
                   "most bytes in the first TLS record of a connection and after 1 s idle, so "
                   "it fits one TCP segment; 0 = 16 KiB records throughout"),
    HE_CONF_K_SIZE("tls.write_buffer", tls_write_buffer, 0, HE_CONF_MIB, "64k",
                   "userspace TLS: the records of a larger HTTP/1.1 body leave in writes of "
                   "this many bytes; 0 = one write per record"),

    HE_CONF_K_SECTION("cache", "the RAM and SSD tiers for origin responses"),
    HE_CONF_K_SIZE("cache.ram_size", cache_ram_bytes, 0, 64 * HE_CONF_TIB, "256m",
                   "RAM tier, split across NUMA nodes; 0 = none"),
    HE_CONF_K_SIZE("cache.ram_object_max", cache_ram_object_max, HE_CONF_KIB, HE_CONF_TIB, "16m",
                   "larger objects skip the RAM tier"),
    {.name = "cache.ssd",
     .type = HE__CONF_STORES,
     .flags = HE__CONF_F_EMPTY_OK,
     .off = offsetof(he_conf_t, cache_stores),
     .size = sizeof(((he_conf_t *)0)->cache_stores[0]),
     .cnt_off = offsetof(he_conf_t, ncache_stores),
     .aux_off = offsetof(he_conf_t, cache_store_bytes),
     .nmax = HE_CONF_NELEM(cache_stores),
     .min = HE_CONF_MIB,
     .max = 1024 * HE_CONF_TIB,
     .item = "store",
     .items = "stores",
     .def = "",
     .doc = "SSD tier: \"DIR:SIZE\" entries"},
    HE_CONF_K_BOOL("cache.admission", cache_admission, "true",
                   "keep objects requested once out of the cache"),
    HE_CONF_K_DURATION("cache.negative_ttl", cache_negative_ttl_ms, 0, HE_CONF_HOUR_MS, "5s",
                       "the longest an origin 404 is remembered; the 404's own no-cache, "
                       "max-age or Expires may shorten it"),
    HE_CONF_K_DURATION("cache.stale_while_revalidate", cache_stale_while_revalidate_ms, 0,
                       24 * HE_CONF_HOUR_MS, "10s", "serve stale while refreshing, this long"),
    HE_CONF_K_DURATION("cache.stale_if_error", cache_stale_if_error_ms, 0, 24 * HE_CONF_HOUR_MS,
                       "60s", "serve stale when the origin fails, this long"),
    HE_CONF_K_UINT("cache.live_fraction", cache_live_fraction_pct, 10, 100, "50",
                   "live media playlists are fresh for this % of the target duration"),
    HE_CONF_K_SECTION("cache.ttl", "freshness per kind of response; 0 = the origin's"),
    HE_CONF_K_TTL(HE_SEG_KIND_MASTER, "master", "0s"),
    HE_CONF_K_TTL(HE_SEG_KIND_MEDIA, "media", "0s"),
    HE_CONF_K_TTL(HE_SEG_KIND_SEGMENT, "segment", "0s"),
    HE_CONF_K_TTL(HE_SEG_KIND_OTHER, "other", "0s"),
    HE_CONF_K_STRS("cache.key_params", cache_key_params, ncache_key_params,
                   HE__CONF_F_EMPTY_OK | HE__CONF_F_TOKEN, "parameter name", "parameter names", "",
                   "query parameters kept in the cache key; others are ignored"),
    HE_CONF_K_UINT("cache.prefetch", prefetch_segments, 0, 32, "2",
                   "segments after a requested one to fetch ahead"),
    HE_CONF_K_SIZE("cache.zero_copy_min", cache_zero_copy_min, 0, HE_CONF_TIB, "256k",
                   "RAM-tier spans at least this long are sent zero-copy (SEND_ZC)"),
    HE_CONF_K_BOOL("cache.zero_copy_adapt", cache_zero_copy_adapt, "true",
                   "stop zero-copy on a connection once the kernel reports it copied"),
    HE_CONF_K_BOOL("cache.ram_sendfile", cache_ram_sendfile, "true",
                   "the RAM tier lives in a memfd and large hits leave by sendfile (else SEND_ZC)"),
    HE_CONF_K_BOOL("cache.ram_splice", cache_ram_splice, "true",
                   "large hits over plain TCP leave by vmsplice of the arena's mapping (memfd or "
                   "huge pages) instead of sendfile or copying sends"),
    HE_CONF_K_ENUM("cache.ram_huge_pages", cache_ram_huge_pages, he_conf_ram_huge_names, "auto",
                   "the RAM tier lives in anonymous transparent huge pages, not a memfd, and large "
                   "hits over plain TCP leave by vmsplice of them; auto: unless kTLS serves "
                   "tls.listen (which sends from the memfd) or the kernel gives no huge pages"),

    HE_CONF_K_SECTION("origin", "where cache misses are fetched from"),
    HE_CONF_K_STRS("origin.urls", origin_urls, norigin_urls, HE__CONF_F_EMPTY_OK | HE__CONF_F_URL,
                   "URL", "URLs", "", "http:// or https:// base URLs, tried in order"),
    HE_CONF_K_ENUM("origin.sources", origin_first, he_conf_sources_names, "root-first",
                   "which is tried first: the root directory or the origins"),
    HE_CONF_K_DURATION("origin.connect_timeout", origin_connect_timeout_ms, 100, HE_CONF_MINUTE_MS,
                       "2s", "to connect to an origin"),
    HE_CONF_K_DURATION("origin.read_timeout", origin_read_timeout_ms, 100, 10 * HE_CONF_MINUTE_MS,
                       "10s", "without receiving anything from an origin"),
    HE_CONF_K_DURATION("origin.total_timeout", origin_total_timeout_ms, HE_CONF_SECOND_MS,
                       HE_CONF_HOUR_MS, "60s", "for a whole origin response"),
    HE_CONF_K_UINT("origin.retries", origin_retries, 0, 8, "1",
                   "further origins to try after a failure"),
    HE_CONF_K_UINT("origin.pool", origin_pool, 0, 1024, "16",
                   "keep-alive connections per worker per origin"),
    /* Only the path, as for tls.certificates: the origin module loads it
     * and reports OpenSSL's reasons. */
    HE_CONF_K_STR("origin.tls_ca_file", origin_tls_ca_file, 0, "",
                  "CA certificates (PEM) for https:// origins; \"\" = the system's store"),
    HE_CONF_K_ENUM("origin.select", origin_select, he_conf_select_names, "ordered",
                   "which origin a miss tries first: in order, or by consistent hashing"),
    HE_CONF_K_DURATION("origin.down_time", origin_down_time_ms, 0, HE_CONF_HOUR_MS, "10s",
                       "an origin that failed is skipped this long"),

    HE_CONF_K_SECTION("http2", "HTTP/2 for viewers"),
    HE_CONF_K_BOOL("http2.tls", http2_tls, "true", "offer h2 by ALPN on the TLS listeners"),
    HE_CONF_K_BOOL("http2.h2c", http2_h2c, "false",
                   "prior-knowledge h2c (cleartext) on the plain listeners"),
    HE_CONF_K_UINT("http2.max_concurrent_streams", http2_max_streams, 1, 1000, "100",
                   "streams a client may have open at once"),
    HE_CONF_K_SIZE("http2.max_header_list", http2_max_header_list, HE_CONF_KIB, HE_CONF_MIB, "16k",
                   "a request's header list (names + values + 32 each)"),
    HE_CONF_K_SIZE("http2.stream_window", http2_stream_window, HE_CONF_KIB, HE_CONF_MIB * 1024, "64k",
                   "our receive window per stream"),
    HE_CONF_K_SIZE("http2.connection_window", http2_conn_window, 64 * HE_CONF_KIB, HE_CONF_MIB * 1024, "1m",
                   "our receive window per connection"),
    HE_CONF_K_DURATION("http2.idle_timeout", http2_idle_timeout_ms, 100, HE_CONF_HOUR_MS, "75s",
                       "a connection with no stream open: GOAWAY, then closed"),
    HE_CONF_K_DURATION("http2.stall_timeout", http2_stall_timeout_ms, 100, HE_CONF_HOUR_MS, "30s",
                       "a stream at zero window sending nothing: reset; a connection: GOAWAY"),
    HE_CONF_K_UINT("http2.max_resets", http2_max_resets, 1, 100000, "100",
                   "streams a client may reset or have refused per second (bursts of 10x)"),
    HE_CONF_K_UINT("http2.max_control_frames", http2_max_control, 1, 1000000, "1000",
                   "SETTINGS, PING, PRIORITY and empty frames per second (bursts of 2x)"),

    HE_CONF_K_SECTION("send", "how file bodies are handed to the kernel"),
    HE_CONF_K_SIZE("send.sendfile_chunk", send_sendfile_chunk, 0, (1024 * HE_CONF_MIB), "1m",
                   "most bytes one sendfile moves before the worker serves others; 0 = what the socket takes"),
    HE_CONF_K_BOOL("send.cork", send_cork, "true",
                   "TCP_CORK while a file body is sent, so no chunk ends in a short segment"),
    HE_CONF_K_BOOL("send.file_splice", send_file_splice, "true",
                   "file bodies over plain TCP by vmsplice of the file's mapping instead of sendfile"),
    HE_CONF_K_SIZE("send.notsent_lowat", send_notsent_lowat, 0, (1024 * HE_CONF_MIB), "0",
                   "TCP_NOTSENT_LOWAT on viewer sockets (unsent bytes the kernel queues); 0 = the kernel's"),

    HE_CONF_K_SECTION("ring", "how a worker waits for its io_uring's completions"),
    HE_CONF_K_UINT("ring.batch", ring_batch, 1, 1024, "64",
                   "completions a busy worker waits for before it wakes (never more than its connections)"),
    HE_CONF_K_UINT("ring.batch_wait_us", ring_batch_wait_us, 0, 10000, "200",
                   "the most microseconds it waits for them, then wakes for what is ready; 0 = wake at the first"),
    HE_CONF_K_UINT("ring.slice_us", ring_slice_us, 0, 1000000, "4000",
                   "microseconds of bodies' turns before new requests go first; 0 = none"),

    HE_CONF_K_SECTION("features", "kernel features the server probes for at start"),
    {.name = "features.disable",
     .type = HE__CONF_FLAGS,
     .flags = HE__CONF_F_EMPTY_OK,
     .off = offsetof(he_conf_t, features_disabled),
     .size = sizeof(uint32_t),
     .names = he_conf_feature_names,
     .item = "feature",
     .items = "features",
     .def = "",
     .doc = "features to leave unused although the kernel has them; all = every one"},
};
#undef HE_CONF_K_SECTION
#undef HE_CONF_K_UINT
#undef HE_CONF_K_DURATION
#undef HE_CONF_K_BOOL
#undef HE_CONF_K_STR
#undef HE_CONF_K_ENUM
#undef HE_CONF_K_CACHE
#undef HE_CONF_K_SIZE
#undef HE_CONF_K_LISTEN
#undef HE_CONF_K_CPUS
#undef HE_CONF_K_STRS
#undef HE_CONF_K_TTL

const size_t he__conf_nkeys = sizeof(he__conf_keys) / sizeof(he__conf_keys[0]);
_Static_assert(sizeof(he__conf_keys) / sizeof(he__conf_keys[0]) <= HE__CONF_MAX_KEYS,
               "raise HE__CONF_MAX_KEYS");

int he__conf_in_section(size_t i, int section)
{
    const char *name = he__conf_keys[i].name;
    const char *prefix;
    size_t plen;

    if (section < 0) return strchr(name, '.') == NULL;
    prefix = he__conf_keys[section].name;
    plen = strlen(prefix);
    return strncmp(name, prefix, plen) == 0 && name[plen] == '.' &&
           strchr(name + plen + 1, '.') == NULL;
}

int he__conf_find(int section, const char *leaf, size_t len)
{
    size_t skip = section < 0 ? 0 : strlen(he__conf_keys[section].name) + 1;

    for (size_t i = 0; i < he__conf_nkeys; i++) {
        const char *name;
        if (!he__conf_in_section(i, section)) continue;
        name = he__conf_keys[i].name + skip;
        if (strlen(name) == len && memcmp(name, leaf, len) == 0) return (int)i;
    }
    return -1;
}

int he__conf_index(const char *name)
{
    for (size_t i = 0; i < he__conf_nkeys; i++) {
        if (strcmp(he__conf_keys[i].name, name) == 0) return (int)i;
    }
    return -1;
}
