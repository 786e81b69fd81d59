/* Cache keys. The key is the normalized path plus only the query
 * parameters the config names (cache.key_params), so signature tokens and
 * player cache-busters do not split one object into many. Parameters are
 * emitted in config order with canonical percent-encoding, so "?b=2&a=1",
 * "?a=%31&b=2" and "?sig=x&a=1&b=2" give the same key when a and b are
 * named.
 *
 * The normalized path has its escapes decoded, so a file may be named
 * "x.ts?lang=en" (requested as "/x.ts%3Flang=en"). In the key the path's
 * '%', '?' and '#' are escaped again: the first '?' of a key always starts
 * its parameters, and "/" + the key's path is a target naming the same
 * path. Only the unreserved bytes of a parameter are decoded (RFC 3986
 * 6.2.2.2): a raw '+' and %2B differ for origins that read queries as
 * forms ('+' is a space there), so they must not share a key.
 *
 * Low-Latency HLS delivery directives (draft-pantos-hls-rfc8216bis 6.2.5)
 * are query parameters a player adds to a playlist request: _HLS_msn,
 * _HLS_part and _HLS_skip ask for another answer (a later playlist, a
 * delta), so on a playlist path they are always in the key, whatever
 * cache.key_params says, after the configured parameters and in UTF-8
 * order of their names (the order 6.2.5.2 asks players to use, so every
 * player's request for one answer shares one key). Every other name that
 * starts with _HLS_ is reserved for directives and means nothing to us:
 * never in a key, even when configured, and directives on a segment are
 * not keyed either. Directives on a playlist with EXT-X-ENDLIST are to be
 * ignored, but the key is made before the playlist is known: such
 * variants stay separate keys, each answered with the whole playlist. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cache/key.h"
#include "segment/segment.h"

#define HE_CACHE_KEY_MAX_PARAMS 32

uint64_t he_cache_hash(const void *p, size_t n)
{
    /* 8 bytes at a time with a multiply-rotate step, then the splitmix64
     * finalizer: fast and well mixed; not meant to resist an attacker
     * (keys are compared in full wherever a collision would matter). */
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h ^= v * 0x87c37b91114253d5ull;
        h = (h << 31 | h >> 33) * 0x4cf5ad432745937full;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)s[i] << (8 * i);
    h ^= v * 0x87c37b91114253d5ull;
    return he_cache_mix64(h);
}

int he_cache_key_set(he_cache_key_t *key, const char *s, size_t len)
{
    const char *q;
    if (len >= sizeof(key->s)) return -ENAMETOOLONG;
    memcpy(key->s, s, len);
    key->s[len] = '\0';
    key->len = (uint32_t)len;
    q = memchr(s, '?', len);
    key->path_len = (uint32_t)(q ? (size_t)(q - s) : len);
    key->hash = he_cache_hash(key->s, len);
    return 0;
}

static bool he_cache_key_unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* RFC 3986 gen-delims and sub-delims that may stand raw in a query
 * parameter ('#' ends the query, '&' and '=' split it): kept as sent,
 * since they need not mean what their escapes mean. */
static bool he_cache_key_raw_ok(unsigned char c, bool literal)
{
    if (c == 0 || !strchr(":/?#[]@!$&'()*+,;=", c)) return false;
    return !literal || (c != '#' && c != '&' && c != '=');
}

/* Writes [p, p+n) in canonical form to out (room for a NUL is kept):
 * escapes of unreserved bytes decoded, other escapes upper-case, reserved
 * bytes as they are, anything else escaped. literal: p is a plain name
 * from the config (a '%' there is a byte, not an escape). Length, or
 * -EINVAL (bad escape), -ENAMETOOLONG. */
static int he_cache_key_canon(const char *p, size_t n, bool literal, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        bool esc;
        if (c == '%' && !literal) {
            int hi, lo;
            if (n - i < 3) return -EINVAL;
            hi = he_seg_hex_digit((unsigned char)p[i + 1]);
            lo = he_seg_hex_digit((unsigned char)p[i + 2]);
            if (hi < 0 || lo < 0) return -EINVAL;
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
            esc = !he_cache_key_unreserved(c);
        } else {
            esc = !he_cache_key_unreserved(c) && !he_cache_key_raw_ok(c, literal);
        }
        if (o + (esc ? 3 : 1) >= cap) return -ENAMETOOLONG;
        if (esc) {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    return (int)o;
}

/* [p, p+n) is already in canonical form: no escapes, nothing to escape.
 * The usual name (lang, bw) is, and then needs no copy to compare. */
static bool he_cache_key_is_canon(const char *p, size_t n, bool literal)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '%' || (!he_cache_key_unreserved(c) && !he_cache_key_raw_ok(c, literal)))
            return false;
    }
    return true;
}

