/* cache: the edge cache. A RAM tier (per NUMA node, S3-FIFO, lock-free
 * hits), an SSD tier (files with checksummed headers, rebuilt at start-up),
 * freshness rules, an HTTP/1.1 origin client without I/O of its own,
 * coalesced fills that stream to their waiters, and video-aware prefetch.
 *
 * Nothing here reads a clock: every function that needs the time takes it.
 * Wall-clock times (Date, Expires, stored-at) are Unix milliseconds
 * ("wall_ms"); deadlines for timeouts are monotonic milliseconds
 * ("now_ms"), both supplied by the caller.
 *
 *   key.c      cache keys: normalized path + configured query parameters
 *   ram.c      RAM tier: node arenas, objects, lock-free index
 *   evict.c    RAM tier: S3-FIFO queues, ghost, admission
 *   fresh.c    freshness: Cache-Control, Expires, overrides, live playlists
 *   crc32c.c   CRC32C for the SSD tier
 *   store.c    SSD tier: directories, index, eviction, rebuild
 *   swrite.c   SSD tier: the write state machine (io_uring or syscalls)
 *   httpc.c    HTTP/1.1 response parser and request builder
 *   origin.c   origin URLs, start-up resolution, a worker's origins + TLS context
 *   pool.c     keep-alive connections per worker per origin
 *   fetch.c    origin fetch state machine: connect, TLS, send, receive, failover
 *   fill.c     coalesced fills, read-while-fill waiters, publishing
 *   prefetch.c next segments of a rendition, used/wasted accounting
 */
#ifndef HE_CACHE_H
#define HE_CACHE_H

#include <liburing.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "conf/conf.h"
#include "segment/segment.h"

/* ---------------------------------------------------------------- results */

/* Flow results (errors are negative errno values). */
enum {
    HE_CACHE_OK = 0,    /* done */
    HE_CACHE_AGAIN = 1, /* an operation was prepared: submit it, then call _complete */
};

/* ---------------------------------------------------------------- statistics */

typedef enum he_cache_tier {
    HE_CACHE_TIER_RAM = 0,
    HE_CACHE_TIER_SSD,
    HE_CACHE_TIER_COUNT
} he_cache_tier_t;

typedef enum he_cache_oerr {
    HE_CACHE_OERR_CONNECT = 0,     /* refused, unreachable */
    HE_CACHE_OERR_TIMEOUT_CONNECT, /* connect deadline passed */
    HE_CACHE_OERR_TIMEOUT_READ,    /* no byte within the read timeout */
    HE_CACHE_OERR_TIMEOUT_TOTAL,   /* the whole fetch took too long */
    HE_CACHE_OERR_IO,              /* reset, broken pipe, other socket errors */
    HE_CACHE_OERR_PROTOCOL,        /* malformed or oversized response */
    HE_CACHE_OERR_TRUNCATED,       /* closed before the end of the body */
    HE_CACHE_OERR_STATUS_5XX,      /* the origin answered 5xx */
    HE_CACHE_OERR_TLS,             /* handshake or certificate failure */
    HE_CACHE_OERR_COUNT
} he_cache_oerr_t;

typedef enum he_cache_derr {
    HE_CACHE_DERR_NOSPC = 0, /* ENOSPC, EDQUOT */
    HE_CACHE_DERR_IO,        /* EIO */
    HE_CACHE_DERR_CORRUPT,   /* bad header, checksum or length */
    HE_CACHE_DERR_PERM,      /* EACCES, EPERM, EROFS */
    HE_CACHE_DERR_OTHER,
    HE_CACHE_DERR_COUNT
} he_cache_derr_t;

