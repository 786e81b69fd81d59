/* The signed-URL step: the router's first handler when the configuration
 * has auth rules. Under a rule, the request's token is checked
 * (auth_token.c) and, when valid, taken out of the target, so neither the
 * cache key, nor the origin (unless the rule's to_origin), nor the access
 * log sees it; the step then declines, and the file or cache handler
 * answers. A playlist that answers such a request goes out through
 * he_auth_respond, which carries the token into its URIs. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/handler/auth.h"
#include "server/handler/handler.h"

#define HE_AUTH_TEXT_MAX 2048 /* the token parameters of one request */

/* The client's address as $remote_addr and EdgeAuth's ip= spell it (an
 * IPv4 client on a dual-stack socket as IPv4). */
static void he_auth_peer_text(const he_conn_t *c, char *out, size_t cap)
{
    out[0] = 0;
    if (c->peer.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&c->peer)->sin_addr, out, (socklen_t)cap);
    } else if (c->peer.ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)&c->peer)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            inet_ntop(AF_INET, a->s6_addr + 12, out, (socklen_t)cap);
        else
            inet_ntop(AF_INET6, a, out, (socklen_t)cap);
    }
}

/* One query parameter of a rule found in the target. */
typedef struct he_auth_param {
    const char *name;
    size_t start, end; /* the "name=value" in url */
    const char *val;
    size_t val_len;
    unsigned count;
} he_auth_param_t;

/* Finds each wanted parameter in the query of url; false when one is
 * given twice (two tokens). */
static bool he_auth_find(const char *url, size_t len, he_auth_param_t *ps, unsigned np)
{
    const char *q = memchr(url, '?', len), *end = url + len;
    for (const char *p = q ? q + 1 : end; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end, *eq = memchr(p, '=', (size_t)(pe - p));
        size_t nn = (size_t)((eq ? eq : pe) - p);
        for (unsigned i = 0; i < np; i++) {
            if (strlen(ps[i].name) != nn || memcmp(ps[i].name, p, nn) != 0) continue;
            if (ps[i].count++) return false;
            ps[i].start = (size_t)(p - url);
            ps[i].end = (size_t)(pe - url);
            ps[i].val = eq ? eq + 1 : pe;
            ps[i].val_len = eq ? (size_t)(pe - eq - 1) : 0;
        }
        p = amp ? amp + 1 : end;
    }
    return true;
}

/* The cookie named name in r's Cookie lines, moved to the start of
 * r->cookie as "name=value" (quotes dropped). 1 found, 0 none, -1 twice. */
static int he_auth_cookie(he_req_t *r, const char *name, const char **val, size_t *val_len)
{
    const char *s = r->cookie, *end = r->cookie + r->cookie_len, *v = NULL;
    size_t nn = strlen(name), vn = 0;
    while (s < end) {
        const char *semi = memchr(s, ';', (size_t)(end - s)), *ce = semi ? semi : end;
        while (s < ce && (*s == ' ' || *s == '\t'))
            s++;
        if ((size_t)(ce - s) > nn && memcmp(s, name, nn) == 0 && s[nn] == '=') {
            if (v) return -1;
            v = s + nn + 1;
            vn = (size_t)(ce - v);
            while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
                vn--;
            if (vn >= 2 && v[0] == '"' && v[vn - 1] == '"') v++, vn -= 2;
        }
        s = semi ? semi + 1 : end;
    }
    if (!v) return 0;
    memmove(r->cookie, name, nn); /* the value lies after its name: a move to the front keeps it */
    r->cookie[nn] = '=';
    memmove(r->cookie + nn + 1, v, vn);
    r->cookie_len = (uint16_t)(nn + 1 + vn);
    r->auth_text = r->cookie;
    r->auth_text_len = r->cookie_len;
    *val = r->cookie + nn + 1;
    *val_len = vn;
    return 1;
}

/* Takes the found parameters out of r->url, keeping the rest in order,
 * and puts them ("a=1&b=2") just past the shortened target, inside the
 * bytes it gave up. */
