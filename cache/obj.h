/* cache: the RAM tier and its objects (ram.c, obj.c, evict.c). */
#ifndef HE_CACHE_OBJ_H
#define HE_CACHE_OBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cache/fresh.h"
#include "cache/key.h"
#include "cache/stats.h"

/* What is stored with an object, in RAM and on disk. */
typedef struct he_cache_meta {
    he_cache_fresh_t fresh;
    uint16_t status; /* 200, or 404 (negative entry) */
    uint8_t kind;    /* he_seg_kind_t */
    bool prefetched; /* filled by prefetch, not yet hit */
    char content_type[96];
    char etag[96];
    char last_modified[40];
    char content_encoding[32]; /* "" = identity; else sent with the body */
} he_cache_meta_t;

typedef struct he_cache_ram he_cache_ram_t;
typedef struct he_cache_obj he_cache_obj_t;

typedef struct he_cache_ram_opts {
    uint64_t bytes;      /* total, split evenly across nodes */
    uint32_t chunk_size; /* object memory granule; 0 = 16 KiB */
    uint64_t object_max; /* larger objects are not published; 0 = bytes/8 */
    bool numa;           /* one partition per NUMA node (else one) */
    bool admission;      /* S3-FIFO small queue + ghost (else CLOCK only) */
    bool memfd;          /* arenas in a memfd: hits can leave by sendfile */
    /* arenas in anonymous transparent huge pages (over memfd): hits
     * leave by vmsplice of 2 MiB pages */
    bool huge;
} he_cache_ram_opts_t;

he_cache_ram_t *he_cache_ram_new(const he_cache_ram_opts_t *o);
/* Every object reference must have been released. */
void he_cache_ram_free(he_cache_ram_t *ram);
int he_cache_ram_nodes(const he_cache_ram_t *ram);
/* The arena of a node, to register as one fixed buffer (SEND_ZC with
 * IORING_RECVSEND_FIXED_BUF). Chunks outside it (overflow) are not fixed. */
void he_cache_ram_arena(const he_cache_ram_t *ram, int node, void **base, size_t *len);
uint64_t he_cache_ram_used(const he_cache_ram_t *ram, int node); /* bytes in chunks */
/* The memfd behind a node's arena (opts.memfd), else -1. */
int he_cache_ram_arena_fd(const he_cache_ram_t *ram, int node);
/* Whether a node's arena is anonymous huge pages (opts.huge). */
bool he_cache_ram_arena_huge(const he_cache_ram_t *ram, int node);
/* len bytes (a multiple of 4 KiB) of private anonymous memory on a 2 MiB
 * boundary, asked for in transparent huge pages: the huge arena's, and the
 * copies of files under root (server/handler/fcopy.c). Freed by
 * munmap(p, len); NULL when mmap fails. */
void *he_cache_huge_map(size_t len);

/* A hit returns the complete object with a reference held (release with
 * he_cache_obj_unref); no lock, one CAS on the refcount, one relaxed store
 * of the frequency bits. NULL on a miss. */
he_cache_obj_t *he_cache_ram_lookup(he_cache_ram_t *ram, int node, const he_cache_key_t *key,
                                    he_cache_stats_t *st);
/* A new object being filled, owned by the caller (one reference). size_hint
 * is the Content-Length or 0. Memory comes from the node's arena, evicting
 * as needed. NULL on -ENOMEM. */
he_cache_obj_t *he_cache_obj_new(he_cache_ram_t *ram, int node, const he_cache_key_t *key,
                                 uint64_t size_hint);
/* Appends body bytes (the filling worker only). 0 or -ENOMEM. */
int he_cache_obj_append(he_cache_obj_t *o, const void *p, size_t n, he_cache_stats_t *st);
/* The same without a copy: writable space at the end of the object (a
 * chunk is allocated if needed), so the worker can recv straight into the
 * object; then commit what was written. 0 on -ENOMEM. */
size_t he_cache_obj_space(he_cache_obj_t *o, void **p, he_cache_stats_t *st);
void he_cache_obj_commit(he_cache_obj_t *o, size_t n);
/* The same for a vectored read: up to max iovecs covering want bytes of
 * space from the end of the object (chunks allocated as needed, adjacent
 * ones merged). Returns the count (0 on -ENOMEM); commit what was read. */
unsigned he_cache_obj_space_iov(he_cache_obj_t *o, struct iovec *iov, unsigned max, uint64_t want,
                                he_cache_stats_t *st);
