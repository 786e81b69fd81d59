/* cache: structures shared between the cache's own files (he__cache_). */
#ifndef HE_CACHE_INTERNAL_H
#define HE_CACHE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cache/key.h"
#include "cache/obj.h"
#include "cache/stats.h"
#include "cache/store.h"

/* ---------------------------------------------------------------- RAM tier */

enum he__cache_obj_state { HE__CACHE_OBJ_FREE = 0, HE__CACHE_OBJ_FILLING, HE__CACHE_OBJ_COMPLETE };
enum he__cache_queue { HE__CACHE_Q_NONE = 0, HE__CACHE_Q_SMALL, HE__CACHE_Q_MAIN };

typedef struct he__cache_node he__cache_node_t;

/* Work in flight for a key, known to a tier from its start to its end: a
 * fill to its RAM partition, an SSD write to its directory. A purge of the
 * key in between marks it (and counts it as found), and it then publishes
 * nothing, since the purge has answered already and what it brings may be
 * the purged bytes. The list is the tier's, under the tier's lock. */
typedef struct he__cache_inflight {
    struct he__cache_inflight *prev, *next;
    const he_cache_key_t *key; /* its owner's: stable while it runs */
    atomic_bool purged;        /* set under the list's lock */
    bool linked;
    uint64_t file_gen; /* an SSD write's file version; 0: no file (fills) */
} he__cache_inflight_t;

static inline bool he__cache_key_eq(const he_cache_key_t *a, const he_cache_key_t *b)
{
    return a->hash == b->hash && a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
}

/* The helpers below run under the list's lock. */
static inline void he__cache_inflight_link(he__cache_inflight_t **head, he__cache_inflight_t *p)
{
    atomic_init(&p->purged, false);
    p->prev = NULL;
    p->next = *head;
    if (*head) (*head)->prev = p;
    *head = p;
    p->linked = true;
}

static inline void he__cache_inflight_unlink(he__cache_inflight_t **head, he__cache_inflight_t *p)
{
    if (!p->linked) return;
    if (p->prev)
        p->prev->next = p->next;
    else
        *head = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->linked = false;
}

/* Marks every entry for key; returns how many. The file_gen of the first
 * cap of them that have a file go into gens (cap 0: none), *ngens says
 * how many. */
static inline int he__cache_inflight_mark(he__cache_inflight_t *head, const he_cache_key_t *key,
                                          uint64_t *gens, unsigned cap, unsigned *ngens)
{
    int n = 0;
    unsigned g = 0;
    for (he__cache_inflight_t *p = head; p; p = p->next)
        if (he__cache_key_eq(p->key, key)) {
            atomic_store(&p->purged, true);
            n++;
            if (p->file_gen && g < cap) gens[g++] = p->file_gen;
        }
    if (ngens) *ngens = g;
    return n;
}

/* A fill in flight (fill.c) and the RAM partition that knows it. */
typedef struct he__cache_rfill {
    he__cache_inflight_t in;
    he__cache_node_t *node;
} he__cache_rfill_t;

/* Object headers are type-stable: they come from per-node blocks that are
 * only freed with the whole RAM tier, so a lock-free reader holding a stale
 * pointer may always read the atomics below; it owns the object only after
 * its refcount CAS succeeds and it has re-checked key, state and indexed. */
struct he_cache_obj {
    /* read without a reference by lock-free lookups */
    _Atomic uint64_t hash;
    _Atomic(struct he_cache_obj *) hnext;
    atomic_uint refs; /* 0 = free header; the index holds one while indexed */
    _Atomic uint8_t state;
    _Atomic uint8_t indexed;
    _Atomic uint8_t freq;       /* S3-FIFO frequency, 0..3, relaxed */
    _Atomic uint8_t pf_pending; /* filled by prefetch, no hit yet */
    /* its arena range went to the kernel by reference (peek_file: vmsplice
     * or sendfile), which may hold the pages after the object is freed:
     * its chunks are dropped then (ram.c), else they are reused as they are */
    _Atomic uint8_t lent;

