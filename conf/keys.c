/* conf/keys.c: every configuration key, declared once. A key's row gives
 * its YAML path, type, field, range, default and doc; the defaults, the
 * parsing of a file and the "expected ..." part of each error all come from
 * these rows, so adding a key is adding a row (and a line in hlsedge.yaml,
 * which a unit test compares with the defaults). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conf/internal.h"

/* Enums are stored through an unsigned, so they must have its size. */
_Static_assert(sizeof(he_log_level_t) == sizeof(unsigned), "he_log_level_t size");
_Static_assert(sizeof(he_access_log_format_t) == sizeof(unsigned), "format size");
_Static_assert(HE_SEG_TYPE_COUNT == 8, "a new content type needs a cache_control row below");

const char *const he__conf_log_level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const he_conf_access_format_names[] = {"combined", "json", NULL};

#define HE_CONF_HOUR_MS 3600000u

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
        .name = n, .type = HE__CONF_ENUM, .off = offsetof(he_conf_t, f), .names = nm, .def = dv,   \
        .doc = d                                                                                   \
    }
#define HE_CONF_K_CACHE(t, n, dv)                                                                  \
    HE_CONF_K_STR("cache_control." n, cache_control[t], HE__CONF_F_HEADER, dv,                     \
                  "Cache-Control for content type " n)

/* Sections come before their keys; the order is the order of hlsedge.yaml
 * and of the key lists in error messages. */
const he__conf_key_t he__conf_keys[] = {
    {.name = "listen",
     .type = HE__CONF_LISTEN,
     .def = "0.0.0.0:8080",
     .doc = "addresses to accept HTTP on"},
    {.name = "workers",
     .type = HE__CONF_WORKERS,
     .off = offsetof(he_conf_t, workers),
     .min = 1,
     .max = 1024,
     .def = "auto",
     .doc = "worker threads; auto = one per allowed CPU"},
    {.name = "cpus",
     .type = HE__CONF_CPUS,
     .max = HE_CONF_MAX_CPUS - 1,
     .def = "auto",
     .doc = "CPUs to run workers on"},
    HE_CONF_K_BOOL("pin", pin, "true", "pin each worker to its CPU"),
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

    HE_CONF_K_SECTION("fd_cache", "open file descriptors kept per worker"),
    HE_CONF_K_UINT("fd_cache.entries", fd_cache_entries, 16, 1048576, "1024", "per worker"),
    HE_CONF_K_DURATION("fd_cache.valid", fd_cache_valid_ms, 0, HE_CONF_HOUR_MS, "5s",
                       "revalidate an open file's stat after this"),
};
#undef HE_CONF_K_SECTION
#undef HE_CONF_K_UINT
#undef HE_CONF_K_DURATION
#undef HE_CONF_K_BOOL
#undef HE_CONF_K_STR
#undef HE_CONF_K_ENUM
#undef HE_CONF_K_CACHE

const size_t he__conf_nkeys = sizeof(he__conf_keys) / sizeof(he__conf_keys[0]);
_Static_assert(sizeof(he__conf_keys) / sizeof(he__conf_keys[0]) <= HE__CONF_MAX_KEYS,
               "raise HE__CONF_MAX_KEYS");

/* Rules that span keys: value(lo) <= value(hi), both HE__CONF_UINT. */
static const struct {
    const char *lo, *hi;
} he_conf_le_rules[] = {
    {"limits.uri_bytes", "limits.header_bytes"}, /* the target is part of the head */
};

/* Appends s to buf (of len, holding a string), truncating. */
static void he_conf_cat(char *buf, size_t len, const char *s)
{
    size_t used = strlen(buf);
    if (used + 1 < len) snprintf(buf + used, len - used, "%s", s);
}

