/* conf/check.c: rules that span keys, checked once the whole file is read
 * (a key may come before the one it depends on). Each failure names one key
 * to blame, and yaml.c points the message at that key's value. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/internal.h"

/* value(lo) <= value(hi) for two keys of one type (integer, duration or
 * size); with zero_ok, hi = 0 turns the rule off (0 means "none"). */
static const struct {
    const char *lo, *hi;
    int zero_ok;
} he_conf_le_rules[] = {
    {"limits.uri_bytes", "limits.header_bytes", 0}, /* the target is part of the head */
    {"cache.ram_object_max", "cache.ram_size", 1},  /* an object must fit the RAM tier */
};

static uint64_t he_conf_value(const he_conf_t *c, const he__conf_key_t *k)
{
    const char *f = (const char *)c + k->off;
    uint64_t v64;
    unsigned v;

    if (k->type == HE__CONF_SIZE) {
        memcpy(&v64, f, sizeof(v64));
        return v64;
    }
    memcpy(&v, f, sizeof(v));
    return v;
}

/* A value as the file would spell it. */
static void he_conf_fmt_value(const he__conf_key_t *k, uint64_t v, char *buf, size_t len)
{
    if (k->type == HE__CONF_SIZE)
        he__conf_fmt_size(v, buf, len);
    else if (k->type == HE__CONF_DURATION)
        he__conf_fmt_ms((unsigned)v, buf, len);
    else
        snprintf(buf, len, "%llu", (unsigned long long)v);
}

static int he_conf_check_le(const he_conf_t *c, const unsigned char *seen, int *bad, char *why,
                            size_t whylen)
{
    for (size_t r = 0; r < sizeof(he_conf_le_rules) / sizeof(he_conf_le_rules[0]); r++) {
        int lo = he__conf_index(he_conf_le_rules[r].lo);
        int hi = he__conf_index(he_conf_le_rules[r].hi);
        const he__conf_key_t *klo = &he__conf_keys[lo], *khi = &he__conf_keys[hi];
        uint64_t vlo = he_conf_value(c, klo), vhi = he_conf_value(c, khi);
        char slo[24], shi[24];

        if (vlo <= vhi || (he_conf_le_rules[r].zero_ok && vhi == 0)) continue;
        he_conf_fmt_value(klo, vlo, slo, sizeof(slo));
        he_conf_fmt_value(khi, vhi, shi, sizeof(shi));
        /* Blame the key the file set: with only header_bytes lowered, the
         * default uri_bytes is not what the user wrote. */
        if (seen[lo] || !seen[hi]) {
            *bad = lo;
            snprintf(why, whylen, "expected at most %s (%s), got %s", khi->name, shi, slo);
        } else {
            *bad = hi;
            snprintf(why, whylen, "expected at least %s (%s)%s, got %s", klo->name, slo,
                     he_conf_le_rules[r].zero_ok ? " or 0" : "", shi);
        }
        return -EINVAL;
    }
    return 0;
}

/* HTTPS addresses need a certificate, and must not also be HTTP ones: both
 * listeners use SO_REUSEPORT, so the kernel would split connections to one
 * address between the two at random. */
static int he_conf_check_tls(const he_conf_t *c, int *bad, char *why, size_t whylen)
{
    if (c->ntls_listen == 0) return 0;
    *bad = he__conf_index("tls.listen");
    if (c->ntls_certs == 0) {
        snprintf(why, whylen, "expected at least one tls.certificates entry to serve HTTPS with");
        return -EINVAL;
    }
    for (unsigned i = 0; i < c->ntls_listen; i++) {
        for (unsigned j = 0; j < c->nlisten; j++) {
            if (strcmp(c->tls_listen[i].text, c->listen[j].text) != 0) continue;
            snprintf(why, whylen, "duplicate address %s (also in listen)", c->listen[j].text);
            return -EEXIST;
        }
    }
    return 0;
}

static int he_conf_check_origin(const he_conf_t *c, int *bad, char *why, size_t whylen)
{
    if (!c->origin_first || c->norigin_urls > 0) return 0;
    *bad = he__conf_index("origin.sources");
    snprintf(why, whylen, "expected at least one origin.urls entry for origin-first");
    return -EINVAL;
}

int he__conf_check(const he_conf_t *c, const unsigned char *seen, int *bad, char *why,
                   size_t whylen)
{
    int rc;

    if ((rc = he_conf_check_le(c, seen, bad, why, whylen)) < 0) return rc;
    if ((rc = he_conf_check_tls(c, bad, why, whylen)) < 0) return rc;
    return he_conf_check_origin(c, bad, why, whylen);
}