static int he_auth_strip(he_req_t *r, he_auth_param_t *ps, unsigned np)
{
    char text[HE_AUTH_TEXT_MAX];
    size_t tn = 0, o, qpos;
    char *url = r->url;
    const char *q = memchr(url, '?', r->url_len);

    for (unsigned i = 0; i < np; i++) {
        size_t n = ps[i].end - ps[i].start;
        if (!ps[i].count) continue;
        if (tn + n + 1 > sizeof(text)) return -ENAMETOOLONG;
        if (tn) text[tn++] = '&';
        memcpy(text + tn, url + ps[i].start, n);
        tn += n;
    }
    if (!q || !tn) return 0;
    qpos = (size_t)(q - url);
    o = qpos + 1;
    for (size_t p = qpos + 1; p < r->url_len;) {
        const char *amp = memchr(url + p, '&', r->url_len - p);
        size_t pe = amp ? (size_t)(amp - url) : r->url_len;
        bool drop = pe == p;
        for (unsigned i = 0; i < np && !drop; i++)
            drop = ps[i].count && ps[i].start == p;
        if (!drop) {
            if (o > qpos + 1) url[o++] = '&';
            memmove(url + o, url + p, pe - p);
            o += pe - p;
        }
        p = pe + 1;
    }
    if (o == qpos + 1) o = qpos; /* nothing left: no '?' either */
    /* removed: every parameter's bytes and at least one separator each */
    memcpy(url + o + 1, text, tn);
    url[o] = 0;
    r->url_len = (uint32_t)o;
    r->auth_text = url + o + 1;
    r->auth_text_len = (uint16_t)tn;
    return 0;
}

static he_stats_auth_t he_auth_edgeauth(he_worker_t *w, he_req_t *r, const he_conf_auth_t *rule,
                                        const char *full, size_t full_len)
{
    he_auth_param_t p = {.name = rule->param};
    char tok[HE_AUTH_TEXT_MAX], ip[INET6_ADDRSTRLEN];
    he_auth_edgeauth_t t;
    const char *val;
    size_t val_len;
    int n;

    if (!he_auth_find(r->url, r->url_len, &p, 1)) return HE_STATS_AUTH_MALFORMED;
    if (p.count) {
        val = p.val;
        val_len = p.val_len;
    } else if (rule->cookie) {
        int c = he_auth_cookie(r, rule->param, &val, &val_len);
        if (c < 0) return HE_STATS_AUTH_MALFORMED;
        if (c == 0) return HE_STATS_AUTH_MISSING;
    } else {
        return HE_STATS_AUTH_MISSING;
    }
    const he_auth_edgeauth_t *known = he_auth_known_find(w->conf->generation, rule, val, val_len);
    const he_auth_edgeauth_t *tp = known ? known : &t;
    if (!known) {
        n = he_auth_pct_decode(val, val_len, tok, sizeof(tok));
        if (n < 0 || he_auth_edgeauth_parse(tok, (size_t)n, &t) < 0)
            return HE_STATS_AUTH_MALFORMED;
    }
    /* inet_ntop formats through sprintf: only for a token bound to one */
    ip[0] = 0;
    if (tp->ip.p) he_auth_peer_text(r->conn, ip, sizeof(ip));
    he_stats_auth_t res =
        known ? he_auth_edgeauth_check(known, rule, full, full_len, ip, (uint64_t)w->date_sec)
              : he_auth_edgeauth_verify(tok, &t, rule, full, full_len, ip, (uint64_t)w->date_sec);
    if (!known && res != HE_STATS_AUTH_BAD_SIGNATURE && res != HE_STATS_AUTH_MALFORMED)
        he_auth_known_keep(w->conf->generation, rule, val, val_len, tok, (size_t)n, &t);
    if (res == HE_STATS_AUTH_OK && p.count && he_auth_strip(r, &p, 1) < 0)
        return HE_STATS_AUTH_MALFORMED;
    return res;
}

static he_stats_auth_t he_auth_secure_link(he_worker_t *w, he_req_t *r, const he_conf_auth_t *rule,
                                           const char *full, size_t full_len)
{
    he_auth_param_t ps[2] = {{.name = rule->md5_param}, {.name = rule->expires_param}};
    char md5[64], exp[32], ip[INET6_ADDRSTRLEN];
    int mn, en = 0;

    if (!he_auth_find(r->url, r->url_len, ps, 2)) return HE_STATS_AUTH_MALFORMED;
    if (!ps[0].count) return HE_STATS_AUTH_MISSING;
    mn = he_auth_pct_decode(ps[0].val, ps[0].val_len, md5, sizeof(md5));
    if (ps[1].count) en = he_auth_pct_decode(ps[1].val, ps[1].val_len, exp, sizeof(exp));
    if (mn < 0 || en < 0) return HE_STATS_AUTH_MALFORMED;
    he_auth_peer_text(r->conn, ip, sizeof(ip));
    he_stats_auth_t res = he_auth_secure_link_verify(rule, md5, (size_t)mn, ps[1].count ? exp : NULL,
                                                     (size_t)en, full, full_len, ip,
                                                     (uint64_t)w->date_sec);
    if (res == HE_STATS_AUTH_OK && he_auth_strip(r, ps, 2) < 0) return HE_STATS_AUTH_MALFORMED;
    return res;
}

