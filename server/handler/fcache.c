/* Per-worker cache of open files and their stat results, so a hot segment
 * costs no open() or fstat() per request. Small playlists and keys also
 * keep their bytes here, so answering them is one send with no file I/O.
 *
 * Entries are revalidated by path after valid_ms: a file replaced by rename
 * (how packagers publish live playlists) is noticed within that time. A
 * live media playlist (no EXT-X-ENDLIST) is revalidated sooner, after
 * cache.live_fraction of its target duration, so the edge follows the
 * packager within one segment (with 2 s segments and 5 s fd_cache.valid it
 * ran two behind). The playlist is parsed once per version of the file,
 * when its bytes are read; a playlist that does not parse (caught half
 * rewritten in place) is stat'ed again on the next request.
 * Opening uses openat2(RESOLVE_BENEATH) relative to the root directory, so
 * neither ".." nor a symlink can lead outside root, whatever the URL
 * normalizer let through.
 *
 * Opening is a synchronous call on the worker. Measured here (6.18 kernel,
 * warm dentry cache, tests/bench/open_cost.c): openat2+fstat+close takes
 * 2.1-2.2 us, the same as IORING_OP_OPENAT2 + STATX + CLOSE round trips
 * 7.7-8.8 us; and it happens once per file per validity period, not per
 * request. A cold disk lookup can block; the SSD tier (cache/) moves that to
 * the ring. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "server/http/http_util.h"
#include "server/handler/handler.h"

#define HE_FCACHE_BODY_MAX (64 * 1024)
#define HE_FCACHE_SNIFF 4096
/* Playlists up to this size are read whole once per version to learn
 * whether they are live (a long EVENT playlist outgrows BODY_MAX); larger
 * ones keep fd_cache.valid. */
#define HE_FCACHE_PARSE_MAX (1024 * 1024)
/* Most entries one bucket holds: a lookup compares at most this many,
 * however the paths were chosen. An insert into a full bucket evicts the
 * bucket's oldest entry. */
#define HE_FCACHE_CHAIN_MAX 8

struct he_fcache {
    int root_fd;
    char root_path[PATH_MAX]; /* resolved root, for the check without openat2 */
    size_t root_path_len;
    bool beneath;
    unsigned cap, count, valid_ms;
    unsigned live_pct; /* cache.live_fraction */
    unsigned nbuckets;
    he_file_t **buckets;
    he_file_t *lru_head, *lru_tail;
    /* Paths come from clients, so the bucket must not be theirs to choose
     * (a flood of 404 paths into one chain): SipHash-2-4 under a key drawn
     * for each cache at start-up. OpenSSL's, not one of our own. */
    EVP_MAC *mac;
    EVP_MAC_CTX *mac_ctx;
    unsigned char key[16];
    size_t mac_size;
    OSSL_PARAM mac_params[2];
    bool mac_rekey;           /* every lookup sets the key again (see he_fcache_hash) */
    unsigned walk_max;        /* the most entries one lookup compared */
    uint64_t chain_evictions; /* entries evicted because their bucket was full */
    bool copies;              /* entries may ask for copies in huge pages */
    int node;                 /* of the worker: its entries share that node's copies */
};

static uint64_t he_fcache_mac(he_fcache_t *fc, const unsigned char *key, const OSSL_PARAM *params,
                              const char *s, size_t len)
{
    uint64_t h = 0;
    size_t out = 0;
    if (!EVP_MAC_init(fc->mac_ctx, key, key ? sizeof(fc->key) : 0, params) ||
        !EVP_MAC_update(fc->mac_ctx, (const unsigned char *)s, len) ||
        !EVP_MAC_final(fc->mac_ctx, (unsigned char *)&h, &out, sizeof(h)))
        return 0; /* cannot happen once the context was set up */
    return h;
}

static uint32_t he_fcache_hash(he_fcache_t *fc, const char *s, size_t len)
{
    /* Init without a key restores the state the keyed init left: no
     * re-keying and no parameter parsing per lookup, 110 ns against 190
     * (OpenSSL 3.0.19, docs/performance.md). */
    uint64_t h = fc->mac_rekey ? he_fcache_mac(fc, fc->key, fc->mac_params, s, len)
                               : he_fcache_mac(fc, NULL, NULL, s, len);
    return (uint32_t)(h ^ (h >> 32));
}