/* Escapes '%', '?' and '#' of the normalized path s[0..n) in place (cap
 * bytes with the NUL): most paths have none and cost one scan. Length or
 * -ENAMETOOLONG. */
static int he_cache_key_escape_path(char *s, size_t n, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    size_t extra = 0, o, i = 0;
    /* 8 bytes at a time to the first that may need an escape (a byte
     * equal to one of the three makes its xor zero) */
    for (; i + 8 <= n; i += 8) {
        uint64_t v, a, b, c;
        memcpy(&v, s + i, 8);
        a = v ^ (ones * '%');
        b = v ^ (ones * '?');
        c = v ^ (ones * '#');
        if (((a - ones) & ~a & high) | ((b - ones) & ~b & high) | ((c - ones) & ~c & high)) break;
    }
    for (; i < n; i++)
        if (s[i] == '%' || s[i] == '?' || s[i] == '#') extra += 2;
    if (!extra) return (int)n;
    if (n + extra >= cap) return -ENAMETOOLONG;
    o = n + extra;
    s[o] = '\0';
    for (i = n; i-- > 0;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%' || c == '?' || c == '#') {
            s[--o] = hex[c & 15];
            s[--o] = hex[c >> 4];
            s[--o] = '%';
        } else {
            s[--o] = (char)c;
        }
    }
    return (int)(n + extra);
}

int he_cache_key_path(const char *target, size_t len, char *out, size_t cap)
{
    int rc = he_seg_url_normalize(target, len, out, cap);
    if (rc < 0) return rc;
    return he_cache_key_escape_path(out, (size_t)rc, cap);
}

/* The directives that select a playlist answer, in UTF-8 order; their
 * conf_index follows the configured names'. */
static const char *const he_cache_key_directives[] = {"_HLS_msn", "_HLS_part", "_HLS_skip"};
#define HE_CACHE_KEY_NDIRECTIVES 3

typedef struct he_cache_key_param {
    unsigned conf_index; /* position in conf->cache_key_params, or nconf + directive */
    unsigned order;      /* position in the request */
    const char *val;     /* raw (still escaped) */
    size_t val_len;
} he_cache_key_param_t;