/* ---------------------------------------------------------------- ETags */

/* The tag a tokenised playlist is sent with: the stored one with the
 * token's hash before its closing quote ("abc" -> "abc-t1a2b3c4d"), so no
 * cache between us and the player hands one viewer's URIs to another. */
static uint32_t he_auth_text_hash(const he_req_t *r)
{
    /* eight bytes at a time: byte-wise FNV over a 100-byte token was
     * visible in every tokenised playlist request's profile */
    return (uint32_t)he__auth_hash(0x84222325cbf29ce4ull, r->auth_text, r->auth_text_len);
}

/* "-tXXXXXXXX\"": the tag's suffix for this token (11 bytes, no NUL);
 * by hand, as snprintf showed in the profile of every playlist request */
static void he_auth_etag_suffix(const he_req_t *r, char out[11])
{
    static const char hex[] = "0123456789abcdef";
    uint32_t h = he_auth_text_hash(r);
    out[0] = '-';
    out[1] = 't';
    for (int i = 0; i < 8; i++)
        out[2 + i] = hex[h >> (28 - 4 * i) & 15];
    out[10] = '"';
}

static size_t he_auth_etag(const he_req_t *r, const char *etag, size_t n, char *out, size_t cap)
{
    if (!etag || n < 2 || etag[n - 1] != '"' || n + 11 > cap) return 0;
    memcpy(out, etag, n - 1);
    he_auth_etag_suffix(r, out + n - 1);
    out[n + 10] = 0;
    return n + 10;
}

/* If-None-Match naming our tag for this token compares as the stored tag:
 * the suffix goes, so the handler's own evaluation can answer 304. */
static void he_auth_inm(he_req_t *r)
{
    char suffix[11];
    size_t o = 0;
    he_auth_etag_suffix(r, suffix);
    for (size_t i = 0; i < r->inm_len;) {
        if (i + 11 <= r->inm_len && memcmp(r->inm + i, suffix, 11) == 0) {
            r->inm[o++] = '"';
            i += 11;
        } else {
            r->inm[o++] = r->inm[i++];
        }
    }
    r->inm_len = (uint16_t)o;
    r->inm[o] = 0;
}

/* ---------------------------------------------------------------- the step */

he_handler_result_t he_auth_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    const he_conf_auth_t *rule = he_conf_auth_match(w->conf, path, len);
    char full[PATH_MAX + 1];
    he_stats_auth_t res;

    if (!rule) return HE_HANDLER_DECLINED;
    if (r->auth_text_len) return HE_HANDLER_DECLINED; /* he_route_next: checked already */
    if (len + 1 >= sizeof(full)) {
        he_http_respond_error(w, r, 414);
        return HE_HANDLER_DONE;
    }
    full[0] = '/';
    memcpy(full + 1, path, len);
    full[len + 1] = 0;
    res = rule->scheme == HE_CONF_AUTH_SECURE_LINK ? he_auth_secure_link(w, r, rule, full, len + 1)
                                                   : he_auth_edgeauth(w, r, rule, full, len + 1);
    w->stats.auth[res]++;
    if (res != HE_STATS_AUTH_OK) {
        /* the cause is in /metrics, never in the answer */
        r->auth_text = NULL;
        r->auth_text_len = 0;
        he_http_respond_error(w, r, res == HE_STATS_AUTH_EXPIRED ? 410 : 403);
        return HE_HANDLER_DONE;
    }
    r->auth_propagate = rule->propagate && r->auth_text_len &&
                        he_seg_type_from_path(path, len) == HE_SEG_TYPE_M3U8;
    r->auth_rule = (uint16_t)(rule - w->conf->auth);
    r->auth_gen = w->conf->generation;
    if (r->auth_propagate && r->inm_len) he_auth_inm(r);
    return HE_HANDLER_DECLINED;
}

