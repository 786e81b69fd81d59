/* handler: who answers a request. The router (route.c) takes each parsed
 * request, checks its method and path, and asks the handlers in the
 * configured source order; each answers it (done) or declines it, and the
 * next one gets a declined request, as nginx's NGX_DECLINED.
 *
 *   route.c          method, normalization, source order, OPTIONS, PURGE
 *   file.c           the library under root: the file handler and its body sources
 *   fcache.c         per-worker cache of open files, stat results, small bodies
 *   respond_cache.c  the edge cache: RAM and SSD hits, fills (cache_glue.h)
 *   origin_io.c      origin fetches, SSD writes and unlinks on the ring
 *   cache_glue.c     the edge cache's start-up, worker hooks, purge
 *   llhls.c          LL-HLS from root: directives, answers, deltas, gzip
 *   llhls_hold.c     held blocking reloads, released by inotify on the ring
 *   auth.c           signed URLs: the token check before the others, the
 *                    playlist rewrite on the way out (auth.h) */
#ifndef HE_HANDLER_H
#define HE_HANDLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "segment/segment.h"
#include "server/http/http.h"

/* Flow results of a handler (not errors). */
typedef enum he_handler_result {
    HE_HANDLER_DONE = 0, /* it answers (now or later) */
    HE_HANDLER_DECLINED, /* not its request: ask the next */
} he_handler_result_t;

/* Where each handler keeps its per-worker state (he_worker_t.hook_data):
 * the order he_route_server_init registers the hooks in. */
enum { HE_HOOK_HTTP = 0, HE_HOOK_FILE, HE_HOOK_CACHE, HE_HOOK_LLHLS };

/* path: the normalized path (relative to root, NUL-terminated). A handler
 * that declines later, once an answer it waited for did not come (the
 * origin failed), calls he_route_next. */
typedef he_handler_result_t (*he_handler_fn)(he_worker_t *w, he_req_t *r, const char *path,
                                             size_t len);

/* route.c */
/* Registers the router with http/ and the handlers' worker hooks with s,
 * in source order (origin-first or root-first). */
int he_route_server_init(he_server_t *s);
void he_route_server_free(he_server_t *s);
/* The request handler (he_http_handler_fn). */
void he_route_request(he_worker_t *w, he_req_t *r);
/* A handler declined r after answering it was under way: the next one
 * gets it. */
void he_route_next(he_worker_t *w, he_req_t *r);

/* auth.c: the first handler. Under an auth rule it answers 403 or 410,
 * or takes a valid token out of the target (r->auth_text) and declines. */
he_handler_result_t he_auth_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len);
/* he_http_respond for the handlers' answers from a representation: a
 * playlist answering a request with a token to carry (r->auth_propagate)
 * goes out rewritten (the token in every URI, its own Content-Length, an
 * ETag of its own); anything else as it is. */
void he_auth_respond(he_worker_t *w, he_req_t *r, const he_http_head_t *h, he_body_t *body);
/* Whether r's token goes on to the origin (its rule's to_origin). */
bool he_auth_to_origin(const he_worker_t *w, const he_req_t *r);

/* file.c */
he_handler_result_t he_file_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len);
extern const he_worker_hooks_t he_file_worker_hooks;
/* RFC 9110 8.8.2.1: a Last-Modified later than Date (a file stamped in the
 * future) is sent as the Date. Conditionals compare the same time. */
static inline time_t he_file_mtime(const he_worker_t *w, time_t mtime)
{
    return mtime > w->date_sec ? w->date_sec : mtime;
}

/* respond_cache.c */
he_handler_result_t he_cache_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len);
/* PURGE from a loopback client (the request method). */
void he_cache_handle_purge(he_worker_t *w, he_req_t *r);
extern const he_worker_hooks_t he_cache_worker_hooks;
/* cache_glue.c: the edge cache of a generation, when origin.urls is set. */
int he__cache_server_init(he_server_t *s, char *err, size_t errlen);
void he__cache_server_free(he_server_t *s);
bool he__cache_enabled(void);
/* What the RAM tier's arena is made of ("huge_pages", "memfd" or
 * "anonymous"), NULL without a cache. */
