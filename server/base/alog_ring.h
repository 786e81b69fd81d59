/* Access log records and the ring that carries them. Workers never write
 * the log themselves: each appends a record to its own single-producer
 * single-consumer ring, and the control
 * thread formats a batch of them and writes it with one write(2). A full
 * ring drops the record and counts it (he_stats_t.log_dropped); a worker
 * never waits for the disk or for the control thread.
 *
 * Records have variable length (a fixed part and the request target), so
 * the ring holds thousands of them in a few hundred KiB that stay in
 * cache: a record costs the worker about as much as the copy of its
 * bytes. */
#ifndef HE_ALOG_RING_H
#define HE_ALOG_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* The access log's cache field: how the cache answered (the handler sets
 * it, the formatter names it). */
typedef enum he_alog_cache {
    HE_ALOG_CACHE_NONE = 0, /* "-": served from root (or not a cacheable answer) */
    HE_ALOG_CACHE_HIT_RAM,
    HE_ALOG_CACHE_HIT_SSD,
    HE_ALOG_CACHE_MISS,
    HE_ALOG_CACHE_STALE,
    HE_ALOG_CACHE_REVALIDATED,
    HE_ALOG_CACHE_COALESCED,
    HE_ALOG_CACHE_PREFETCHED,
    HE_ALOG_CACHE_COUNT
} he_alog_cache_t;
/* "HIT-RAM", ...; "-" for NONE and for a value out of range. */
const char *he_alog_cache_name(unsigned st);

/* Bytes per worker ring (a power of two), paged in only once the access
 * log is on: about 24,000 playlist requests. The control thread drains
 * every 100 ms and whenever a producer has written another
 * HE_ALOG_NOTIFY_BYTES (one uv_async_send), so a ring fills only when the
 * control thread cannot keep up for eight of those. Fewer, bigger drains
 * cost less per record: one wake-up and one write(2) each, and on ext4 a
 * write of 64 KiB costs 20% more per byte than one of 256 KiB
 * (tests/bench/alog_cost.c, drain and write per combined line: 92 ns at
 * 32 KiB of records per drain, 75 at 64 KiB, 70 at 128 KiB). In the
 * server, with the control thread on its own CPU, 256 KiB wake-ups and a
 * 2 MiB ring cost it 151-163 ns per JSON line against 168-187 with 128 KiB
 * and 1 MiB (same run, alternating; 512 KiB and 4 MiB: no better). The
 * compile-time overrides are for such comparisons. */
#ifndef HE_ALOG_RING_BYTES
#define HE_ALOG_RING_BYTES (1u << 21)
#endif
#ifndef HE_ALOG_NOTIFY_BYTES
#define HE_ALOG_NOTIFY_BYTES (1u << 18)
#endif

enum he_alog_tls { HE_ALOG_TLS_NONE = 0, HE_ALOG_TLS_USERSPACE, HE_ALOG_TLS_KTLS };

/* Longer request targets are cut (and end in "..." in the log). */
#define HE_ALOG_TARGET_MAX 2048

/* One request as the worker saw it. Times are monotonic; the control
 * thread converts them to wall-clock time when it formats. The fixed part
 * is one cache line's worth (64 bytes): the worker stores only what it
 * has at hand and the control thread derives the rest. */
typedef struct he_alog_rec {
    uint32_t size; /* of the record, target included, a multiple of 8; 0: the
                    * rest of the ring is unused, the next record is at its start */
    uint16_t target_len;
    uint16_t status;
    uint64_t end_ns;     /* CLOCK_MONOTONIC at the last byte */
    uint64_t bytes_sent; /* header + body */
    uint32_t duration_us;
    uint32_t ttfb_us;
    uint16_t head_len; /* of bytes_sent, the header; the rest is the body */
    uint16_t worker;
    uint8_t family; /* AF_INET, AF_INET6, 0 = unknown */
    uint8_t method; /* llhttp_method_t */
    uint8_t http_major, http_minor;
    uint8_t tls;       /* enum he_alog_tls */
    uint8_t truncated; /* the target was longer than HE_ALOG_TARGET_MAX */
    uint8_t cache;     /* he_alog_cache_t, named when formatted */
    uint8_t pad[5];
    uint8_t addr[16]; /* IPv4: 4 bytes, then zeros (the formatter's cache key) */
    char target[];    /* target_len bytes */
} he_alog_rec_t;

_Static_assert(sizeof(he_alog_rec_t) == 64, "the fixed part of a record is 64 bytes");

typedef struct he_alog_ring {
    /* written by the producer only */
    _Alignas(64) atomic_uint head; /* bytes ever written, modulo 2^32 */
    unsigned tail_seen;            /* the producer's last look at tail */
    unsigned skip;                 /* reserved: bytes left unused at the ring's end */
    /* written by the consumer only */
    _Alignas(64) atomic_uint tail;
    /* read-mostly */
    _Alignas(64) atomic_int enabled; /* the control thread has a log open */
    unsigned size, mask;
    void *notify; /* uv_async_t *, or NULL */
    _Alignas(64) char data[];
} he_alog_ring_t;

/* bytes: a power of two, at least 4 KiB. */
he_alog_ring_t *he_alog_ring_new(unsigned bytes);
void he_alog_ring_free(he_alog_ring_t *r);
void he_alog_ring_set_notify(he_alog_ring_t *r, void *uv_async);

static inline bool he_alog_ring_on(const he_alog_ring_t *r)
{
    return r && atomic_load_explicit(&r->enabled, memory_order_relaxed);
}

/* Worker side: reserves a record for a target of target_len bytes (at
 * most HE_ALOG_TARGET_MAX), or NULL when the ring is full (the caller
 * counts the drop); he_alog_commit publishes it. */
he_alog_rec_t *he_alog_reserve(he_alog_ring_t *r, size_t target_len);
void he_alog_commit(he_alog_ring_t *r, he_alog_rec_t *rec);

/* The ring's two halves, inline in he_alog_push: no calls on the
 * worker's path (a record costs it about 10 ns). */
static inline he_alog_rec_t *he_alog_reserve_in(he_alog_ring_t *r, size_t target_len)
{
    unsigned head = atomic_load_explicit(&r->head, memory_order_relaxed);
    unsigned need = (unsigned)((sizeof(he_alog_rec_t) + target_len + 7) & ~(size_t)7);
    unsigned pos = head & r->mask, room = r->size - pos;
    /* A record never wraps: if it does not fit before the ring's end, the
     * rest of the ring is skipped (marked with size 0). */
    unsigned skip = room < need ? room : 0;
    he_alog_rec_t *rec;

    if (head + skip + need - r->tail_seen > r->size) {
        /* Looks full: look at the consumer's line only now, so a ring with
         * room costs the producer no shared cache-line read. */
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head + skip + need - r->tail_seen > r->size) return NULL;
    }
    if (skip) {
        ((he_alog_rec_t *)(r->data + pos))->size = 0;
        pos = 0;
    }
    r->skip = skip;
    rec = (he_alog_rec_t *)(r->data + pos);
    rec->size = need;
    return rec;
}

static inline void he_alog_commit_in(he_alog_ring_t *r, he_alog_rec_t *rec)
{
    unsigned old = atomic_load_explicit(&r->head, memory_order_relaxed);
    unsigned head = old + r->skip + rec->size;
    atomic_store_explicit(&r->head, head, memory_order_release);
    /* one wake-up per HE_ALOG_NOTIFY_BYTES written, never per request */
    if ((old ^ head) >= HE_ALOG_NOTIFY_BYTES && r->notify) uv_async_send(r->notify);
}

#endif
