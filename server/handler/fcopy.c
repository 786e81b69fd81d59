/* Copies of hot files under root in anonymous huge pages, shared by the
 * workers (fd_cache.memory).
 *
 * A segment from root leaves by vmsplice of its mapping (send.file_splice).
 * The mapping is the page cache's, in 4 KiB pages: vmsplice takes each
 * page's reference through the page tables, and the pipe and the skbs drop
 * them one by one. The same bytes in a private anonymous region on a 2 MiB
 * boundary with MADV_HUGEPAGE are taken a huge page at a time, as the RAM
 * tier's are (docs/performance.md, "Files under root in huge pages": 5-9 %
 * more bytes per CPU-second under wrk and at line rate).
 *
 * A copy belongs to one version of one file: device, inode, size and
 * modification time, the open-file cache's validators. A worker's entry
 * asks for the copy of its version on the file's second request (a file
 * asked for once is not worth the read), and holds it until the entry goes;
 * another worker's entry of the same version shares it if that worker runs
 * on the same NUMA node. The worker that reads a copy touches its pages
 * first, so they are on its node (workers allocate node-locally), and each
 * node's workers get a copy of their own. A file that changes has a new
 * version, so its entries (revalidated as fd_cache.valid says) never find
 * the old copy again; like a mapping, a copy is what the file held when it
 * was read, and the read is checked against a second fstat.
 *
 * Memory. A copy takes its file's whole 2 MiB pages, and one more for the
 * rest when that is 1 MiB or more (else the rest is in 4 KiB pages), so it
 * never takes more than 1 MiB over the file. Files under 1 MiB are not
 * copied (a huge page would be more than twice their size), nor files over
 * 16 MiB (their read would hold the worker); they keep their mapping. The
 * copies together stay within fd_cache.memory: an idle one (no entry holds
 * it) is kept for the next request and is the first to go, oldest first,
 * when a new copy needs room; when every copy is in use, the file is sent
 * from its mapping. Freeing a copy unmaps it; a pipe or an skb still
 * holding its pages keeps them until the kernel is done, so a response in
 * flight never reads reused memory.
 *
 * Sharing. Copies are made, found and released only when an open-file
 * cache entry asks for one (on its second request, then at most once a
 * second while there is no room) or goes, never per request, so one mutex
 * is enough; a request reads its entry's copy with no shared write. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "server/handler/handler.h"

#define HE_FCOPY_HUGE ((size_t)2 << 20)
/* The read runs on the worker: into fresh huge pages from the page cache,
 * 16 MiB took 2-6 ms on the AMD guest and a 2.4 MB segment 0.2-0.8 ms.
 * Larger files (a progressive MP4) keep their mapping. */
#define HE_FCOPY_FILE_MAX ((uint64_t)16 << 20)
#define HE_FCOPY_BUCKETS 1024 /* a power of two */

struct he_fcopy {
    struct he_fcopy *hnext;         /* hash chain */
    struct he_fcopy *iprev, *inext; /* idle list (refs == 0), oldest at the tail */
    dev_t dev;
    ino_t ino;
    uint64_t size;
    time_t mtime;
    long mtime_ns;
    int node; /* the NUMA node of the workers it serves (-1: any) */
    char *mem;
    size_t len;    /* of the mapping (he_fcopy_len) */
    unsigned refs; /* open-file cache entries holding it */
};

static struct {
    pthread_mutex_t mu;
    he_fcopy_t *buckets[HE_FCOPY_BUCKETS];
    he_fcopy_t *idle_head, *idle_tail;
    uint64_t budget;  /* fd_cache.memory; 0 while copies are off */
    uint64_t bytes;   /* mapped by copies, plus reads under way */
    uint64_t count;   /* copies in the table */
    uint64_t made;    /* copies read */
    uint64_t evicted; /* idle copies freed to make room or for a smaller budget */
    uint64_t refused; /* files sent from their mapping for want of room */
} he_fcopy_g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Whole huge pages, and the last part past them in one more when it is
 * half of one or more, else in 4 KiB pages: at most 1 MiB over the file. */
static size_t he_fcopy_len(uint64_t size)
{
    uint64_t whole = size & ~(uint64_t)(HE_FCOPY_HUGE - 1), tail = size - whole;
    if (tail >= HE_FCOPY_HUGE / 2) return (size_t)(whole + HE_FCOPY_HUGE);
    return (size_t)(whole + ((tail + 4095) & ~(uint64_t)4095));
}

bool he_fcopy_worth(uint64_t size)
{
    return size >= HE_FCOPY_HUGE / 2 && size <= HE_FCOPY_FILE_MAX;
}

static unsigned he_fcopy_bucket(dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
    return (unsigned)(h >> 40) & (HE_FCOPY_BUCKETS - 1);
}

static void he_fcopy_idle_unlink(he_fcopy_t *c)
{
    if (c->iprev)
        c->iprev->inext = c->inext;
    else
        he_fcopy_g.idle_head = c->inext;
    if (c->inext)
        c->inext->iprev = c->iprev;
    else
        he_fcopy_g.idle_tail = c->iprev;
    c->iprev = c->inext = NULL;
}

/* Under mu: out of the table and unmapped. */
static void he_fcopy_destroy(he_fcopy_t *c)
{
    he_fcopy_t **pp = &he_fcopy_g.buckets[he_fcopy_bucket(c->dev, c->ino)];
    while (*pp && *pp != c)
        pp = &(*pp)->hnext;
    if (*pp) *pp = c->hnext;
    he_fcopy_g.bytes -= c->len;
    he_fcopy_g.count--;
    munmap(c->mem, c->len);
    free(c);
}

