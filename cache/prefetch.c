/* Video-aware prefetch. A viewer that fetched segment N of a rendition will
 * ask for N+1 in about one segment duration, so the cache fills N+1..N+k
 * ahead of it. Where N sits is read from the rendition's media playlist,
 * parsed with the one parser in segment/ from the cache's own copy and
 * kept per rendition with its freshness; each segment's normalized path
 * goes into one hash table, so a segment request costs one lookup, not a
 * scan of the renditions.
 *
 * What a prefetch was worth is counted by the RAM tier: a prefetched
 * object carries a mark that its first hit turns into "used" and its
 * eviction without a hit into "wasted" (ram.c, evict.c); prefetch_issued
 * is counted by the fill. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache/fill.h"
#include "cache/fresh.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/prefetch.h"
#include "cache/store.h"

#define HE__PF_BUCKETS 4096

typedef struct he__pf_rend he__pf_rend_t;

typedef struct he__pf_seg {
    uint64_t hash; /* of path */
    struct he__pf_seg *hnext;
    he__pf_rend_t *r;
    uint32_t index;
    char *path;   /* key path (he_cache_key_path); NULL: not prefetchable */
    char *target; /* origin-form request-target */
} he__pf_seg_t;

struct he__pf_rend {
    char *path;
    char *target;  /* origin-form target a viewer's request used; NULL: unknown */
    char *pending; /* a segment waiting for a fresh copy of this playlist */
    uint64_t hash, body_hash;
    uint64_t obj_serial; /* the cache object learnt last (0: learnt from bytes) */
    int64_t fresh_until_ms;
    uint64_t used; /* tick of last use, for LRU */
    he__pf_seg_t *segs;
    uint32_t nsegs;
};

struct he_cache_prefetch {
    const he_conf_t *conf;
    he__pf_rend_t *rends;
    unsigned n, max;
    uint64_t tick;
    he__pf_seg_t *buckets[HE__PF_BUCKETS];
};

he_cache_prefetch_t *he_cache_prefetch_new(const he_conf_t *conf, unsigned max_renditions)
{
    he_cache_prefetch_t *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->conf = conf;
    p->max = max_renditions ? max_renditions : 1;
    p->rends = calloc(p->max, sizeof(*p->rends));
    if (!p->rends) {
        free(p);
        return NULL;
    }
    return p;
}

static void he_pf_unindex(he_cache_prefetch_t *p, he__pf_rend_t *r)
{
    for (uint32_t i = 0; i < r->nsegs; i++) {
        he__pf_seg_t *s = &r->segs[i], **pp;
        if (!s->path) continue;
        for (pp = &p->buckets[s->hash % HE__PF_BUCKETS]; *pp; pp = &(*pp)->hnext)
            if (*pp == s) {
                *pp = s->hnext;
                break;
            }
    }
}

static void he_pf_segs_free(he__pf_seg_t *segs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(segs[i].path);
        free(segs[i].target);
    }
    free(segs);
}

static void he_pf_rend_clear(he_cache_prefetch_t *p, he__pf_rend_t *r)
{
    he_pf_unindex(p, r);
    he_pf_segs_free(r->segs, r->nsegs);
    free(r->path);
    free(r->target);
    free(r->pending);
    memset(r, 0, sizeof(*r));
}

void he_cache_prefetch_free(he_cache_prefetch_t *p)
{
    if (!p) return;
    for (unsigned i = 0; i < p->n; i++)
        he_pf_rend_clear(p, &p->rends[i]);
    free(p->rends);
    free(p);
}

unsigned he_cache_prefetch_renditions(const he_cache_prefetch_t *p)
{
    return p->n;
}

static he__pf_rend_t *he_pf_find(he_cache_prefetch_t *p, const char *path, uint64_t h)
{
    for (unsigned i = 0; i < p->n; i++)
        if (p->rends[i].hash == h && strcmp(p->rends[i].path, path) == 0) return &p->rends[i];
    return NULL;
}

/* A slot for a new rendition: a free one, else the least recently used. */
static he__pf_rend_t *he_pf_slot(he_cache_prefetch_t *p)
{
    he__pf_rend_t *v;
    if (p->n < p->max) return &p->rends[p->n++];
    v = &p->rends[0];
    for (unsigned i = 1; i < p->n; i++)
        if (p->rends[i].used < v->used) v = &p->rends[i];
    he_pf_rend_clear(p, v);
    return v;
}

/* Resolves a segment URI against the playlist: target and key path, or
 * false when it is not ours to prefetch (another host, too long, bad). */
