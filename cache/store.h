/* cache: the SSD tier (store.c, swrite.c). */
#ifndef HE_CACHE_STORE_H
#define HE_CACHE_STORE_H

#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/fresh.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/result.h"
#include "cache/stats.h"
#include "conf/conf.h"

/* Where the cache logs (once per cause for disk errors). May be NULL. */
typedef void (*he_cache_log_fn)(void *ctx, int level, const char *msg);

typedef struct he_cache_store he_cache_store_t;
typedef struct he_cache_swrite he_cache_swrite_t;

/* The fsync policy: CRC-protected files make a torn write harmless (it is
 * dropped at the next start-up), so the default is not to fsync. */
typedef enum he_cache_fsync {
    HE_CACHE_FSYNC_NONE = 0,
    HE_CACHE_FSYNC_DATA /* fdatasync each object before its rename */
} he_cache_fsync_t;

typedef struct he_cache_store_opts {
    const char *dirs[HE_CONF_MAX_STORES];
    uint64_t bytes[HE_CONF_MAX_STORES];
    unsigned ndirs;
    he_cache_fsync_t fsync;
    bool verify_bodies; /* rebuild reads every body to check its CRC */
    he_cache_log_fn log;
    void *log_ctx;
} he_cache_store_opts_t;

/* Opens the directories and rebuilds the index from the files' headers:
 * temporary files are removed, corrupt or truncated objects are removed
 * and counted in st (may be NULL). -errno on a directory that cannot be
 * opened or created. Runs at start-up with plain syscalls. */
int he_cache_store_open(he_cache_store_t **out, const he_cache_store_opts_t *o, int64_t wall_ms,
                        he_cache_stats_t *st);
void he_cache_store_close(he_cache_store_t *s);
uint64_t he_cache_store_count(he_cache_store_t *s);
uint64_t he_cache_store_used(he_cache_store_t *s, unsigned dir);

/* A hit: everything needed to answer from the file. */
typedef struct he_cache_store_hit {
    int dirfd;         /* the store directory; open path relative to it */
    char path[48];     /* "ab/cd/abcdef0123456789.obj" */
    uint64_t body_off; /* sendfile from here */
    uint64_t body_len;
    bool revisit; /* hit before since it was stored or the SIEVE hand passed */
    he_cache_meta_t meta;
} he_cache_store_hit_t;

/* Looks the key up (a mutex per directory; a hit is followed by file I/O
 * anyway). Marks the entry visited for SIEVE. 0 hit, -ENOENT miss. */
int he_cache_store_lookup(he_cache_store_t *s, const he_cache_key_t *key, he_cache_store_hit_t *hit,
                          he_cache_stats_t *st);
/* True if key is stored; counts nothing, does not mark it visited. */
bool he_cache_store_contains(he_cache_store_t *s, const he_cache_key_t *key);
/* Purge: removes the entry and queues its unlink; a write of the key in
 * flight (he_cache_swrite_new was called) drops its file instead of
 * indexing it. 0 (an entry or a write), or -ENOENT. */
int he_cache_store_remove(he_cache_store_t *s, const he_cache_key_t *key);
/* How many purges began (counted before they look at the index and the
 * writes in flight). Read before an object is published and again once
 * its write began (he_cache_swrite_new): if it changed, a purge may have
 * come in between and missed both the object and the write. */
uint64_t he_cache_store_purges(he_cache_store_t *s);
/* A 304 for the object described by validated (the copy whose ETag and
 * Last-Modified the conditional request carried): the entry's freshness
 * becomes f only if it is that version (same status, same ETag, or with
 * no ETag the same Last-Modified); another version (an older one whose
 * replacement was never written, say) is left to expire. 0, -ESTALE
 * (another version), -ENOENT. */
int he_cache_store_refresh(he_cache_store_t *s, const he_cache_key_t *key,
                           const he_cache_meta_t *validated, const he_cache_fresh_t *f);
/* Reports a disk error seen by the caller (e.g. a failed sendfile):
 * counted, logged once per cause; the entry is dropped. */
void he_cache_store_error(he_cache_store_t *s, const he_cache_key_t *key, int neg_errno,
                          he_cache_stats_t *st);
/* The same for the file a hit named (hit->path): the entry is dropped only
 * while it still names that file, and -ENOENT for a file whose entry is
 * gone or replaced (the hit raced an eviction or a newer write) counts
 * nothing. */
void he_cache_store_error_file(he_cache_store_t *s, const he_cache_key_t *key, const char *path,
                               int neg_errno, he_cache_stats_t *st);

/* Writing an object: a state machine the worker ring drives.
 *   w = he_cache_swrite_new(store, obj, st)   (takes an obj reference; NULL:
 *       not stored, e.g. larger than the directory or no room right now)
 *   while ((rc = he_cache_swrite_step(w, sqe)) == HE_CACHE_AGAIN)
 *       submit sqe; on its CQE: he_cache_swrite_complete(w, cqe->res, st)
 *   rc is 0 (renamed into place and indexed) or -errno (counted, logged
 *   once per cause, the temp file unlinked); then he_cache_swrite_free(w).
 * Ops used: OPENAT, WRITE, FSYNC (with the FSYNC policy), CLOSE, RENAMEAT,
 * UNLINKAT. One operation is in flight at a time. */
he_cache_swrite_t *he_cache_swrite_new(he_cache_store_t *s, he_cache_obj_t *obj,
                                       he_cache_stats_t *st);
int he_cache_swrite_step(he_cache_swrite_t *w, struct io_uring_sqe *sqe);
void he_cache_swrite_complete(he_cache_swrite_t *w, int res, he_cache_stats_t *st);
void he_cache_swrite_free(he_cache_swrite_t *w);
/* The same machine on plain syscalls (tests, tools). inject, if set, is
 * called before each operation runs, with res HE_CACHE_SWRITE_BEFORE (its
 * answer ignored), and after, when it may replace the operation's result
 * (e.g. -ENOSPC) to simulate disk errors. */
#define HE_CACHE_SWRITE_BEFORE INT_MIN
typedef int (*he_cache_swrite_inject_fn)(void *ctx, int op, int res);
int he_cache_swrite_run_sync(he_cache_swrite_t *w, he_cache_stats_t *st,
                             he_cache_swrite_inject_fn inject, void *ctx);
/* Evicted files wait to be unlinked: the ring prepares one UNLINKAT per
 * call (HE_CACHE_AGAIN) until none is left (0). _unlink_sync drains them. */
int he_cache_store_unlink_step(he_cache_store_t *s, struct io_uring_sqe *sqe);
void he_cache_store_unlink_sync(he_cache_store_t *s);

#endif