/* Per worker; written only by its owner, summed by the control thread. */
typedef struct he_cache_stats {
    uint64_t hits[HE_CACHE_TIER_COUNT];
    uint64_t misses[HE_CACHE_TIER_COUNT];
    uint64_t negative_hits;   /* cached 404s served */
    uint64_t stale_serves;    /* stale-while-revalidate or stale-if-error */
    uint64_t revalidations;   /* conditional requests sent */
    uint64_t revalidated_304; /* answered 304: entry refreshed */
    uint64_t fills;           /* origin fills started */
    uint64_t fills_failed;
    uint64_t bytes_filled;      /* body bytes received from origins */
    uint64_t coalesced_waiters; /* requests that joined an existing fill */
    uint64_t origin_requests;
    uint64_t origin_failovers;
    uint64_t origin_reused; /* requests sent on a pooled connection */
    uint64_t origin_errors[HE_CACHE_OERR_COUNT];
    uint64_t evictions[HE_CACHE_TIER_COUNT];
    uint64_t ram_admitted;   /* published into the RAM tier */
    uint64_t ram_rejected;   /* too large, not cacheable */
    uint64_t ram_ghost_hits; /* S3-FIFO: re-inserted straight into main */
    uint64_t ram_overflow;   /* chunks taken from malloc: arena pinned full */
    uint64_t prefetch_issued;
    uint64_t prefetch_used;
    uint64_t prefetch_wasted;
    uint64_t store_writes; /* objects renamed into place */
    uint64_t store_write_bytes;
    uint64_t disk_errors[HE_CACHE_DERR_COUNT];
    /* RAM-tier zero-copy sends, by what the kernel's notification said:
     * zc_copied ones were copied after all (loopback, or a device without
     * scatter-gather/checksum offload), and cost more than a plain send */
    uint64_t zc_sends;
    uint64_t zc_copied;
    uint64_t promotions; /* SSD hits copied into the RAM tier */
} __attribute__((aligned(64))) he_cache_stats_t;

const char *he_cache_oerr_name(he_cache_oerr_t e);
const char *he_cache_derr_name(he_cache_derr_t e);
he_cache_derr_t he_cache_derr_of(int neg_errno);

/* Where the cache logs (once per cause for disk errors). May be NULL. */
typedef void (*he_cache_log_fn)(void *ctx, int level, const char *msg);

/* ---------------------------------------------------------------- keys */

#define HE_CACHE_KEY_MAX 2048

typedef struct he_cache_key {
    uint64_t hash;
    uint32_t len;             /* of s, without the NUL */
    uint32_t path_len;        /* the key path (he_cache_key_path): s[0..path_len) */
    char s[HE_CACHE_KEY_MAX]; /* "path" or "path?a=1&b=2", NUL-terminated */
} he_cache_key_t;

/* The path part of a key: the normalized path (he_seg_url_normalize) with
 * its '%', '?' and '#' escaped again ("/x.ts%3Fa" -> "x.ts%3Fa"), so the
 * first '?' of a key starts its parameters and "/" + the key path is a
 * target for the same path. Length, or he_seg_url_normalize's errors. */
int he_cache_key_path(const char *target, size_t len, char *out, size_t cap);
/* Builds the key of a request-target ("/a/b.ts?token=x&lang=en"): the key
 * path plus only the query parameters named in conf->cache_key_params, in
 * the order the config names them (a parameter given twice keeps its
 * values in request order). Names and values are in RFC 3986 normal form:
 * escapes of unreserved bytes decoded, other escapes upper-case, reserved
 * bytes ('+', '/', ...) as sent, other bytes escaped. 0, or -EINVAL (bad
 * target or escape), -ENAMETOOLONG. */
int he_cache_key_make(const he_conf_t *conf, const char *target, size_t len, he_cache_key_t *key);
/* Same from a key string already built (e.g. read back from disk). */
int he_cache_key_set(he_cache_key_t *key, const char *s, size_t len);
/* 64-bit hash used everywhere in the cache (keys, ghosts, file names). */
uint64_t he_cache_hash(const void *p, size_t n);

/* ---------------------------------------------------------------- freshness */

typedef struct he_cache_fresh {
    int64_t stored_ms;  /* wall clock when the response arrived */
    int64_t expires_ms; /* fresh strictly before this */
    uint32_t swr_ms;    /* stale-while-revalidate window after expires_ms */
    uint32_t sie_ms;    /* stale-if-error window after expires_ms */
} he_cache_fresh_t;

typedef enum he_cache_freshness {
    HE_CACHE_FRESH = 0,
    HE_CACHE_STALE_REVALIDATE, /* serve it, refresh in the background */
    HE_CACHE_STALE_IF_ERROR,   /* serve it only if the origin fails */
    HE_CACHE_EXPIRED           /* do not serve without revalidating */
} he_cache_freshness_t;

/* The Cache-Control directives the cache acts on, merged over every
 * Cache-Control field line of a response. All zero: none given. */