static int he_fcache_mac_new(he_fcache_t *fc)
{
    static const char probe[] = "/probe/index.m3u8";
    uint64_t keyed, again;
    if (RAND_bytes(fc->key, sizeof(fc->key)) != 1) return -EIO;
    if (!(fc->mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL))) return -ENOSYS;
    if (!(fc->mac_ctx = EVP_MAC_CTX_new(fc->mac))) return -ENOMEM;
    /* 64-bit output (the default is 128) */
    fc->mac_size = 8;
    fc->mac_params[0] = OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &fc->mac_size);
    fc->mac_params[1] = OSSL_PARAM_construct_end();
    if (!EVP_MAC_init(fc->mac_ctx, fc->key, sizeof(fc->key), fc->mac_params)) return -EINVAL;
    /* A provider that does not keep the keyed state (OpenSSL before it
     * kept a copy) would hash on from the last lookup: checked once, and
     * then every lookup re-keys. */
    keyed = he_fcache_mac(fc, fc->key, fc->mac_params, probe, sizeof(probe) - 1);
    he_fcache_mac(fc, NULL, NULL, "other", 5);
    again = he_fcache_mac(fc, NULL, NULL, probe, sizeof(probe) - 1);
    fc->mac_rekey = keyed != again;
    return 0;
}

he_fcache_t *he_fcache_new(int root_fd, unsigned entries, unsigned valid_ms, unsigned live_pct,
                           bool beneath)
{
    he_fcache_t *fc = calloc(1, sizeof(*fc));
    if (!fc) return NULL;
    fc->root_fd = root_fd;
    fc->beneath = beneath;
    if (!beneath) {
        char link[64];
        ssize_t n;
        snprintf(link, sizeof(link), "/proc/self/fd/%d", root_fd);
        n = readlink(link, fc->root_path, sizeof(fc->root_path) - 1);
        fc->root_path_len = n > 0 ? (size_t)n : 0;
        fc->root_path[fc->root_path_len] = 0;
    }
    fc->cap = entries ? entries : 1024;
    fc->valid_ms = valid_ms;
    fc->live_pct = live_pct ? live_pct : 50;
    fc->nbuckets = 16;
    while (fc->nbuckets < fc->cap * 2)
        fc->nbuckets <<= 1;
    fc->buckets = calloc(fc->nbuckets, sizeof(*fc->buckets));
    if (!fc->buckets || he_fcache_mac_new(fc) < 0) {
        he_fcache_free(fc);
        return NULL;
    }
    return fc;
}

static void he_fcache_destroy_entry(he_file_t *f)
{
    if (f->fd >= 0) close(f->fd);
    if (f->map) munmap(f->map, f->size);
    he_fcopy_put(f->copy, f->stale);
    free(f->body);
    free(f->path);
    free(f);
}

static void he_fcache_lru_unlink(he_fcache_t *fc, he_file_t *f)
{
    if (f->lprev)
        f->lprev->lnext = f->lnext;
    else
        fc->lru_head = f->lnext;
    if (f->lnext)
        f->lnext->lprev = f->lprev;
    else
        fc->lru_tail = f->lprev;
    f->lprev = f->lnext = NULL;
}

static void he_fcache_lru_push(he_fcache_t *fc, he_file_t *f)
{
    f->lprev = NULL;
    f->lnext = fc->lru_head;
    if (fc->lru_head) fc->lru_head->lprev = f;
    fc->lru_head = f;
    if (!fc->lru_tail) fc->lru_tail = f;
}

/* Takes f out of the table; it is destroyed now or when its last user
 * puts it back. */
static void he_fcache_remove(he_fcache_t *fc, he_file_t *f)
{
    he_file_t **pp = &fc->buckets[f->hash & (fc->nbuckets - 1)];
    while (*pp && *pp != f)
        pp = &(*pp)->hnext;
    if (*pp) *pp = f->hnext;
    he_fcache_lru_unlink(fc, f);
    f->cached = false;
    fc->count--;
    if (f->refs == 0) he_fcache_destroy_entry(f);
}

