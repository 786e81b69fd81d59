/* conf/auth.c: the rules of the auth list. yaml.c walks the list of
 * mappings and hands each key of a rule here; this file knows the keys,
 * their defaults and the rules a whole rule must keep. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/internal.h"
#include "segment/segment.h"

const char *const he__conf_auth_keys[] = {
    "prefix", "scheme",  "param",        "keys",          "propagate",       "cookie",
    "clock_skew", "to_origin", "template", "md5_param", "expires_param", "propagate_hosts", NULL,
};

void he__conf_auth_init(he_conf_auth_t *r)
{
    memset(r, 0, sizeof(*r));
    r->scheme = HE_CONF_AUTH_EDGEAUTH;
    snprintf(r->param, sizeof(r->param), "__token__");
    r->propagate = true;
    r->clock_skew_ms = 30000;
    /* nginx's documented example: secure_link_md5 "$secure_link_expires$uri$remote_addr secret" */
    snprintf(r->template_, sizeof(r->template_), "$expires$uri$remote_addr $secret");
    snprintf(r->md5_param, sizeof(r->md5_param), "md5");
    snprintf(r->expires_param, sizeof(r->expires_param), "expires");
}

static int he_conf_auth_str(char *dst, size_t cap, const char *v, size_t len, bool token,
                            char *why, size_t whylen)
{
    if (len == 0 || len >= cap) {
        snprintf(why, whylen, "expected 1..%zu bytes, got %zu", cap - 1, len);
        return -EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch < 0x21 || ch == 0x7f || (token && (ch == '&' || ch == '=' || ch == ';'))) {
            char q[64];
            he__conf_quote(v, len, q, sizeof(q));
            snprintf(why, whylen, "expected %s, got %s",
                     token ? "a parameter name without spaces, controls, '&', '=' or ';'"
                           : "no spaces or control characters",
                     q);
            return -EINVAL;
        }
    }
    memcpy(dst, v, len);
    dst[len] = 0;
    return 0;
}

