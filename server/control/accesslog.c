/* Access log: the drain and formatter the control thread drives; the
 * file it writes is server/accesslog_file.c. See accesslog.h. */
#include "server/control/accesslog.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <llhttp.h>
#include <string.h>

#include "server/base/alog_ring.h"
#include "server/base/log.h"

/* ---------------------------------------------------------------- formatter */

static const char *he_alog_tls_name(uint8_t t)
{
    return t == HE_ALOG_TLS_KTLS ? "ktls" : t == HE_ALOG_TLS_USERSPACE ? "tls" : "-";
}

/* Formatting is hand-written rather than snprintf: the control thread
 * formats every request the server answers, and this is most of what the
 * access log costs (docs/performance.md). What repeats from line to line
 * (the second, the method, the client, cache and TLS status) is spelled
 * once into a piece and copied whole; numbers are written in place two
 * digits at a time; the target is scanned and copied 8 bytes at a time.
 * Every helper appends at o and returns the new end; the caller
 * guarantees room (HE_ALOG_LINE_MAX), including the up to 48 bytes a
 * piece's copy writes past its end. */

/* literals: a copy of constant size, which the compiler inlines */
#define he_alog_lit(o, s) (memcpy(o, s, sizeof(s) - 1), (o) + sizeof(s) - 1)

/* A piece's whole buffer, a constant size (three vector moves), however
 * long the text in it: cheaper than a copy of its length. */
static inline char *he_alog_piece(char *o, const he_alog_piece_t *p)
{
    memcpy(o, p->s, sizeof(p->s));
    return o + p->len;
}

static void he_alog_piece_set(he_alog_piece_t *p, const char *s, size_t n)
{
    if (n > sizeof(p->s)) n = sizeof(p->s); /* never: pieces are short */
    memcpy(p->s, s, n);
    p->len = (uint8_t)n;
}

static const char he_alog_digits[] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

static inline char *he_alog_2d(char *o, unsigned v)
{
    memcpy(o, he_alog_digits + v * 2, 2);
    return o + 2;
}

/* Digits in v. */
static inline unsigned he_alog_ndigits(uint64_t v)
{
    unsigned n = 1;
    for (;;) {
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* v in decimal, written in place from its last digit back, two at a time.
 * Its branches depend on the digits' count, which repeats from line to
 * line in a steady load (a playlist's size, a worker's number). Measured
 * slower (tests/bench/alog_cost.c): a branch-free conversion of 8 digits
 * at once (33 -> 41 ns per combined line), small numbers inline, 32-bit
 * divisions. */
static char *he_alog_u64(char *o, uint64_t v)
{
    char *end = o + he_alog_ndigits(v), *p = end;
    while (v >= 100) {
        p -= 2;
        he_alog_2d(p, (unsigned)(v % 100));
        v /= 100;
    }
    if (v >= 10)
        he_alog_2d(p - 2, (unsigned)v);
    else
        p[-1] = (char)('0' + v);
    return end;
}

/* v < 10^width zero-padded to width digits (tcache only: once a second) */
static char *he_alog_pad(char *o, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        o[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return o + width;
}

/* v < 1000 as three digits */
static inline char *he_alog_3d(char *o, unsigned v)
{
    o[0] = (char)('0' + v / 100);
    return he_alog_2d(o + 1, v % 100);
}

/* microseconds as seconds: "0.000412" */
static char *he_alog_secs(char *o, uint32_t us)
{
    unsigned frac = us % 1000000;
    if (us < 1000000) {
        o = he_alog_lit(o, "0.");
    } else {
        o = he_alog_u64(o, us / 1000000);
        *o++ = '.';
    }
    o = he_alog_2d(o, frac / 10000);
    o = he_alog_2d(o, frac / 100 % 100);
    return he_alog_2d(o, frac % 100);
}

/* Most lines come from a few clients in a row: spell an address once. */
static char *he_alog_addr(he_alog_t *a, char *o, const he_alog_rec_t *rec)
{
    uint64_t k0, k1;
    __builtin_memcpy(&k0, rec->addr, 8);
    __builtin_memcpy(&k1, rec->addr + 8, 8);
    if (k0 != a->acache_key[0] || k1 != a->acache_key[1] || rec->family != a->acache_family ||
        !a->acache.len) {
        char *s = a->acache.s, *p = s;
        if (rec->family == AF_INET) {
            for (int i = 0; i < 4; i++) {
                if (i) *p++ = '.';
                p = he_alog_u64(p, rec->addr[i]);
            }
        } else if (rec->family != AF_INET6 ||
                   !inet_ntop(AF_INET6, rec->addr, s, sizeof(a->acache.s))) {
            *p++ = '-';
        } else {
            p += strlen(s);
        }
        a->acache.len = (uint8_t)(p - s);
        a->acache_key[0] = k0;
        a->acache_key[1] = k1;
        a->acache_family = rec->family;
    }
    return he_alog_piece(o, &a->acache);
}

/* Some byte of v needs an escape: below 0x20, above 0x7e, '"' or '\'
 * (exact as a whole: a borrow can only add a byte after a true one). */
static inline uint64_t he_alog_special8(uint64_t v)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = v ^ (ones * '"'), b = v ^ (ones * '\\');
    uint64_t ctl = (v - ones * 0x20) & ~v; /* below 0x20 */
    uint64_t top = (v + ones) | v;         /* 0x7f and above */
    return (ctl | top | ((q - ones) & ~q) | ((b - ones) & ~b)) & high;
}

/* The target as text: combined escapes like nginx (\xHH), JSON as
 * \u00HH; both quote-safe, one byte in at most six out. A usual target
 * needs no escape at all: it is checked and copied 8 bytes at a time (the
 * last 8 overlapping), and only a target with something to escape goes
 * byte by byte from the first 8 bytes that hold it. */
static char *he_alog_escape(char *o, const char *s, size_t n, bool json)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 0;
    uint64_t v;

    if (n >= 8) {
        for (; i + 8 < n; i += 8) {
            __builtin_memcpy(&v, s + i, 8);
            if (he_alog_special8(v)) goto slow;
            __builtin_memcpy(o + i, &v, 8);
        }
        __builtin_memcpy(&v, s + n - 8, 8);
        if (!he_alog_special8(v)) {
            __builtin_memcpy(o + n - 8, &v, 8);
            return o + n;
        }
    }
slow:
    o += i;
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
            *o++ = (char)ch;
        } else if (json && (ch == '"' || ch == '\\')) {
            *o++ = '\\';
            *o++ = (char)ch;
        } else {
            o = json ? he_alog_lit(o, "\\u00") : he_alog_lit(o, "\\x");
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
    }
    return o;
}