void he_fcache_free(he_fcache_t *fc)
{
    if (!fc) return;
    while (fc->lru_head) {
        he_file_t *f = fc->lru_head;
        f->refs = 0;
        he_fcache_remove(fc, f);
    }
    free(fc->buckets);
    EVP_MAC_CTX_free(fc->mac_ctx);
    EVP_MAC_free(fc->mac);
    OPENSSL_cleanse(fc->key, sizeof(fc->key));
    free(fc);
}

/* Without openat2: where the opened file really is, from /proc, must be
 * below root. One readlink per open, and only on kernels before 5.6. */
static bool he_fcache_inside_root(he_fcache_t *fc, int fd)
{
    char link[64], real[PATH_MAX];
    ssize_t n;
    if (fc->root_path_len == 0) return false;
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, real, sizeof(real) - 1);
    if (n <= 0) return false;
    if (fc->root_path_len == 1) return true; /* root is "/" */
    return (size_t)n > fc->root_path_len && memcmp(real, fc->root_path, fc->root_path_len) == 0 &&
           real[fc->root_path_len] == '/';
}

/* O_NONBLOCK: opening a FIFO would otherwise wait for a writer, blocking
 * the worker (nginx opens the same way); it changes nothing for a regular
 * file, and anything else is refused after the fstat. */
static int he_fcache_open(he_fcache_t *fc, const char *path)
{
    int fd;
    if (fc->beneath) {
        struct open_how how = {
            .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        fd = (int)syscall(SYS_openat2, fc->root_fd, path, &how, sizeof(how));
    } else {
        fd = openat(fc->root_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0 && !he_fcache_inside_root(fc, fd)) {
            close(fd);
            return -EXDEV;
        }
    }
    if (fd < 0) {
        int e = errno;
        if (e == ENOTDIR || e == ENAMETOOLONG) return -ENOENT;
        if (e == EXDEV || e == ELOOP) return -EXDEV; /* escapes root */
        return -e;
    }
    return fd;
}

/* nginx's ETag has whole seconds: a live playlist rewritten in place
 * (ffmpeg without temp_file) within one second, often at the same size,
 * would keep its tag, and a client its stale copy. The nanoseconds follow
 * when there are any; a file with whole-second times keeps nginx's tag. */
static void he_fcache_etag(he_file_t *f)
{
    size_t n = he_http_etag(f->etag, sizeof(f->etag), f->mtime, f->size);
    if (f->mtime_ns && n > 0) {
        int m = snprintf(f->etag + n - 1, sizeof(f->etag) - (n - 1), "-%lx\"", f->mtime_ns);
        if (m > 0 && (size_t)m < sizeof(f->etag) - (n - 1)) n += (size_t)m - 1;
    }
    f->etag_len = (uint8_t)n;
}

/* How long a playlist's entry is trusted without a stat, from its whole
 * body: a live media playlist for live_pct of its target duration (when
 * that is less than fd_cache.valid), one that does not parse not at all,
 * any other for fd_cache.valid. */
static uint32_t he_fcache_playlist_valid(const he_fcache_t *fc, he_file_t *f, const char *body,
                                         size_t n)
{
    he_seg_playlist_t pl;
    char err[128];
    uint32_t valid = fc->valid_ms;
    if (he_seg_playlist_parse(body, n, &pl, err, sizeof(err)) < 0) return 0;
    f->live = he_seg_playlist_is_live(&pl);
    f->ll = f->live && (memmem(body, n, "#EXT-X-PART-INF", 15) ||
                        memmem(body, n, "#EXT-X-SERVER-CONTROL", 21));
    if (f->live && pl.target_duration > 0) {
        double live = pl.target_duration * 1000.0 * fc->live_pct / 100.0;
        if (live < valid) valid = (uint32_t)live;
    }
    he_seg_playlist_free(&pl);
    return valid;
}

static int he_fcache_fill(he_fcache_t *fc, he_file_t *f, const char *path, size_t len)
{
    struct stat st;
    int fd;

    if (len == 0) return -EISDIR;
    fd = he_fcache_open(fc, path);
    if (fd < 0) return fd;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        /* A FIFO, socket or device is not there as far as a client can
         * tell: 404, as nginx answers, and remembered like absence. */
        return S_ISDIR(st.st_mode) ? -EISDIR : -ENOENT;
    }
    f->fd = fd;
    he_fcache_take_version(f, &st);
    f->type = he_seg_type_from_path(path, len);
    he_fcache_etag(f);
    he_http_date_format(f->mtime, f->last_modified);

    if (f->type == HE_SEG_TYPE_M3U8 || f->type == HE_SEG_TYPE_KEY || f->type == HE_SEG_TYPE_VTT) {
        size_t want = f->size <= HE_FCACHE_BODY_MAX ? f->size : HE_FCACHE_SNIFF;
        char *buf = malloc(want ? want : 1);
        ssize_t n = buf ? pread(fd, buf, want, 0) : -1;
        if (n < 0 || (size_t)n != want) {
            /* changed under us or unreadable: serve it by sendfile instead */
            free(buf);
            buf = NULL;
            n = 0;
        }
        f->kind = he_seg_kind_of(f->type, buf, (size_t)n);
        if (f->type == HE_SEG_TYPE_M3U8) {
            if (buf && f->size <= HE_FCACHE_BODY_MAX) {
                f->valid_ms = he_fcache_playlist_valid(fc, f, buf, (size_t)n);
            } else if (!buf) {
                f->valid_ms = 0; /* changed under us: look again next time */
            } else if (f->size <= HE_FCACHE_PARSE_MAX) {
                char *whole = malloc(f->size);
                ssize_t m = whole ? pread(fd, whole, f->size, 0) : -1;
                if (m >= 0 && (uint64_t)m == f->size)
                    f->valid_ms = he_fcache_playlist_valid(fc, f, whole, (size_t)m);
                else
                    f->valid_ms = 0;
                free(whole);
            }
        }
        if (buf && f->size <= HE_FCACHE_BODY_MAX)
            f->body = buf;
        else
            free(buf);
    } else {
        f->kind = he_seg_kind_of(f->type, NULL, 0);
    }
    return 0;
}