const char *he__cache_ram_arena(void);
/* Removes target's key from both tiers; how many entries went. */
int he__cache_purge(const he_conf_t *conf, const char *target, size_t len);

/* via.c: "hlsedge-<hostname>", this box's name in Via; whether a Via
 * value already names it (a loop: answered 508). */
const char *he__via_name(void);
bool he__via_loop(const char *via, size_t len);

/* ---------------------------------------------------------------- file cache */

typedef struct he_file he_file_t;

struct he_file {
    struct he_file *hnext;         /* hash chain */
    struct he_file *lprev, *lnext; /* LRU */
    char *path;                    /* normalized, relative to root */
    uint32_t hash;
    uint32_t refs; /* responses using it; evicted entries close when 0 */
    bool cached;   /* still in the table */
    int fd;        /* -1 for a negative entry */
    int err;       /* negative errno for a negative entry (-ENOENT, ...) */
    uint64_t size;
    time_t mtime;
    long mtime_ns; /* rewrites in place within one second differ only here */
    ino_t ino;
    dev_t dev;
    uint64_t validated_ms; /* monotonic ms of the last stat */
    uint32_t valid_ms;     /* stat again after: fd_cache.valid, less for a live playlist */
    he_seg_type_t type;
    he_seg_kind_t kind;
    bool live; /* a live media playlist (no EXT-X-ENDLIST) */
    bool ll;   /* and a low-latency one (EXT-X-PART-INF or EXT-X-SERVER-CONTROL) */
    char etag[48]; /* nginx's "mtime-size", then "-nanoseconds" when nonzero */
    uint8_t etag_len;
    char last_modified[30]; /* IMF-fixdate of mtime, formatted once */
    char *body;             /* whole body in memory for small playlists/keys, or NULL */
    char *map;              /* whole file mapped read-only (userspace TLS sends from it), or NULL */
    struct he_fcopy *copy;  /* its bytes in shared huge pages (fcopy.c), or NULL */
    uint32_t uses;          /* requests that found the entry, counted up to 2 */
    uint64_t copy_after_ms; /* no room for a copy: not asked again before this */
    bool stale;             /* removed because the file changed: its copy goes too */
};

typedef struct he_fcache he_fcache_t;

/* valid_ms: fd_cache.valid; live_pct: cache.live_fraction, the share of
 * its target duration after which a live media playlist is stat'ed again
 * (when that is sooner). */
he_fcache_t *he_fcache_new(int root_fd, unsigned entries, unsigned valid_ms, unsigned live_pct,
                           bool beneath);
void he_fcache_free(he_fcache_t *fc);
/* Looks up (opening or revalidating as needed) a normalized path. Returns
 * an entry with a reference held, or NULL with *err set (-ENOENT, -EACCES,
 * -ELOOP for a symlink escaping root, -EISDIR, -ENOMEM). */
he_file_t *he_fcache_get(he_fcache_t *fc, const char *path, size_t len, uint64_t now_ms, int *err,
                         bool *hit);
void he_fcache_put(he_fcache_t *fc, he_file_t *f);
/* The file's bytes mapped read-only, mapped on first use and unmapped with
 * the entry; NULL for an empty file or when mmap fails (*err set). */
const char *he_fcache_map(he_fcache_t *fc, he_file_t *f, int *err);
/* The version of a file an entry stands for: inode, device, size and
 * modification time, from a stat of it; and whether st (a stat of f's path
 * or descriptor) is still that version. */
void he_fcache_take_version(he_file_t *f, const struct stat *st);
bool he_fcache_same_version(const he_file_t *f, const struct stat *st);
/* Whether the entries may ask for copies in huge pages (fcopy.c), and the
 * NUMA node of the worker (-1: none known) whose copies they share. */
void he_fcache_copies(he_fcache_t *fc, bool on, int node);
/* f's copy, asked for from its second request on (and after no room, once
 * a second at most): f->copy, or still NULL. */