typedef struct he_cache_cc {
    bool no_store, no_cache, private_, must_revalidate; /* or proxy-revalidate */
    bool max_age_set, s_maxage_set, swr_set, sie_set;
    int64_t max_age, s_maxage, swr, sie; /* seconds, when _set */
} he_cache_cc_t;

/* Adds the directives of one Cache-Control field value (n bytes). A
 * directive given more than once keeps its smallest value; a malformed
 * max-age or s-maxage counts as 0 (stale, RFC 9111 4.2.1). */
void he_cache_cc_parse(he_cache_cc_t *cc, const char *v, size_t n);

/* Response head fields the cache needs (filled by the origin parser). */
typedef struct he_cache_http_resp {
    int status;
    int64_t content_length; /* -1 when absent */
    bool chunked;
    bool keepalive;
    bool no_body;  /* 1xx/204/304 or a HEAD request */
    int64_t age_s; /* Age, -1 when absent */
    char content_type[96];
    char etag[96];
    char last_modified[40];
    char date[40];
    char expires[40];
    /* "" for identity: we ask for identity, but stores (S3, GCS) answer
     * with the encoding an object was stored with */
    char content_encoding[32];
    he_cache_cc_t cc;
    /* never stored: a Set-Cookie is one viewer's; Vary: * never matches
     * (a Vary on fields is fine: no viewer's header goes to the origin) */
    bool set_cookie;
    bool vary; /* Vary: * */
} he_cache_http_resp_t;

/* Decides whether a response may be stored and for how long. kind is the
 * response's kind (he_seg_kind_of with the body head for m3u8); for media
 * playlists the body is parsed (he_seg_playlist_parse) to bound a live
 * playlist's lifetime by cache_live_fraction_pct of its target duration.
 * Returns true (storable, *out filled) or false (no-store, private,
 * Set-Cookie, Vary: *, an uncacheable status,
 * a 404 without negative caching or that the origin gives no lifetime). */
bool he_cache_fresh_compute(const he_conf_t *conf, he_seg_kind_t kind,
                            const he_cache_http_resp_t *r, const char *body, size_t body_len,
                            int64_t wall_ms, he_cache_fresh_t *out);
he_cache_freshness_t he_cache_fresh_state(const he_cache_fresh_t *f, int64_t wall_ms);
const char *he_cache_freshness_name(he_cache_freshness_t s);
/* IMF-fixdate, RFC 850 and asctime dates -> Unix ms. 0 or -EINVAL. */
int he_cache_http_date_parse(const char *s, size_t n, int64_t *ms);

/* ---------------------------------------------------------------- objects */

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
} he_cache_ram_opts_t;

he_cache_ram_t *he_cache_ram_new(const he_cache_ram_opts_t *o);
/* Every object reference must have been released. */
void he_cache_ram_free(he_cache_ram_t *ram);
int he_cache_ram_nodes(const he_cache_ram_t *ram);
/* The arena of a node, to register as one fixed buffer (SEND_ZC with
 * IORING_RECVSEND_FIXED_BUF). Chunks outside it (overflow) are not fixed. */
void he_cache_ram_arena(const he_cache_ram_t *ram, int node, void **base, size_t *len);
uint64_t he_cache_ram_used(const he_cache_ram_t *ram, int node); /* bytes in chunks */

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

/* ---------------------------------------------------------------- SSD tier */

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
/* The same machine on plain syscalls (tests, tools). inject, if set, may
 * replace an operation's result (e.g. -ENOSPC) to simulate disk errors. */
typedef int (*he_cache_swrite_inject_fn)(void *ctx, int op, int res);
int he_cache_swrite_run_sync(he_cache_swrite_t *w, he_cache_stats_t *st,
                             he_cache_swrite_inject_fn inject, void *ctx);
/* Evicted files wait to be unlinked: the ring prepares one UNLINKAT per
 * call (HE_CACHE_AGAIN) until none is left (0). _unlink_sync drains them. */
int he_cache_store_unlink_step(he_cache_store_t *s, struct io_uring_sqe *sqe);
void he_cache_store_unlink_sync(he_cache_store_t *s);

/* ---------------------------------------------------------------- origin client */