static int he_conf_auth_key(he_conf_auth_t *r, const char *v, size_t len, int idx, char *why,
                            size_t whylen)
{
    unsigned i = idx < 0 ? 0 : (unsigned)idx;
    char q[64];
    if (i == 0) r->nkeys = 0;
    if (i >= HE_CONF_AUTH_MAX_KEYS) {
        snprintf(why, whylen, "expected at most %d keys", HE_CONF_AUTH_MAX_KEYS);
        return -EINVAL;
    }
    he__conf_quote(v, len > 8 ? 8 : len, q, sizeof(q)); /* a key's start only: it is a secret */
    if (len == 0 || len % 2 || len / 2 > HE_CONF_AUTH_KEY_MAX) {
        snprintf(why, whylen, "expected a key of 2..%d hex digits, an even count, got %zu digits",
                 2 * HE_CONF_AUTH_KEY_MAX, len);
        return -EINVAL;
    }
    for (size_t j = 0; j < len; j += 2) {
        int hi = he_seg_hex_digit((unsigned char)v[j]), lo = he_seg_hex_digit((unsigned char)v[j + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(why, whylen, "expected hex digits, got %s... (a byte at %zu is not)", q, j);
            return -EINVAL;
        }
        r->keys[i][j / 2] = (unsigned char)(hi << 4 | lo);
    }
    r->key_len[i] = (unsigned)(len / 2);
    r->nkeys = i + 1;
    return 0;
}

static int he_conf_auth_host(he_conf_auth_t *r, const char *v, size_t len, int idx, char *why,
                             size_t whylen)
{
    unsigned i = idx < 0 ? 0 : (unsigned)idx;
    if (i == 0) r->npropagate_hosts = 0;
    if (len == 0 && idx < 0) return 0; /* "" or []: none */
    if (i >= HE_CONF_AUTH_MAX_HOSTS) {
        snprintf(why, whylen, "expected at most %d hosts", HE_CONF_AUTH_MAX_HOSTS);
        return -EINVAL;
    }
    for (size_t j = 0; j < len; j++) {
        if (v[j] == '/' || v[j] == '?' || v[j] == '#' || v[j] == '@') {
            char q[64];
            he__conf_quote(v, len, q, sizeof(q));
            snprintf(why, whylen, "expected a host or host:port, got %s", q);
            return -EINVAL;
        }
    }
    if (he_conf_auth_str(r->propagate_hosts[i], sizeof(r->propagate_hosts[i]), v, len, false, why,
                         whylen) < 0)
        return -EINVAL;
    r->npropagate_hosts = i + 1;
    return 0;
}

static bool he_conf_auth_is(const char *key, size_t klen, const char *name)
{
    return strlen(name) == klen && memcmp(key, name, klen) == 0;
}

int he__conf_auth_takes_list(const char *key, size_t klen)
{
    return he_conf_auth_is(key, klen, "keys") || he_conf_auth_is(key, klen, "propagate_hosts");
}

int he__conf_auth_set(he_conf_auth_t *r, const char *key, size_t klen, const char *v, size_t len,
                      int idx, char *why, size_t whylen)
{
    char q[64];
    bool b;

    why[0] = 0;
    if (he_conf_auth_is(key, klen, "keys")) return he_conf_auth_key(r, v, len, idx, why, whylen);
    if (he_conf_auth_is(key, klen, "propagate_hosts"))
        return he_conf_auth_host(r, v, len, idx, why, whylen);
    he__conf_quote(v, len, q, sizeof(q));
    if (he_conf_auth_is(key, klen, "prefix")) {
        if (len == 0 || v[0] != '/') {
            snprintf(why, whylen, "expected a path starting with '/', got %s", q);
            return -EINVAL;
        }
        return he_conf_auth_str(r->prefix, sizeof(r->prefix), v, len, false, why, whylen);
    }
    if (he_conf_auth_is(key, klen, "scheme")) {
        if (len == 8 && memcmp(v, "edgeauth", 8) == 0) {
            r->scheme = HE_CONF_AUTH_EDGEAUTH;
        } else if (len == 11 && memcmp(v, "secure_link", 11) == 0) {
            r->scheme = HE_CONF_AUTH_SECURE_LINK;
        } else {
            snprintf(why, whylen, "expected edgeauth or secure_link, got %s", q);
            return -EINVAL;
        }
        return 0;
    }
    if (he_conf_auth_is(key, klen, "param"))
        return he_conf_auth_str(r->param, sizeof(r->param), v, len, true, why, whylen);
    if (he_conf_auth_is(key, klen, "md5_param"))
        return he_conf_auth_str(r->md5_param, sizeof(r->md5_param), v, len, true, why, whylen);
    if (he_conf_auth_is(key, klen, "expires_param"))
        return he_conf_auth_str(r->expires_param, sizeof(r->expires_param), v, len, true, why,
                                whylen);
    if (he_conf_auth_is(key, klen, "template")) {
        if (len == 0 || len >= sizeof(r->template_)) {
            snprintf(why, whylen, "expected 1..%zu bytes, got %zu", sizeof(r->template_) - 1, len);
            return -EINVAL;
        }
        memcpy(r->template_, v, len);
        r->template_[len] = 0;
        return 0;
    }
    if (he_conf_auth_is(key, klen, "clock_skew")) {
        unsigned ms;
        if (he_conf_parse_duration_ms(v, &ms) < 0 || ms > 3600000) {
            snprintf(why, whylen, "expected a duration in 0s..1h, got %s", q);
            return -EINVAL;
        }
        r->clock_skew_ms = ms;
        return 0;
    }
    if (he_conf_auth_is(key, klen, "propagate") || he_conf_auth_is(key, klen, "cookie") ||
        he_conf_auth_is(key, klen, "to_origin")) {
        if (he__conf_parse_bool(v, &b) < 0) {
            snprintf(why, whylen, "expected true or false, got %s", q);
            return -EINVAL;
        }
        if (key[0] == 'p') r->propagate = b;
        else if (key[0] == 'c') r->cookie = b;
        else r->to_origin = b;
        return 0;
    }
    return -ENOENT;
}

/* The template's variables, as nginx spells them without the
 * "secure_link_" of $secure_link_expires. */
static int he_conf_auth_template_ok(const char *t, char *why, size_t whylen)
{
    bool secret = false;
    for (const char *p = strchr(t, '$'); p; p = strchr(p + 1, '$')) {
        static const char *const vars[] = {"expires", "uri", "remote_addr", "secret", NULL};
        size_t i;
        for (i = 0; vars[i]; i++)
            if (strncmp(p + 1, vars[i], strlen(vars[i])) == 0) break;
        if (!vars[i]) {
            snprintf(why, whylen, "expected only $expires, $uri, $remote_addr and $secret, got %.20s",
                     p);
            return -EINVAL;
        }
        if (i == 3) secret = true;
    }
    if (!secret) {
        snprintf(why, whylen, "expected $secret in the template (else anyone can sign)");
        return -EINVAL;
    }
    return 0;
}

int he__conf_auth_check(const he_conf_t *c, const he_conf_auth_t *r, const char **key, char *why,
                        size_t whylen)
{
    *key = NULL;
    if (!r->prefix[0]) {
        snprintf(why, whylen, "expected a prefix in every rule");
        return -EINVAL;
    }
    if (r->nkeys == 0) {
        snprintf(why, whylen, "expected at least one key in keys");
        return -EINVAL;
    }
    if (r->scheme == HE_CONF_AUTH_SECURE_LINK) {
        *key = "template";
        if (he_conf_auth_template_ok(r->template_, why, whylen) < 0) return -EINVAL;
        *key = "cookie";
        if (r->cookie) {
            snprintf(why, whylen, "expected false for secure_link (its md5 travels in the query)");
            return -EINVAL;
        }
        *key = "expires_param";
        if (strcmp(r->md5_param, r->expires_param) == 0) {
            snprintf(why, whylen, "expected a name other than md5_param's");
            return -EINVAL;
        }
    }
    /* a token in the cache key would split the cache per viewer */
    for (unsigned i = 0; i < c->ncache_key_params; i++) {
        const char *p = c->cache_key_params[i];
        if (r->scheme == HE_CONF_AUTH_EDGEAUTH ? strcmp(p, r->param) == 0
                                               : strcmp(p, r->md5_param) == 0 ||
                                                     strcmp(p, r->expires_param) == 0) {
            *key = r->scheme == HE_CONF_AUTH_EDGEAUTH ? "param" : "md5_param";
            snprintf(why, whylen, "expected a parameter that cache.key_params does not list, got \"%s\"",
                     p);
            return -EINVAL;
        }
    }
    for (unsigned i = 0; i < c->nauth; i++) {
        if (&c->auth[i] != r && strcmp(c->auth[i].prefix, r->prefix) == 0) {
            *key = "prefix";
            snprintf(why, whylen, "duplicate prefix \"%s\" (rule %u has it too)", r->prefix, i + 1);
            return -EEXIST;
        }
    }
    return 0;
}

const he_conf_auth_t *he_conf_auth_match(const he_conf_t *c, const char *path, size_t len)
{
    const he_conf_auth_t *best = NULL;
    size_t best_len = 0;
    for (unsigned i = 0; i < c->nauth; i++) {
        size_t n = strlen(c->auth[i].prefix) - 1; /* without its '/': path has none */
        if (n <= len && (!best || n > best_len) && memcmp(c->auth[i].prefix + 1, path, n) == 0) {
            best = &c->auth[i];
            best_len = n;
        }
    }
    return best;
}