/* A value as it can be shown in a message: quoted, printable, bounded. */
static void he_conf_quote(const char *v, size_t len, char *buf, size_t buflen)
{
    size_t o = 0, max = len > 40 ? 40 : len;

    if (buflen < 8) return;
    buf[o++] = '"';
    for (size_t i = 0; i < max && o + 5 < buflen; i++) {
        unsigned char ch = (unsigned char)v[i];
        buf[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    buf[o++] = '"';
    buf[o] = '\0';
    if (max < len) he_conf_cat(buf, buflen, "...");
}

#define HE_CONF_FIELD(c, k) ((char *)(c) + (k)->off)

static int he_conf_set_uint(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                            int idx, char *why, size_t whylen)
{
    unsigned n;
    int rc = he__conf_parse_uint(v, len, &n);

    if (rc < 0) return rc;
    if (n < k->min || n > k->max) return -ERANGE;
    memcpy(HE_CONF_FIELD(c, k), &n, sizeof(n));
    return 0;
}

static int he_conf_set_bool(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                            int idx, char *why, size_t whylen)
{
    bool b;

    if (he__conf_parse_bool(v, &b) < 0) return -EINVAL;
    memcpy(HE_CONF_FIELD(c, k), &b, sizeof(b));
    return 0;
}

static int he_conf_set_str(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                           int idx, char *why, size_t whylen)
{
    if (len >= k->size) {
        snprintf(why, whylen, "expected at most %zu bytes, got %zu", k->size - 1, len);
        return -ENAMETOOLONG;
    }
    if ((k->flags & HE__CONF_F_NONEMPTY) && len == 0) return -EINVAL;
    if (k->flags & HE__CONF_F_HEADER) {
        /* CR or LF here would let the config split a response. */
        for (size_t i = 0; i < len; i++) {
            unsigned char ch = (unsigned char)v[i];
            if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
                snprintf(why, whylen, "expected a header value without control characters");
                return -EINVAL;
            }
        }
    }
    /* Clear the whole array so that equal configs compare equal bytewise. */
    memset(HE_CONF_FIELD(c, k), 0, k->size);
    memcpy(HE_CONF_FIELD(c, k), v, len);
    return 0;
}

static int he_conf_set_duration(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                                int idx, char *why, size_t whylen)
{
    unsigned ms;
    int rc = he_conf_parse_duration_ms(v, &ms);

    if (rc < 0) return rc;
    if (ms < k->min || ms > k->max) return -ERANGE;
    memcpy(HE_CONF_FIELD(c, k), &ms, sizeof(ms));
    return 0;
}

static int he_conf_set_enum(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                            int idx, char *why, size_t whylen)
{
    for (unsigned i = 0; k->names[i] != NULL; i++) {
        if (strcmp(v, k->names[i]) == 0) {
            memcpy(HE_CONF_FIELD(c, k), &i, sizeof(i));
            return 0;
        }
    }
    return -EINVAL;
}

static int he_conf_set_workers(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                               int idx, char *why, size_t whylen)
{
    char got[64];
    unsigned n = 0;
    int rc = 0;

    if (strcmp(v, "auto") != 0) {
        rc = he__conf_parse_uint(v, len, &n);
        if (rc == -EINVAL || (rc == 0 && n == 0)) return -EINVAL;
        if (rc == -ERANGE || n > k->max) {
            he_conf_quote(v, len, got, sizeof(got));
            snprintf(why, whylen, "expected \"auto\" or an integer in %u..%u, got %s", k->min,
                     k->max, got);
            return -ERANGE;
        }
    }
    c->workers = n;
    return 0;
}

static int he_conf_set_listen(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                              int idx, char *why, size_t whylen)
{
    he_conf_listen_t l;

    if (idx <= 0) {
        memset(c->listen, 0, sizeof(c->listen));
        c->nlisten = 0;
    }
    if (c->nlisten >= HE_CONF_MAX_LISTEN) {
        snprintf(why, whylen, "expected at most %d addresses", HE_CONF_MAX_LISTEN);
        return -E2BIG;
    }
    if (he_conf_parse_listen(v, &l) < 0) return -EINVAL;
    for (unsigned i = 0; i < c->nlisten; i++) {
        if (strcmp(c->listen[i].text, l.text) == 0) {
            snprintf(why, whylen, "duplicate address %s", l.text);
            return -EEXIST;
        }
    }
    c->listen[c->nlisten++] = l;
    return 0;
}

static int he_conf_set_addr(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                            int idx, char *why, size_t whylen)
{
    he_conf_listen_t *l = (he_conf_listen_t *)HE_CONF_FIELD(c, k);

    if (len == 0 || strcmp(v, "off") == 0) {
        memset(l, 0, sizeof(*l));
        return 0;
    }
    return he_conf_parse_listen(v, l);
}

static int he_conf_set_cpus(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                            int idx, char *why, size_t whylen)
{
    char got[64];
    unsigned n;
    int rc;

    if (idx <= 0) {
        memset(c->cpus, 0, sizeof(c->cpus));
        c->ncpus = 0;
        if (idx < 0 && strcmp(v, "auto") == 0) return 0;
    }
    if (c->ncpus >= HE_CONF_MAX_CPUS) {
        snprintf(why, whylen, "expected at most %d CPUs", HE_CONF_MAX_CPUS);
        return -E2BIG;
    }
    rc = he__conf_parse_uint(v, len, &n);
    if (rc == -EINVAL) return rc;
    if (rc == -ERANGE || n > k->max) {
        he_conf_quote(v, len, got, sizeof(got));
        snprintf(why, whylen, "expected a CPU number in 0..%u, got %s", k->max, got);
        return -ERANGE;
    }
    for (unsigned i = 0; i < c->ncpus; i++) {
        if (c->cpus[i] == (int)n) {
            snprintf(why, whylen, "duplicate CPU %u", n);
            return -EEXIST;
        }
    }
    c->cpus[c->ncpus++] = (int)n;
    return 0;
}

typedef int (*he_conf_set_fn)(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                              int idx, char *why, size_t whylen);

static const struct {
    he_conf_set_fn set;
    int list; /* accepts a YAML sequence */
} he_conf_types[HE__CONF_TYPE_COUNT] = {
    [HE__CONF_SECTION] = {NULL, 0},
    [HE__CONF_UINT] = {he_conf_set_uint, 0},
    [HE__CONF_BOOL] = {he_conf_set_bool, 0},
    [HE__CONF_STR] = {he_conf_set_str, 0},
    [HE__CONF_DURATION] = {he_conf_set_duration, 0},
    [HE__CONF_ENUM] = {he_conf_set_enum, 0},
    [HE__CONF_WORKERS] = {he_conf_set_workers, 0},
    [HE__CONF_LISTEN] = {he_conf_set_listen, 1},
    [HE__CONF_ADDR] = {he_conf_set_addr, 0},
    [HE__CONF_CPUS] = {he_conf_set_cpus, 1},
};

int he__conf_takes_list(const he__conf_key_t *k)
{
    return he_conf_types[k->type].list;
}

void he__conf_expect(const he__conf_key_t *k, char *buf, size_t len)
{
    char lo[16], hi[16];
    int section = (int)(k - he__conf_keys);

    buf[0] = '\0';
    switch (k->type) {
    case HE__CONF_SECTION:
        he_conf_cat(buf, len, "a mapping with keys ");
        for (size_t i = 0, n = 0; i < he__conf_nkeys; i++) {
            if (!he__conf_in_section(i, section)) continue;
            if (n++) he_conf_cat(buf, len, ", ");
            he_conf_cat(buf, len, strrchr(he__conf_keys[i].name, '.') + 1);
        }
        break;
    case HE__CONF_UINT:
        snprintf(buf, len, "an integer in %u..%u", k->min, k->max);
        break;
    case HE__CONF_BOOL:
        snprintf(buf, len, "true or false");
        break;
    case HE__CONF_STR:
        snprintf(buf, len, "%s",
                 k->flags & HE__CONF_F_NONEMPTY ? "a non-empty string" : "a string");
        break;
    case HE__CONF_DURATION:
        he__conf_fmt_ms(k->min, lo, sizeof(lo));
        he__conf_fmt_ms(k->max, hi, sizeof(hi));
        snprintf(buf, len, "a duration in %s..%s such as \"250ms\", \"10s\" or \"2m\"", lo, hi);
        break;
    case HE__CONF_ENUM:
        he_conf_cat(buf, len, "one of ");
        for (size_t i = 0; k->names[i] != NULL; i++) {
            if (i) he_conf_cat(buf, len, ", ");
            he_conf_cat(buf, len, k->names[i]);
        }
        break;
    case HE__CONF_WORKERS:
        snprintf(buf, len, "a positive integer or \"auto\"");
        break;
    case HE__CONF_LISTEN:
        snprintf(buf, len,
                 "an address \"host:port\" or \"[v6]:port\" (IP literal, port 1..65535), or a "
                 "list of them");
        break;
    case HE__CONF_ADDR:
        snprintf(buf, len,
                 "an address \"host:port\" or \"[v6]:port\" (IP literal, port 1..65535), or "
                 "\"off\"");
        break;
    case HE__CONF_CPUS:
        snprintf(buf, len, "\"auto\" or a list of CPU numbers in 0..%u", k->max);
        break;
    default:
        snprintf(buf, len, "a value");
        break;
    }
}

int he__conf_set(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                 char *why, size_t whylen)
{
    char expect[256], got[64];
    int rc;

    why[0] = '\0';
    if (he_conf_types[k->type].set == NULL) return -EINVAL;
    if (memchr(v, '\0', len) != NULL) {
        snprintf(why, whylen, "expected a value without NUL bytes");
        return -EINVAL;
    }
    rc = he_conf_types[k->type].set(c, k, v, len, idx, why, whylen);
    if (rc < 0 && why[0] == '\0') {
        he__conf_expect(k, expect, sizeof(expect));
        he_conf_quote(v, len, got, sizeof(got));
        snprintf(why, whylen, "expected %s, got %s", expect, got);
    }
    return rc;
}

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
        const char *name = he__conf_keys[i].name + skip;
        if (!he__conf_in_section(i, section)) continue;
        if (strlen(name) == len && memcmp(name, leaf, len) == 0) return (int)i;
    }
    return -1;
}

