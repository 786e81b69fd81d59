/* Access log: the control thread's side. It drains the workers' record
 * rings (server/base/alog_ring.h), formats a batch of records and writes
 * it with one write(2). */
#ifndef HE_ACCESSLOG_H
#define HE_ACCESSLOG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"
#include "server/base/alog_ring.h"

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
    he_alog_piece_t tail[HE_ALOG_CACHE_COUNT + 1][3];
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