    /* stable while a reference is held */
    he__cache_node_t *node;
    he_cache_key_t *key; /* allocated to its length: never copy by value */
    uint64_t serial;     /* he_cache_obj_serial */
    he_cache_meta_t meta;
    _Atomic int64_t stored_ms, expires_ms; /* refreshable part of meta.fresh */
    _Atomic uint64_t len;                  /* bytes written (final when COMPLETE) */
    char **chunks;
    uint32_t nchunks, chunk_cap;
    uint32_t hint_chunks; /* chunks the size hint asks for; 0 = unknown */

    /* under the node lock */
    struct he_cache_obj *qprev, *qnext;
    uint8_t queue;
    struct he_cache_obj *free_next;
};

typedef struct he__cache_fifo {
    he_cache_obj_t *head, *tail; /* insert at head, evict from tail */
    uint64_t count, chunks;
} he__cache_fifo_t;

/* Ghost FIFO: hashes of objects evicted from the small queue, remembered
 * for as many chunks as the main queue holds. A ring plus a small
 * open-addressed table; forgetting an entry early is harmless. */
typedef struct he__cache_ghost_slot {
    uint64_t hash, seq;
} he__cache_ghost_slot_t;

typedef struct he__cache_ghost {
    uint64_t *ring_hash;
    uint32_t *ring_chunks;
    uint64_t cap, head, tail; /* entries; seqs [tail, head) are valid */
    uint64_t chunks, chunks_cap;
    he__cache_ghost_slot_t *tab;
    uint64_t tab_mask;
} he__cache_ghost_t;

typedef struct he__cache_objblock {
    struct he__cache_objblock *next;
    he_cache_obj_t objs[64];
} he__cache_objblock_t;

struct he__cache_node {
    he_cache_ram_t *ram;
    int id;
    pthread_mutex_t lock; /* inserts, evictions, frees: never hits */
    atomic_uint seq;      /* odd while the index is being changed */
    _Atomic(he_cache_obj_t *) *buckets;
    uint64_t mask;

    char *arena;
    size_t arena_len;
    bool arena_numa;
    int arena_fd; /* the memfd behind the arena (opts.memfd), else -1 */
    bool arena_huge; /* anonymous huge pages (opts.huge): freed runs dropped by MADV_DONTNEED */
    uint32_t *free_chunks; /* stack of chunk indexes */
    /* per arena chunk, of an arena that drops freed chunks (memfd or huge):
     * its pages are dropped or never touched, so a fill would fault them in */
    uint8_t *chunk_dropped;
    uint32_t nfree, nchunks;
    atomic_uint_fast64_t used_chunks; /* arena + overflow, for stats */

    he__cache_fifo_t small, main;
    he__cache_ghost_t ghost;
    he_cache_obj_t *free_objs;
    he__cache_objblock_t *blocks;
    he__cache_inflight_t *fills; /* fills in flight of this partition */
} __attribute__((aligned(64)));

struct he_cache_ram {
    he_cache_ram_opts_t opts;
    uint32_t chunk_size;
    int nnodes;
    he__cache_node_t *nodes;
    _Atomic uint64_t epoch;   /* removals begun (he_cache_ram_remove) */
    _Atomic uint64_t serials; /* objects created */
};

/* evict.c (node lock held) */
int he__cache_evict_init(he__cache_node_t *n);
void he__cache_evict_free(he__cache_node_t *n);
void he__cache_evict_insert(he__cache_node_t *n, he_cache_obj_t *o, he_cache_stats_t *st);
void he__cache_evict_remove(he__cache_node_t *n, he_cache_obj_t *o);
/* Takes the next victim off the queues (one from the small queue leaves
 * its ghost); the caller unindexes and drops it. NULL when nothing is
 * left to evict. */
