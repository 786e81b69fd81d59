/* RAM tier objects: creating one in a node's partition, filling it (the
 * filling worker only, chunk by chunk from the partition's memory, see
 * ram.c) and reading it (any holder of a reference, without a lock). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache/fresh.h"
#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/stats.h"

/* ---------------------------------------------------------------- objects */

static he_cache_obj_t *he_cache_obj_header(he__cache_node_t *n)
{
    he_cache_obj_t *o = n->free_objs;
    if (!o) {
        he__cache_objblock_t *b = calloc(1, sizeof(*b));
        if (!b) return NULL;
        b->next = n->blocks;
        n->blocks = b;
        for (int i = 63; i >= 0; i--) {
            b->objs[i].node = n;
            b->objs[i].free_next = n->free_objs;
            n->free_objs = &b->objs[i];
        }
        o = n->free_objs;
    }
    n->free_objs = o->free_next;
    return o;
}

he_cache_obj_t *he_cache_obj_new(he_cache_ram_t *ram, int node, const he_cache_key_t *key,
                                 uint64_t size_hint)
{
    he__cache_node_t *n = he__cache_ram_node(ram, node);
    size_t ksz = offsetof(he_cache_key_t, s) + key->len + 1;
    he_cache_key_t *k = malloc(ksz);
    uint32_t hint_chunks = (uint32_t)((size_hint + ram->chunk_size - 1) / ram->chunk_size);
    uint32_t cap = hint_chunks ? hint_chunks : 4;
    char **chunks;
    he_cache_obj_t *o;

    chunks = malloc(sizeof(char *) * cap);
    if (!k || !chunks) {
        free(k);
        free(chunks);
        return NULL;
    }
    memcpy(k, key, ksz);
    pthread_mutex_lock(&n->lock);
    o = he_cache_obj_header(n);
    pthread_mutex_unlock(&n->lock);
    if (!o) {
        free(k);
        free(chunks);
        return NULL;
    }
    o->node = n;
    o->key = k;
    o->serial = atomic_fetch_add_explicit(&ram->serials, 1, memory_order_relaxed) + 1;
    memset(&o->meta, 0, sizeof(o->meta));
    atomic_store_explicit(&o->stored_ms, 0, memory_order_relaxed);
    atomic_store_explicit(&o->expires_ms, 0, memory_order_relaxed);
    atomic_store_explicit(&o->len, 0, memory_order_relaxed);
    o->chunks = chunks;
    o->nchunks = 0;
    o->chunk_cap = cap;
    o->hint_chunks = hint_chunks;
    o->qprev = o->qnext = NULL;
    o->queue = HE__CACHE_Q_NONE;
    atomic_store_explicit(&o->freq, 0, memory_order_relaxed);
    atomic_store_explicit(&o->pf_pending, 0, memory_order_relaxed);
    atomic_store_explicit(&o->lent, 0, memory_order_relaxed);
    atomic_store_explicit(&o->indexed, 0, memory_order_relaxed);
    atomic_store_explicit(&o->state, HE__CACHE_OBJ_FILLING, memory_order_relaxed);
    atomic_store_explicit(&o->hash, key->hash, memory_order_relaxed);
    /* publishes everything above to whoever CASes the count from here on */
    atomic_store_explicit(&o->refs, 1, memory_order_release);
    return o;
}

/* Most chunks taken from the free list at once (4 MiB of 16 KiB chunks):
 * a bound on how far ahead of its bytes a fill holds memory. */
#define HE_CACHE_OBJ_RUN_MAX HE__CACHE_ALLOC_MAX

/* More chunks at o's end: as many as its size hint says are still to come
 * (at most HE_CACHE_OBJ_RUN_MAX), taken together so that they are adjacent
 * and a hit's bytes leave in few sendfile ranges; one when the size is
 * unknown or the hint is passed. Only the filling worker reads a FILLING
 * object's table, so it may move. */