bool he_auth_to_origin(const he_worker_t *w, const he_req_t *r)
{
    char path[PATH_MAX];
    int n;
    const he_conf_auth_t *rule;
    if (!r->auth_text_len || r->auth_text == r->cookie) return false; /* cookies never */
    n = he_seg_url_normalize(r->url, r->url_len, path, sizeof(path));
    rule = n < 0 ? NULL : he_conf_auth_match(w->conf, path, (size_t)n);
    return rule && rule->to_origin;
}

/* ---------------------------------------------------------------- the answer */

/* Output buffers, kept per worker thread for the next rewrite: a fresh
 * malloc of a long media playlist's output is fresh pages, and faulting
 * them in cost more than the rewrite (perf, tests/bench/auth-cost.py).
 * The same thread keeps its rewritten playlists (auth_cache.c). A memory
 * body's release runs on the worker that sent it. */
#define HE_AUTH_POOL 8

/* Sealed copies (he_auth_seal) are packed into 2 MiB regions that the
 * kernel may back with a transparent huge page (MADV_HUGEPAGE): vmsplice
 * then pins a huge page per request instead of a page per 4 KiB
 * (gup_fast_fallback fell from 8.6 to 2.1 % of the auth server's
 * samples, docs/performance.md). A region is unmapped when the last copy
 * in it goes and never reused; a thread has at most HE_AUTH_ARENAS, past
 * which (or for a copy over half a region) a copy gets a mapping of its
 * own. */
#define HE_AUTH_ARENA (2u << 20)
#define HE_AUTH_ARENAS 8

typedef struct he_auth_arena {
    void *map;
    char *base;     /* HE_AUTH_ARENA bytes, aligned to them */
    size_t used;
    unsigned refs;  /* the copies in it, and the pool's while it fills */
} he_auth_arena_t;

static __thread unsigned he_auth_narenas;

typedef struct he_auth_pool {
    unsigned n;
    he_auth_buf_t *b[HE_AUTH_POOL];
    he_auth_cache_t *cache;
    he_auth_arena_t *arena; /* the one copies go into next */
} he_auth_pool_t;

static pthread_key_t he_auth_pool_key;
static pthread_once_t he_auth_pool_once = PTHREAD_ONCE_INIT;

static void he_auth_arena_unref(he_auth_arena_t *a)
{
    if (--a->refs) return;
    munmap(a->map, 2 * HE_AUTH_ARENA);
    he_auth_narenas--;
    free(a);
}

static he_auth_arena_t *he_auth_arena_new(void)
{
    he_auth_arena_t *a;
    void *m;
    if (he_auth_narenas >= HE_AUTH_ARENAS || !(a = calloc(1, sizeof(*a)))) return NULL;
    /* twice the size, to find an aligned region in it (a huge page must be) */
    m = mmap(NULL, 2 * HE_AUTH_ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        free(a);
        return NULL;
    }
    a->map = m;
    a->base = (char *)(((uintptr_t)m + HE_AUTH_ARENA - 1) & ~(uintptr_t)(HE_AUTH_ARENA - 1));
    (void)madvise(a->base, HE_AUTH_ARENA, MADV_HUGEPAGE); /* without THP: 4 KiB pages, as before */
    a->refs = 1;
    he_auth_narenas++;
    return a;
}

static void he_auth_buf_unseal(he_auth_buf_t *b)
{
    if (b->arena)
        he_auth_arena_unref(b->arena);
    else if (b->sealed)
        munmap(b->sealed, b->sealed_cap);
    b->sealed = NULL;
    b->sealed_cap = 0;
    b->arena = NULL;
}

static void he_auth_buf_free(he_auth_buf_t *b)
{
    he_auth_buf_unseal(b);
    free(b->p);
    free(b);
}

static void he_auth_pool_free(void *p)
{
    he_auth_pool_t *pool = p;
    /* the thread's key reads NULL by now: the cache's last references
     * free their buffers (one still being sent is freed when it is) */
    he_auth_cache_free(pool->cache);
    for (unsigned i = 0; i < pool->n; i++)
        he_auth_buf_free(pool->b[i]);
    if (pool->arena) he_auth_arena_unref(pool->arena);
    free(pool);
}

static void he_auth_pool_init(void)
{
    pthread_key_create(&he_auth_pool_key, he_auth_pool_free); /* freed at thread exit */
}

/* The thread's pool, made at its first rewrite with the auth_cache.* of
 * the generation it serves (a reload that changes them starts new
 * workers, so the limits never change under a pool). */
