/* Tokenised playlists kept per worker: a viewer re-fetches the same
 * playlist with the same token (a live one every target duration, a VOD
 * one on every seek or restart), and the rewrite of a long media playlist
 * costs several times the rest of the request (docs/performance.md, auth).
 * An entry is the rewrite of one stored version of one playlist for one
 * token: it is found by the rule's generation and index, the path, the
 * stored version's ETag and size, and the token text, and kept until the
 * token expires or room is needed (least recently used goes first).
 *
 * The stored playlist stays cached once, untokenised; these are its
 * outputs. Only this worker's thread touches its cache: no lock. */
#include <stdlib.h>
#include <string.h>

#include "server/handler/auth.h"

typedef struct he_auth_entry {
    uint64_t hash;
    he_auth_cache_key_t k; /* k's strings point into key */
    char *key;
    he_auth_buf_t *out; /* one reference held */
    size_t bytes;       /* out's capacity, its sealed copy, the key: what the entry holds */
    uint64_t expires;   /* seconds: the token's end */
    uint64_t used;      /* the cache's tick when last found */
} he_auth_entry_t;

#define HE_AUTH_CACHE_SEEN 512 /* fingerprints of masters asked for once */

struct he_auth_cache {
    unsigned max_entries, n;
    size_t max_bytes, bytes;
    uint64_t tick;
    uint64_t seen[HE_AUTH_CACHE_SEEN]; /* direct-mapped: a collision forgets one */
    he_auth_entry_t e[];
};

/* Eight bytes at a time: the key is about 200 bytes, most of it the
 * token, hashed on every playlist request. Collisions only cost a
 * compare. */
uint64_t he__auth_hash(uint64_t h, const char *p, size_t n)
{
    uint64_t w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, p, n);
    h = (h ^ w ^ n) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
}

static uint64_t he_auth_cache_hash(const he_auth_cache_key_t *k)
{
    uint64_t h = ((uint64_t)k->gen << 32 | k->rule) ^ k->size * 0xff51afd7ed558ccdull;
    h = he__auth_hash(h, k->path, k->path_len);
    h = he__auth_hash(h, k->etag, k->etag_len);
    return he__auth_hash(h, k->text, k->text_len);
}

static bool he_auth_cache_same(const he_auth_entry_t *e, uint64_t hash,
                               const he_auth_cache_key_t *k)
{
    return e->hash == hash && e->k.gen == k->gen && e->k.rule == k->rule &&
           e->k.size == k->size && e->k.path_len == k->path_len &&
           e->k.etag_len == k->etag_len && e->k.text_len == k->text_len &&
           memcmp(e->k.text, k->text, k->text_len) == 0 &&
           memcmp(e->k.path, k->path, k->path_len) == 0 &&
           memcmp(e->k.etag, k->etag, k->etag_len) == 0;
}

he_auth_cache_t *he_auth_cache_new(unsigned max_entries, size_t max_bytes)
{
    he_auth_cache_t *c;
    if (!max_entries) return NULL;
    c = calloc(1, sizeof(*c) + max_entries * sizeof(c->e[0]));
    if (!c) return NULL;
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    return c;
}

static void he_auth_cache_drop(he_auth_cache_t *c, unsigned i)
{
    he_auth_entry_t *e = &c->e[i];
    c->bytes -= e->bytes;
    he_auth_buf_unref(e->out);
    free(e->key);
    c->e[i] = c->e[--c->n];
}

void he_auth_cache_free(he_auth_cache_t *c)
{
    if (!c) return;
    while (c->n)
        he_auth_cache_drop(c, c->n - 1);
    free(c);
}

he_auth_buf_t *he_auth_cache_get(he_auth_cache_t *c, const he_auth_cache_key_t *k, uint64_t now)
{
    uint64_t hash;
    if (!c) return NULL;
    hash = he_auth_cache_hash(k);
    for (unsigned i = 0; i < c->n; i++) {
        he_auth_entry_t *e = &c->e[i];
        if (!he_auth_cache_same(e, hash, k)) continue;
        if (now >= e->expires) { /* the token ended: its playlist goes too */
            he_auth_cache_drop(c, i);
            return NULL;
        }
        e->used = ++c->tick;
        e->out->refs++;
        return e->out;
    }
    return NULL;
}

/* Makes room for bytes more: expired entries first, then the least
 * recently used. */
static void he_auth_cache_room(he_auth_cache_t *c, size_t bytes, uint64_t now)
{
    for (unsigned i = 0; i < c->n;) {
        if (now >= c->e[i].expires)
            he_auth_cache_drop(c, i);
        else
            i++;
    }
    while (c->n && (c->n == c->max_entries || c->bytes + bytes > c->max_bytes)) {
        unsigned lru = 0;
        for (unsigned i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[lru].used) lru = i;
        he_auth_cache_drop(c, lru);
    }
}

bool he_auth_cache_put(he_auth_cache_t *c, const he_auth_cache_key_t *k, he_auth_buf_t *out,
                       uint64_t expires, uint64_t now)
{
    size_t kn = k->path_len + k->etag_len + k->text_len;
    size_t bytes = out->cap + out->len + kn; /* the sealed copy auth.c may add */
    uint64_t hash;
    he_auth_entry_t *e;
    char *key;

    if (!c || expires <= now || bytes > c->max_bytes) return false;
    hash = he_auth_cache_hash(k);
    /* the same playlist, token and version: a concurrent miss put it already */
    for (unsigned i = 0; i < c->n; i++)
        if (he_auth_cache_same(&c->e[i], hash, k)) return false;
    /* an older version of this playlist for this token is of no more use */
    for (unsigned i = 0; i < c->n; i++) {
        const he_auth_entry_t *o = &c->e[i];
        if (o->k.gen == k->gen && o->k.rule == k->rule && o->k.path_len == k->path_len &&
            o->k.text_len == k->text_len && memcmp(o->k.path, k->path, k->path_len) == 0 &&
            memcmp(o->k.text, k->text, k->text_len) == 0) {
            he_auth_cache_drop(c, i);
            break;
        }
    }
    he_auth_cache_room(c, bytes, now);
    if (!(key = malloc(kn ? kn : 1))) return false;
    e = &c->e[c->n++];
    memcpy(key, k->path, k->path_len);
    memcpy(key + k->path_len, k->etag, k->etag_len);
    memcpy(key + k->path_len + k->etag_len, k->text, k->text_len);
    e->hash = hash;
    e->k = *k;
    e->k.path = key;
    e->k.etag = key + k->path_len;
    e->k.text = key + k->path_len + k->etag_len;
    e->key = key;
    e->out = out;
    out->refs++;
    e->bytes = bytes;
    e->expires = expires;
    e->used = ++c->tick;
    c->bytes += e->bytes;
    return true;
}

bool he_auth_cache_again(he_auth_cache_t *c, const char *url, size_t url_len, const char *etag,
                         size_t etag_len, const char *text, size_t text_len)
{
    if (!c) return false;
    uint64_t h = he__auth_hash(he__auth_hash(he__auth_hash(0, url, url_len), etag, etag_len), text,
                               text_len) | 1; /* 0 is an empty slot */
    uint64_t *slot = &c->seen[h % HE_AUTH_CACHE_SEEN];
    if (*slot == h) return true;
    *slot = h;
    return false;
}

unsigned he_auth_cache_entries(const he_auth_cache_t *c)
{
    return c ? c->n : 0;
}

size_t he_auth_cache_bytes(const he_auth_cache_t *c)
{
    return c ? c->bytes : 0;
}