static bool he_cache_obj_grow(he_cache_obj_t *o, he_cache_stats_t *st)
{
    unsigned want = o->hint_chunks > o->nchunks ? o->hint_chunks - o->nchunks : 1;
    if (want > HE_CACHE_OBJ_RUN_MAX) want = HE_CACHE_OBJ_RUN_MAX;
    if (o->nchunks + want > o->chunk_cap) {
        uint32_t cap = o->chunk_cap ? o->chunk_cap : 4;
        char **t;
        while (cap < o->nchunks + want)
            cap *= 2;
        if (!(t = realloc(o->chunks, sizeof(char *) * cap))) return false;
        o->chunks = t;
        o->chunk_cap = cap;
    }
    unsigned got = he__cache_ram_chunk_alloc(o->node, st, o->chunks + o->nchunks, want);
    o->nchunks += got;
    return got > 0;
}

size_t he_cache_obj_space(he_cache_obj_t *o, void **p, he_cache_stats_t *st)
{
    uint32_t cs = o->node->ram->chunk_size;
    uint64_t have = atomic_load_explicit(&o->len, memory_order_relaxed);
    if (have / cs == o->nchunks && !he_cache_obj_grow(o, st)) return 0;
    *p = o->chunks[have / cs] + have % cs;
    return cs - have % cs;
}

unsigned he_cache_obj_space_iov(he_cache_obj_t *o, struct iovec *iov, unsigned max, uint64_t want,
                                he_cache_stats_t *st)
{
    uint32_t cs = o->node->ram->chunk_size;
    uint64_t pos = atomic_load_explicit(&o->len, memory_order_relaxed), end = pos + want;
    unsigned n = 0;
    /* chunks allocated ahead of len are simply reused by _space/_commit:
     * they take over from the chunk at len / chunk_size */
    while (pos < end) {
        uint64_t ci = pos / cs;
        size_t k;
        char *p;
        if (ci == o->nchunks && !he_cache_obj_grow(o, st)) break;
        p = o->chunks[ci] + pos % cs;
        k = cs - pos % cs;
        if (k > end - pos) k = (size_t)(end - pos);
        if (n && (char *)iov[n - 1].iov_base + iov[n - 1].iov_len == p) {
            iov[n - 1].iov_len += k; /* adjacent arena chunks: one span */
        } else {
            if (n == max) break;
            iov[n].iov_base = p;
            iov[n].iov_len = k;
            n++;
        }
        pos += k;
    }
    return n;
}

void he_cache_obj_commit(he_cache_obj_t *o, size_t n)
{
    uint64_t have = atomic_load_explicit(&o->len, memory_order_relaxed);
    atomic_store_explicit(&o->len, have + n, memory_order_release);
}

int he_cache_obj_append(he_cache_obj_t *o, const void *p, size_t len, he_cache_stats_t *st)
{
    const char *s = p;
    while (len) {
        void *dst;
        size_t n = he_cache_obj_space(o, &dst, st);
        if (!n) return -ENOMEM;
        if (n > len) n = len;
        memcpy(dst, s, n);
        he_cache_obj_commit(o, n);
        s += n;
        len -= n;
    }
    return 0;
}

void he_cache_obj_set_meta(he_cache_obj_t *o, const he_cache_meta_t *m)
{
    o->meta = *m;
    atomic_store_explicit(&o->stored_ms, m->fresh.stored_ms, memory_order_relaxed);
    atomic_store_explicit(&o->expires_ms, m->fresh.expires_ms, memory_order_relaxed);
    atomic_store_explicit(&o->pf_pending, m->prefetched, memory_order_relaxed);
}

void he_cache_obj_finish(he_cache_obj_t *o)
{
    /* chunks taken ahead for a size hint the body fell short of: readers
     * never look past len, so they can go back */
    uint32_t cs = o->node->ram->chunk_size;
    uint32_t used = (uint32_t)((atomic_load_explicit(&o->len, memory_order_relaxed) + cs - 1) / cs);
    if (o->nchunks > used) {
        he__cache_ram_chunk_return(o->node, o->chunks + used, o->nchunks - used);
        o->nchunks = used;
    }
    atomic_store_explicit(&o->state, HE__CACHE_OBJ_COMPLETE, memory_order_release);
}

/* ---------------------------------------------------------------- reading */