/* The largest object he_cache_ram_insert publishes. */
uint64_t he_cache_ram_object_max(const he_cache_ram_t *ram);
void he_cache_obj_set_meta(he_cache_obj_t *o, const he_cache_meta_t *m);
/* Marks the object complete: its bytes never change again. */
void he_cache_obj_finish(he_cache_obj_t *o);
/* Publishes a complete object in its node's index (replacing one with the
 * same key). 0 published; 1 not published (larger than object_max or
 * larger than the node), the caller's reference stays valid either way. */
int he_cache_ram_insert(he_cache_ram_t *ram, he_cache_obj_t *o, he_cache_stats_t *st);
/* The same for a copy from an older source (an SSD object promoted): only
 * if no object with its key is indexed in its node and no removal (purge)
 * began since epoch was read with he_cache_ram_epoch, both checked under
 * the node lock. Read the epoch before looking the source up: a purge
 * that removed the source first then finds the copy or refuses it.
 * 0 published, 1 as above, -EEXIST (a newer copy is there), -ESTALE. */
int he_cache_ram_insert_if_absent(he_cache_ram_t *ram, he_cache_obj_t *o, he_cache_stats_t *st,
                                  uint64_t epoch);
uint64_t he_cache_ram_epoch(const he_cache_ram_t *ram);
/* True if a complete object is indexed under key; unlike a lookup it
 * counts nothing and marks nothing (no hit, no prefetch "used"). */
bool he_cache_ram_contains(he_cache_ram_t *ram, int node, const he_cache_key_t *key);
/* Purge: removes the key from every node (bumping the epoch first) and
 * marks the fills of the key in flight, which then publish nothing in
 * either tier. Returns how many objects and fills it found. */
int he_cache_ram_remove(he_cache_ram_t *ram, const he_cache_key_t *key);

void he_cache_obj_ref(he_cache_obj_t *o);
/* Releases a reference; memory goes back when the last one goes, so an
 * evicted object stays readable by whoever still holds it. */
void he_cache_obj_unref(he_cache_obj_t *o);
uint64_t he_cache_obj_len(const he_cache_obj_t *o); /* bytes available now */
/* Names this object among all the cache ever held (never 0): a header
 * reused for another object gets another serial, so a serial seen before
 * means the same bytes. */
uint64_t he_cache_obj_serial(const he_cache_obj_t *o);
bool he_cache_obj_complete(const he_cache_obj_t *o);
const he_cache_meta_t *he_cache_obj_meta(const he_cache_obj_t *o);
const he_cache_key_t *he_cache_obj_key(const he_cache_obj_t *o);
int he_cache_obj_node(const he_cache_obj_t *o);
/* With a memfd arena (he_cache_ram_opts_t.memfd): the bytes at off as a
 * range of the arena's memfd, *fd and *file_off, running over adjacent
 * chunks, and as the same bytes of the arena's mapping, *mem (may be NULL);
 * their length, 0 when none have arrived or the chunk at off is not in the
 * arena (memory only: he_cache_obj_peek). A huge-page arena (opts.huge)
 * gives the run with *fd -1. For sending by reference (sendfile,
 * vmsplice): o is marked lent, and its chunks are dropped when it is
 * freed, since the kernel may still hold their pages. Bytes sent by copy
 * should come from he_cache_obj_peek, which keeps them reusable as they
 * are, with no fault-in by the next fill. */
size_t he_cache_obj_peek_file(he_cache_obj_t *o, uint64_t off, int *fd, uint64_t *file_off,
                              const char **mem);
/* Contiguous bytes at off (up to the end of its chunk and of what is
 * available): returns the count and sets *p; 0 at the end. *fixed_off is
 * the byte offset inside the node arena, or -1 for an overflow chunk. */
size_t he_cache_obj_peek(const he_cache_obj_t *o, uint64_t off, const void **p, int64_t *fixed_off);
/* The bytes written to o, contiguous (parsers want them so; playlists are
 * small): *p points into o when its first chunk holds them all, else to a
 * copy in *copy, which the caller frees. Returns their count; *p is NULL
 * only when the copy could not be made. */
size_t he_cache_obj_flat(const he_cache_obj_t *o, const void **p, char **copy);
/* Freshness of a stored object; _refresh replaces it (a 304 answer). */
void he_cache_obj_fresh(const he_cache_obj_t *o, he_cache_fresh_t *f);
void he_cache_obj_refresh(he_cache_obj_t *o, const he_cache_fresh_t *f);

#endif