static he_auth_pool_t *he_auth_pool(const he_conf_t *conf)
{
    he_auth_pool_t *pool;
    pthread_once(&he_auth_pool_once, he_auth_pool_init);
    pool = pthread_getspecific(he_auth_pool_key);
    if (!pool && (pool = calloc(1, sizeof(*pool)))) {
        pool->cache = he_auth_cache_new(conf->auth_cache_entries, (size_t)conf->auth_cache_bytes);
        pthread_setspecific(he_auth_pool_key, pool);
    }
    return pool;
}

void he_auth_buf_unref(he_auth_buf_t *b)
{
    he_auth_pool_t *pool;
    if (--b->refs) return;
    pthread_once(&he_auth_pool_once, he_auth_pool_init);
    pool = pthread_getspecific(he_auth_pool_key); /* NULL in the thread's destructor: freed */
    if (pool && pool->n < HE_AUTH_POOL) {
        /* the next rewrite writes other bytes into b->p, never into the
         * sealed copy, whose pages sockets may still hold */
        he_auth_buf_unseal(b);
        pool->b[pool->n++] = b;
    } else
        he_auth_buf_free(b);
}

/* The playlist rewritten into a pooled buffer: the length, *bp the
 * buffer (one reference, to he_auth_buf_unref); or an error. */
static ssize_t he_auth_rewrite_pooled(he_auth_pool_t *pool, const char *in, size_t len,
                                      const he_auth_rewrite_t *rw, he_auth_buf_t **bp)
{
    he_auth_buf_t *b = pool && pool->n ? pool->b[--pool->n] : calloc(1, sizeof(*b));
    ssize_t n;
    *bp = NULL;
    if (!b) return -ENOMEM;
    b->refs = 1;
    n = he_auth_rewrite(in, len, rw, &b->p, &b->cap);
    if (n < 0) {
        he_auth_buf_unref(b);
        return n;
    }
    b->len = (size_t)n;
    *bp = b;
    return n;
}

/* When the token in text (the parameters he_auth_strip set aside, or the
 * cookie) ends, in seconds, skew included: how long its rewritten
 * playlists are worth keeping. A secure_link without expires never ends:
 * an hour, and least recently used goes first anyway. */
static uint64_t he_auth_text_expires(const he_conf_auth_t *rule, const char *text, size_t len,
                                     uint64_t now)
{
    const char *name = rule->scheme == HE_CONF_AUTH_SECURE_LINK ? rule->expires_param : rule->param;
    size_t nn = strlen(name);
    uint64_t skew = rule->clock_skew_ms / 1000;
    char tok[HE_AUTH_TEXT_MAX];
    for (const char *p = text, *end = text + len; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p)), *pe = amp ? amp : end;
        if ((size_t)(pe - p) > nn && memcmp(p, name, nn) == 0 && p[nn] == '=') {
            int n = he_auth_pct_decode(p + nn + 1, (size_t)(pe - p - nn - 1), tok, sizeof(tok));
            he_auth_edgeauth_t t;
            uint64_t v = 0;
            if (n < 0) return now;
            if (rule->scheme != HE_CONF_AUTH_SECURE_LINK)
                return he_auth_edgeauth_parse(tok, (size_t)n, &t) < 0 ? now : t.end + skew;
            for (int i = 0; i < n; i++) {
                if (tok[i] < '0' || tok[i] > '9' || v > UINT64_MAX / 20) return now;
                v = v * 10 + (uint64_t)(tok[i] - '0');
            }
            return v + skew;
        }
        p = amp ? amp + 1 : end;
    }
    return rule->scheme == HE_CONF_AUTH_SECURE_LINK ? now + 3600 : now;
}

/* The whole representation from body, in memory: the body's own bytes
 * when they are one span, else a copy (*copy, to free). NULL when it has
 * not all arrived or cannot be read. */
static const char *he_auth_gather(he_body_t *b, uint64_t size, char **copy)
{
    he_body_span_t s;
    ssize_t n;
    char *c;
    *copy = NULL;
    memset(&s, 0, sizeof(s));
    n = b->ops->peek(b, 0, &s, true);
    if (n <= 0 || !s.p) return NULL;
    if ((uint64_t)n >= size) return s.p;
    if (!(c = malloc(size))) return NULL;
    for (uint64_t off = 0; off < size; off += (uint64_t)n) {
        n = b->ops->peek(b, off, &s, true);
        if (n <= 0 || !s.p) {
            free(c);
            return NULL;
        }
        if ((uint64_t)n > size - off) n = (ssize_t)(size - off);
        memcpy(c + off, s.p, (size_t)n);
    }
    *copy = c;
    return c;
}

