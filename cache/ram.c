/* The RAM tier: one partition per NUMA node, each with its own arena (from
 * numa_alloc_onnode, or mmap without NUMA), chunk allocator, index and
 * S3-FIFO queues (evict.c). A worker looks up and fills in its own node.
 *
 * With opts.memfd the arena is a shared mapping of a memfd, so a hit's
 * bytes are also a range of a file and leave by sendfile, zero-copy, with
 * no completion to wait for. The kernel then holds the pages of a sent
 * range until the peer acknowledged them, while the tier may evict and
 * reuse the chunk at once; so freed arena chunks are punched out of the
 * memfd first: queued skbs keep the old pages, and the next fill writes
 * into fresh ones. (The arena is then never registered as a fixed buffer:
 * a registration pins the old pages and would stop aliasing the mapping.)
 *
 * With opts.huge the arena is private anonymous memory on huge-page
 * boundaries with MADV_HUGEPAGE instead: hits leave by vmsplice of it,
 * and the kernel takes (and later frees) a 2 MiB page's references in one
 * step where a memfd's base pages cost a lookup and a reference each.
 * Freed chunks are dropped with MADV_DONTNEED for the same reason as the
 * punch; that splits the huge page around them, so a tier under heavy
 * eviction drifts toward base pages (docs/performance.md).
 *
 * Only an object whose range went to the kernel by reference (it is
 * "lent": he_cache_obj_peek_file) is dropped. One that only ever left by
 * copy (userspace TLS, a reader of a fill still under way, SSD writes)
 * keeps its pages, and the next fill writes into them as they are: a
 * dropped chunk costs a punch now and a fault-in (or a populate) of every
 * page later, which at a full tier under cold misses was most of the
 * worker's time (docs/performance.md, "Cold misses won").
 *
 * Concurrency. Hits take no lock: a lookup walks the bucket chain with
 * acquire loads, takes a reference with a CAS that refuses a zero count
 * (a free header), then re-checks hash, key, state and "indexed" on the
 * object it now owns; the only other write is a relaxed store of the
 * frequency bits. This is safe because headers are type-stable (see
 * internal.h): a stale pointer never points at unmapped memory, and the
 * CAS (acquire) synchronizes with the release store of refs=1 when the
 * header was last initialized, so the key read after it is the one that
 * belongs to the reference held. Inserts, unlinks and frees take the node
 * mutex and bracket index changes with a sequence count; a lookup that
 * finds nothing re-reads the count, and if the index changed under it (a
 * chain walk may follow a recycled header into another chain) it retries,
 * and after a few tries looks up under the lock, so a miss is never
 * reported for an object that stayed indexed. */
#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/stats.h"

#define HE__CACHE_CHAIN_MAX 256
#define HE__CACHE_HUGE_ALIGN ((size_t)2 << 20) /* x86-64's and arm64's (4 KiB pages) PMD size */
#define HE__CACHE_LOOKUP_TRIES 4

/* False when shmem huge pages are forced (shmem_enabled "force", global
 * or for any size), which MADV_NOHUGEPAGE cannot refuse: then the arena
 * stays anonymous (see the top of the file for why). */
static bool he_cache_shmem_small_pages(void)
{
    static const char *const paths[] = {"/sys/kernel/mm/transparent_hugepage/shmem_enabled"};
    char buf[256], path[128];
    bool ok = true;
    FILE *f;

    for (int i = -1; i < 16 && ok; i++) { /* the global setting, then per size */
        if (i < 0)
            snprintf(path, sizeof(path), "%s", paths[0]);
        else
            snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/hugepages-%dkB/shmem_enabled",
                     4 << i);
        if (!(f = fopen(path, "re"))) continue;
        if (fgets(buf, sizeof(buf), f) && strstr(buf, "[force]")) ok = false;
        fclose(f);
    }
    return ok;
}

void *he_cache_huge_map(size_t len)
{
    /* on a huge-page boundary, so the region is whole huge pages */
    size_t a = HE__CACHE_HUGE_ALIGN;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    char *p = mmap(NULL, len + a, PROT_READ | PROT_WRITE, flags, -1, 0);
    char *q;
    if (p == MAP_FAILED) return NULL;
    q = (char *)(((uintptr_t)p + a - 1) & ~(uintptr_t)(a - 1));
    if (q > p) munmap(p, (size_t)(q - p));
    munmap(q + len, a - (size_t)(q - p));
    madvise(q, len, MADV_HUGEPAGE);
    return q;
}