/* Incremental HTTP/1.1 response parser. */
typedef enum he_cache_httpc_ev {
    HE_CACHE_HTTPC_MORE = 0, /* all input used, need more */
    HE_CACHE_HTTPC_HEADERS,  /* the head is parsed: see p->resp */
    HE_CACHE_HTTPC_BODY,     /* *body, *body_len hold payload bytes */
    HE_CACHE_HTTPC_DONE      /* the response is complete */
} he_cache_httpc_ev_t;

#define HE_CACHE_HTTPC_HEAD_MAX 16384

typedef struct he_cache_httpc {
    he_cache_http_resp_t resp;
    int state;
    int body_state; /* entered after HEADERS is returned */
    bool head_request;
    uint32_t line_len;
    uint32_t head_bytes;
    int64_t remaining; /* body or chunk bytes left */
    char line[1024];   /* the current line (see he_cache_httpc_parse) */
    bool line_overflow;
} he_cache_httpc_t;

void he_cache_httpc_init(he_cache_httpc_t *p, bool head_request);
/* Consumes up to len bytes (*used reports how many) and returns the next
 * event, or -EPROTO (malformed), -E2BIG (head too large). A header line
 * longer than p->line is skipped if the parser does not read that field,
 * else -EPROTO (a framing or caching header must be read whole). */
int he_cache_httpc_parse(he_cache_httpc_t *p, const char *data, size_t len, size_t *used,
                         const char **body, size_t *body_len);
/* The peer closed: DONE if the body ends at close, else -EPIPE. */
int he_cache_httpc_eof(he_cache_httpc_t *p);
/* Writes "GET <path> HTTP/1.1" with Host, conditional validators (either
 * may be NULL or ""), keep-alive. Returns the length or -ENOSPC. */
int he_cache_httpc_request(char *out, size_t cap, const char *host, const char *path,
                           const char *inm, const char *ims);

/* Same with any method ("GET", "HEAD"). */
int he_cache_httpc_request_method(char *out, size_t cap, const char *method, const char *host,
                                  const char *path, const char *inm, const char *ims);

/* ---- origins (origin.c, pool.c)
 *
 * Start-up or reload, on the control thread (blocking, may resolve DNS):
 *     he_cache_origin_t list[HE_CONF_MAX_ORIGINS];
 *     int n = he_cache_origins_resolve(conf, list, err, sizeof(err));
 * then per worker (loads the CA store if any origin is https):
 *     he_cache_origins_opts_t oo = {.conf = conf, .origins = list, .norigins = n};
 *     he_cache_origins_new(&worker->origins, &oo, err, sizeof(err));
 * Names are resolved only there (getaddrinfo, first address); nothing on
 * the ring ever resolves. A reload resolves again and gives each worker a
 * new he_cache_origins_t; the worker frees the old one once no fetch uses
 * it (fetches point at it). */

/* One origin base URL, parsed and resolved: plain data, copy it freely. */
typedef struct he_cache_origin {
    bool tls;        /* https */
    bool host_is_ip; /* a literal: no SNI, the certificate must name the IP */
    uint16_t port;
    char host[256];      /* name or address, without brackets */
    char authority[272]; /* Host header: "host", "host:port", "[v6]:port" */
    char base[512];      /* path prefix without a trailing '/'; "" for none */
    struct sockaddr_storage addr;
    socklen_t addrlen; /* 0: not resolved (a name, he_cache_origin_parse only) */
} he_cache_origin_t;

/* Parses "http[s]://host[:port][/prefix]" (IPv6 as [addr]); numeric hosts
 * get their address, names are left unresolved. 0 or -EINVAL (err set). */
int he_cache_origin_parse(const char *url, he_cache_origin_t *o, char *err, size_t errlen);
/* Parses and resolves conf->origin_urls in order (getaddrinfo for names:
 * control thread only). Returns the count, or -EINVAL / -EHOSTUNREACH
 * with err naming the URL. */
int he_cache_origins_resolve(const he_conf_t *conf, he_cache_origin_t *out, char *err,
                             size_t errlen);
/* Joins the origin's base and an origin-form target: "/vod" + "/a.ts?x"
 * -> "/vod/a.ts?x". Length or -ENAMETOOLONG / -EINVAL. */
int he_cache_origin_path(const he_cache_origin_t *o, const char *target, char *out, size_t cap);

/* A worker's view of the origins: the resolved list, its keep-alive pools
 * and its TLS context. Used by one thread only. */
typedef struct he_cache_origins he_cache_origins_t;

