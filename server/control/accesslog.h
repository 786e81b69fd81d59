/* Access log. Workers never write the log themselves: each appends a
 * record to its own single-producer single-consumer ring, and the control
 * thread formats a batch of them and writes it with one write(2). A full
 * ring drops the record and counts it (he_stats_t.log_dropped); a worker
 * never waits for the disk or for the control thread.
 *
 * Records have variable length (a fixed part and the request target), so
 * the ring holds thousands of them in a few hundred KiB that stay in
 * cache: a record costs the worker about as much as the copy of its
 * bytes. */
#ifndef HE_ACCESSLOG_H
#define HE_ACCESSLOG_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conf/conf.h"

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

/* At least HE_CST_COUNT (server/cache_glue.h): cache statuses the
 * formatter keeps spelled. */
#define HE_ALOG_CACHE_ST_MAX 8

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
    uint8_t cache;     /* enum he_cache_st (server/cache_glue.h), named when formatted */
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

struct he_worker;
struct he_conn;
/* Records the response c just finished (called from he_respond_finish). */
void he_alog_push(struct he_worker *w, const struct he_conn *c, uint64_t end_ns, uint64_t ttfb_us,
                  uint64_t total_us);

/* ---------------------------------------------------------------- writer */

/* A piece of a line spelled once and copied whole: the formatter copies
 * all of s (a constant size, inlined) and advances by len. */
typedef struct he_alog_piece {
    char s[48];
    uint8_t len; /* 0: not spelled yet */
} he_alog_piece_t;

typedef struct he_alog {
    int fd; /* -1 = off */
    he_access_log_format_t format;
    char path[PATH_MAX];
    char *buf;
    size_t len, cap;
    uint64_t written; /* records */
    uint64_t write_errors;
    int64_t real_minus_mono_ns; /* refreshed at every drain */
    /* What the formatter spelled already, for the format in pieces_format
     * (a change of format forgets all of it). */
    he_access_log_format_t pieces_format;
    uint64_t tcache_ns; /* wall-clock ns of the second tcache spells */
    bool tcache_ok;
    he_alog_piece_t tcache; /* ` - - [30/Nov/2025:10:14:15 +0000] "` or
                             * `{"time":"2025-11-30T10:14:15.` */
    uint8_t mcache_method;
    he_alog_piece_t mcache; /* `GET ` or `,"method":"GET","target":"` */
    uint64_t acache_key[2]; /* address of the last client */
    uint8_t acache_family;
    he_alog_piece_t acache; /* ... as text */
    /* ` cache=- tls=-\n` or `,"cache":"-","tls":"-"}\n`, by cache status
     * (the last: out of range) and enum he_alog_tls */
    he_alog_piece_t tail[HE_ALOG_CACHE_ST_MAX + 1][3];
} he_alog_t;

void he_alog_init(he_alog_t *a);
/* Opens path (append, create) for format; on success replaces the open
 * log, on failure keeps it. "" turns the log off. 0 or -errno.
 * (The file side is server/accesslog_file.c.) */
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
/* Room he_alog_format needs: more than a record's longest line, escapes
 * included, plus what it writes past the line's end (a piece's copy). */
#define HE_ALOG_LINE_MAX 13312
/* One record as a line (with '\n' and a NUL) into out, which must have
 * cap >= HE_ALOG_LINE_MAX (else nothing: 0); returns its length. */
size_t he_alog_format(he_alog_t *a, const he_alog_rec_t *rec, char *out, size_t cap);

#endif