/* Forgets every piece when the format changes (tests set it directly). */
static void he_alog_pieces_check(he_alog_t *a)
{
    if (a->pieces_format == a->format) return;
    a->pieces_format = a->format;
    a->tcache_ok = false;
    a->mcache.len = 0;
    for (unsigned i = 0; i <= HE_ALOG_CACHE_COUNT; i++)
        for (unsigned k = 0; k < 3; k++)
            a->tail[i][k].len = 0;
}

/* The time up to the second, spelled once per second. */
static void he_alog_tcache(he_alog_t *a, uint64_t real_ns)
{
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t sec = (time_t)(real_ns / 1000000000ull);
    char buf[64], *o = buf;
    struct tm tm;

    gmtime_r(&sec, &tm);
    if (a->format == HE_ACCESS_LOG_JSON) { /* {"time":"2025-11-30T10:14:15. */
        o = he_alog_lit(o, "{\"time\":\"");
        o = he_alog_pad(o, (unsigned)tm.tm_year + 1900, 4);
        *o++ = '-';
        o = he_alog_pad(o, (unsigned)tm.tm_mon + 1, 2);
        *o++ = '-';
        o = he_alog_pad(o, (unsigned)tm.tm_mday, 2);
        *o++ = 'T';
    } else { /*  - - [30/Nov/2025:10:14:15 +0000] " */
        o = he_alog_lit(o, " - - [");
        o = he_alog_pad(o, (unsigned)tm.tm_mday, 2);
        *o++ = '/';
        memcpy(o, mon[tm.tm_mon], 3);
        o += 3;
        *o++ = '/';
        o = he_alog_pad(o, (unsigned)tm.tm_year + 1900, 4);
        *o++ = ':';
    }
    o = he_alog_pad(o, (unsigned)tm.tm_hour, 2);
    *o++ = ':';
    o = he_alog_pad(o, (unsigned)tm.tm_min, 2);
    *o++ = ':';
    o = he_alog_pad(o, (unsigned)tm.tm_sec, 2);
    o = a->format == HE_ACCESS_LOG_JSON ? he_alog_lit(o, ".") : he_alog_lit(o, " +0000] \"");
    he_alog_piece_set(&a->tcache, buf, (size_t)(o - buf));
    a->tcache_ns = (uint64_t)sec * 1000000000ull;
    a->tcache_ok = true;
}