static bool he_fcache_still_valid(he_fcache_t *fc, he_file_t *f, const char *path)
{
    struct stat st;
    if (fstatat(fc->root_fd, path, &st, 0) < 0) return f->fd < 0 && -errno == f->err;
    return f->fd >= 0 && he_fcache_same_version(f, &st);
}

void he_fcache_take_version(he_file_t *f, const struct stat *st)
{
    f->size = (uint64_t)st->st_size;
    f->mtime = st->st_mtim.tv_sec;
    f->mtime_ns = st->st_mtim.tv_nsec;
    f->ino = st->st_ino;
    f->dev = st->st_dev;
}

bool he_fcache_same_version(const he_file_t *f, const struct stat *st)
{
    return st->st_ino == f->ino && st->st_dev == f->dev && (uint64_t)st->st_size == f->size &&
           st->st_mtim.tv_sec == f->mtime && st->st_mtim.tv_nsec == f->mtime_ns;
}

he_file_t *he_fcache_get(he_fcache_t *fc, const char *path, size_t len, uint64_t now_ms, int *err,
                         bool *hit)
{
    uint32_t h = he_fcache_hash(fc, path, len);
    he_file_t *f = fc->buckets[h & (fc->nbuckets - 1)], *last = NULL;
    unsigned walked = 0;
    int rc;

    /* a bucket never holds more than HE_FCACHE_CHAIN_MAX (the insert
     * below), so this loop is bounded whatever the paths */
    for (; f; last = f, f = f->hnext, walked++)
        if (f->hash == h && strlen(f->path) == len && memcmp(f->path, path, len) == 0) break;
    if (walked > fc->walk_max) fc->walk_max = walked;

    if (f) {
        if (now_ms - f->validated_ms >= f->valid_ms) {
            if (he_fcache_still_valid(fc, f, path)) {
                f->validated_ms = now_ms;
            } else {
                f->stale = true;
                he_fcache_remove(fc, f);
                f = NULL;
            }
        }
        if (f) {
            *hit = true;
            if (fc->lru_head != f) {
                he_fcache_lru_unlink(fc, f);
                he_fcache_lru_push(fc, f);
            }
            if (f->fd < 0) {
                *err = f->err;
                return NULL;
            }
            if (f->uses < 2) f->uses++;
            f->refs++;
            return f;
        }
    }

    *hit = false;
    f = calloc(1, sizeof(*f));
    if (!f || !(f->path = strndup(path, len))) {
        free(f);
        *err = -ENOMEM;
        return NULL;
    }
    f->fd = -1;
    f->uses = 1;
    f->valid_ms = fc->valid_ms;
    rc = he_fcache_fill(fc, f, path, len);
    if (rc < 0) {
        f->err = rc;
        if (rc != -ENOENT) { /* only absence is worth remembering */
            he_fcache_destroy_entry(f);
            *err = rc;
            return NULL;
        }
    }
    /* a full bucket: its oldest entry (inserted first, so last in the
     * chain) goes, whatever the LRU says */
    if (walked >= HE_FCACHE_CHAIN_MAX && last) {
        he_fcache_remove(fc, last);
        fc->chain_evictions++;
    }
    f->hash = h;
    f->validated_ms = now_ms;
    f->cached = true;
    f->hnext = fc->buckets[h & (fc->nbuckets - 1)];
    fc->buckets[h & (fc->nbuckets - 1)] = f;
    he_fcache_lru_push(fc, f);
    fc->count++;
    while (fc->count > fc->cap && fc->lru_tail && fc->lru_tail != f)
        he_fcache_remove(fc, fc->lru_tail);
    if (f->fd < 0) {
        *err = f->err;
        return NULL;
    }
    f->refs++;
    return f;
}