typedef struct he_cache_origins_opts {
    const he_conf_t *conf;            /* origin_pool: idle connections kept per origin */
    const he_cache_origin_t *origins; /* he_cache_origins_resolve's output */
    unsigned norigins;
    const char *tls_ca_file; /* NULL: the system store; tests: a private CA (PEM) */
} he_cache_origins_opts_t;

int he_cache_origins_new(he_cache_origins_t **out, const he_cache_origins_opts_t *opts, char *err,
                         size_t errlen);
void he_cache_origins_free(he_cache_origins_t *o); /* closes pooled fds */
unsigned he_cache_origins_count(const he_cache_origins_t *o);
const he_cache_origin_t *he_cache_origins_get(const he_cache_origins_t *o, unsigned i);

/* A connection to an origin: the socket and, for https, its TLS state
 * (an SSL * with memory BIOs). */
typedef struct he_cache_conn {
    int fd;
    void *tls; /* SSL *, or NULL */
    uint64_t idle_since_ms;
} he_cache_conn_t;

/* The keep-alive pool: the most recently used idle connection to origin
 * i (checked with a non-blocking MSG_PEEK: one the origin closed is
 * dropped), or false. */
bool he_cache_pool_get(he_cache_origins_t *o, unsigned i, uint64_t now_ms, he_cache_conn_t *c);
/* Returns a connection: kept, or closed here (close(2)) if the pool is full. */
void he_cache_pool_put(he_cache_origins_t *o, unsigned i, he_cache_conn_t *c, uint64_t now_ms);
/* Closes connections idle for longer than idle_ms. */
void he_cache_pool_expire(he_cache_origins_t *o, uint64_t now_ms, uint64_t idle_ms);
unsigned he_cache_pool_idle(const he_cache_origins_t *o, unsigned i);
/* Closes a connection that is not pooled (frees its TLS state). */
void he_cache_conn_close(he_cache_conn_t *c);

/* ---- the fetch: one origin request, as a state machine without I/O */

/* What an origin fetch wants done next. */
typedef enum he_cache_io_op {
    HE_CACHE_IO_NONE = 0,
    HE_CACHE_IO_SOCKET,  /* socket(family, SOCK_STREAM|NONBLOCK|CLOEXEC): res = fd */
    HE_CACHE_IO_CONNECT, /* connect(fd, addr) */
    HE_CACHE_IO_SEND,    /* send(fd, buf, len, MSG_NOSIGNAL) */
    HE_CACHE_IO_RECV,    /* recv(fd, buf, len, 0) */
    HE_CACHE_IO_CLOSE,   /* close(fd); res ignored */
    HE_CACHE_IO_DONE     /* finished: see he_cache_fetch_result */
} he_cache_io_op_t;

typedef struct he_cache_io {
    he_cache_io_op_t op;
    int fd;
    int family;
    const struct sockaddr *addr; /* valid until the op completes */
    socklen_t addrlen;
    void *buf; /* owned by the fetch: valid until the op completes */
    size_t len;
    uint64_t deadline_ms; /* monotonic; 0 = none. Past it, cancel the op */
} he_cache_io_t;

/* Prepares io on an SQE (IORING_OP_SOCKET needs kernel 5.19; the caller
 * may run socket() itself and complete with its result). The caller sets
 * user_data and, for a deadline, links an IORING_OP_LINK_TIMEOUT of
 * deadline_ms - now (the op then completes with -ECANCELED), or runs its
 * own timer and asks he_cache_fetch_expired. */
void he_cache_io_prep(const he_cache_io_t *io, struct io_uring_sqe *sqe);
/* Runs io with plain syscalls, waiting (poll) at most until deadline_ms
 * as measured by now_ms: -ETIME past it. For tests and tools. */
int he_cache_io_run_sync(const he_cache_io_t *io, uint64_t now_ms);

/* Where an origin fetch delivers what it receives (the fill). headers
 * comes with the first body byte, or with the end of a response without
 * body, never earlier: until then a failure can still move to the next
 * origin without the sink having seen anything. */
typedef struct he_cache_sink {
    void *ctx;
    /* 0 to go on, negative to abort (the fetch then closes) */
    int (*headers)(void *ctx, const he_cache_http_resp_t *r);
    int (*body)(void *ctx, const char *p, size_t n);
} he_cache_sink_t;