int he_cache_key_make(const he_conf_t *conf, const char *target, size_t len, he_cache_key_t *key)
{
    he_cache_key_param_t params[HE_CACHE_KEY_MAX_PARAMS];
    unsigned nparams = 0, nconf = 0;
    const char *q, *end = target + len, *hash;
    bool playlist;
    int rc;

    rc = he_cache_key_path(target, len, key->s, sizeof(key->s));
    if (rc < 0) return rc;
    key->len = key->path_len = (uint32_t)rc;

    hash = memchr(target, '#', len);
    if (hash) end = hash;
    q = memchr(target, '?', (size_t)(end - target));
    playlist = he_seg_type_from_path(key->s, key->path_len) == HE_SEG_TYPE_M3U8;
    if (conf) nconf = conf->ncache_key_params;
    if (q && (nconf || playlist)) {
        const char *p = q + 1;
        unsigned order = 0;
        /* per configured name, once per key rather than per parameter:
         * its length, and whether it is its own canonical form */
        size_t clen[HE_CONF_MAX_KEY_PARAMS];
        bool ccanon[HE_CONF_MAX_KEY_PARAMS];
        if (nconf > HE_CONF_MAX_KEY_PARAMS) nconf = HE_CONF_MAX_KEY_PARAMS;
        for (unsigned i = 0; i < nconf; i++) {
            clen[i] = strlen(conf->cache_key_params[i]);
            ccanon[i] = he_cache_key_is_canon(conf->cache_key_params[i], clen[i], true);
        }
        while (p < end) {
            const char *amp = memchr(p, '&', (size_t)(end - p));
            const char *pe = amp ? amp : end;
            const char *eq = memchr(p, '=', (size_t)(pe - p));
            const char *ne = eq ? eq : pe;
            char buf[3 * sizeof(conf->cache_key_params[0])], want[sizeof(buf)];
            const char *name = p;
            int nl = (int)(ne - p);
            /* canonical copies only of names that need one: this runs for
             * every parameter of every cached request */
            if (!he_cache_key_is_canon(p, (size_t)nl, false)) {
                nl = he_cache_key_canon(p, (size_t)nl, false, buf, sizeof(buf));
                name = buf;
            }
            if (nl == -EINVAL) return -EINVAL;
            if (nl >= 5 && memcmp(name, "_HLS_", 5) == 0) {
                for (unsigned d = 0; playlist && d < HE_CACHE_KEY_NDIRECTIVES; d++) {
                    if (strlen(he_cache_key_directives[d]) != (size_t)nl ||
                        memcmp(he_cache_key_directives[d], name, (size_t)nl) != 0)
                        continue;
                    if (nparams == HE_CACHE_KEY_MAX_PARAMS) return -ENAMETOOLONG;
                    params[nparams].conf_index = nconf + d;
                    params[nparams].order = order;
                    params[nparams].val = eq ? eq + 1 : pe;
                    params[nparams].val_len = eq ? (size_t)(pe - eq - 1) : 0;
                    nparams++;
                    break;
                }
            } else if (nl >= 0) {
                for (unsigned i = 0; i < nconf; i++) {
                    const char *c = conf->cache_key_params[i];
                    size_t cl = clen[i];
                    bool same;
                    /* A configured name's canonical form is itself or
                     * longer (literal: only escapes are added), so most
                     * pairs are told apart by length alone. */
                    if (cl > (size_t)nl) {
                        same = false;
                    } else if (cl == (size_t)nl) {
                        same = ccanon[i] && memcmp(c, name, cl) == 0;
                    } else if (ccanon[i]) {
                        same = false;
                    } else {
                        int wl = he_cache_key_canon(c, cl, true, want, sizeof(want));
                        same = wl == nl && memcmp(want, name, (size_t)nl) == 0;
                    }
                    if (same) {
                        if (nparams == HE_CACHE_KEY_MAX_PARAMS) return -ENAMETOOLONG;
                        params[nparams].conf_index = i;
                        params[nparams].order = order;
                        params[nparams].val = eq ? eq + 1 : pe;
                        params[nparams].val_len = eq ? (size_t)(pe - eq - 1) : 0;
                        nparams++;
                        break;
                    }
                }
            }
            order++;
            p = pe + 1;
        }
    }

    /* insertion sort by (config position, request position): stable and
     * small */
    for (unsigned i = 1; i < nparams; i++) {
        he_cache_key_param_t t = params[i];
        unsigned j = i;
        while (j > 0 &&
               (params[j - 1].conf_index > t.conf_index ||
                (params[j - 1].conf_index == t.conf_index && params[j - 1].order > t.order))) {
            params[j] = params[j - 1];
            j--;
        }
        params[j] = t;
    }

    for (unsigned i = 0; i < nparams; i++) {
        unsigned ci = params[i].conf_index;
        const char *name =
            ci < nconf ? conf->cache_key_params[ci] : he_cache_key_directives[ci - nconf];
        if (key->len + 1 >= sizeof(key->s)) return -ENAMETOOLONG;
        key->s[key->len++] = i == 0 ? '?' : '&';
        rc = he_cache_key_canon(name, strlen(name), true, key->s + key->len,
                                sizeof(key->s) - key->len);
        if (rc < 0) return rc;
        key->len += (uint32_t)rc;
        if (key->len + 1 >= sizeof(key->s)) return -ENAMETOOLONG;
        key->s[key->len++] = '=';
        rc = he_cache_key_canon(params[i].val, params[i].val_len, false, key->s + key->len,
                                sizeof(key->s) - key->len);
        if (rc < 0) return rc;
        key->len += (uint32_t)rc;
    }
    key->s[key->len] = '\0';
    key->hash = he_cache_hash(key->s, key->len);
    return 0;
}
