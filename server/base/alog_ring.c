/* The access log's record rings: creation, and the out-of-line reserve
 * and commit. See alog_ring.h. */
#include "server/base/alog_ring.h"

#include <sys/mman.h>

he_alog_ring_t *he_alog_ring_new(unsigned bytes)
{
    size_t size = sizeof(he_alog_ring_t) + bytes;
    he_alog_ring_t *r;

    if (bytes < 4096 || (bytes & (bytes - 1))) return NULL;
    /* mmap: the ring costs no memory until a log is on and it is written */
    r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return NULL;
    r->size = bytes;
    r->mask = bytes - 1;
    return r;
}

void he_alog_ring_free(he_alog_ring_t *r)
{
    if (r) munmap(r, sizeof(he_alog_ring_t) + r->size);
}

void he_alog_ring_set_notify(he_alog_ring_t *r, void *uv_async)
{
    r->notify = uv_async;
}

he_alog_rec_t *he_alog_reserve(he_alog_ring_t *r, size_t target_len)
{
    return he_alog_reserve_in(r, target_len);
}

void he_alog_commit(he_alog_ring_t *r, he_alog_rec_t *rec)
{
    he_alog_commit_in(r, rec);
}

static const char *const he_alog_cache_names[HE_ALOG_CACHE_COUNT] = {
    "-", "HIT-RAM", "HIT-SSD", "MISS", "STALE", "REVALIDATED", "COALESCED", "PREFETCHED",
};

const char *he_alog_cache_name(unsigned st)
{
    return st < HE_ALOG_CACHE_COUNT ? he_alog_cache_names[st] : "-";
}