/* Under mu: idle copies go, oldest first, until want more bytes fit. */
static bool he_fcopy_room(uint64_t want)
{
    while (he_fcopy_g.bytes + want > he_fcopy_g.budget && he_fcopy_g.idle_tail) {
        he_fcopy_t *c = he_fcopy_g.idle_tail;
        he_fcopy_idle_unlink(c);
        he_fcopy_destroy(c);
        he_fcopy_g.evicted++;
    }
    return he_fcopy_g.bytes + want <= he_fcopy_g.budget;
}

void he_fcopy_configure(uint64_t bytes)
{
    pthread_mutex_lock(&he_fcopy_g.mu);
    he_fcopy_g.budget = bytes;
    he_fcopy_room(0);
    pthread_mutex_unlock(&he_fcopy_g.mu);
}

/* The file's bytes into mem; false if it could not be read whole or is
 * no longer the version f describes. */
static bool he_fcopy_read(const he_file_t *f, char *mem)
{
    struct stat st;
    uint64_t done = 0;
    while (done < f->size) {
        ssize_t n = pread(f->fd, mem + done, (size_t)(f->size - done), (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += (uint64_t)n;
    }
    /* written to while read: the bytes may mix two versions */
    return fstat(f->fd, &st) == 0 && he_fcache_same_version(f, &st);
}

static he_fcopy_t *he_fcopy_find(const he_file_t *f, int node)
{
    for (he_fcopy_t *c = he_fcopy_g.buckets[he_fcopy_bucket(f->dev, f->ino)]; c; c = c->hnext)
        if (c->ino == f->ino && c->dev == f->dev && c->size == f->size && c->mtime == f->mtime &&
            c->mtime_ns == f->mtime_ns && c->node == node)
            return c;
    return NULL;
}

/* Under mu: a reference to c, taken off the idle list. */
static he_fcopy_t *he_fcopy_ref(he_fcopy_t *c)
{
    if (c->refs++ == 0) he_fcopy_idle_unlink(c);
    return c;
}

he_fcopy_t *he_fcopy_get(const he_file_t *f, int node, bool *changed)
{
    size_t len = he_fcopy_len(f->size);
    he_fcopy_t *c, *had;
    char *mem;

    if (f->fd < 0 || !he_fcopy_worth(f->size)) return NULL;
    pthread_mutex_lock(&he_fcopy_g.mu);
    if ((c = he_fcopy_find(f, node))) {
        he_fcopy_ref(c);
        pthread_mutex_unlock(&he_fcopy_g.mu);
        return c;
    }
    if (!he_fcopy_room(len)) {
        he_fcopy_g.refused++;
        pthread_mutex_unlock(&he_fcopy_g.mu);
        return NULL;
    }
    he_fcopy_g.bytes += len; /* the read's room, held while it runs unlocked */
    pthread_mutex_unlock(&he_fcopy_g.mu);

    c = calloc(1, sizeof(*c));
    mem = c ? he_cache_huge_map(len) : NULL;
    if (mem && !he_fcopy_read(f, mem)) {
        munmap(mem, len);
        mem = NULL;
        if (changed) *changed = true;
    }
    pthread_mutex_lock(&he_fcopy_g.mu);
    he_fcopy_g.bytes -= len;
    if (!mem) {
        pthread_mutex_unlock(&he_fcopy_g.mu);
        free(c);
        return NULL;
    }
    if ((had = he_fcopy_find(f, node))) { /* another worker read it meanwhile */
        he_fcopy_ref(had);
        pthread_mutex_unlock(&he_fcopy_g.mu);
        munmap(mem, len);
        free(c);
        return had;
    }
    c->dev = f->dev;
    c->ino = f->ino;
    c->size = f->size;
    c->mtime = f->mtime;
    c->mtime_ns = f->mtime_ns;
    c->node = node;
    c->mem = mem;
    c->len = len;
    c->refs = 1;
    c->hnext = he_fcopy_g.buckets[he_fcopy_bucket(c->dev, c->ino)];
    he_fcopy_g.buckets[he_fcopy_bucket(c->dev, c->ino)] = c;
    he_fcopy_g.bytes += len;
    he_fcopy_g.count++;
    he_fcopy_g.made++;
    he_fcopy_room(0); /* a budget lowered during the read */
    pthread_mutex_unlock(&he_fcopy_g.mu);
    return c;
}

const char *he_fcopy_bytes(const he_fcopy_t *c)
{
    return c->mem;
}

void he_fcopy_put(he_fcopy_t *c, bool stale)
{
    if (!c) return;
    pthread_mutex_lock(&he_fcopy_g.mu);
    if (--c->refs == 0) {
        if (stale) { /* the file changed: no entry will ask for this version */
            he_fcopy_destroy(c);
        } else {
            c->inext = he_fcopy_g.idle_head;
            if (he_fcopy_g.idle_head) he_fcopy_g.idle_head->iprev = c;
            he_fcopy_g.idle_head = c;
            if (!he_fcopy_g.idle_tail) he_fcopy_g.idle_tail = c;
            he_fcopy_room(0);
        }
    }
    pthread_mutex_unlock(&he_fcopy_g.mu);
}

void he_fcopy_stats(he_fcopy_stats_t *st)
{
    pthread_mutex_lock(&he_fcopy_g.mu);
    st->budget = he_fcopy_g.budget;
    st->bytes = he_fcopy_g.bytes;
    st->copies = he_fcopy_g.count;
    st->made = he_fcopy_g.made;
    st->evicted = he_fcopy_g.evicted;
    st->refused = he_fcopy_g.refused;
    pthread_mutex_unlock(&he_fcopy_g.mu);
}