static int he_cache_ram_node_init(he_cache_ram_t *ram, he__cache_node_t *n, int id, uint64_t bytes,
                                  bool numa)
{
    uint64_t nb = 1024;
    n->ram = ram;
    n->id = id;
    pthread_mutex_init(&n->lock, NULL);
    atomic_init(&n->seq, 0);
    n->nchunks = (uint32_t)(bytes / ram->chunk_size);
    if (n->nchunks == 0) n->nchunks = 1;
    n->arena_len = (size_t)n->nchunks * ram->chunk_size;
    n->arena_fd = -1;
    if (ram->opts.huge) {
        if (!(n->arena = he_cache_huge_map(n->arena_len))) return -ENOMEM;
        n->arena_huge = true;
        if (numa) numa_tonode_memory(n->arena, n->arena_len, id);
    }
    if (!n->arena && ram->opts.memfd && he_cache_shmem_small_pages()) {
        char name[32];
        void *p;
        snprintf(name, sizeof(name), "hlsedge-ram-%d", id);
        n->arena_fd = memfd_create(name, MFD_CLOEXEC);
        if (n->arena_fd < 0) return -errno;
        if (ftruncate(n->arena_fd, (off_t)n->arena_len) < 0) return -errno;
        p = mmap(NULL, n->arena_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, n->arena_fd, 0);
        if (p == MAP_FAILED) return -errno;
        n->arena = p;
        /* Punching a chunk out of a huge folio would zero it in place when
         * the folio cannot be split (skbs hold it): base pages only. */
        madvise(p, n->arena_len, MADV_NOHUGEPAGE);
        /* shmem pages follow the mapping's policy: allocated on the node */
        if (numa) numa_tonode_memory(p, n->arena_len, id);
    }
    if (numa && !n->arena) {
        n->arena = numa_alloc_onnode(n->arena_len, id);
        n->arena_numa = n->arena != NULL;
    }
    if (!n->arena) {
        void *p = mmap(NULL, n->arena_len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return -ENOMEM;
        n->arena = p;
    }
    n->free_chunks = malloc(sizeof(uint32_t) * n->nchunks);
    if (!n->free_chunks) return -ENOMEM;
    if (n->arena_fd >= 0 || n->arena_huge) {
        /* nothing is faulted in yet */
        if (!(n->chunk_dropped = malloc(n->nchunks))) return -ENOMEM;
        memset(n->chunk_dropped, 1, n->nchunks);
    }
    /* hand out low chunks first: untouched arena pages stay unfaulted */
    for (uint32_t i = 0; i < n->nchunks; i++)
        n->free_chunks[i] = n->nchunks - 1 - i;
    n->nfree = n->nchunks;
    /* about two buckets per object of four chunks */
    while (nb < n->nchunks / 2 && nb < (1u << 26))
        nb <<= 1;
    n->buckets = calloc(nb, sizeof(*n->buckets));
    if (!n->buckets) return -ENOMEM;
    n->mask = nb - 1;
    return he__cache_evict_init(n);
}

he_cache_ram_t *he_cache_ram_new(const he_cache_ram_opts_t *o)
{
    he_cache_ram_t *ram;
    bool numa = false;
    int nnodes = 1;

    if (o->bytes == 0) return NULL;
    ram = calloc(1, sizeof(*ram));
    if (!ram) return NULL;
    ram->opts = *o;
    ram->chunk_size = o->chunk_size ? o->chunk_size : 16384;
    if (o->numa && numa_available() >= 0) {
        numa = true;
        nnodes = numa_max_node() + 1;
        if (nnodes < 1) nnodes = 1;
    }
    if (!ram->opts.object_max) ram->opts.object_max = o->bytes / 8;
    ram->nnodes = nnodes;
    ram->nodes = aligned_alloc(64, sizeof(he__cache_node_t) * (size_t)nnodes);
    if (!ram->nodes) {
        free(ram);
        return NULL;
    }
    memset(ram->nodes, 0, sizeof(he__cache_node_t) * (size_t)nnodes);
    for (int i = 0; i < nnodes; i++) {
        if (he_cache_ram_node_init(ram, &ram->nodes[i], i, o->bytes / (uint64_t)nnodes, numa) < 0) {
            ram->nnodes = i + 1;
            he_cache_ram_free(ram);
            return NULL;
        }
    }
    return ram;
}

/* Takes [off, off + len) of the arena's memfd out of the page cache, or
 * out of a huge-page arena's mapping (see the top of the file); the range
 * reads as zeros, and a write faults in a new page. */
static void he_cache_arena_punch(he__cache_node_t *n, size_t off, size_t len)
{
    if (len && n->arena_huge) {
        /* private anonymous: the range maps fresh zero pages, and pages a
         * pipe or an skb holds stay theirs */
        if (madvise(n->arena + off, len, MADV_DONTNEED) < 0) abort();
        return;
    }
    if (len && fallocate(n->arena_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                         (off_t)len) < 0)
        /* cannot happen on a memfd; reusing the chunk could change bytes
         * a socket still holds, so never quietly */
        abort();
}

/* Chunks back on the free list (node lock held), last first: the list is
 * a stack, so an object's run of adjacent chunks comes off it again in
 * address order and makes one sendfile range for the next object.
 * dropped: their pages were just dropped (he_cache_arena_punch). */
static void he_cache_chunks_push(he__cache_node_t *n, char *const *chunks, uint32_t count,
                                 bool dropped)
{
    size_t cs = n->ram->chunk_size;
    for (uint32_t i = count; i-- > 0;) {
        char *c = chunks[i];
        if (c >= n->arena && c < n->arena + n->arena_len) {
            uint32_t idx = (uint32_t)((size_t)(c - n->arena) / cs);
            n->free_chunks[n->nfree++] = idx;
            if (n->chunk_dropped) n->chunk_dropped[idx] = dropped;
        } else {
            free(c); /* overflow */
        }
    }
    atomic_fetch_sub_explicit(&n->used_chunks, count, memory_order_relaxed);
}

static void he_cache_obj_release_memory(he__cache_node_t *n, he_cache_obj_t *o)
{
    size_t cs = n->ram->chunk_size, run_off = 0, run_len = 0;
    /* the last reference's release ordered every lender's store before this */
    bool drop =
        (n->arena_fd >= 0 || n->arena_huge) && atomic_load_explicit(&o->lent, memory_order_relaxed);
    for (uint32_t i = 0; drop && i < o->nchunks; i++) {
        char *c = o->chunks[i];
        if (c >= n->arena && c < n->arena + n->arena_len) {
            size_t off = (size_t)(c - n->arena);
            /* one punch per run of adjacent chunks */
            if (run_len && run_off + run_len == off) {
                run_len += cs;
            } else {
                he_cache_arena_punch(n, run_off, run_len);
                run_off = off;
                run_len = cs;
            }
        }
    }
    if (drop) he_cache_arena_punch(n, run_off, run_len);
    he_cache_chunks_push(n, o->chunks, o->nchunks, drop);
    free(o->chunks);
    o->chunks = NULL;
    o->nchunks = o->chunk_cap = 0;
    free(o->key);
    o->key = NULL;
}

void he_cache_ram_free(he_cache_ram_t *ram)
{
    if (!ram) return;
    for (int i = 0; i < ram->nnodes; i++) {
        he__cache_node_t *n = &ram->nodes[i];
        /* objects still indexed hold only the index reference */
        for (uint64_t b = 0; n->buckets && b <= n->mask; b++) {
            he_cache_obj_t *o = atomic_load_explicit(&n->buckets[b], memory_order_relaxed);
            while (o) {
                he_cache_obj_t *next = atomic_load_explicit(&o->hnext, memory_order_relaxed);
                he_cache_obj_release_memory(n, o);
                o = next;
            }
        }
        while (n->blocks) {
            he__cache_objblock_t *b = n->blocks;
            n->blocks = b->next;
            free(b);
        }
        he__cache_evict_free(n);
        free(n->buckets);
        free(n->free_chunks);
        free(n->chunk_dropped);
        if (n->arena) {
            if (n->arena_numa)
                numa_free(n->arena, n->arena_len);
            else
                munmap(n->arena, n->arena_len);
        }
        if (n->arena_fd >= 0) close(n->arena_fd);
        pthread_mutex_destroy(&n->lock);
    }
    free(ram->nodes);
    free(ram);
}

int he_cache_ram_nodes(const he_cache_ram_t *ram)
{
    return ram->nnodes;
}

void he_cache_ram_arena(const he_cache_ram_t *ram, int node, void **base, size_t *len)
{
    he__cache_node_t *n = he__cache_ram_node((he_cache_ram_t *)ram, node);
    *base = n->arena;
    *len = n->arena_len;
}

int he_cache_ram_arena_fd(const he_cache_ram_t *ram, int node)
{
    return he__cache_ram_node((he_cache_ram_t *)ram, node)->arena_fd;
}

bool he_cache_ram_arena_huge(const he_cache_ram_t *ram, int node)
{
    return he__cache_ram_node((he_cache_ram_t *)ram, node)->arena_huge;
}

uint64_t he_cache_ram_used(const he_cache_ram_t *ram, int node)
{
    he__cache_node_t *n = he__cache_ram_node((he_cache_ram_t *)ram, node);
    return atomic_load_explicit(&n->used_chunks, memory_order_relaxed) * ram->chunk_size;
}

/* ---------------------------------------------------------------- references */

static bool he_cache_obj_tryget(he_cache_obj_t *o)
{
    unsigned r = atomic_load_explicit(&o->refs, memory_order_relaxed);
    while (r != 0) {
        if (atomic_compare_exchange_weak_explicit(&o->refs, &r, r + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    }
    return false;
}

void he_cache_obj_ref(he_cache_obj_t *o)
{
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
}

/* The last reference went: give the memory back and recycle the header. */
static void he_cache_obj_free_locked(he__cache_node_t *n, he_cache_obj_t *o)
{
    he_cache_obj_release_memory(n, o);
    atomic_store_explicit(&o->state, HE__CACHE_OBJ_FREE, memory_order_relaxed);
    o->free_next = n->free_objs;
    n->free_objs = o;
}

static void he_cache_obj_drop_locked(he__cache_node_t *n, he_cache_obj_t *o)
{
    if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
        he_cache_obj_free_locked(n, o);
}

void he_cache_obj_unref(he_cache_obj_t *o)
{
    if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1) {
        he__cache_node_t *n = o->node;
        pthread_mutex_lock(&n->lock);
        he_cache_obj_free_locked(n, o);
        pthread_mutex_unlock(&n->lock);
    }
}

/* ---------------------------------------------------------------- index */

static void he_cache_seq_begin(he__cache_node_t *n)
{
    unsigned s = atomic_load_explicit(&n->seq, memory_order_relaxed);
    atomic_store_explicit(&n->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void he_cache_seq_end(he__cache_node_t *n)
{
    unsigned s = atomic_load_explicit(&n->seq, memory_order_relaxed);
    atomic_store_explicit(&n->seq, s + 1, memory_order_release);
}

static bool he_cache_obj_is(he_cache_obj_t *o, const he_cache_key_t *key)
{
    return atomic_load_explicit(&o->state, memory_order_acquire) == HE__CACHE_OBJ_COMPLETE &&
           atomic_load_explicit(&o->indexed, memory_order_acquire) &&
           atomic_load_explicit(&o->hash, memory_order_relaxed) == key->hash && o->key &&
           o->key->len == key->len && memcmp(o->key->s, key->s, key->len) == 0;
}

/* Walks one chain; returns a referenced match, NULL, or sets *unsure when
 * the walk was cut short. */
static he_cache_obj_t *he_cache_ram_walk(he__cache_node_t *n, const he_cache_key_t *key,
                                         bool locked, bool *unsure)
{
    he_cache_obj_t *o =
        atomic_load_explicit(&n->buckets[key->hash & n->mask], memory_order_acquire);
    unsigned steps = 0;
    for (; o; o = atomic_load_explicit(&o->hnext, memory_order_acquire)) {
        if (!locked && ++steps > HE__CACHE_CHAIN_MAX) {
            *unsure = true;
            return NULL;
        }
        if (atomic_load_explicit(&o->hash, memory_order_relaxed) != key->hash) continue;
        if (!he_cache_obj_tryget(o)) continue;
        if (he_cache_obj_is(o, key)) return o;
        /* someone else's object now, or no longer indexed */
        if (locked)
            he_cache_obj_drop_locked(n, o);
        else
            he_cache_obj_unref(o);
    }
    return NULL;
}

static void he_cache_ram_hit(he_cache_obj_t *o, he_cache_stats_t *st)
{
    uint8_t f = atomic_load_explicit(&o->freq, memory_order_relaxed);
    if (f < 3) atomic_store_explicit(&o->freq, f + 1, memory_order_relaxed);
    if (atomic_load_explicit(&o->pf_pending, memory_order_relaxed) &&
        atomic_exchange_explicit(&o->pf_pending, 0, memory_order_relaxed) && st)
        st->prefetch_used++;
    /* negative_hits counts at the serve (he__rc_serve_obj), which knows
     * the answer went out */
    if (st) st->hits[HE_CACHE_TIER_RAM]++;
}

he_cache_obj_t *he_cache_ram_lookup(he_cache_ram_t *ram, int node, const he_cache_key_t *key,
                                    he_cache_stats_t *st)
{
    he__cache_node_t *n;
    he_cache_obj_t *o;
    if (!ram) {
        if (st) st->misses[HE_CACHE_TIER_RAM]++;
        return NULL;
    }
    n = he__cache_ram_node(ram, node);
    for (int t = 0; t < HE__CACHE_LOOKUP_TRIES; t++) {
        bool unsure = false;
        unsigned s1 = atomic_load_explicit(&n->seq, memory_order_acquire);
        o = he_cache_ram_walk(n, key, false, &unsure);
        if (o) {
            he_cache_ram_hit(o, st);
            return o;
        }
        atomic_thread_fence(memory_order_acquire);
        if (!unsure && !(s1 & 1) && atomic_load_explicit(&n->seq, memory_order_relaxed) == s1) {
            if (st) st->misses[HE_CACHE_TIER_RAM]++;
            return NULL;
        }
    }
    /* the index kept changing under us: settle it under the lock */
    pthread_mutex_lock(&n->lock);
    {
        bool unsure = false;
        o = he_cache_ram_walk(n, key, true, &unsure);
    }
    pthread_mutex_unlock(&n->lock);
    if (o)
        he_cache_ram_hit(o, st);
    else if (st)
        st->misses[HE_CACHE_TIER_RAM]++;
    return o;
}

bool he_cache_ram_contains(he_cache_ram_t *ram, int node, const he_cache_key_t *key)
{
    bool unsure = false;
    he_cache_obj_t *o;
    if (!ram) return false;
    o = he_cache_ram_walk(he__cache_ram_node(ram, node), key, false, &unsure);
    if (o) he_cache_obj_unref(o);
    return o != NULL; /* "unsure" says no: at worst a duplicate prefetch */
}

static void he_cache_ram_unindex(he__cache_node_t *n, he_cache_obj_t *o)
{
    _Atomic(he_cache_obj_t *) *pp =
        &n->buckets[atomic_load_explicit(&o->hash, memory_order_relaxed) & n->mask];
    he_cache_obj_t *cur;
    he_cache_seq_begin(n);
    while ((cur = atomic_load_explicit(pp, memory_order_relaxed)) != NULL) {
        if (cur == o) {
            /* o->hnext stays: a reader standing on o still reaches the rest */
            atomic_store_explicit(pp, atomic_load_explicit(&o->hnext, memory_order_relaxed),
                                  memory_order_release);
            break;
        }
        pp = &cur->hnext;
    }
    atomic_store_explicit(&o->indexed, 0, memory_order_release);
    he_cache_seq_end(n);
}

/* ---------------------------------------------------------------- memory */

bool he__cache_ram_evict_one(he__cache_node_t *n, he_cache_stats_t *st)
{
    he_cache_obj_t *o = he__cache_evict_victim(n, st);
    if (!o) return false;
    he_cache_ram_unindex(n, o);
    if (st) {
        st->evictions[HE_CACHE_TIER_RAM]++;
        if (atomic_exchange_explicit(&o->pf_pending, 0, memory_order_relaxed))
            st->prefetch_wasted++;
    }
    he_cache_obj_drop_locked(n, o); /* the index's reference */
    return true;
}

/* Up to want more chunks for one object, under one lock: popped together,
 * they are adjacent in the arena wherever the free list holds a run (a
 * fresh arena, an evicted object's chunks), where one at a time they would
 * interleave with the chunks of every other fill under way. Evicts as
 * needed for all of them; with nothing left to evict, one malloc'd chunk
 * (the arena is full of objects still being sent: counted as overflow). */
unsigned he__cache_ram_chunk_alloc(he__cache_node_t *n, he_cache_stats_t *st, char **out,
                                   unsigned want)
{
    size_t cs = n->ram->chunk_size;
    uint64_t dropped[HE__CACHE_ALLOC_MAX / 64] = {0};
    unsigned got = 0;
    if (want > HE__CACHE_ALLOC_MAX) want = HE__CACHE_ALLOC_MAX;
    pthread_mutex_lock(&n->lock);
    while (n->nfree < want && he__cache_ram_evict_one(n, st))
        ;
    while (got < want && n->nfree) {
        uint32_t idx = n->free_chunks[--n->nfree];
        if (n->chunk_dropped && n->chunk_dropped[idx]) {
            n->chunk_dropped[idx] = 0; /* populated below */
            dropped[got / 64] |= 1ull << (got % 64);
        }
        out[got++] = n->arena + (size_t)idx * cs;
    }
    pthread_mutex_unlock(&n->lock);
    /* A dropped chunk's first write faults a new page in: some 470 faults
     * for a 1.9 MB segment in base pages, and a tier under eviction drifts
     * to base pages. One MADV_POPULATE_WRITE per run of adjacent dropped
     * chunks makes them in one call (cold misses at a full tier: 1.4x the
     * bytes per CPU-second, docs/performance.md "Cold misses"). Before
     * Linux 5.14 it fails with EINVAL, and the writes fault as before. */
    for (unsigned i = 0; i < got;) {
        unsigned j = i + 1;
        if (!(dropped[i / 64] >> (i % 64) & 1)) {
            i++;
            continue;
        }
        while (j < got && out[j] == out[j - 1] + cs && (dropped[j / 64] >> (j % 64) & 1))
            j++;
        (void)madvise(out[i], (size_t)(j - i) * cs, MADV_POPULATE_WRITE);
        i = j;
    }
    if (!got) {
        if (!(out[0] = malloc(cs))) return 0;
        if (st) st->ram_overflow++;
        got = 1;
    }
    atomic_fetch_add_explicit(&n->used_chunks, got, memory_order_relaxed);
    return got;
}

void he__cache_ram_chunk_return(he__cache_node_t *n, char *const *chunks, uint32_t count)
{
    if (!count) return;
    pthread_mutex_lock(&n->lock);
    he_cache_chunks_push(n, chunks, count, false); /* populated when taken, never lent */
    pthread_mutex_unlock(&n->lock);
}

uint64_t he_cache_ram_object_max(const he_cache_ram_t *ram)
{
    uint64_t node = (uint64_t)(ram->nodes[0].nchunks / 2) * ram->chunk_size;
    return ram->opts.object_max < node ? ram->opts.object_max : node;
}

void he__cache_ram_fill_add(he_cache_ram_t *ram, int node, he__cache_rfill_t *p,
                            const he_cache_key_t *key)
{
    he__cache_node_t *n = he__cache_ram_node(ram, node);
    p->in.key = key;
    p->node = n;
    pthread_mutex_lock(&n->lock);
    he__cache_inflight_link(&n->fills, &p->in);
    pthread_mutex_unlock(&n->lock);
}

bool he__cache_ram_fill_del(he__cache_rfill_t *p)
{
    if (p->in.linked) {
        pthread_mutex_lock(&p->node->lock);
        he__cache_inflight_unlink(&p->node->fills, &p->in);
        pthread_mutex_unlock(&p->node->lock);
    }
    return atomic_load(&p->in.purged);
}

/* cond: insert-if-absent, and only if no removal began since epoch.
 * fill: the fill that made o, ended here (see he__cache_ram_insert_fill). */
static int he_cache_ram_publish(he_cache_ram_t *ram, he_cache_obj_t *o, he_cache_stats_t *st,
                                bool cond, uint64_t epoch, he__cache_rfill_t *fill)
{
    he__cache_node_t *n = o->node;
    uint64_t len = atomic_load_explicit(&o->len, memory_order_relaxed);
    _Atomic(he_cache_obj_t *) *bucket = &n->buckets[o->key->hash & n->mask];
    he_cache_obj_t *old;

    if (len > ram->opts.object_max || o->nchunks > n->nchunks / 2 ||
        atomic_load_explicit(&o->state, memory_order_relaxed) != HE__CACHE_OBJ_COMPLETE) {
        /* purged: the caller must not write it elsewhere either */
        if (fill && he__cache_ram_fill_del(fill)) return -ESTALE;
        if (st) st->ram_rejected++;
        return 1;
    }
    pthread_mutex_lock(&n->lock);
    if (fill) {
        he__cache_inflight_unlink(&n->fills, &fill->in);
        if (atomic_load(&fill->in.purged)) {
            pthread_mutex_unlock(&n->lock);
            return -ESTALE;
        }
    }
    /* a newer version replaces the old one */
    for (old = atomic_load_explicit(bucket, memory_order_relaxed); old;
         old = atomic_load_explicit(&old->hnext, memory_order_relaxed))
        if (old != o && he_cache_obj_is(old, o->key)) break;
    if (cond && (old || atomic_load(&ram->epoch) != epoch)) {
        /* seq_cst: a remove bumps before locking, so either this sees the
         * bump or the remove's locked section comes after this one */
        pthread_mutex_unlock(&n->lock);
        return old ? -EEXIST : -ESTALE;
    }
    if (old) {
        he_cache_ram_unindex(n, old);
        he__cache_evict_remove(n, old);
        he_cache_obj_drop_locked(n, old);
    }
    atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed); /* the index's */
    he_cache_seq_begin(n);
    atomic_store_explicit(&o->hnext, atomic_load_explicit(bucket, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&o->indexed, 1, memory_order_relaxed);
    atomic_store_explicit(bucket, o, memory_order_release);
    he_cache_seq_end(n);
    he__cache_evict_insert(n, o, st);
    pthread_mutex_unlock(&n->lock);
    if (st) st->ram_admitted++;
    return 0;
}

int he_cache_ram_insert(he_cache_ram_t *ram, he_cache_obj_t *o, he_cache_stats_t *st)
{
    return he_cache_ram_publish(ram, o, st, false, 0, NULL);
}

int he_cache_ram_insert_if_absent(he_cache_ram_t *ram, he_cache_obj_t *o, he_cache_stats_t *st,
                                  uint64_t epoch)
{
    return he_cache_ram_publish(ram, o, st, true, epoch, NULL);
}

int he__cache_ram_insert_fill(he_cache_ram_t *ram, he_cache_obj_t *o, he_cache_stats_t *st,
                              he__cache_rfill_t *p)
{
    return he_cache_ram_publish(ram, o, st, false, 0, p);
}

uint64_t he_cache_ram_epoch(const he_cache_ram_t *ram)
{
    return atomic_load(&((he_cache_ram_t *)ram)->epoch);
}

int he_cache_ram_remove(he_cache_ram_t *ram, const he_cache_key_t *key)
{
    int removed = 0;
    if (!ram) return 0;
    atomic_fetch_add(&ram->epoch, 1); /* before the locks: see he_cache_ram_publish */
    for (int i = 0; i < ram->nnodes; i++) {
        he__cache_node_t *n = &ram->nodes[i];
        he_cache_obj_t *o;
        pthread_mutex_lock(&n->lock);
        for (o = atomic_load_explicit(&n->buckets[key->hash & n->mask], memory_order_relaxed); o;
             o = atomic_load_explicit(&o->hnext, memory_order_relaxed))
            if (he_cache_obj_is(o, key)) break;
        if (o) {
            he_cache_ram_unindex(n, o);
            he__cache_evict_remove(n, o);
            he_cache_obj_drop_locked(n, o);
            removed++;
        }
        /* fills of the key in flight: they publish nothing */
        removed += he__cache_inflight_mark(n->fills, key, NULL, 0, NULL);
        pthread_mutex_unlock(&n->lock);
    }
    return removed;
}