he_cache_obj_t *he__cache_evict_victim(he__cache_node_t *n, he_cache_stats_t *st);
bool he__cache_ghost_contains(const he__cache_ghost_t *g, uint64_t hash);
void he__cache_ghost_add(he__cache_ghost_t *g, uint64_t hash, uint32_t chunks);

/* The partition a worker on node uses (an unknown node, -1: the first). */
static inline he__cache_node_t *he__cache_ram_node(he_cache_ram_t *ram, int node)
{
    if (node < 0) node = 0;
    return &ram->nodes[node % ram->nnodes];
}

/* ram.c (node lock held): evicts one object, as chosen by evict.c, and
 * drops it; false when nothing is left to evict. */
bool he__cache_ram_evict_one(he__cache_node_t *n, he_cache_stats_t *st);
/* ram.c: up to want (at most HE__CACHE_ALLOC_MAX) more chunks of node n's
 * memory into out (takes the lock once): the free list, else evicting,
 * else one malloc'd chunk (counted as overflow). Returns how many; 0 on
 * ENOMEM. */
#define HE__CACHE_ALLOC_MAX 256u
unsigned he__cache_ram_chunk_alloc(he__cache_node_t *n, he_cache_stats_t *st, char **out,
                                   unsigned want);
/* ram.c: chunks never written (allocated ahead of a fill that came up
 * short of its size hint) back to the free list; takes the lock. */
void he__cache_ram_chunk_return(he__cache_node_t *n, char *const *chunks, uint32_t count);

/* ram.c: a fill of key begins in node's partition (p is the fill's). */
void he__cache_ram_fill_add(he_cache_ram_t *ram, int node, he__cache_rfill_t *p,
                            const he_cache_key_t *key);
/* The fill ends without publishing: true if a purge marked it. */
bool he__cache_ram_fill_del(he__cache_rfill_t *p);
/* Publishes o (an object of p's partition) as he_cache_ram_insert does and
 * ends p, both under the node lock, so a purge either marked p first or
 * finds o indexed: -ESTALE (marked: not published), 0, or 1. */
int he__cache_ram_insert_fill(he_cache_ram_t *ram, he_cache_obj_t *o, he_cache_stats_t *st,
                              he__cache_rfill_t *p);

/* ---------------------------------------------------------------- SSD tier */

#define HE__CACHE_STORE_MAGIC 0x43534548u /* "HESC" little-endian */
#define HE__CACHE_STORE_VERSION 2u        /* 2: content encoding; keys with escaped paths */
#define HE__CACHE_HDR_FIXED 64
#define HE__CACHE_HDR_MAX 4096
#define HE__CACHE_BLOCK 4096 /* disk usage is counted in these */

/* On-disk header, little-endian (store_hdr.c builds and checks it):
 *   0 magic u32 | 4 version u32 | 8 header_len u32 | 12 header_crc u32
 *  16 body_len u64 | 24 body_crc u32 | 28 status u16 | 30 kind u8 | 31 cenc_len u8
 *  32 stored_ms i64 | 40 expires_ms i64 | 48 swr_ms u32 | 52 sie_ms u32
 *  56 key_len u16 | 58 ctype_len u8 | 59 etag_len u8 | 60 lm_len u8 | 61 0[3]
 *  64 key, content type, etag, last-modified, content encoding (no NULs)
 * header_crc covers the header_len bytes with its own field zeroed. Files
 * of another version are removed at start-up (he__cache_hdr_parse says
 * -EPROTONOSUPPORT), uncounted. */

typedef struct he__cache_sentry {
    uint64_t hash;
    uint64_t gen; /* file name: ab/<hash>-<gen>.obj */
    struct he__cache_sentry *hnext;
    struct he__cache_sentry *prev, *next; /* SIEVE queue: head newest */
    he_cache_key_t *key;                  /* allocated to its length */
    uint64_t body_len;
    uint32_t hdr_len;
    bool visited;
    he_cache_meta_t meta;
} he__cache_sentry_t;