typedef struct he_cache_fetch he_cache_fetch_t;

typedef struct he_cache_fetch_req {
    const char *path; /* origin-form target below the origin's base, "/a/b.ts?x=1" */
    const char *inm;  /* If-None-Match or NULL */
    const char *ims;  /* If-Modified-Since or NULL */
    bool head;        /* HEAD instead of GET */
} he_cache_fetch_req_t;

/* Sets inm/ims from a stale object being revalidated (its ETag and
 * Last-Modified; they point into the object's meta). */
void he_cache_fetch_req_validators(he_cache_fetch_req_t *req, const he_cache_obj_t *stale);

/* One origin request with failover: attempt k goes to origin k mod n, up
 * to 1 + origin_retries attempts. A connect error or timeout, a reset, a
 * malformed head, a 5xx or a read/total timeout before the sink saw
 * anything moves to the next origin; after that the fetch ends. A 5xx on
 * the last attempt ends the fetch with an error (cause STATUS_5XX), so the
 * fill can serve stale-if-error. A pooled connection that turns out dead
 * (send fails, or EOF/reset before any response byte) is retried once on a
 * fresh connection without counting as an attempt. Timeouts: connect
 * (per connect), read (per send/recv), total (per attempt, the whole
 * response). Every failure is counted once in st->origin_errors by cause.
 * req's strings are copied. NULL on -ENOMEM or -ENAMETOOLONG. */
he_cache_fetch_t *he_cache_fetch_new(he_cache_origins_t *o, const he_conf_t *conf,
                                     const he_cache_fetch_req_t *req, const he_cache_sink_t *sink,
                                     uint64_t now_ms, he_cache_stats_t *st);
/* The next operation to run (fills io), or HE_CACHE_IO_DONE. One
 * operation is in flight at a time: call _complete before the next _next. */
he_cache_io_op_t he_cache_fetch_next(he_cache_fetch_t *f, uint64_t now_ms, he_cache_io_t *io);
/* The result of the operation returned by the last _next. -ECANCELED
 * after its deadline (or after _expired said true) and -ETIME count as a
 * timeout. */
void he_cache_fetch_complete(he_cache_fetch_t *f, int res, uint64_t now_ms);
/* Called by the caller's timer: true if the in-flight op's deadline passed
 * (cancel it; its completion then counts as a timeout). */
bool he_cache_fetch_expired(he_cache_fetch_t *f, uint64_t now_ms);
/* The deadline of the op in flight (0 = none), for the caller's timer. */
uint64_t he_cache_fetch_deadline(const he_cache_fetch_t *f);
/* After DONE: 0 success (the sink saw the whole response), or -errno with
 * *cause set (cause may be NULL). */
int he_cache_fetch_result(const he_cache_fetch_t *f, he_cache_oerr_t *cause);
/* The origin index that answered (or was tried last). */
unsigned he_cache_fetch_origin(const he_cache_fetch_t *f);
/* The request-target it was made with (req->path); the fetch keeps it. */
const char *he_cache_fetch_target(const he_cache_fetch_t *f);
/* Only with no operation in flight (after DONE, or after the in-flight
 * op's completion was fed back): closes its connection with close(2). */
void he_cache_fetch_free(he_cache_fetch_t *f);
/* Drives a fetch to the end with blocking syscalls (tests, tools); clock_ms
 * is the monotonic clock (NULL: CLOCK_MONOTONIC). Returns the result. */
int he_cache_fetch_run_sync(he_cache_fetch_t *f, uint64_t (*clock_ms)(void));

/* ---------------------------------------------------------------- fills */

typedef struct he_cache_fills he_cache_fills_t;
typedef struct he_cache_fill he_cache_fill_t;
typedef struct he_cache_waiter he_cache_waiter_t;

typedef enum he_cache_fill_ev {
    HE_CACHE_FILL_EV_HEADERS = 1, /* he_cache_fill_status/obj are set */
    HE_CACHE_FILL_EV_DATA,        /* more bytes in the object */
    HE_CACHE_FILL_EV_DONE,        /* all bytes are there */
    HE_CACHE_FILL_EV_ERROR        /* failed: end the response (close if midway) */
} he_cache_fill_ev_t;

/* A client waiting on a fill; embedded in the connection. The callback
 * runs on the fill's worker; the waiter reads the fill's object from its
 * own offset up to he_cache_obj_len (read-while-fill). */