uint64_t he_cache_obj_serial(const he_cache_obj_t *o)
{
    return o->serial;
}

uint64_t he_cache_obj_len(const he_cache_obj_t *o)
{
    return atomic_load_explicit(&o->len, memory_order_acquire);
}

bool he_cache_obj_complete(const he_cache_obj_t *o)
{
    return atomic_load_explicit(&o->state, memory_order_acquire) == HE__CACHE_OBJ_COMPLETE;
}

const he_cache_meta_t *he_cache_obj_meta(const he_cache_obj_t *o)
{
    return &o->meta;
}

const he_cache_key_t *he_cache_obj_key(const he_cache_obj_t *o)
{
    return o->key;
}

int he_cache_obj_node(const he_cache_obj_t *o)
{
    return o->node->id;
}

size_t he_cache_obj_flat(const he_cache_obj_t *o, const void **p, char **copy)
{
    uint64_t len = he_cache_obj_len(o), off = 0;
    *copy = NULL;
    *p = "";
    if (len == 0 || he_cache_obj_peek(o, 0, p, NULL) >= len) return (size_t)len;
    if (!(*copy = malloc(len))) {
        *p = NULL;
        return 0;
    }
    while (off < len) {
        const void *c;
        size_t n = he_cache_obj_peek(o, off, &c, NULL);
        if (!n) break;
        memcpy(*copy + off, c, n);
        off += n;
    }
    *p = *copy;
    return (size_t)off;
}

size_t he_cache_obj_peek(const he_cache_obj_t *o, uint64_t off, const void **p, int64_t *fixed_off)
{
    uint32_t cs = o->node->ram->chunk_size;
    uint64_t len = atomic_load_explicit(&o->len, memory_order_acquire);
    const char *c;
    size_t n;
    if (off >= len) return 0;
    c = o->chunks[off / cs] + off % cs;
    n = cs - off % cs;
    if (n > len - off) n = (size_t)(len - off);
    *p = c;
    if (fixed_off) {
        const he__cache_node_t *nd = o->node;
        *fixed_off =
            c >= nd->arena && c < nd->arena + nd->arena_len ? (int64_t)(c - nd->arena) : -1;
    }
    return n;
}

size_t he_cache_obj_peek_file(he_cache_obj_t *o, uint64_t off, int *fd, uint64_t *file_off,
                              const char **mem)
{
    const he__cache_node_t *nd = o->node;
    uint32_t cs = nd->ram->chunk_size;
    uint64_t len = atomic_load_explicit(&o->len, memory_order_acquire), i;
    const char *c;
    size_t n;

    if ((nd->arena_fd < 0 && !nd->arena_huge) || off >= len) return 0;
    c = o->chunks[off / cs] + off % cs;
    if (c < nd->arena || c >= nd->arena + nd->arena_len) return 0; /* overflow: memory */
    /* adjacent chunks are one range of the memfd: one sendfile */
    n = cs - off % cs;
    for (i = off / cs + 1; off + n < len && o->chunks[i] == c + n; i++)
        n += cs;
    if (n > len - off) n = (size_t)(len - off);
    /* the caller hands the range to the kernel by reference; the release
     * orders this before the free that reads it (ram.c) */
    if (!atomic_load_explicit(&o->lent, memory_order_relaxed))
        atomic_store_explicit(&o->lent, 1, memory_order_relaxed);
    *fd = nd->arena_fd;
    *file_off = (uint64_t)(c - nd->arena);
    if (mem) *mem = c;
    return n;
}

void he_cache_obj_fresh(const he_cache_obj_t *o, he_cache_fresh_t *f)
{
    *f = o->meta.fresh;
    f->stored_ms = atomic_load_explicit(&o->stored_ms, memory_order_relaxed);
    f->expires_ms = atomic_load_explicit(&o->expires_ms, memory_order_relaxed);
}

void he_cache_obj_refresh(he_cache_obj_t *o, const he_cache_fresh_t *f)
{
    atomic_store_explicit(&o->stored_ms, f->stored_ms, memory_order_relaxed);
    atomic_store_explicit(&o->expires_ms, f->expires_ms, memory_order_relaxed);
}