typedef struct he__cache_unlink {
    struct he__cache_unlink *next;
    char path[48];
} he__cache_unlink_t;

/* A write in flight (swrite.c), known to its directory until it is
 * indexed: a purge marks it, and the file it made is then dropped. */
typedef he__cache_inflight_t he__cache_pending_t;

typedef struct he__cache_sdir {
    struct he_cache_store *store;
    unsigned index;
    int dirfd;
    char path[PATH_MAX];
    uint64_t limit, used, reserved; /* bytes in blocks */
    pthread_mutex_t lock;
    he__cache_sentry_t **buckets;
    uint64_t mask, count;
    he__cache_sentry_t *head, *tail, *hand;
    he__cache_unlink_t *unlinks;  /* files to remove, for the ring */
    he__cache_pending_t *pending; /* writes in flight */
} he__cache_sdir_t;

struct he_cache_store {
    he_cache_store_opts_t opts;
    he__cache_sdir_t dirs[HE_CONF_MAX_STORES];
    unsigned ndirs;
    atomic_uint_fast64_t gen;
    atomic_uint_fast64_t purges; /* purges begun (he_cache_store_remove) */
    atomic_uint logged;          /* one bit per he_cache_derr_t already logged */
    unsigned unlink_rr;
};

uint64_t he__cache_store_blocks(uint64_t bytes);
he__cache_sdir_t *he__cache_store_dir_for(he_cache_store_t *s, uint64_t hash);
void he__cache_store_name(char *out, size_t cap, uint64_t hash, uint64_t gen);
/* The temp file a write of that version renames to that name. */
void he__cache_store_tmp_name(char *out, size_t cap, uint64_t hash, uint64_t gen);
/* Counts a disk error and logs its cause the first time it is seen. */
void he__cache_store_fail(he_cache_store_t *s, int neg_errno, const char *what,
                          he_cache_stats_t *st);
/* Reserves room for a new file (evicting as needed). 0 or -ENOSPC. */
int he__cache_store_reserve(he__cache_sdir_t *d, uint64_t bytes, he_cache_stats_t *st);
void he__cache_store_unreserve(he__cache_sdir_t *d, uint64_t bytes);
/* A write starts (p->key set; file_gen names its temp file, 0 for a fill
 * that has none yet) or ends without a file to index. */
void he__cache_store_pending_add(he__cache_sdir_t *d, he__cache_pending_t *p, uint64_t file_gen);
void he__cache_store_pending_del(he__cache_sdir_t *d, he__cache_pending_t *p);
/* Indexes a file that was renamed into place (consumes the reservation,
 * ends p): 0, or -ESTALE when the key was purged since p began (the file
 * is queued for unlinking instead). */
int he__cache_store_add(he__cache_sdir_t *d, he__cache_pending_t *p, uint64_t gen, uint32_t hdr_len,
                        uint64_t body_len, const he_cache_meta_t *meta, uint64_t reserved,
                        he_cache_stats_t *st);
/* store_hdr.c: builds a header; returns its length or -ENAMETOOLONG. */
int he__cache_hdr_build(char *out, const he_cache_key_t *key, const he_cache_meta_t *m,
                        uint64_t body_len, uint32_t body_crc);
/* Checks a header read from disk; fills key and meta. 0, -EBADMSG, or
 * -EPROTONOSUPPORT (another format version). */
int he__cache_hdr_parse(const char *buf, size_t n, he_cache_key_t *key, he_cache_meta_t *m,
                        uint32_t *hdr_len, uint64_t *body_len, uint32_t *body_crc);

/* crc32c.c: CRC32C of n bytes at p, continuing crc (0 to start) */
uint32_t he__cache_crc32c(uint32_t crc, const void *p, size_t n);
/* The table-driven one whatever the CPU has, and whether he__cache_crc32c
 * uses the CPU's instruction instead (for tests) */
uint32_t he__cache_crc32c_table(uint32_t crc, const void *p, size_t n);
bool he__cache_crc32c_hardware(void);

#endif
