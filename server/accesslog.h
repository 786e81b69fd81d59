/* Access log. Workers never write the log themselves: each appends fixed-
 * size records to its own single-producer single-consumer ring, and the
 * control thread formats a batch of them and writes it with one write(2).
 * A full ring drops the record and counts it (he_stats_t.log_dropped); a
 * worker never waits for the disk or for the control thread. */
#ifndef HE_ACCESSLOG_H
#define HE_ACCESSLOG_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conf/conf.h"

/* Records per worker ring (a power of two): 2 MiB of address space, paged
 * in only once the access log is on. At the control thread's 100 ms drain
 * interval this absorbs 40k requests/s per worker even without the early
 * wake-up below. */
#define HE_ALOG_RING_RECORDS 4096
/* The producer wakes the control thread (uv_async_send) once every this
 * many records, so a busy worker is drained before its ring fills. */
#define HE_ALOG_NOTIFY_EVERY 512

enum he_alog_tls { HE_ALOG_TLS_NONE = 0, HE_ALOG_TLS_USERSPACE, HE_ALOG_TLS_KTLS };

#define HE_ALOG_TARGET_MAX 438 /* 512-byte records; cache[] took two bytes */

/* One request, 512 bytes, as the worker saw it. Times are monotonic; the
 * control thread converts them to wall-clock time when it formats. */
typedef struct he_alog_rec {
    uint64_t end_ns;     /* CLOCK_MONOTONIC at the last byte */
    uint64_t bytes_sent; /* header + body */
    uint64_t body_bytes;
    uint32_t duration_us;
    uint32_t ttfb_us;
    uint16_t status;
    uint16_t worker;
    uint16_t port; /* client port, host order */
    uint16_t target_len;
    uint8_t family; /* AF_INET, AF_INET6, 0 = unknown */
    uint8_t method; /* llhttp_method_t */
    uint8_t http_major, http_minor;
    uint8_t tls;       /* enum he_alog_tls (filled by the TLS listener) */
    uint8_t truncated; /* the target was longer than HE_ALOG_TARGET_MAX */
    char cache[12];    /* cache status: "-", "HIT-RAM" ... "REVALIDATED" (server/cache_glue.h) */
    uint8_t addr[16];
    char target[HE_ALOG_TARGET_MAX];
} he_alog_rec_t;

_Static_assert(sizeof(he_alog_rec_t) == 512, "access log record size");

typedef struct he_alog_ring {
    /* written by the producer only */
    _Alignas(64) atomic_uint head;
    unsigned tail_seen; /* the producer's last look at tail */
    /* written by the consumer only */
    _Alignas(64) atomic_uint tail;
    /* read-mostly */
    _Alignas(64) atomic_int enabled; /* the control thread has a log open */
    unsigned mask;
    void *notify; /* uv_async_t *, or NULL */
    _Alignas(64) he_alog_rec_t recs[];
} he_alog_ring_t;

he_alog_ring_t *he_alog_ring_new(unsigned records);
void he_alog_ring_free(he_alog_ring_t *r);
void he_alog_ring_set_notify(he_alog_ring_t *r, void *uv_async);

static inline bool he_alog_ring_on(const he_alog_ring_t *r)
{
    return r && atomic_load_explicit(&r->enabled, memory_order_relaxed);
}

/* Worker side: reserves the next record, or NULL when the ring is full
 * (the caller counts the drop); he_alog_commit publishes it. */
he_alog_rec_t *he_alog_reserve(he_alog_ring_t *r);
void he_alog_commit(he_alog_ring_t *r);

struct he_worker;
struct he_conn;
/* Records the response c just finished (called from he_respond_finish). */
void he_alog_push(struct he_worker *w, const struct he_conn *c, uint64_t end_ns, uint64_t ttfb_us,
                  uint64_t total_us);

/* ---------------------------------------------------------------- writer */

typedef struct he_alog {
    int fd; /* -1 = off */
    he_access_log_format_t format;
    char path[PATH_MAX];
    char *buf;
    size_t len, cap;
    uint64_t written; /* records */
    uint64_t write_errors;
    int64_t real_minus_mono_ns; /* refreshed at every drain */
    time_t tcache_sec;
    char tcache[40];
} he_alog_t;

void he_alog_init(he_alog_t *a);
/* Opens path (append, create) for format; on success replaces the open
 * log, on failure keeps it. "" turns the log off. 0 or -errno. */
int he_alog_open(he_alog_t *a, const char *path, he_access_log_format_t format);
/* Opens the same path again (SIGUSR1, after logrotate renamed it). */
int he_alog_reopen(he_alog_t *a);
void he_alog_close(he_alog_t *a);
/* Formats every record in r into the batch buffer (writing it out when
 * full) and frees their slots. Returns the number of records. */
size_t he_alog_drain(he_alog_t *a, he_alog_ring_t *r);
/* Drains n rings at once, merging their records by time (each ring is in
 * order already), so that lines from different workers interleave as the
 * responses finished. Returns the number of records. */
size_t he_alog_drain_many(he_alog_t *a, he_alog_ring_t *const *rings, unsigned n);
/* Writes the batch with one write(2). */
void he_alog_flush(he_alog_t *a);
/* One record as a line (with '\n'); returns its length. For tests. */
size_t he_alog_format(he_alog_t *a, const he_alog_rec_t *rec, char *out, size_t cap);

#endif