static int he_conf_index(const char *name)
{
    for (size_t i = 0; i < he__conf_nkeys; i++) {
        if (strcmp(he__conf_keys[i].name, name) == 0) return (int)i;
    }
    return -1;
}

int he__conf_check(const he_conf_t *c, const unsigned char *seen, int *bad, char *why,
                   size_t whylen)
{
    for (size_t r = 0; r < sizeof(he_conf_le_rules) / sizeof(he_conf_le_rules[0]); r++) {
        int lo = he_conf_index(he_conf_le_rules[r].lo);
        int hi = he_conf_index(he_conf_le_rules[r].hi);
        unsigned vlo, vhi;

        memcpy(&vlo, (const char *)c + he__conf_keys[lo].off, sizeof(vlo));
        memcpy(&vhi, (const char *)c + he__conf_keys[hi].off, sizeof(vhi));
        if (vlo <= vhi) continue;
        /* Blame the key the file set: with only header_bytes lowered, the
         * default uri_bytes is not what the user wrote. */
        if (seen[lo] || !seen[hi]) {
            *bad = lo;
            snprintf(why, whylen, "expected at most %s (%u), got %u", he__conf_keys[hi].name, vhi,
                     vlo);
        } else {
            *bad = hi;
            snprintf(why, whylen, "expected at least %s (%u), got %u", he__conf_keys[lo].name, vlo,
                     vhi);
        }
        return -EINVAL;
    }
    return 0;
}