void he_fcache_copy(he_fcache_t *fc, he_file_t *f, uint64_t now_ms);
/* Takes f out of the table (it is destroyed when its last user puts it):
 * for an entry whose file changed in a way revalidation cannot see yet. */
void he_fcache_invalidate(he_fcache_t *fc, he_file_t *f);
/* The entry of path, if any, goes (inotify saw the file change). */
void he_fcache_forget(he_fcache_t *fc, const char *path, size_t len);

/* ---------------------------------------------------------------- copies in huge pages */

/* Copies of files under root in anonymous huge pages, shared by the
 * workers' entries of the same version of a file (fcopy.c). */
typedef struct he_fcopy he_fcopy_t;

typedef struct he_fcopy_stats {
    uint64_t budget, bytes, copies; /* fd_cache.memory, what copies map, how many */
    uint64_t made, evicted, refused;
} he_fcopy_stats_t;

/* fd_cache.memory: what the copies together may map; 0 turns copies off
 * (kept ones go as their entries do). Idle copies over it go now. */
void he_fcopy_configure(uint64_t bytes);
/* Whether a file of this size is copied at all (1 MiB to 16 MiB). */
bool he_fcopy_worth(uint64_t size);
/* The copy of f's version for NUMA node (-1: none known; f open, f->size
 * worth it), read now if no entry on the node has it, with a reference for
 * f; NULL when there is no room, or
 * (*changed set, when changed is not NULL) the file could not be read
 * whole as f describes it: it changed since f's stat. */
he_fcopy_t *he_fcopy_get(const he_file_t *f, int node, bool *changed);
const char *he_fcopy_bytes(const he_fcopy_t *c);
/* Drops f's reference; stale: the file changed, so an idle copy goes. */
void he_fcopy_put(he_fcopy_t *c, bool stale);
void he_fcopy_stats(he_fcopy_stats_t *st);
/* The kernel gives anonymous memory huge pages on madvise ("always" or
 * "madvise"; not "never", nor a kernel without THP). */
bool he__thp_available(void);

/* ---------------------------------------------------------------- LL-HLS from root */

/* What a held or answered playlist request asked for. */
typedef struct he_llq {
    he_seg_ll_directives_t d;
    bool gzip;
    double td; /* the playlist's target duration when it came, seconds */
} he_llq_t;

/* One answer's bytes from a playlist: the playlist itself, a delta
 * update, gzipped (own: allocated for it, or NULL). */
typedef struct he_llvariant {
    const char *p;
    size_t n;
    char *own;
    bool made, delta, gzip;
} he_llvariant_t;

/* The edge's copy of a live LL playlist fetched from an origin
 * (llhls_origin.c): its bytes, its LL view into them, what the origin
 * said of it, and the answer variants made from it so far, by
 * _HLS_skip mode and gzip. Shared by the answers that send it. */
typedef struct he_llcopy {
    unsigned refs;
    he_seg_ll_t ll;
    he_llvariant_t variants[3][2];
    uint64_t stored_ms; /* monotonic ms when the origin generated it: Age */
    char etag[96];
    char last_modified[40];
    size_t len;
    char body[];
} he_llcopy_t;

/* A playlist and its LL view, for answering: a file under root, or an
 * origin's copy. */
typedef struct he_llsnap {
    he_file_t *f;       /* from root: a reference held */
    he_llcopy_t *copy;  /* from an origin: a reference held */
    const char *buf;
    size_t len;
    he_seg_ll_t ll;     /* f's own parse; a copy's view, borrowed */
    bool ok;
} he_llsnap_t;

/* llhls.c. The file handler's LL path: false when r is no concern of it
 * (served as a file; f still held); true when it answered or holds r (f
 * was put). */
bool he__llhls_file(he_worker_t *w, he_req_t *r, const char *path, size_t len, he_file_t *f);
/* The snapshot of path (looked up again), or of f (its reference moves to
 * s): 0, or -ENOENT, -EINVAL (not a media playlist) ... */
int he__llsnap_load(he_worker_t *w, const char *path, size_t len, he_llsnap_t *s);
int he__llsnap_from(he_worker_t *w, he_file_t *f, he_llsnap_t *s);
void he__llsnap_put(he_worker_t *w, he_llsnap_t *s);
/* A snapshot of an origin's copy (a reference taken); dropping a copy's
 * last reference frees it. */
