/* Signed-URL tokens, as pure functions: Akamai EdgeAuth 2.0 (the layout of
 * akamai/EdgeAuth-Token-Python: fields joined by '~', HMAC-SHA256 keyed
 * with the hex-decoded key over the fields before "hmac=") and nginx's
 * secure_link_md5 (MD5 over a template, base64url without padding).
 * Nothing here knows a request; auth.c feeds it. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "segment/segment.h"
#include "server/handler/auth.h"

/* ---------------------------------------------------------------- parsing */

int he_auth_pct_decode(const char *src, size_t len, char *dst, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = src[i];
        if (ch == '%') {
            int hi, lo;
            if (i + 2 >= len) return -EINVAL;
            hi = he_seg_hex_digit((unsigned char)src[i + 1]);
            lo = he_seg_hex_digit((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return -EINVAL;
            ch = (char)(hi << 4 | lo);
            i += 2;
        }
        if (o + 1 >= cap) return -ENAMETOOLONG;
        dst[o++] = ch;
    }
    dst[o] = 0;
    return (int)o;
}

static int he_auth_u64(const he_auth_field_t *f, uint64_t *out)
{
    uint64_t v = 0;
    if (f->len == 0 || f->len > 19) return -EINVAL;
    for (size_t i = 0; i < f->len; i++) {
        unsigned d = (unsigned)(f->p[i] - '0');
        if (d > 9) return -EINVAL;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int he_auth_edgeauth_parse(const char *tok, size_t len, he_auth_edgeauth_t *t)
{
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
        {"ip", offsetof(he_auth_edgeauth_t, ip)},     {"st", offsetof(he_auth_edgeauth_t, st)},
        {"exp", offsetof(he_auth_edgeauth_t, exp)},   {"acl", offsetof(he_auth_edgeauth_t, acl)},
        {"id", offsetof(he_auth_edgeauth_t, id)},     {"data", offsetof(he_auth_edgeauth_t, data)},
        {"hmac", offsetof(he_auth_edgeauth_t, hmac)},
    };
    const char *s = tok, *end = tok + len;

    memset(t, 0, sizeof(*t));
    if (len == 0) return -EINVAL;
    while (s < end) {
        const char *tilde = memchr(s, '~', (size_t)(end - s));
        const char *fe = tilde ? tilde : end;
        const char *eq = memchr(s, '=', (size_t)(fe - s));
        he_auth_field_t *f = NULL;
        size_t i;

        if (t->hmac.p) return -EINVAL; /* hmac is the last field */
        if (!eq || eq == s || eq + 1 == fe) return -EINVAL;
        for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
            if (strlen(fields[i].name) == (size_t)(eq - s) &&
                memcmp(fields[i].name, s, (size_t)(eq - s)) == 0) {
                f = (he_auth_field_t *)((char *)t + fields[i].off);
                break;
            }
        }
        if (!f || f->p) return -EINVAL; /* unknown, or given twice */
        f->p = eq + 1;
        f->len = (size_t)(fe - eq - 1);
        if (f == &t->hmac) t->signed_len = s == tok ? 0 : (size_t)(s - tok - 1);
        s = tilde ? tilde + 1 : end;
        if (tilde && s == end) return -EINVAL; /* a trailing '~' */
    }
    if (!t->exp.p || !t->hmac.p || t->hmac.len != 64 || t->signed_len == 0) return -EINVAL;
    for (size_t i = 0; i < 64; i++)
        if (he_seg_hex_digit((unsigned char)t->hmac.p[i]) < 0) return -EINVAL;
    if (he_auth_u64(&t->exp, &t->end) < 0) return -EINVAL;
    if (t->st.p && he_auth_u64(&t->st, &t->start) < 0) return -EINVAL;
    return 0;
}

/* '*' matches any run of bytes, '/' included (EdgeAuth's ACL wildcard).
 * Iterative with one backtrack point: linear in practice, never
 * exponential. */
static bool he_auth_glob(const char *g, size_t gn, const char *s, size_t sn)
{
    size_t gi = 0, si = 0, star = (size_t)-1, mark = 0;
    while (si < sn) {
        if (gi < gn && g[gi] == '*') {
            star = gi++;
            mark = si;
        } else if (gi < gn && g[gi] == s[si]) {
            gi++, si++;
        } else if (star != (size_t)-1) {
            gi = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (gi < gn && g[gi] == '*')
        gi++;
    return gi == gn;
}

bool he_auth_acl_match(const char *acl, size_t acl_len, const char *path, size_t path_len)
{
    const char *s = acl, *end = acl + acl_len;
    while (s <= end) {
        const char *bang = memchr(s, '!', (size_t)(end - s));
        const char *ae = bang ? bang : end;
        if (ae > s && he_auth_glob(s, (size_t)(ae - s), path, path_len)) return true;
        if (!bang) break;
        s = bang + 1;
    }
    return false;
}

/* ---------------------------------------------------------------- EdgeAuth */

/* One MAC context per thread, keyed afresh for each key tried: no fetch
 * and no allocation per request. Freed when the thread (a worker) ends. */
static pthread_key_t he_auth_mac_key;
static pthread_once_t he_auth_mac_once = PTHREAD_ONCE_INIT;

static void he_auth_mac_free(void *ctx)
{
    EVP_MAC_CTX_free(ctx);
}

static void he_auth_mac_init(void)
{
    pthread_key_create(&he_auth_mac_key, he_auth_mac_free);
}

static EVP_MAC_CTX *he_auth_hmac_ctx(void)
{
    EVP_MAC_CTX *ctx;
    pthread_once(&he_auth_mac_once, he_auth_mac_init);
    ctx = pthread_getspecific(he_auth_mac_key);
    if (!ctx) {
        EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        if (!mac) return NULL;
        ctx = EVP_MAC_CTX_new(mac);
        EVP_MAC_free(mac); /* the context holds its own reference */
        if (ctx) pthread_setspecific(he_auth_mac_key, ctx);
    }
    return ctx;
}

static int he_auth_hmac_sha256(const unsigned char *key, size_t key_len, const char *a, size_t an,
                               const char *b, size_t bn, unsigned char out[32])
{
    EVP_MAC_CTX *ctx = he_auth_hmac_ctx();
    OSSL_PARAM params[2];
    size_t outl = 0;
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_end();
    if (!ctx || !EVP_MAC_init(ctx, key, key_len, params) ||
        !EVP_MAC_update(ctx, (const unsigned char *)a, an) ||
        (bn && !EVP_MAC_update(ctx, (const unsigned char *)b, bn)) ||
        !EVP_MAC_final(ctx, out, &outl, 32) || outl != 32)
        return -EIO;
    return 0;
}

/* Tokens whose HMAC was verified, per thread: a player presents the same
 * token with every request, and the HMAC (a re-keyed HMAC-SHA256 per key
 * tried) was most of the check's cost (tests/bench/auth-cost.py). A slot
 * holds the bytes the HMAC covers, the hmac field and the key that made
 * it; a token is taken as signed only when all of them compare equal (in
 * constant time) and the rule still has that key. The time window, the
 * ACL and the ip are checked on every request. */
#define HE_AUTH_MEMO_SLOTS 64
#define HE_AUTH_MEMO_BYTES 448 /* a longer token is verified every time */

typedef struct he_auth_memo_slot {
    uint64_t hash;
    uint16_t signed_len, url_len; /* 0 signed_len: empty */
    unsigned key_len;
    unsigned char key[HE_CONF_AUTH_KEY_MAX];
    char m[HE_AUTH_MEMO_BYTES]; /* signed bytes, url part, 64 hex digits */
} he_auth_memo_slot_t;

/* A token as it came (percent-encoded), verified under a rule of one
 * configuration generation: its decoded copy and parse. */
typedef struct he_auth_known_slot {
    uint64_t hash, gen;
    const he_conf_auth_t *rule;
    uint16_t raw_len, tok_len; /* 0 raw_len: empty */
    he_auth_edgeauth_t t;      /* points into tok */
    char raw[HE_AUTH_MEMO_BYTES];
    char tok[HE_AUTH_MEMO_BYTES];
} he_auth_known_slot_t;

typedef struct he_auth_memo {
    uint64_t seed; /* per thread: nobody aims at one slot */
    he_auth_memo_slot_t s[HE_AUTH_MEMO_SLOTS];
    he_auth_known_slot_t known[HE_AUTH_MEMO_SLOTS];
} he_auth_memo_t;

static pthread_key_t he_auth_memo_key;
static pthread_once_t he_auth_memo_once = PTHREAD_ONCE_INIT;

static void he_auth_memo_free(void *m)
{
    OPENSSL_cleanse(m, sizeof(he_auth_memo_t)); /* it held the keys */
    free(m);
}

static void he_auth_memo_init(void)
{
    pthread_key_create(&he_auth_memo_key, he_auth_memo_free);
}

static he_auth_memo_t *he_auth_memo(void)
{
    he_auth_memo_t *m;
    pthread_once(&he_auth_memo_once, he_auth_memo_init);
    m = pthread_getspecific(he_auth_memo_key);
    if (!m && (m = calloc(1, sizeof(*m)))) {
        if (getrandom(&m->seed, sizeof(m->seed), 0) != sizeof(m->seed))
            m->seed = (uint64_t)(uintptr_t)m ^ 0x243f6a8885a308d3ull;
        pthread_setspecific(he_auth_memo_key, m);
    }
    return m;
}

static he_auth_memo_slot_t *he_auth_memo_slot(he_auth_memo_t *m, const char *tok,
                                              const he_auth_edgeauth_t *t, const char *url,
                                              size_t url_len, uint64_t *hash)
{
    uint64_t h = he__auth_hash(m->seed, tok, t->signed_len);
    h = he__auth_hash(h, url, url_len);
    *hash = he__auth_hash(h, t->hmac.p, 64);
    return &m->s[*hash % HE_AUTH_MEMO_SLOTS];
}

static bool he_auth_memo_find(he_auth_memo_t *m, const char *tok, const he_auth_edgeauth_t *t,
                              const char *url, size_t url_len, const he_conf_auth_t *rule)
{
    uint64_t hash;
    he_auth_memo_slot_t *s;
    bool has_key = false;
    if (!m || t->signed_len + url_len + 64 > HE_AUTH_MEMO_BYTES) return false;
    s = he_auth_memo_slot(m, tok, t, url, url_len, &hash);
    if (!s->signed_len || s->hash != hash || s->signed_len != t->signed_len ||
        s->url_len != url_len)
        return false;
    if (CRYPTO_memcmp(s->m, tok, t->signed_len) | CRYPTO_memcmp(s->m + t->signed_len, url, url_len) |
        CRYPTO_memcmp(s->m + t->signed_len + url_len, t->hmac.p, 64))
        return false;
    for (unsigned k = 0; k < rule->nkeys; k++)
        has_key |= rule->key_len[k] == s->key_len &&
                   CRYPTO_memcmp(rule->keys[k], s->key, s->key_len) == 0;
    return has_key;
}

static void he_auth_memo_keep(he_auth_memo_t *m, const char *tok, const he_auth_edgeauth_t *t,
                              const char *url, size_t url_len, const unsigned char *key,
                              unsigned key_len)
{
    uint64_t hash;
    he_auth_memo_slot_t *s;
    if (!m || t->signed_len + url_len + 64 > HE_AUTH_MEMO_BYTES || key_len > sizeof(s->key))
        return;
    s = he_auth_memo_slot(m, tok, t, url, url_len, &hash);
    s->hash = hash;
    s->signed_len = (uint16_t)t->signed_len;
    s->url_len = (uint16_t)url_len;
    s->key_len = key_len;
    memcpy(s->key, key, key_len);
    memcpy(s->m, tok, t->signed_len);
    memcpy(s->m + t->signed_len, url, url_len);
    memcpy(s->m + t->signed_len + url_len, t->hmac.p, 64);
}

/* ---------------------------------------------------------------- known tokens */

static he_auth_known_slot_t *he_auth_known_slot(he_auth_memo_t *m, uint64_t gen,
                                                const he_conf_auth_t *rule, const char *raw,
                                                size_t raw_len, uint64_t *hash)
{
    uint64_t h = he__auth_hash(m->seed ^ gen ^ (uint64_t)(uintptr_t)rule, raw, raw_len);
    *hash = h;
    return &m->known[h % HE_AUTH_MEMO_SLOTS];
}

const he_auth_edgeauth_t *he_auth_known_find(uint64_t gen, const he_conf_auth_t *rule,
                                             const char *raw, size_t raw_len)
{
    he_auth_memo_t *m = he_auth_memo();
    uint64_t hash;
    if (!m || raw_len > HE_AUTH_MEMO_BYTES) return NULL;
    he_auth_known_slot_t *s = he_auth_known_slot(m, gen, rule, raw, raw_len, &hash);
    if (!s->raw_len || s->hash != hash || s->gen != gen || s->rule != rule ||
        s->raw_len != raw_len || CRYPTO_memcmp(s->raw, raw, raw_len) != 0)
        return NULL;
    return &s->t;
}

void he_auth_known_keep(uint64_t gen, const he_conf_auth_t *rule, const char *raw, size_t raw_len,
                        const char *tok, size_t tok_len, const he_auth_edgeauth_t *t)
{
    he_auth_memo_t *m = he_auth_memo();
    uint64_t hash;
    /* an ACL token only: a URL token's signature covers the path */
    if (!m || !t->acl.p || raw_len > HE_AUTH_MEMO_BYTES || tok_len > HE_AUTH_MEMO_BYTES) return;
    he_auth_known_slot_t *s = he_auth_known_slot(m, gen, rule, raw, raw_len, &hash);
    s->hash = hash;
    s->gen = gen;
    s->rule = rule;
    s->raw_len = (uint16_t)raw_len;
    s->tok_len = (uint16_t)tok_len;
    memcpy(s->raw, raw, raw_len);
    memcpy(s->tok, tok, tok_len);
    s->t = *t;
    /* the fields point into s->tok from now on */
    he_auth_field_t *f[] = {&s->t.ip, &s->t.st, &s->t.exp, &s->t.acl, &s->t.id, &s->t.data, &s->t.hmac};
    for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (f[i]->p) f[i]->p = s->tok + (f[i]->p - tok);
}

he_stats_auth_t he_auth_edgeauth_check(const he_auth_edgeauth_t *t, const he_conf_auth_t *rule,
                                       const char *path, size_t path_len, const char *ip,
                                       uint64_t now)
{
    uint64_t skew = rule->clock_skew_ms / 1000;
    if (t->st.p && now + skew < t->start) return HE_STATS_AUTH_NOT_YET_VALID;
    if (now >= t->end + skew) return HE_STATS_AUTH_EXPIRED;
    if (t->acl.p && !he_auth_acl_match(t->acl.p, t->acl.len, path, path_len))
        return HE_STATS_AUTH_ACL;
    if (t->ip.p && (strlen(ip) != t->ip.len || memcmp(ip, t->ip.p, t->ip.len) != 0))
        return HE_STATS_AUTH_IP;
    return HE_STATS_AUTH_OK;
}

he_stats_auth_t he_auth_edgeauth_verify(const char *tok, const he_auth_edgeauth_t *t,
                                        const he_conf_auth_t *rule, const char *path,
                                        size_t path_len, const char *ip, uint64_t now)
{
    static const char hex[] = "0123456789abcdef";
    char url[16 + 4096];
    size_t url_len = 0;
    bool signed_ok = false;
    he_auth_memo_t *memo = he_auth_memo();
    unsigned matched = 0;

    /* a URL token: no acl; the HMAC covers "~url=PATH", which is not sent */
    if (!t->acl.p) {
        if (path_len > sizeof(url) - 6) return HE_STATS_AUTH_MALFORMED;
        memcpy(url, "~url=", 5);
        memcpy(url + 5, path, path_len);
        url_len = 5 + path_len;
    }
    if (he_auth_memo_find(memo, tok, t, url, url_len, rule)) signed_ok = true;
    for (unsigned k = 0; !signed_ok && k < rule->nkeys; k++) {
        unsigned char mac[32];
        char mac_hex[64];
        bool ok;
        if (he_auth_hmac_sha256(rule->keys[k], rule->key_len[k], tok, t->signed_len, url, url_len,
                                mac) < 0)
            return HE_STATS_AUTH_BAD_SIGNATURE;
        for (int i = 0; i < 32; i++) {
            mac_hex[2 * i] = hex[mac[i] >> 4];
            mac_hex[2 * i + 1] = hex[mac[i] & 15];
        }
        /* every key is tried, found or not: the time taken says nothing */
        ok = CRYPTO_memcmp(mac_hex, t->hmac.p, 64) == 0;
        matched |= (unsigned)ok << k;
        if (k + 1 == rule->nkeys) signed_ok = matched != 0;
    }
    if (!signed_ok) return HE_STATS_AUTH_BAD_SIGNATURE;
    for (unsigned k = 0; matched && k < rule->nkeys; k++)
        if (matched >> k & 1) {
            he_auth_memo_keep(memo, tok, t, url, url_len, rule->keys[k], rule->key_len[k]);
            break;
        }
    return he_auth_edgeauth_check(t, rule, path, path_len, ip, now);
}

/* ---------------------------------------------------------------- secure_link */

/* base64url without padding into 16 bytes; -EINVAL unless exactly an MD5. */
static int he_auth_b64url_md5(const char *s, size_t n, unsigned char out[16])
{
    uint32_t acc = 0;
    unsigned bits = 0, o = 0;
    if (n != 22) return -EINVAL; /* 16 bytes: 22 characters without "==" */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '-'             ? 62
                : c == '_'             ? 63
                                       : -1;
        if (v < 0) return -EINVAL;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o < 16) out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return o == 16 && (acc & ((1u << bits) - 1)) == 0 ? 0 : -EINVAL;
}

/* The template with its variables substituted; the length or -ENAMETOOLONG. */
static int he_auth_template(const he_conf_auth_t *rule, unsigned k, const char *expires,
                            size_t expires_len, const char *uri, size_t uri_len, const char *ip,
                            char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = rule->template_; *p;) {
        const char *v = p;
        size_t vn = 1, skip = 1;
        if (*p == '$') {
            if (strncmp(p + 1, "expires", 7) == 0)
                v = expires ? expires : "", vn = expires ? expires_len : 0, skip = 8;
            else if (strncmp(p + 1, "uri", 3) == 0)
                v = uri, vn = uri_len, skip = 4;
            else if (strncmp(p + 1, "remote_addr", 11) == 0)
                v = ip, vn = strlen(ip), skip = 12;
            else if (strncmp(p + 1, "secret", 6) == 0)
                v = (const char *)rule->keys[k], vn = rule->key_len[k], skip = 7;
        }
        if (o + vn > cap) return -ENAMETOOLONG;
        memcpy(out + o, v, vn);
        o += vn;
        p += skip;
    }
    return (int)o;
}

he_stats_auth_t he_auth_secure_link_verify(const he_conf_auth_t *rule, const char *md5,
                                           size_t md5_len, const char *expires,
                                           size_t expires_len, const char *uri, size_t uri_len,
                                           const char *ip, uint64_t now)
{
    unsigned char want[16];
    char buf[8192];
    bool signed_ok = false;
    uint64_t end = 0;

    if (!md5) return HE_STATS_AUTH_MISSING;
    if (he_auth_b64url_md5(md5, md5_len, want) < 0) return HE_STATS_AUTH_MALFORMED;
    if (expires) {
        he_auth_field_t f = {expires, expires_len};
        if (he_auth_u64(&f, &end) < 0) return HE_STATS_AUTH_MALFORMED;
    }
    for (unsigned k = 0; k < rule->nkeys; k++) {
        unsigned char got[EVP_MAX_MD_SIZE];
        unsigned got_len = 0;
        int n = he_auth_template(rule, k, expires, expires_len, uri, uri_len, ip, buf, sizeof(buf));
        if (n < 0) return HE_STATS_AUTH_MALFORMED;
        if (!EVP_Digest(buf, (size_t)n, got, &got_len, EVP_md5(), NULL) || got_len != 16)
            return HE_STATS_AUTH_BAD_SIGNATURE;
        signed_ok |= CRYPTO_memcmp(got, want, 16) == 0;
    }
    OPENSSL_cleanse(buf, sizeof(buf)); /* it held the secret */
    if (!signed_ok) return HE_STATS_AUTH_BAD_SIGNATURE;
    /* nginx: an expired link is "0" (here 410); the skew is ours */
    if (expires && now >= end + rule->clock_skew_ms / 1000) return HE_STATS_AUTH_EXPIRED;
    return HE_STATS_AUTH_OK;
}