void he_fcache_put(he_fcache_t *fc, he_file_t *f)
{
    (void)fc;
    if (--f->refs == 0 && !f->cached) he_fcache_destroy_entry(f);
}

/* Userspace TLS encrypts file bodies from this mapping: one copy (the
 * encryption) where pread + SSL_write would make two. The mapping lives as
 * long as the entry, so a hot segment is mapped once per worker. */
const char *he_fcache_map(he_fcache_t *fc, he_file_t *f, int *err)
{
    void *p;
    (void)fc;
    if (f->map) return f->map;
    if (f->fd < 0 || f->size == 0) {
        *err = -EINVAL;
        return NULL;
    }
    p = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);
    if (p == MAP_FAILED) {
        *err = -errno;
        return NULL;
    }
    f->map = p;
    return f->map;
}

void he_fcache_copies(he_fcache_t *fc, bool on, int node)
{
    fc->copies = on;
    fc->node = node;
}

void he_fcache_copy(he_fcache_t *fc, he_file_t *f, uint64_t now_ms)
{
    bool changed = false;
    if (!fc->copies || f->copy || f->uses < 2 || now_ms < f->copy_after_ms ||
        !he_fcopy_worth(f->size))
        return;
    /* no room: the mapping serves, and the store's lock is not taken per
     * request while it stays full; a file that changed since the entry's
     * stat (a segment still being written) is not read again for it */
    if (!(f->copy = he_fcopy_get(f, fc->node, &changed)))
        f->copy_after_ms = changed ? UINT64_MAX : now_ms + 1000;
}

void he_fcache_invalidate(he_fcache_t *fc, he_file_t *f)
{
    f->stale = true;
    if (f->cached) he_fcache_remove(fc, f);
}

void he_fcache_forget(he_fcache_t *fc, const char *path, size_t len)
{
    uint32_t h = he_fcache_hash(fc, path, len);
    for (he_file_t *f = fc->buckets[h & (fc->nbuckets - 1)]; f; f = f->hnext)
        if (f->hash == h && strlen(f->path) == len && memcmp(f->path, path, len) == 0) {
            f->stale = true;
            he_fcache_remove(fc, f);
            return;
        }
}