/* The method, and what surrounds it up to the target. */
static char *he_alog_method(he_alog_t *a, char *o, uint8_t m)
{
    if (m != a->mcache_method || !a->mcache.len) {
        const char *name = llhttp_method_name((llhttp_method_t)m);
        char buf[64], *p = buf;
        size_t n;
        if (!name || !*name) name = "-";
        n = strnlen(name, 20); /* the longest is 13 */
        if (a->format == HE_ACCESS_LOG_JSON) p = he_alog_lit(p, "\",\"method\":\"");
        memcpy(p, name, n);
        p += n;
        p = a->format == HE_ACCESS_LOG_JSON ? he_alog_lit(p, "\",\"target\":\"")
                                            : he_alog_lit(p, " ");
        he_alog_piece_set(&a->mcache, buf, (size_t)(p - buf));
        a->mcache_method = m;
    }
    return he_alog_piece(o, &a->mcache);
}

/* The end of the line: cache and TLS status. */
static char *he_alog_tail(he_alog_t *a, char *o, const he_alog_rec_t *rec)
{
    unsigned c = rec->cache < HE_ALOG_CACHE_COUNT ? rec->cache : HE_ALOG_CACHE_COUNT;
    unsigned t = rec->tls < 3 ? rec->tls : 0;
    he_alog_piece_t *p = &a->tail[c][t];
    if (!p->len) {
        const char *cn = he_alog_cache_name(c), *tn = he_alog_tls_name((uint8_t)t);
        char buf[128];
        int n = a->format == HE_ACCESS_LOG_JSON
                    ? snprintf(buf, sizeof(buf), ",\"cache\":\"%s\",\"tls\":\"%s\"}\n", cn, tn)
                    : snprintf(buf, sizeof(buf), " cache=%s tls=%s\n", cn, tn);
        he_alog_piece_set(p, buf, (size_t)n);
    }
    return he_alog_piece(o, p);
}

static inline uint64_t he_alog_body(const he_alog_rec_t *rec)
{
    return rec->bytes_sent > rec->head_len ? rec->bytes_sent - rec->head_len : 0;
}

/* "HTTP/1.1" then rest: the version digits patched in */
#define he_alog_version(o, lit, at, rec)                                                           \
    do {                                                                                           \
        char *v_ = (o) + (at);                                                                     \
        (o) = he_alog_lit(o, lit);                                                                 \
        v_[0] = (char)('0' + (rec)->http_major % 10);                                              \
        v_[2] = (char)('0' + (rec)->http_minor % 10);                                              \
    } while (0)

static char *he_alog_status(char *o, unsigned status)
{
    return status >= 100 && status < 1000 ? he_alog_3d(o, status) : he_alog_u64(o, status);
}

static char *he_alog_combined(he_alog_t *a, const he_alog_rec_t *rec, char *o)
{
    o = he_alog_addr(a, o, rec);
    o = he_alog_piece(o, &a->tcache); /*  - - [time] " */
    o = he_alog_method(a, o, rec->method);
    o = he_alog_escape(o, rec->target, rec->target_len, false);
    if (rec->truncated) o = he_alog_lit(o, "...");
    if (rec->http_major)
        he_alog_version(o, " HTTP/1.1\" ", 6, rec);
    else /* refused before its version was read (414) */
        o = he_alog_lit(o, " -\" ");
    o = he_alog_status(o, rec->status);
    *o++ = ' ';
    o = he_alog_u64(o, he_alog_body(rec));
    /* what combined lacks, as key=value pairs (the server keeps neither
     * Referer nor User-Agent: "-") */
    o = he_alog_lit(o, " \"-\" \"-\" rt=");
    o = he_alog_secs(o, rec->duration_us);
    o = he_alog_lit(o, " ttfb=");
    o = he_alog_secs(o, rec->ttfb_us);
    o = he_alog_lit(o, " worker=");
    o = he_alog_u64(o, rec->worker);
    return he_alog_tail(a, o, rec);
}

static char *he_alog_json(he_alog_t *a, const he_alog_rec_t *rec, uint64_t real_ns, char *o)
{
    o = he_alog_piece(o, &a->tcache); /* {"time":"2025-11-30T10:14:15. */
    o = he_alog_3d(o, (unsigned)((real_ns - a->tcache_ns) / 1000000));
    o = he_alog_lit(o, "Z\",\"client\":\"");
    o = he_alog_addr(a, o, rec);
    o = he_alog_method(a, o, rec->method);
    o = he_alog_escape(o, rec->target, rec->target_len, true);
    if (rec->truncated) o = he_alog_lit(o, "...");
    if (rec->http_major)
        he_alog_version(o, "\",\"protocol\":\"HTTP/1.1\",\"status\":", 19, rec);
    else
        o = he_alog_lit(o, "\",\"protocol\":\"-\",\"status\":");
    o = he_alog_status(o, rec->status);
    o = he_alog_lit(o, ",\"bytes\":");
    o = he_alog_u64(o, he_alog_body(rec));
    o = he_alog_lit(o, ",\"duration_us\":");
    o = he_alog_u64(o, rec->duration_us);
    o = he_alog_lit(o, ",\"ttfb_us\":");
    o = he_alog_u64(o, rec->ttfb_us);
    o = he_alog_lit(o, ",\"worker\":");
    o = he_alog_u64(o, rec->worker);
    return he_alog_tail(a, o, rec);
}