/* A kept output larger than this, once found again, is copied into a
 * mapping of its own and sent from there by vmsplice: the send then hands
 * the socket page references instead of copying the bytes for every
 * request (+18 us per 150 KB in tests/bench/auth-cost.py), and unlike the
 * memfd this was before, the kernel reads no shmem page cache (a lookup
 * per 4 KiB page, docs/performance.md). The buffer itself is not sent that
 * way because the pool reuses it; the sealed copy is only ever unmapped,
 * so pages a socket still holds never change. TLS without kTLS reads it as
 * memory. */
#define HE_AUTH_SEAL_MIN (64 * 1024)

/* Into the thread's current region: false when it cannot be. */
static bool he_auth_seal_packed(he_auth_buf_t *b)
{
    he_auth_pool_t *pool = pthread_getspecific(he_auth_pool_key);
    he_auth_arena_t *a = pool ? pool->arena : NULL;
    size_t need = (b->len + 63) & ~(size_t)63;
    if (!pool || need > HE_AUTH_ARENA / 2) return false;
    if (!a || HE_AUTH_ARENA - a->used < need) {
        if (a) { /* full: it goes with its last copy */
            pool->arena = NULL;
            he_auth_arena_unref(a);
        }
        if (!(a = pool->arena = he_auth_arena_new())) return false;
    }
    b->sealed = a->base + a->used;
    b->sealed_cap = need;
    b->arena = a;
    a->used += need;
    a->refs++;
    memcpy(b->sealed, b->p, b->len);
    return true;
}

static void he_auth_seal(he_auth_buf_t *b)
{
    size_t cap;
    void *m;
    if (b->len <= HE_AUTH_SEAL_MIN || b->sealed) return;
    if (he_auth_seal_packed(b)) return;
    cap = (b->len + 4095) & ~(size_t)4095;
    m = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return; /* sent from b->p, as any rewrite */
    memcpy(m, b->p, b->len);
    b->sealed = m;
    b->sealed_cap = cap;
}

static ssize_t he_auth_body_peek(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem)
{
    const he_auth_buf_t *o = b->ctx;
    (void)need_mem;
    s->len = (size_t)(b->end - off);
    s->fixed_off = -1;
    s->mapped = false;
    s->fd = -1;
    s->file_off = 0;
    s->spliceable = o->sealed != NULL;
    s->p = (o->sealed ? o->sealed : o->p) + off;
    return (ssize_t)s->len;
}

static void he_auth_body_release(he_body_t *b)
{
    he_auth_buf_unref(b->ctx);
}

static const he_body_ops_t he_auth_body_ops = {
    .peek = he_auth_body_peek,
    .release = he_auth_body_release,
};

/* Sends out (the caller's reference goes with the body). */
static void he_auth_send(he_worker_t *w, he_req_t *r, he_http_head_t *h, he_auth_buf_t *out)
{
    he_body_t nb;
    w->stats.auth_rewrites++;
    memset(&nb, 0, sizeof(nb));
    nb.ops = &he_auth_body_ops;
    nb.ctx = out;
    nb.end = out->len;
    h->clen = (uint64_t)out->len;
    he_http_respond(w, r, h, &nb);
}