struct he_cache_waiter {
    he_cache_fill_t *fill;
    he_cache_waiter_t *prev, *next;
    void (*notify)(he_cache_waiter_t *w, he_cache_fill_ev_t ev);
    void *ctx;
};

typedef struct he_cache_fills_opts {
    const he_conf_t *conf;
    he_cache_ram_t *ram; /* may be NULL */
    int node;
    he_cache_store_t *store; /* may be NULL */
    he_cache_stats_t *stats;
} he_cache_fills_opts_t;

/* One table per worker: each worker coalesces its own clients. */
he_cache_fills_t *he_cache_fills_new(const he_cache_fills_opts_t *o);
void he_cache_fills_free(he_cache_fills_t *fs); /* no fill may be active */
/* Joins the fill for key, or starts one (*created: the caller starts the
 * origin fetch with he_cache_fill_sink as its sink). w may be NULL (a
 * prefetch). stale, if not NULL, is an expired or stale object being
 * revalidated: a 304 refreshes and serves it, a failure inside its
 * stale-if-error window serves it too. Returns NULL on -ENOMEM. */
he_cache_fill_t *he_cache_fill_join(he_cache_fills_t *fs, const he_cache_key_t *key,
                                    he_cache_waiter_t *w, he_cache_obj_t *stale, bool prefetch,
                                    bool *created);
he_cache_fill_t *he_cache_fill_find(he_cache_fills_t *fs, const he_cache_key_t *key);
unsigned he_cache_fills_active(const he_cache_fills_t *fs);
/* A waiter leaves early (its client went away). */
void he_cache_fill_leave(he_cache_waiter_t *w);
/* The sink the origin fetch feeds. */
he_cache_sink_t he_cache_fill_sink(he_cache_fill_t *f);
/* The fetch ended: res 0 publishes (RAM if admitted and small enough, SSD
 * via he_cache_fills_next_write), res < 0 fails (waiters get ERROR, no
 * entry is left). Either way the fill leaves the table. */
void he_cache_fill_end(he_cache_fill_t *f, int res, he_cache_oerr_t cause, int64_t wall_ms);
/* After HEADERS: the status to answer and the object to stream from (the
 * waiter takes its own reference if it keeps it past the notification). */
int he_cache_fill_status(const he_cache_fill_t *f);
he_cache_obj_t *he_cache_fill_obj(const he_cache_fill_t *f);
bool he_cache_fill_stale(const he_cache_fill_t *f); /* answering from a stale object */
/* Hit-for-miss. After HEADERS: whether waiter w may take this answer. The
 * request that started the fill may; others unless the response is one
 * viewer's (401, 403, 407, private, Set-Cookie; never stored): such an
 * answer is not meant for requests that differ in what the key leaves out
 * (a token). The first false takes the fill out of the table, so later
 * requests do not join. */
bool he_cache_fill_shared(he_cache_fill_t *f, const he_cache_waiter_t *w);
/* Moves w from its fill to a new fill of the same key that is w's alone
 * (no other request joins it; it publishes like any fill): start its
 * fetch as for a created one, with w's own target. NULL on -ENOMEM (w has
 * left its fill). A callback may call it for its own waiter. */
he_cache_fill_t *he_cache_fill_alone(he_cache_waiter_t *w);
/* The origin's response head (Content-Length, Content-Type, ETag ...),
 * valid from HEADERS on; for a stale answer use the object's meta. */
const he_cache_http_resp_t *he_cache_fill_resp(const he_cache_fill_t *f);
/* SSD writes queued by finished fills, for the ring to drive. */
he_cache_swrite_t *he_cache_fills_next_write(he_cache_fills_t *fs);
/* Objects queued for SSD writes that he_cache_fills_next_write has not
 * handed out yet. */
unsigned he_cache_fills_pending_writes(const he_cache_fills_t *fs);

/* ---------------------------------------------------------------- prefetch */