void he__llsnap_of_copy(he_llcopy_t *c, he_llsnap_t *s);
void he__llcopy_unref(he_llcopy_t *c);
/* Appendix B.1's TTLs are in target durations: td * units in whole
 * seconds, at least 1, at most a day. */
unsigned he__llhls_ttl(double td, double units);
/* The playlist's target duration, 1 s when it has none. */
double he__llhls_td(const he_seg_ll_t *ll);
/* Why q is answered 400 (6.2.5.2), or NULL: malformed directives, a part
 * without an msn, and against ll (when known and not ended) an msn more
 * than two past the last segment or a part past the Advance Part Limit. */
const char *he__llhls_refuse(const he_llq_t *q, bool malformed, const he_seg_ll_t *ll);
/* Whether s holds what q asks for (6.2.5.2); answers r from s. */
bool he__llhls_ready(const he_llq_t *q, const he_llsnap_t *s);
void he__llhls_answer(he_worker_t *w, he_req_t *r, const he_llq_t *q, const he_llsnap_t *s);
/* 400, 404 or 503 with Cache-Control: max-age of ttl_s (Appendix B.1:
 * an error 1 TD, a blocking request's 404 4 TD). */
void he__llhls_error(he_worker_t *w, he_req_t *r, int status, double ttl_s, const char *why);
bool he__llhls_accepts_gzip(const he_req_t *r);

/* llhls_hold.c */
extern const he_worker_hooks_t he_llhls_worker_hooks;
/* Watches the directory of path (once): its files' changes reach the fd
 * cache and the requests held on them. 0, or a negative errno. */
int he__llhold_watch(he_worker_t *w, const char *path, size_t len);
/* Holds r until path changes to hold what q asks for, or deadline_ms
 * (then 503). 0, or -ENOMEM, -EBUSY (an HTTP/2 stream with state of
 * another handler), -ENOENT (no watch on its directory). */
int he__llhold_add(he_worker_t *w, he_req_t *r, const char *path, size_t len, const he_llq_t *q,
                   uint64_t deadline_ms);
/* In front of an origin (llhls_origin.c): r is held on the playlist of
 * cache key key until he__llhold_release_copy finds it ready, or
 * deadline_ms (503). A request held with q->td 0 came before any copy:
 * the first copy checks its directives (400) and sets its deadline to
 * three of its target durations. */
int he__llhold_add_origin(he_worker_t *w, he_req_t *r, const char *key, size_t len,
                          const he_llq_t *q, uint64_t deadline_ms);
/* Whether requests are held on key. */
bool he__llhold_waiting(he_worker_t *w, const char *key, size_t len);
/* A new copy of key's playlist came: answers what it satisfies. */
void he__llhold_release_copy(he_worker_t *w, const char *key, size_t len, const he_llsnap_t *s);
/* The origin answered key's playlist with an error: every request held
 * on it gets status (Cache-Control ttl_s). */
void he__llhold_fail_origin(he_worker_t *w, const char *key, size_t len, int status, double ttl_s);
/* An LL view of the live playlist at path was read: its directory
 * remembers its target duration and its preload hint's path. */
void he__llhold_note(he_worker_t *w, const char *path, size_t len, const he_seg_ll_t *ll);
/* path (missing from root) is the preload hint of the LL playlist beside
 * it: r is held until it is written (true), 404 after three TD. */
bool he__llhold_hint(he_worker_t *w, he_req_t *r, const char *path, size_t len);
/* A blocking request (_HLS_msn) for a playlist missing from a directory
 * that held an LL playlist: 404 for 4 TD (Appendix B.1), true. */
bool he__llhold_blocking_404(he_worker_t *w, he_req_t *r, const char *path, size_t len);
/* Seconds of Cache-Control for a part or segment beside an LL playlist
 * (6 TD, Appendix B.1), 0 for others. */
unsigned he__llhold_part_ttl(he_worker_t *w, const char *path, size_t len);

#endif