void he_auth_respond(he_worker_t *w, he_req_t *r, const he_http_head_t *head, he_body_t *body)
{
    he_http_head_t hh = *head, *h = &hh;
    char etag[200], path[PATH_MAX], *copy;
    he_auth_buf_t *out;
    const he_conf_auth_t *rule;
    const char *in, *drop[3] = {NULL, NULL, NULL};
    size_t etag_len;
    uint64_t size;
    ssize_t n;
    int pn;

    if (!r->auth_propagate || h->type != HE_SEG_TYPE_M3U8 ||
        (h->status != 200 && h->status != 206 && h->status != 304) || (h->cenc && h->cenc[0])) {
        he_http_respond(w, r, h, body);
        return;
    }
    etag_len = he_auth_etag(r, h->etag, h->etag_len, etag, sizeof(etag));
    h->etag = etag_len ? etag : NULL;
    h->etag_len = etag_len;
    if (h->status == 304 || !body || !body->ops || r->method == HTTP_HEAD) {
        he_http_respond(w, r, h, body);
        return;
    }
    he_auth_pool_t *pool = he_auth_pool(w->conf);
    /* a master is fetched once per viewer: it is kept only when the same
     * token asks for the same version again (a player that reloads it), so
     * single fetches cost no entry, nor the normalized path and the key */
    bool keep = head->etag && head->etag_len &&
                (r->kind != HE_SEG_KIND_MASTER ||
                 (pool && he_auth_cache_again(pool->cache, r->url, r->url_len, head->etag,
                                              head->etag_len, r->auth_text, r->auth_text_len)));
    pn = 0;
    if (keep || r->auth_gen != w->conf->generation)
        pn = he_seg_url_normalize(r->url, r->url_len, path, sizeof(path));
    if (r->auth_gen == w->conf->generation)
        rule = &w->conf->auth[r->auth_rule];
    else /* a reload came between the check and the answer: as it is now */
        rule = pn < 0 ? NULL : he_conf_auth_match(w->conf, path, (size_t)pn);
    if (!rule || pn < 0) {
        he_http_respond(w, r, h, body);
        return;
    }
    size = h->range ? h->size : body->end;
    /* the stored version by its own validator: without one, no telling
     * a new version of the same size from the old, so no keeping */
    he_auth_cache_key_t ck = {.gen = w->conf->generation,
                              .rule = (unsigned)(rule - w->conf->auth),
                              .path = path,
                              .path_len = (size_t)pn,
                              .etag = head->etag,
                              .etag_len = head->etag ? head->etag_len : 0,
                              .text = r->auth_text,
                              .text_len = r->auth_text_len,
                              .size = size};
    he_auth_cache_t *cache = pool && keep ? pool->cache : NULL;
    h->status = 200; /* a Range of the stored bytes names nothing in these */
    h->range = false;
    h->accept_ranges = false;
    h->has_clen = true;
    if ((out = he_auth_cache_get(cache, &ck, (uint64_t)w->date_sec))) {
        w->stats.auth_kept[HE_STATS_AUTH_KEPT_HIT]++;
        he__body_release(body);
        he_auth_seal(out); /* used twice: worth its copy (a miss never pays for it) */
        he_auth_send(w, r, h, out);
        return;
    }
    body->off = 0;
    body->end = size;
    in = size ? he_auth_gather(body, size, &copy) : NULL;
    if (!in) {
        he__body_release(body);
        he_log_error("worker %u: playlist %.*s not complete for its token rewrite", w->id,
                     (int)r->url_len, r->url);
        he_http_respond_error(w, r, 502);
        return;
    }
    if (rule->scheme == HE_CONF_AUTH_SECURE_LINK) {
        drop[0] = rule->md5_param;
        drop[1] = rule->expires_param;
    } else {
        drop[0] = rule->param;
    }
    he_auth_rewrite_t rw = {.text = r->auth_text,
                            .text_len = r->auth_text_len,
                            .drop = drop,
                            .hosts = NULL,
                            .nhosts = rule->npropagate_hosts};
    const char *hosts[HE_CONF_AUTH_MAX_HOSTS];
    for (unsigned i = 0; i < rule->npropagate_hosts; i++)
        hosts[i] = rule->propagate_hosts[i];
    rw.hosts = hosts;
    n = he_auth_rewrite_pooled(pool, in, (size_t)size, &rw, &out);
    free(copy);
    if (n == -EINVAL) { /* no playlist after all (no #EXTM3U): no URI to carry it */
        h->clen = size;
        he_http_respond(w, r, h, body);
        return;
    }
    he__body_release(body);
    if (n < 0) {
        he_http_respond_error(w, r, 503);
        return;
    }
    w->stats.auth_kept[cache ? HE_STATS_AUTH_KEPT_MISS : HE_STATS_AUTH_KEPT_BYPASS]++;
    if (cache) {
        he_auth_cache_put(cache, &ck, out,
                          he_auth_text_expires(rule, r->auth_text, r->auth_text_len,
                                               (uint64_t)w->date_sec),
                          (uint64_t)w->date_sec);
    }
    if (pool) {
        w->stats.auth_kept_entries = he_auth_cache_entries(pool->cache);
        w->stats.auth_kept_bytes = he_auth_cache_bytes(pool->cache);
    }
    he_auth_send(w, r, h, out);
}