/* The worker, on a segment request it served (hit or fill):
 *     n = he_cache_prefetch_next(pf, key.s (path part), wall, he_cache_present,
 *                                &present_ctx, items, 8, &stale);
 *     for each item: he_cache_fill_join(fills, &item.key, NULL, NULL, true, &created)
 *                    and, if created, a fetch of item.target into its sink;
 *     if stale: he_cache_prefetch_refresh(pf, seg path, &item) and a fill of
 *                    item (joined if one runs); when a playlist fill ends,
 *                    he_cache_prefetch_take_pending gives the segment to
 *                    prefetch after again, now from the fresh copy.
 * and whenever a media playlist is served or filled:
 *     he_cache_prefetch_playlist_obj(pf, obj, the request's target)
 *                                               (or _playlist with the bytes)
 * One he_cache_prefetch_t per worker, like the fills table; not shared. */

typedef struct he_cache_prefetch he_cache_prefetch_t;

/* True if key is cached or being filled: prefetch skips it. */
typedef bool (*he_cache_present_fn)(void *ctx, const he_cache_key_t *key);

/* The usual present function: RAM tier, SSD tier, then this worker's
 * fills; counts nothing (a prefetch check is not a hit). Any may be NULL. */
typedef struct he_cache_present_ctx {
    he_cache_ram_t *ram;
    int node;
    he_cache_store_t *store;
    he_cache_fills_t *fills;
} he_cache_present_ctx_t;
bool he_cache_present(void *ctx, const he_cache_key_t *key);

/* What to fill: the cache key and the origin-form target to request (the
 * segment URI as the playlist wrote it, resolved against the playlist's
 * path, query included: a signed URI keeps its token). */
typedef struct he_cache_prefetch_item {
    he_cache_key_t key;
    char target[HE_CACHE_KEY_MAX];
} he_cache_prefetch_item_t;

/* max_renditions: media playlists remembered (least recently used go). */
he_cache_prefetch_t *he_cache_prefetch_new(const he_conf_t *conf, unsigned max_renditions);
void he_cache_prefetch_free(he_cache_prefetch_t *p);
/* A media playlist was served or filled: remember where its segments are
 * (parsed once here, kept with fresh_until_ms; the same bytes again only
 * extend it). path is its key path ("live/720p/index.m3u8"); target, if
 * not NULL, the origin-form request-target a viewer's request for it used
 * (raw: escapes and query as sent), which segment URIs are resolved
 * against and a refresh requests; NULL keeps the one known. Segments with
 * absolute URIs (another host) are never prefetched. 0, or -EINVAL (not a
 * media playlist), -ENOMEM. */
int he_cache_prefetch_playlist(he_cache_prefetch_t *p, const char *path, const char *target,
                               const char *body, size_t len, int64_t fresh_until_ms);
/* The same from the cache's own copy: a complete media playlist object
 * (its key path, its bytes, fresh until its expiry). */
int he_cache_prefetch_playlist_obj(he_cache_prefetch_t *p, he_cache_obj_t *o, const char *target);
/* A viewer fetched a segment (seg_path: its key path, no query): writes up
 * to max items for the next conf->prefetch_segments segments of its
 * rendition that present() does not know. Returns how many. A segment of
 * no known playlist gives 0. *playlist_stale is set when the rendition's
 * playlist has expired (refresh it to see more). */
int he_cache_prefetch_next(he_cache_prefetch_t *p, const char *seg_path, int64_t wall_ms,
                           he_cache_present_fn present, void *ctx, he_cache_prefetch_item_t *out,
                           unsigned max, bool *playlist_stale);
/* The rendition of seg_path has an expired playlist (_next said
 * playlist_stale): writes the playlist's key and the target a viewer's
 * request for it used into out, so the worker fills it like a miss
 * (coalesced with any fill of that key), and remembers seg_path until the
 * fresh copy is parsed. 0, or -ENOENT (a segment of no known playlist),
 * -ENODATA (no viewer's target known: no refresh), -ENAMETOOLONG, -ENOMEM. */
int he_cache_prefetch_refresh(he_cache_prefetch_t *p, const char *seg_path,
                              he_cache_prefetch_item_t *out);
/* After a fresh copy of playlist_path was given to _playlist(_obj): the
 * segment whose prefetch waited on it, into out (its key path). Returns 1
 * (and forgets it), 0 when none waits, or -ENAMETOOLONG. */
int he_cache_prefetch_take_pending(he_cache_prefetch_t *p, const char *playlist_path, char *out,
                                   size_t cap);
/* Renditions remembered now (tests, /stats). */
unsigned he_cache_prefetch_renditions(const he_cache_prefetch_t *p);

#endif