static bool he_pf_resolve(const char *base, const char *uri, he__pf_seg_t *s)
{
    char t[HE_CACHE_KEY_MAX], path[HE_CACHE_KEY_MAX];
    int tl = he_seg_uri_resolve(base, uri, t, sizeof(t)), pl;
    if (tl <= 0 || t[0] != '/' || t[1] == '/') return false; /* absolute or scheme-relative */
    pl = he_cache_key_path(t, (size_t)tl, path, sizeof(path));
    if (pl <= 0) return false;
    s->target = strdup(t);
    s->path = strdup(path);
    if (!s->target || !s->path) {
        free(s->target);
        free(s->path);
        s->target = s->path = NULL;
        return false;
    }
    s->hash = he_cache_hash(path, (size_t)pl);
    return true;
}

/* target, or NULL when it is not in origin form ("/path?query") */
static const char *he_pf_origin_form(const char *target)
{
    return target && target[0] == '/' && target[1] != '/' ? target : NULL;
}

/* The newest viewer's target wins: any of them names the resource. */
static int he_pf_set_target(he__pf_rend_t *r, const char *target)
{
    char *t;
    if (!target || (r->target && strcmp(r->target, target) == 0)) return 0;
    if (!(t = strdup(target))) return -ENOMEM;
    free(r->target);
    r->target = t;
    return 0;
}

int he_cache_prefetch_playlist(he_cache_prefetch_t *p, const char *path, const char *target,
                               const char *body, size_t len, int64_t fresh_until_ms)
{
    uint64_t h = he_cache_hash(path, strlen(path)), bh = he_cache_hash(body, len);
    he__pf_rend_t *r = he_pf_find(p, path, h);
    he_seg_playlist_t pl;
    he__pf_seg_t *segs;
    char err[128], base[HE_CACHE_KEY_MAX + 1];
    target = he_pf_origin_form(target);
    if (r && r->body_hash == bh) {
        r->fresh_until_ms = fresh_until_ms;
        return he_pf_set_target(r, target);
    }
    if (strlen(path) + 2 > sizeof(base)) return -ENAMETOOLONG;
    if (target && strlen(target) >= sizeof(base)) target = NULL;
    if (he_seg_playlist_parse(body, len, &pl, err, sizeof(err)) < 0) return -EINVAL;
    if (pl.is_master) {
        he_seg_playlist_free(&pl);
        return -EINVAL;
    }
    segs = calloc(pl.nsegments ? pl.nsegments : 1, sizeof(*segs));
    if (!segs) {
        he_seg_playlist_free(&pl);
        return -ENOMEM;
    }
    /* segment URIs are relative to what the origin was asked for: the key
     * path has its escapes decoded and would resolve to another target */
    if (target) {
        strcpy(base, target);
    } else if (r && r->target) {
        strcpy(base, r->target);
    } else {
        base[0] = '/';
        strcpy(base + 1, path);
    }
    for (size_t i = 0; i < pl.nsegments; i++) {
        segs[i].index = (uint32_t)i;
        he_pf_resolve(base, pl.segments[i].uri, &segs[i]);
    }
    if (!r) {
        char *pc = strdup(path);
        if (!pc) {
            he_pf_segs_free(segs, (uint32_t)pl.nsegments);
            he_seg_playlist_free(&pl);
            return -ENOMEM;
        }
        r = he_pf_slot(p);
        r->path = pc;
        r->hash = h;
        he_pf_set_target(r, target); /* -ENOMEM: no refresh, segments still */
    } else {
        he_pf_set_target(r, target);
        he_pf_unindex(p, r);
        he_pf_segs_free(r->segs, r->nsegs);
    }
    r->segs = segs;
    r->nsegs = (uint32_t)pl.nsegments;
    r->body_hash = bh;
    r->obj_serial = 0;
    r->fresh_until_ms = fresh_until_ms;
    r->used = ++p->tick;
    for (uint32_t i = 0; i < r->nsegs; i++) {
        he__pf_seg_t *s = &segs[i];
        s->r = r;
        if (!s->path) continue;
        s->hnext = p->buckets[s->hash % HE__PF_BUCKETS];
        p->buckets[s->hash % HE__PF_BUCKETS] = s;
    }
    he_seg_playlist_free(&pl);
    return 0;
}

