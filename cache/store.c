/* The SSD tier: one or more store directories, each with a size limit, an
 * in-memory index rebuilt from the files' headers at start-up, and SIEVE
 * eviction (Zhang et al., NSDI 2024). SIEVE rather than S3-FIFO here: the
 * RAM tier's admission already keeps one-hit wonders from reaching this
 * tier often, and SIEVE needs no ghost or second queue: one visited bit
 * per entry and a hand that walks from the oldest entry, clearing bits
 * until it finds an unvisited victim.
 *
 * Files: <dir>/<ab>/<hash>-<gen>.obj, where ab is the hash's first byte in
 * hex and gen is unique per write, so that a queued unlink of an evicted
 * version can never remove a newer file of the same key. Temporary files
 * live in <dir>/tmp/ and are removed at start-up; they are never indexed.
 * Each directory's index is guarded by a mutex: an SSD hit is followed by
 * file I/O anyway, and misses and writes must update the SIEVE queue. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/fresh.h"
#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/result.h"
#include "cache/stats.h"
#include "cache/store.h"

uint64_t he__cache_store_blocks(uint64_t bytes)
{
    return (bytes + HE__CACHE_BLOCK - 1) / HE__CACHE_BLOCK * HE__CACHE_BLOCK;
}

void he__cache_store_name(char *out, size_t cap, uint64_t hash, uint64_t gen)
{
    snprintf(out, cap, "%02x/%016" PRIx64 "-%016" PRIx64 ".obj", (unsigned)(hash >> 56), hash, gen);
}

void he__cache_store_tmp_name(char *out, size_t cap, uint64_t hash, uint64_t gen)
{
    snprintf(out, cap, "tmp/%016" PRIx64 "-%016" PRIx64 ".tmp", hash, gen);
}

/* Weighted rendezvous hashing: each key goes to the directory with the
 * highest -weight/ln(u), u uniform from hash(key, dir), so directories get
 * keys in proportion to their size and adding one moves few keys. */
he__cache_sdir_t *he__cache_store_dir_for(he_cache_store_t *s, uint64_t hash)
{
    he__cache_sdir_t *best = &s->dirs[0];
    double best_score = -INFINITY;
    if (s->ndirs == 1) return best;
    for (unsigned i = 0; i < s->ndirs; i++) {
        uint64_t v[2] = {hash, i};
        uint64_t h = he_cache_hash(v, sizeof(v));
        double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
        double score = -(double)s->dirs[i].limit / log(u);
        if (score > best_score) {
            best_score = score;
            best = &s->dirs[i];
        }
    }
    return best;
}

void he__cache_store_fail(he_cache_store_t *s, int neg_errno, const char *what,
                          he_cache_stats_t *st)
{
    he_cache_derr_t cause = he_cache_derr_of(neg_errno);
    unsigned bit = 1u << cause;
    if (st) st->disk_errors[cause]++;
    if (!(atomic_fetch_or(&s->logged, bit) & bit) && s->opts.log) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "cache: disk error (%s) on %s: %s; served from origin instead (logged once "
                 "per cause)",
                 he_cache_derr_name(cause), what, strerror(-neg_errno));
        s->opts.log(s->opts.log_ctx, 1, msg);
    }
}

/* ---------------------------------------------------------------- index */

static he__cache_sentry_t **he_cache_sdir_slot(he__cache_sdir_t *d, const he_cache_key_t *key)
{
    he__cache_sentry_t **pp = &d->buckets[key->hash & d->mask];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->hash == key->hash && (*pp)->key->len == key->len &&
            memcmp((*pp)->key->s, key->s, key->len) == 0)
            break;
    return pp;
}

static uint64_t he_cache_sentry_size(const he__cache_sentry_t *e)
{
    return he__cache_store_blocks(e->hdr_len + e->body_len);
}