size_t he_alog_format(he_alog_t *a, const he_alog_rec_t *rec, char *out, size_t cap)
{
    uint64_t real_ns = rec->end_ns + (uint64_t)a->real_minus_mono_ns;
    char *end;

    if (cap < HE_ALOG_LINE_MAX) return 0; /* never, with the batch buffer */
    he_alog_pieces_check(a);
    /* a second later (or earlier: another worker's record, or the clock
     * was set back) */
    if (!a->tcache_ok || real_ns - a->tcache_ns >= 1000000000ull) he_alog_tcache(a, real_ns);
    if (a->format == HE_ACCESS_LOG_JSON)
        end = he_alog_json(a, rec, real_ns, out);
    else
        end = he_alog_combined(a, rec, out);
    *end = 0;
    return (size_t)(end - out);
}

/* Records carry monotonic times; lines show wall-clock time. */
static void he_alog_clock(he_alog_t *a)
{
    struct timespec rt, mt;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    a->real_minus_mono_ns = ((int64_t)rt.tv_sec - (int64_t)mt.tv_sec) * 1000000000ll +
                            ((int64_t)rt.tv_nsec - (int64_t)mt.tv_nsec);
}

/* The record at *tail, past a skip marker, or NULL when none is left. */
static const he_alog_rec_t *he_alog_peek(const he_alog_ring_t *r, unsigned *tail, unsigned head)
{
    const he_alog_rec_t *rec;
    if (*tail == head) return NULL;
    rec = (const he_alog_rec_t *)(r->data + (*tail & r->mask));
    if (rec->size == 0) { /* the rest of the ring was skipped */
        *tail += r->size - (*tail & r->mask);
        if (*tail == head) return NULL;
        rec = (const he_alog_rec_t *)(r->data + (*tail & r->mask));
    }
    return rec;
}

size_t he_alog_drain(he_alog_t *a, he_alog_ring_t *r)
{
    return he_alog_drain_many(a, &r, 1);
}

#define HE_ALOG_MERGE_MAX 64

size_t he_alog_drain_many(he_alog_t *a, he_alog_ring_t *const *rings, unsigned n)
{
    unsigned tail[HE_ALOG_MERGE_MAX], head[HE_ALOG_MERGE_MAX];
    size_t count = 0;
    bool on = a->fd >= 0 && a->buf;

    if (n > HE_ALOG_MERGE_MAX) { /* many workers: in groups, each in order */
        for (unsigned i = 0; i < n; i += HE_ALOG_MERGE_MAX)
            count += he_alog_drain_many(a, rings + i,
                                        n - i < HE_ALOG_MERGE_MAX ? n - i : HE_ALOG_MERGE_MAX);
        return count;
    }
    for (unsigned i = 0; i < n; i++) {
        tail[i] = atomic_load_explicit(&rings[i]->tail, memory_order_relaxed);
        head[i] = atomic_load_explicit(&rings[i]->head, memory_order_acquire);
        if (!on) /* the log was turned off: discard */
            atomic_store_explicit(&rings[i]->tail, head[i], memory_order_release);
    }
    if (!on) return 0;
    he_alog_clock(a);
    for (;;) {
        const he_alog_rec_t *best = NULL;
        unsigned bi = 0;
        /* the oldest next record of all rings (each ring is in order) */
        for (unsigned i = 0; i < n; i++) {
            const he_alog_rec_t *rec = he_alog_peek(rings[i], &tail[i], head[i]);
            if (rec && (!best || rec->end_ns < best->end_ns)) {
                best = rec;
                bi = i;
            }
        }
        if (!best) break;
        if (a->cap - a->len < HE_ALOG_LINE_MAX) {
            /* free what is formatted already, then write */
            for (unsigned i = 0; i < n; i++)
                atomic_store_explicit(&rings[i]->tail, tail[i], memory_order_release);
            he_alog_flush(a);
        }
        a->len += he_alog_format(a, best, a->buf + a->len, a->cap - a->len);
        tail[bi] += best->size;
        count++;
    }
    for (unsigned i = 0; i < n; i++)
        atomic_store_explicit(&rings[i]->tail, tail[i], memory_order_release);
    a->written += count;
    return count;
}