int he_cache_prefetch_playlist_obj(he_cache_prefetch_t *p, he_cache_obj_t *o, const char *target)
{
    const he_cache_key_t *k = he_cache_obj_key(o);
    const he_cache_meta_t *m = he_cache_obj_meta(o);
    uint64_t serial = he_cache_obj_serial(o), h;
    char path[HE_CACHE_KEY_MAX], *flat;
    const void *body;
    size_t len;
    he__pf_rend_t *r;
    he_cache_fresh_t fr;
    int rc;
    /* encoded bytes (gzip ...) are no playlist we can read */
    if (!he_cache_obj_complete(o) || m->kind != HE_SEG_KIND_MEDIA || m->status != 200 ||
        m->content_encoding[0])
        return -EINVAL;
    memcpy(path, k->s, k->path_len);
    path[k->path_len] = '\0';
    h = he_cache_hash(path, strlen(path)); /* as he_cache_prefetch_playlist does */
    he_cache_obj_fresh(o, &fr);
    /* Served again and again while fresh: the object learnt last needs no
     * copy, hash or parse, which for a long VOD playlist would cost more
     * than serving it. */
    r = he_pf_find(p, path, h);
    if (r && r->obj_serial == serial) {
        r->fresh_until_ms = fr.expires_ms;
        return he_pf_set_target(r, he_pf_origin_form(target));
    }
    len = he_cache_obj_flat(o, &body, &flat);
    if (!body) return -ENOMEM;
    rc = he_cache_prefetch_playlist(p, path, target, body, len, fr.expires_ms);
    free(flat);
    if (rc == 0 && (r = he_pf_find(p, path, h))) r->obj_serial = serial;
    return rc;
}

static he__pf_seg_t *he_pf_seg_find(he_cache_prefetch_t *p, const char *seg_path)
{
    uint64_t h = he_cache_hash(seg_path, strlen(seg_path));
    he__pf_seg_t *s = p->buckets[h % HE__PF_BUCKETS];
    for (; s; s = s->hnext)
        if (s->hash == h && strcmp(s->path, seg_path) == 0) return s;
    return NULL;
}

int he_cache_prefetch_next(he_cache_prefetch_t *p, const char *seg_path, int64_t wall_ms,
                           he_cache_present_fn present, void *ctx, he_cache_prefetch_item_t *out,
                           unsigned max, bool *playlist_stale)
{
    he__pf_seg_t *s = he_pf_seg_find(p, seg_path);
    unsigned n = 0, k = p->conf->prefetch_segments;
    he__pf_rend_t *r;
    *playlist_stale = false;
    if (!s) return 0;
    r = s->r;
    r->used = ++p->tick;
    *playlist_stale = wall_ms >= r->fresh_until_ms;
    for (uint32_t i = s->index + 1; i < r->nsegs && i <= s->index + k && n < max; i++) {
        he__pf_seg_t *x = &r->segs[i];
        he_cache_prefetch_item_t *it = &out[n];
        if (!x->target) continue;
        if (he_cache_key_make(p->conf, x->target, strlen(x->target), &it->key) < 0) continue;
        if (present && present(ctx, &it->key)) continue;
        strcpy(it->target, x->target);
        n++;
    }
    return (int)n;
}

int he_cache_prefetch_refresh(he_cache_prefetch_t *p, const char *seg_path,
                              he_cache_prefetch_item_t *out)
{
    he__pf_seg_t *s = he_pf_seg_find(p, seg_path);
    he__pf_rend_t *r;
    char *pend;
    size_t n;
    if (!s) return -ENOENT;
    r = s->r;
    /* only what a viewer asked for: a target rebuilt from the key path has
     * its escapes decoded and its query dropped, another resource */
    if (!r->target) return -ENODATA;
    n = strlen(r->target);
    if (n + 1 > sizeof(out->target)) return -ENAMETOOLONG;
    memcpy(out->target, r->target, n + 1);
    if (he_cache_key_make(p->conf, out->target, n, &out->key) < 0 ||
        out->key.path_len != strlen(r->path) || memcmp(out->key.s, r->path, out->key.path_len))
        return -EINVAL;
    /* the newest request wins: it is the one the viewer is at */
    pend = strdup(seg_path);
    if (!pend) return -ENOMEM;
    free(r->pending);
    r->pending = pend;
    return 0;
}

int he_cache_prefetch_take_pending(he_cache_prefetch_t *p, const char *playlist_path, char *out,
                                   size_t cap)
{
    he__pf_rend_t *r =
        he_pf_find(p, playlist_path, he_cache_hash(playlist_path, strlen(playlist_path)));
    size_t n;
    if (!r || !r->pending) return 0;
    n = strlen(r->pending);
    if (n + 1 > cap) return -ENAMETOOLONG;
    memcpy(out, r->pending, n + 1);
    free(r->pending);
    r->pending = NULL;
    return 1;
}

bool he_cache_present(void *ctx, const he_cache_key_t *key)
{
    he_cache_present_ctx_t *c = ctx;
    return (c->fills && he_cache_fill_find(c->fills, key)) ||
           he_cache_ram_contains(c->ram, c->node, key) || he_cache_store_contains(c->store, key);
}