static void he_cache_sdir_queue_unlink(he__cache_sdir_t *d, uint64_t hash, uint64_t gen)
{
    he__cache_unlink_t *u = malloc(sizeof(*u));
    if (!u) return; /* the file stays until the next start-up finds it unindexed... */
    he__cache_store_name(u->path, sizeof(u->path), hash, gen);
    u->next = d->unlinks;
    d->unlinks = u;
}

/* A purge's unlink, at once rather than queued for the ring, and durable
 * before the purge is answered: the index is rebuilt from the directory
 * at start-up, so a purged file still there after a crash would be served
 * again. unlinkat alone survives a kill -9 but not a power loss or kernel
 * panic: the directory entry's removal is on disk only once the directory
 * is fsync'd (fsync(2)). A purge is rare; the cost is one journal commit.
 * Returns 0 or the negative errno of the fsync. */
static int he_cache_store_unlink_now(he__cache_sdir_t *d, uint64_t hash, uint64_t gen)
{
    char name[48];
    int fd, rc = 0;
    he__cache_store_name(name, sizeof(name), hash, gen);
    if (unlinkat(d->dirfd, name, 0) < 0 && errno != ENOENT) {
        he_cache_sdir_queue_unlink(d, hash, gen); /* the ring tries again */
        return 0;
    }
    /* ENOENT too: a queued unlink may have removed it, not yet durably */
    name[2] = '\0'; /* "<ab>", the file's subdirectory */
    fd = openat(d->dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    if (fsync(fd) < 0) rc = -errno;
    close(fd);
    return rc;
}

/* Unlinks e from the hash and the queue, frees it, queues its file. */
static void he_cache_sdir_drop(he__cache_sdir_t *d, he__cache_sentry_t **slot, bool unlink_file)
{
    he__cache_sentry_t *e = *slot;
    *slot = e->hnext;
    if (d->hand == e) d->hand = e->prev;
    if (e->prev)
        e->prev->next = e->next;
    else
        d->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        d->tail = e->prev;
    d->used -= he_cache_sentry_size(e);
    d->count--;
    if (unlink_file) he_cache_sdir_queue_unlink(d, e->hash, e->gen);
    free(e->key);
    free(e);
}

/* SIEVE: the hand starts at the tail (oldest) and moves toward the head,
 * clearing visited bits, and evicts the first unvisited entry. */
static bool he_cache_sdir_evict_one(he__cache_sdir_t *d, he_cache_stats_t *st)
{
    he__cache_sentry_t *e = d->hand ? d->hand : d->tail;
    if (!e) return false;
    while (e->visited) {
        e->visited = false;
        e = e->prev ? e->prev : d->tail;
    }
    d->hand = e->prev;
    he_cache_sdir_drop(d, he_cache_sdir_slot(d, e->key), true);
    if (st) st->evictions[HE_CACHE_TIER_SSD]++;
    return true;
}

int he__cache_store_reserve(he__cache_sdir_t *d, uint64_t bytes, he_cache_stats_t *st)
{
    int rc = 0;
    bytes = he__cache_store_blocks(bytes);
    pthread_mutex_lock(&d->lock);
    if (bytes > d->limit) {
        rc = -ENOSPC;
    } else {
        while (d->used + d->reserved + bytes > d->limit && he_cache_sdir_evict_one(d, st))
            ;
        if (d->used + d->reserved + bytes > d->limit)
            rc = -ENOSPC; /* other writes in flight hold the rest */
        else
            d->reserved += bytes;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void he__cache_store_unreserve(he__cache_sdir_t *d, uint64_t bytes)
{
    pthread_mutex_lock(&d->lock);
    d->reserved -= he__cache_store_blocks(bytes);
    pthread_mutex_unlock(&d->lock);
}

static int he_cache_sdir_add_locked(he__cache_sdir_t *d, const he_cache_key_t *key, uint64_t gen,
                                    uint32_t hdr_len, uint64_t body_len,
                                    const he_cache_meta_t *meta, he_cache_stats_t *st)
{
    he__cache_sentry_t **slot = he_cache_sdir_slot(d, key), *e;
    size_t ksz = offsetof(he_cache_key_t, s) + key->len + 1;
    if (*slot) {
        /* a newer version: drop the old one (and its file, whose name
         * differs by gen); keep the newer of two found at rebuild */
        if ((*slot)->meta.fresh.stored_ms > meta->fresh.stored_ms) {
            he_cache_sdir_queue_unlink(d, key->hash, gen);
            return 0;
        }
        he_cache_sdir_drop(d, slot, true);
    }
    e = calloc(1, sizeof(*e));
    if (e) e->key = malloc(ksz);
    if (!e || !e->key) {
        if (e) free(e);
        he_cache_sdir_queue_unlink(d, key->hash, gen);
        return -ENOMEM;
    }
    memcpy(e->key, key, ksz);
    e->hash = key->hash;
    e->gen = gen;
    e->hdr_len = hdr_len;
    e->body_len = body_len;
    e->meta = *meta;
    e->meta.prefetched = false;
    e->hnext = d->buckets[key->hash & d->mask];
    d->buckets[key->hash & d->mask] = e;
    e->next = d->head;
    if (d->head)
        d->head->prev = e;
    else
        d->tail = e;
    d->head = e;
    d->used += he_cache_sentry_size(e);
    d->count++;
    while (d->used + d->reserved > d->limit && d->count > 1 && he_cache_sdir_evict_one(d, st))
        ;
    return 0;
}

void he__cache_store_pending_add(he__cache_sdir_t *d, he__cache_pending_t *p, uint64_t file_gen)
{
    p->file_gen = file_gen;
    pthread_mutex_lock(&d->lock);
    he__cache_inflight_link(&d->pending, p);
    pthread_mutex_unlock(&d->lock);
}

void he__cache_store_pending_del(he__cache_sdir_t *d, he__cache_pending_t *p)
{
    pthread_mutex_lock(&d->lock);
    he__cache_inflight_unlink(&d->pending, p);
    pthread_mutex_unlock(&d->lock);
}

int he__cache_store_add(he__cache_sdir_t *d, he__cache_pending_t *p, uint64_t gen, uint32_t hdr_len,
                        uint64_t body_len, const he_cache_meta_t *meta, uint64_t reserved,
                        he_cache_stats_t *st)
{
    int rc;
    bool purged;
    pthread_mutex_lock(&d->lock);
    d->reserved -= he__cache_store_blocks(reserved);
    he__cache_inflight_unlink(&d->pending, p);
    purged = atomic_load(&p->purged);
    if (!purged) rc = he_cache_sdir_add_locked(d, p->key, gen, hdr_len, body_len, meta, st);
    pthread_mutex_unlock(&d->lock);
    if (purged) {
        /* the purge that answered "purged" must not be undone by a file
         * of the bytes it purged, not even by a restart: gone now */
        (void)he_cache_store_unlink_now(d, p->key->hash, gen); /* durably, as a purge does */
        rc = -ESTALE;
    }
    return rc;
}

/* ---------------------------------------------------------------- rebuild */

static int he_cache_store_read_full(int fd, char *buf, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, off + (off_t)got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (int)got;
}

/* Checks one file; 0 indexed, else it was removed. */
static int he_cache_store_load(he__cache_sdir_t *d, int subfd, const char *sub, const char *name,
                               he_cache_stats_t *st)
{
    he_cache_store_t *s = d->store;
    static __thread char buf[HE__CACHE_HDR_MAX];
    static __thread he_cache_key_t key;
    he_cache_meta_t meta;
    uint32_t hdr_len, body_crc;
    uint64_t body_len, hash, gen;
    char want[48], full[64];
    struct stat sb;
    int fd, n, rc = -EBADMSG;

    snprintf(full, sizeof(full), "%s/%s", sub, name);
    if (sscanf(name, "%16" SCNx64 "-%16" SCNx64 ".obj", &hash, &gen) != 2) goto bad;
    fd = openat(subfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        goto bad;
    }
    n = he_cache_store_read_full(fd, buf, sizeof(buf), 0);
    if (n < 0 || fstat(fd, &sb) < 0) {
        rc = n < 0 ? n : -errno;
        close(fd);
        goto bad;
    }
    rc = he__cache_hdr_parse(buf, (size_t)n, &key, &meta, &hdr_len, &body_len, &body_crc);
    he__cache_store_name(want, sizeof(want), key.hash, gen);
    if (rc == 0 && (key.hash != hash || strcmp(want, full) != 0)) rc = -EBADMSG;
    if (rc == 0 && (uint64_t)sb.st_size != hdr_len + body_len) rc = -EBADMSG; /* truncated */
    if (rc == 0 && s->opts.verify_bodies) {
        uint32_t crc = 0;
        static __thread char big[1 << 16];
        uint64_t off = 0;
        while (off < body_len) {
            size_t want_n = body_len - off < sizeof(big) ? (size_t)(body_len - off) : sizeof(big);
            int got = he_cache_store_read_full(fd, big, want_n, (off_t)(hdr_len + off));
            if (got <= 0) {
                rc = got < 0 ? got : -EBADMSG;
                break;
            }
            crc = he__cache_crc32c(crc, big, (size_t)got);
            off += (uint64_t)got;
        }
        if (rc == 0 && crc != body_crc) rc = -EBADMSG;
    }
    close(fd);
    if (rc != 0) goto bad;
    if (gen >= atomic_load(&s->gen)) atomic_store(&s->gen, gen + 1);
    return he_cache_sdir_add_locked(d, &key, gen, hdr_len, body_len, &meta, st);
bad:
    /* a file of an older format is dropped, not counted as corrupt */
    if (rc != -EPROTONOSUPPORT) he__cache_store_fail(s, rc == -EBADMSG ? -EBADMSG : rc, full, st);
    unlinkat(subfd, name, 0);
    return rc;
}

static int he_cache_store_rebuild(he__cache_sdir_t *d, he_cache_stats_t *st)
{
    DIR *dir;
    struct dirent *de;
    int fd;
    /* temporary files are never indexed: a crash mid-write leaves them */
    fd = openat(d->dirfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && (dir = fdopendir(fd)) != NULL) {
        while ((de = readdir(dir)) != NULL)
            if (de->d_name[0] != '.') unlinkat(fd, de->d_name, 0);
        closedir(dir);
    } else if (fd >= 0) {
        close(fd);
    }
    for (unsigned i = 0; i < 256; i++) {
        char sub[4];
        snprintf(sub, sizeof(sub), "%02x", i);
        if (mkdirat(d->dirfd, sub, 0755) < 0 && errno != EEXIST) return -errno;
        fd = openat(d->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return -errno;
        dir = fdopendir(fd);
        if (!dir) {
            close(fd);
            return -errno;
        }
        while ((de = readdir(dir)) != NULL) {
            if (de->d_name[0] == '.') continue;
            he_cache_store_load(d, fd, sub, de->d_name, st);
        }
        closedir(dir);
    }
    /* a lowered limit: evict down to it now */
    while (d->used > d->limit && he_cache_sdir_evict_one(d, st))
        ;
    return 0;
}

int he_cache_store_open(he_cache_store_t **out, const he_cache_store_opts_t *o, int64_t wall_ms,
                        he_cache_stats_t *st)
{
    he_cache_store_t *s;
    int rc = 0;
    *out = NULL;
    if (o->ndirs == 0 || o->ndirs > HE_CONF_MAX_STORES) return -EINVAL;
    s = calloc(1, sizeof(*s));
    if (!s) return -ENOMEM;
    s->opts = *o;
    atomic_init(&s->gen, (uint64_t)wall_ms << 16);
    for (unsigned i = 0; i < o->ndirs; i++) {
        he__cache_sdir_t *d = &s->dirs[i];
        uint64_t nb = 1024;
        d->store = s;
        d->index = i;
        d->limit = o->bytes[i];
        d->dirfd = -1;
        pthread_mutex_init(&d->lock, NULL);
        s->ndirs = i + 1;
        snprintf(d->path, sizeof(d->path), "%s", o->dirs[i]);
        while (nb < d->limit / 65536 && nb < (1u << 24))
            nb <<= 1;
        d->buckets = calloc(nb, sizeof(*d->buckets));
        if (!d->buckets) {
            rc = -ENOMEM;
            break;
        }
        d->mask = nb - 1;
        if (mkdir(d->path, 0755) < 0 && errno != EEXIST) {
            rc = -errno;
            break;
        }
        d->dirfd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->dirfd < 0) {
            rc = -errno;
            break;
        }
        if (mkdirat(d->dirfd, "tmp", 0755) < 0 && errno != EEXIST) {
            rc = -errno;
            break;
        }
        if ((rc = he_cache_store_rebuild(d, st)) < 0) break;
    }
    if (rc < 0) {
        he_cache_store_close(s);
        return rc;
    }
    he_cache_store_unlink_sync(s);
    *out = s;
    return 0;
}

void he_cache_store_close(he_cache_store_t *s)
{
    if (!s) return;
    for (unsigned i = 0; i < s->ndirs; i++) {
        he__cache_sdir_t *d = &s->dirs[i];
        while (d->head) {
            he__cache_sentry_t *e = d->head;
            d->head = e->next;
            free(e->key);
            free(e);
        }
        while (d->unlinks) {
            he__cache_unlink_t *u = d->unlinks;
            d->unlinks = u->next;
            if (d->dirfd >= 0) unlinkat(d->dirfd, u->path, 0);
            free(u);
        }
        free(d->buckets);
        if (d->dirfd >= 0) close(d->dirfd);
        pthread_mutex_destroy(&d->lock);
    }
    free(s);
}

uint64_t he_cache_store_count(he_cache_store_t *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->ndirs; i++) {
        pthread_mutex_lock(&s->dirs[i].lock);
        n += s->dirs[i].count;
        pthread_mutex_unlock(&s->dirs[i].lock);
    }
    return n;
}

uint64_t he_cache_store_used(he_cache_store_t *s, unsigned dir)
{
    uint64_t n;
    pthread_mutex_lock(&s->dirs[dir].lock);
    n = s->dirs[dir].used;
    pthread_mutex_unlock(&s->dirs[dir].lock);
    return n;
}

/* ---------------------------------------------------------------- lookups */

int he_cache_store_lookup(he_cache_store_t *s, const he_cache_key_t *key, he_cache_store_hit_t *hit,
                          he_cache_stats_t *st)
{
    he__cache_sdir_t *d;
    he__cache_sentry_t *e;
    if (!s) {
        if (st) st->misses[HE_CACHE_TIER_SSD]++;
        return -ENOENT;
    }
    d = he__cache_store_dir_for(s, key->hash);
    pthread_mutex_lock(&d->lock);
    e = *he_cache_sdir_slot(d, key);
    if (e) {
        hit->revisit = e->visited;
        e->visited = true;
        hit->dirfd = d->dirfd;
        he__cache_store_name(hit->path, sizeof(hit->path), e->hash, e->gen);
        hit->body_off = e->hdr_len;
        hit->body_len = e->body_len;
        hit->meta = e->meta;
    }
    pthread_mutex_unlock(&d->lock);
    if (st) {
        if (e)
            st->hits[HE_CACHE_TIER_SSD]++; /* negative_hits: at the serve */
        else
            st->misses[HE_CACHE_TIER_SSD]++;
    }
    return e ? 0 : -ENOENT;
}

bool he_cache_store_contains(he_cache_store_t *s, const he_cache_key_t *key)
{
    he__cache_sdir_t *d;
    bool found;
    if (!s) return false;
    d = he__cache_store_dir_for(s, key->hash);
    pthread_mutex_lock(&d->lock);
    found = *he_cache_sdir_slot(d, key) != NULL;
    pthread_mutex_unlock(&d->lock);
    return found;
}

/* Drops key's entry; with path, only while the entry still names that
 * file (a hit's path: a newer version may have replaced it since). */
static int he_cache_store_drop(he_cache_store_t *s, const he_cache_key_t *key, const char *path)
{
    he__cache_sdir_t *d = he__cache_store_dir_for(s, key->hash);
    he__cache_sentry_t **slot;
    char name[48];
    int rc = -ENOENT;
    pthread_mutex_lock(&d->lock);
    slot = he_cache_sdir_slot(d, key);
    if (*slot && path) he__cache_store_name(name, sizeof(name), (*slot)->hash, (*slot)->gen);
    if (*slot && (!path || strcmp(name, path) == 0)) {
        he_cache_sdir_drop(d, slot, true);
        rc = 0;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

uint64_t he_cache_store_purges(he_cache_store_t *s)
{
    return s ? atomic_load(&s->purges) : 0;
}

/* Writes of one key at once are one per worker at most; beyond this many
 * a purge still marks them, only without closing the window below. */
#define HE_STORE_PURGE_WRITES 16

/* A write the purge marked may have its rename already submitted, before
 * the mark: the file it gives a name would be indexed by the next start-up
 * if the process died before the rename's completion unlinked it. The
 * temp file decides it, as a rename is atomic: unlinked here, the rename
 * cannot happen (it fails, and the write ends); already gone, the rename
 * has happened (or the write ended, or it has not opened the file yet and
 * will see the mark first), so the final name goes, durably, before the
 * purge is answered. */
static void he_cache_store_purge_write(he__cache_sdir_t *d, uint64_t hash, uint64_t gen)
{
    char tmp[64];
    he__cache_store_tmp_name(tmp, sizeof(tmp), hash, gen);
    if (unlinkat(d->dirfd, tmp, 0) == 0) return; /* tmp/ is emptied at start-up */
    int rc = he_cache_store_unlink_now(d, hash, gen);
    if (rc < 0) he__cache_store_fail(d->store, rc, "a purge's directory fsync", NULL);
}

int he_cache_store_remove(he_cache_store_t *s, const he_cache_key_t *key)
{
    he__cache_sdir_t *d;
    he__cache_sentry_t **slot;
    int rc = -ENOENT;
    if (!s) return rc;
    /* before the lock: see he_cache_store_purges */
    atomic_fetch_add(&s->purges, 1);
    uint64_t hash = 0, gen = 0, writes[HE_STORE_PURGE_WRITES];
    unsigned nwrites = 0;
    bool dropped = false;
    d = he__cache_store_dir_for(s, key->hash);
    pthread_mutex_lock(&d->lock);
    slot = he_cache_sdir_slot(d, key);
    if (*slot) {
        hash = (*slot)->hash;
        gen = (*slot)->gen;
        he_cache_sdir_drop(d, slot, false);
        dropped = true;
        rc = 0;
    }
    /* writes of the key in flight: their files are never indexed (and
     * are removed by he__cache_store_add; a crash leaves them in tmp/,
     * which start-up empties) */
    if (he__cache_inflight_mark(d->pending, key, writes, HE_STORE_PURGE_WRITES, &nwrites)) rc = 0;
    pthread_mutex_unlock(&d->lock);
    /* outside the lock: the name is unique to this version (gen), so no
     * newer write of the key can be hit */
    if (dropped) {
        int frc = he_cache_store_unlink_now(d, hash, gen);
        if (frc < 0) he__cache_store_fail(s, frc, "a purge's directory fsync", NULL);
    }
    for (unsigned i = 0; i < nwrites; i++) he_cache_store_purge_write(d, key->hash, writes[i]);
    return rc;
}

/* The entry is the version a 304 validated: the same ETag, or without
 * one the same Last-Modified (what the conditional request carried). */
static bool he_cache_store_same_version(const he_cache_meta_t *e, const he_cache_meta_t *v)
{
    if (e->status != v->status || strcmp(e->etag, v->etag) != 0) return false;
    return v->etag[0] || (v->last_modified[0] && strcmp(e->last_modified, v->last_modified) == 0);
}

int he_cache_store_refresh(he_cache_store_t *s, const he_cache_key_t *key,
                           const he_cache_meta_t *validated, const he_cache_fresh_t *f)
{
    /* in memory only: after a restart the entry is stale and gets
     * revalidated again, which is correct, merely one request more */
    he__cache_sdir_t *d;
    he__cache_sentry_t *e;
    int rc = -ENOENT;
    if (!s) return rc;
    d = he__cache_store_dir_for(s, key->hash);
    pthread_mutex_lock(&d->lock);
    e = *he_cache_sdir_slot(d, key);
    if (e && he_cache_store_same_version(&e->meta, validated)) {
        e->meta.fresh.stored_ms = f->stored_ms;
        e->meta.fresh.expires_ms = f->expires_ms;
        rc = 0;
    } else if (e) {
        rc = -ESTALE;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void he_cache_store_error(he_cache_store_t *s, const he_cache_key_t *key, int neg_errno,
                          he_cache_stats_t *st)
{
    if (!s) return;
    he__cache_store_fail(s, neg_errno, key->s, st);
    he_cache_store_drop(s, key, NULL);
}

void he_cache_store_error_file(he_cache_store_t *s, const he_cache_key_t *key, const char *path,
                               int neg_errno, he_cache_stats_t *st)
{
    if (!s) return;
    /* a file missing because its entry went (evicted, replaced) since the
     * lookup is no disk error, and the entry there now is not its */
    if (he_cache_store_drop(s, key, path) < 0 && neg_errno == -ENOENT) return;
    he__cache_store_fail(s, neg_errno, key->s, st);
}

/* ---------------------------------------------------------------- unlinks */

int he_cache_store_unlink_step(he_cache_store_t *s, struct io_uring_sqe *sqe)
{
    /* the path must outlive the SQE: it is kept in a per-store slot that
     * the next call replaces (one unlink in flight per store) */
    static __thread char path[HE__CACHE_HDR_FIXED + 48];
    for (unsigned i = 0; i < s->ndirs; i++) {
        he__cache_sdir_t *d = &s->dirs[(s->unlink_rr + i) % s->ndirs];
        he__cache_unlink_t *u;
        pthread_mutex_lock(&d->lock);
        u = d->unlinks;
        if (u) d->unlinks = u->next;
        pthread_mutex_unlock(&d->lock);
        if (u) {
            snprintf(path, sizeof(path), "%s", u->path);
            io_uring_prep_unlinkat(sqe, d->dirfd, path, 0);
            free(u);
            s->unlink_rr++;
            return HE_CACHE_AGAIN;
        }
    }
    return HE_CACHE_OK;
}

void he_cache_store_unlink_sync(he_cache_store_t *s)
{
    for (unsigned i = 0; i < s->ndirs; i++) {
        he__cache_sdir_t *d = &s->dirs[i];
        he__cache_unlink_t *u;
        pthread_mutex_lock(&d->lock);
        u = d->unlinks;
        d->unlinks = NULL;
        pthread_mutex_unlock(&d->lock);
        while (u) {
            he__cache_unlink_t *next = u->next;
            unlinkat(d->dirfd, u->path, 0);
            free(u);
            u = next;
        }
    }
}
