/* conf/set.c: what each type of key accepts. One setter per type turns a
 * YAML scalar into the field of he_conf_t that the key's row names, and
 * he__conf_expect says in words what the type accepts, which every error
 * that has nothing more precise to say is built from ("expected <that>,
 * got <value>"). The list types live in set_list.c. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conf/internal.h"

#define HE_CONF_FIELD(c, k) ((char *)(c) + (k)->off)

void he__conf_cat(char *buf, size_t len, const char *s)
{
    size_t used = strlen(buf);
    if (used + 1 < len) snprintf(buf + used, len - used, "%s", s);
}

void he__conf_quote(const char *v, size_t len, char *buf, size_t buflen)
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
    if (max < len) he__conf_cat(buf, buflen, "...");
}

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

static int he_conf_set_size(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                            int idx, char *why, size_t whylen)
{
    uint64_t n;
    int rc = he__conf_parse_size(v, len, &n);

    if (rc < 0) return rc;
    if (n < k->min || n > k->max) return -ERANGE;
    memcpy(HE_CONF_FIELD(c, k), &n, sizeof(n));
    return 0;
}

/* An enum is stored through an unsigned, or, for a two-way choice such as
 * origin.sources, as the bool "is it the second name". */
static int he_conf_set_enum(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len,
                            int idx, char *why, size_t whylen)
{
    for (unsigned i = 0; k->names[i] != NULL; i++) {
        if (strcmp(v, k->names[i]) != 0) continue;
        if (k->size == sizeof(bool)) {
            bool b = i != 0;
            memcpy(HE_CONF_FIELD(c, k), &b, sizeof(b));
        } else {
            memcpy(HE_CONF_FIELD(c, k), &i, sizeof(i));
        }
        return 0;
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
            he__conf_quote(v, len, got, sizeof(got));
            snprintf(why, whylen, "expected \"auto\" or an integer in %llu..%llu, got %s",
                     (unsigned long long)k->min, (unsigned long long)k->max, got);
            return -ERANGE;
        }
    }
    c->workers = n;
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
    [HE__CONF_LISTEN] = {he__conf_set_listen, 1},
    [HE__CONF_ADDR] = {he_conf_set_addr, 0},
    [HE__CONF_CPUS] = {he__conf_set_cpus, 1},
    [HE__CONF_SIZE] = {he_conf_set_size, 0},
    [HE__CONF_STRS] = {he__conf_set_strs, 1},
    [HE__CONF_STORES] = {he__conf_set_stores, 1},
    [HE__CONF_FLAGS] = {he__conf_set_flags, 1},
};

int he__conf_takes_list(const he__conf_key_t *k)
{
    return he_conf_types[k->type].list;
}

#define HE_CONF_ADDR_TEXT "an address \"host:port\" or \"[v6]:port\" (IP literal, port 1..65535)"

void he__conf_expect(const he__conf_key_t *k, char *buf, size_t len)
{
    char lo[24], hi[24];
    int section = (int)(k - he__conf_keys);

    buf[0] = '\0';
    switch (k->type) {
    case HE__CONF_SECTION:
        he__conf_cat(buf, len, "a mapping with keys ");
        for (size_t i = 0, n = 0; i < he__conf_nkeys; i++) {
            if (!he__conf_in_section(i, section)) continue;
            if (n++) he__conf_cat(buf, len, ", ");
            he__conf_cat(buf, len, strrchr(he__conf_keys[i].name, '.') + 1);
        }
        break;
    case HE__CONF_UINT:
        snprintf(buf, len, "an integer in %llu..%llu", (unsigned long long)k->min,
                 (unsigned long long)k->max);
        break;
    case HE__CONF_BOOL:
        snprintf(buf, len, "true or false");
        break;
    case HE__CONF_STR:
        snprintf(buf, len, "%s",
                 k->flags & HE__CONF_F_NONEMPTY ? "a non-empty string" : "a string");
        break;
    case HE__CONF_DURATION:
        he__conf_fmt_ms((unsigned)k->min, lo, sizeof(lo));
        he__conf_fmt_ms((unsigned)k->max, hi, sizeof(hi));
        snprintf(buf, len, "a duration in %s..%s such as \"250ms\", \"10s\" or \"2m\"", lo, hi);
        break;
    case HE__CONF_SIZE:
        he__conf_fmt_size(k->min, lo, sizeof(lo));
        he__conf_fmt_size(k->max, hi, sizeof(hi));
        snprintf(buf, len, "a size in %s..%s such as \"512m\" or \"2g\"", lo, hi);
        break;
    case HE__CONF_ENUM:
        he__conf_cat(buf, len, "one of ");
        for (size_t i = 0; k->names[i] != NULL; i++) {
            if (i) he__conf_cat(buf, len, ", ");
            he__conf_cat(buf, len, k->names[i]);
        }
        break;
    case HE__CONF_WORKERS:
        snprintf(buf, len, "a positive integer or \"auto\"");
        break;
    case HE__CONF_LISTEN:
        snprintf(buf, len, "%s, or a list of them", HE_CONF_ADDR_TEXT);
        break;
    case HE__CONF_ADDR:
        snprintf(buf, len, "%s, or \"off\"", HE_CONF_ADDR_TEXT);
        break;
    case HE__CONF_CPUS:
        snprintf(buf, len, "\"auto\" or a list of CPU numbers in 0..%llu",
                 (unsigned long long)k->max);
        break;
    case HE__CONF_STRS:
        if (k->flags & HE__CONF_F_URL)
            snprintf(buf, len,
                     "an http:// or https:// URL such as \"https://origin.example.com/vod\", or "
                     "a list of them");
        else if (k->flags & HE__CONF_F_TOKEN)
            snprintf(buf, len, "a %s of letters, digits and !#$%%'*+-.^_`|~, or a list of them",
                     k->item);
        else
            snprintf(buf, len, "a %s, or a list of them", k->item);
        break;
    case HE__CONF_STORES:
        he__conf_fmt_size(k->min, lo, sizeof(lo));
        snprintf(buf, len,
                 "\"DIR:SIZE\" such as \"/var/cache/hlsedge:100g\" (SIZE at least %s), or a list "
                 "of them",
                 lo);
        break;
    case HE__CONF_FLAGS:
        he__conf_cat(buf, len, "one of ");
        for (size_t i = 0; k->names[i] != NULL; i++) {
            he__conf_cat(buf, len, k->names[i]);
            he__conf_cat(buf, len, ", ");
        }
        he__conf_cat(buf, len, "or \"all\", or a list of them");
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
        he__conf_quote(v, len, got, sizeof(got));
        snprintf(why, whylen, "expected %s, got %s", expect, got);
    }
    return rc;
}
