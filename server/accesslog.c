/* Access log: per-worker record rings (producer side runs on workers) and
 * the writer the control thread drives. See accesslog.h. */
#include "server/accesslog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include "server/log.h"
#include "server/server.h"
#include "server/tls.h"
#include "server/cache_glue.h"

#define HE_ALOG_BUF (256 * 1024)
#define HE_ALOG_LINE_MAX 16384 /* more than a record's longest line, escapes included */

/* ---------------------------------------------------------------- ring */

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

void he_alog_commit(he_alog_ring_t *r, he_alog_rec_t *rec)
{
    unsigned old = atomic_load_explicit(&r->head, memory_order_relaxed);
    unsigned head = old + r->skip + rec->size;
    atomic_store_explicit(&r->head, head, memory_order_release);
    /* one wake-up per HE_ALOG_NOTIFY_BYTES written, never per request */
    if ((old ^ head) >= HE_ALOG_NOTIFY_BYTES && r->notify) uv_async_send(r->notify);
}

void he_alog_push(struct he_worker *w, const struct he_conn *c, uint64_t end_ns, uint64_t ttfb_us,
                  uint64_t total_us)
{
    size_t n = c->req.url_len > HE_ALOG_TARGET_MAX ? HE_ALOG_TARGET_MAX : c->req.url_len;
    he_alog_rec_t *rec = he_alog_reserve(w->alog, n);

    if (!rec) {
        w->stats.log_dropped++;
        return;
    }
    rec->target_len = (uint16_t)n;
    rec->status = (uint16_t)c->status;
    rec->end_ns = end_ns;
    rec->bytes_sent = c->bytes_sent;
    rec->body_bytes = c->bytes_sent > c->head_len ? c->bytes_sent - c->head_len : 0;
    rec->duration_us = total_us > UINT32_MAX ? UINT32_MAX : (uint32_t)total_us;
    rec->ttfb_us = ttfb_us > UINT32_MAX ? UINT32_MAX : (uint32_t)ttfb_us;
    rec->worker = (uint16_t)w->id;
    rec->method = c->req.method;
    rec->http_major = c->req.http_major;
    rec->http_minor = c->req.http_minor;
    rec->tls = !c->tls           ? HE_ALOG_TLS_NONE
               : c->tls->ktls_tx ? HE_ALOG_TLS_KTLS
                                 : HE_ALOG_TLS_USERSPACE;
    rec->cache = c->cache_st; /* a number here; the control thread names it */
    rec->truncated = c->req.url_len > HE_ALOG_TARGET_MAX;
    rec->family = (uint8_t)c->peer.ss_family;
    if (c->peer.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&c->peer;
        memcpy(rec->addr, &a->sin_addr, 4);
        rec->port = ntohs(a->sin_port);
    } else if (c->peer.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&c->peer;
        memcpy(rec->addr, &a->sin6_addr, 16);
        rec->port = ntohs(a->sin6_port);
    } else {
        rec->family = 0;
        rec->port = 0;
    }
    memcpy(rec->target, c->url, n);
    he_alog_commit(w->alog, rec);
}

/* ---------------------------------------------------------------- writer */

void he_alog_init(he_alog_t *a)
{
    memset(a, 0, sizeof(*a));
    a->fd = -1;
    a->tcache_sec = -1;
}

int he_alog_open(he_alog_t *a, const char *path, he_access_log_format_t format)
{
    int fd;

    if (!path[0]) {
        he_alog_close(a);
        return 0;
    }
    if (!a->buf) {
        a->buf = malloc(HE_ALOG_BUF);
        if (!a->buf) return -ENOMEM;
        a->cap = HE_ALOG_BUF;
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    he_alog_flush(a); /* what was formatted for the old file goes there */
    if (a->fd >= 0) close(a->fd);
    a->fd = fd;
    if (a->format != format) a->tcache_sec = -1; /* spelled per format */
    a->format = format;
    snprintf(a->path, sizeof(a->path), "%s", path);
    return 0;
}

int he_alog_reopen(he_alog_t *a)
{
    char path[PATH_MAX];
    if (a->fd < 0) return 0;
    snprintf(path, sizeof(path), "%s", a->path);
    return he_alog_open(a, path, a->format);
}

void he_alog_close(he_alog_t *a)
{
    he_alog_flush(a);
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    a->path[0] = 0;
    free(a->buf);
    a->buf = NULL;
    a->cap = a->len = 0;
}

void he_alog_flush(he_alog_t *a)
{
    size_t off = 0;
    while (a->fd >= 0 && off < a->len) {
        ssize_t n = write(a->fd, a->buf + off, a->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* A full disk loses log lines, never requests. */
            static uint64_t last_warn;
            if (a->write_errors++ == last_warn) {
                he_log_warn("access log %s: write: %s", a->path, strerror(errno));
                last_warn = a->write_errors * 2; /* warn at 1, 2, 4, 8 ... errors */
            }
            break;
        }
        off += (size_t)n;
    }
    a->len = 0;
}

static const char *he_alog_tls_name(uint8_t t)
{
    return t == HE_ALOG_TLS_KTLS ? "ktls" : t == HE_ALOG_TLS_USERSPACE ? "tls" : "-";
}

/* Formatting is hand-written rather than snprintf: the control thread
 * formats every request the server answers, and this is most of what the
 * access log costs (docs/performance.md). Every helper appends at o and
 * returns the new end; the caller guarantees room (HE_ALOG_LINE_MAX). */
static char *he_alog_put(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

#define he_alog_lit(o, s) he_alog_put(o, s, sizeof(s) - 1)

static char *he_alog_str(char *o, const char *s)
{
    return he_alog_put(o, s, strlen(s));
}

static const char he_alog_digits[] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

static char *he_alog_u64(char *o, uint64_t v)
{
    char tmp[20];
    int i = sizeof(tmp);
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        tmp[--i] = he_alog_digits[d + 1];
        tmp[--i] = he_alog_digits[d];
    }
    if (v >= 10) {
        tmp[--i] = he_alog_digits[v * 2 + 1];
        tmp[--i] = he_alog_digits[v * 2];
    } else {
        tmp[--i] = (char)('0' + v);
    }
    return he_alog_put(o, tmp + i, sizeof(tmp) - (size_t)i);
}

/* v zero-padded to width digits */
static char *he_alog_pad(char *o, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        o[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return o + width;
}

/* microseconds as seconds: "0.000412" */
static char *he_alog_secs(char *o, uint32_t us)
{
    o = he_alog_u64(o, us / 1000000);
    *o++ = '.';
    return he_alog_pad(o, us % 1000000, 6);
}

/* Most lines come from a few clients in a row: spell an address once. */
static char *he_alog_addr(he_alog_t *a, char *o, const he_alog_rec_t *rec)
{
    uint8_t key[17];
    key[0] = rec->family;
    memcpy(key + 1, rec->addr, 16);
    if (memcmp(key, a->acache_key, sizeof(key)) != 0 || !a->acache_len) {
        char *p = a->acache;
        if (rec->family == AF_INET) {
            for (int i = 0; i < 4; i++) {
                if (i) *p++ = '.';
                p = he_alog_u64(p, rec->addr[i]);
            }
        } else if (rec->family != AF_INET6 ||
                   !inet_ntop(AF_INET6, rec->addr, a->acache, sizeof(a->acache))) {
            *p++ = '-';
        } else {
            p += strlen(a->acache);
        }
        a->acache_len = (size_t)(p - a->acache);
        memcpy(a->acache_key, key, sizeof(key));
    }
    return he_alog_put(o, a->acache, a->acache_len);
}

/* Bytes a target keeps as they are: printable ASCII but '"' and '\'. */
static bool he_alog_plain(unsigned char ch)
{
    return ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\';
}

/* The target as text: combined escapes like nginx (\xHH), JSON as
 * \u00HH; both quote-safe, one byte in at most six out. Runs of plain
 * bytes (all of a usual target) are copied whole. */
static char *he_alog_escape(char *o, const char *s, size_t n, bool json)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        unsigned char ch;
        while (j < n && he_alog_plain((unsigned char)s[j]))
            j++;
        o = he_alog_put(o, s + i, j - i);
        if (j == n) break;
        ch = (unsigned char)s[j];
        if (json && (ch == '"' || ch == '\\')) {
            *o++ = '\\';
            *o++ = (char)ch;
        } else {
            o = json ? he_alog_lit(o, "\\u00") : he_alog_lit(o, "\\x");
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
        i = j + 1;
    }
    return o;
}

static char *he_alog_method(char *o, uint8_t m)
{
    const char *name = llhttp_method_name((llhttp_method_t)m);
    return he_alog_str(o, name && *name ? name : "-");
}

/* The time up to the second, spelled once per second. */
static void he_alog_tcache(he_alog_t *a, time_t sec)
{
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    char *o = a->tcache;

    gmtime_r(&sec, &tm);
    if (a->format == HE_ACCESS_LOG_JSON) { /* 2025-11-30T10:14:15. */
        o = he_alog_pad(o, (unsigned)tm.tm_year + 1900, 4);
        *o++ = '-';
        o = he_alog_pad(o, (unsigned)tm.tm_mon + 1, 2);
        *o++ = '-';
        o = he_alog_pad(o, (unsigned)tm.tm_mday, 2);
        *o++ = 'T';
    } else { /* [30/Nov/2025:10:14:15 +0000] */
        *o++ = '[';
        o = he_alog_pad(o, (unsigned)tm.tm_mday, 2);
        *o++ = '/';
        o = he_alog_put(o, mon[tm.tm_mon], 3);
        *o++ = '/';
        o = he_alog_pad(o, (unsigned)tm.tm_year + 1900, 4);
        *o++ = ':';
    }
    o = he_alog_pad(o, (unsigned)tm.tm_hour, 2);
    *o++ = ':';
    o = he_alog_pad(o, (unsigned)tm.tm_min, 2);
    *o++ = ':';
    o = he_alog_pad(o, (unsigned)tm.tm_sec, 2);
    o = a->format == HE_ACCESS_LOG_JSON ? he_alog_lit(o, ".") : he_alog_lit(o, " +0000]");
    a->tcache_len = (size_t)(o - a->tcache);
    a->tcache_sec = sec;
}

static char *he_alog_combined(he_alog_t *a, const he_alog_rec_t *rec, char *o)
{
    o = he_alog_addr(a, o, rec);
    o = he_alog_lit(o, " - - ");
    o = he_alog_put(o, a->tcache, a->tcache_len);
    o = he_alog_lit(o, " \"");
    o = he_alog_method(o, rec->method);
    *o++ = ' ';
    o = he_alog_escape(o, rec->target, rec->target_len, false);
    if (rec->truncated) o = he_alog_lit(o, "...");
    o = he_alog_lit(o, " HTTP/");
    *o++ = (char)('0' + rec->http_major % 10);
    *o++ = '.';
    *o++ = (char)('0' + rec->http_minor % 10);
    o = he_alog_lit(o, "\" ");
    o = he_alog_u64(o, rec->status);
    *o++ = ' ';
    o = he_alog_u64(o, rec->body_bytes);
    /* what combined lacks, as key=value pairs (the server keeps neither
     * Referer nor User-Agent: "-") */
    o = he_alog_lit(o, " \"-\" \"-\" rt=");
    o = he_alog_secs(o, rec->duration_us);
    o = he_alog_lit(o, " ttfb=");
    o = he_alog_secs(o, rec->ttfb_us);
    o = he_alog_lit(o, " worker=");
    o = he_alog_u64(o, rec->worker);
    o = he_alog_lit(o, " cache=");
    o = he_alog_str(o, he__cache_st_name(rec->cache));
    o = he_alog_lit(o, " tls=");
    o = he_alog_str(o, he_alog_tls_name(rec->tls));
    *o++ = '\n';
    return o;
}

static char *he_alog_json(he_alog_t *a, const he_alog_rec_t *rec, uint64_t real_ns, char *o)
{
    o = he_alog_lit(o, "{\"time\":\"");
    o = he_alog_put(o, a->tcache, a->tcache_len);
    o = he_alog_pad(o, (unsigned)(real_ns / 1000000 % 1000), 3);
    o = he_alog_lit(o, "Z\",\"client\":\"");
    o = he_alog_addr(a, o, rec);
    o = he_alog_lit(o, "\",\"port\":");
    o = he_alog_u64(o, rec->port);
    o = he_alog_lit(o, ",\"method\":\"");
    o = he_alog_method(o, rec->method);
    o = he_alog_lit(o, "\",\"target\":\"");
    o = he_alog_escape(o, rec->target, rec->target_len, true);
    if (rec->truncated) o = he_alog_lit(o, "...");
    o = he_alog_lit(o, "\",\"protocol\":\"HTTP/");
    *o++ = (char)('0' + rec->http_major % 10);
    *o++ = '.';
    *o++ = (char)('0' + rec->http_minor % 10);
    o = he_alog_lit(o, "\",\"status\":");
    o = he_alog_u64(o, rec->status);
    o = he_alog_lit(o, ",\"bytes\":");
    o = he_alog_u64(o, rec->body_bytes);
    o = he_alog_lit(o, ",\"bytes_sent\":");
    o = he_alog_u64(o, rec->bytes_sent);
    o = he_alog_lit(o, ",\"duration_us\":");
    o = he_alog_u64(o, rec->duration_us);
    o = he_alog_lit(o, ",\"ttfb_us\":");
    o = he_alog_u64(o, rec->ttfb_us);
    o = he_alog_lit(o, ",\"worker\":");
    o = he_alog_u64(o, rec->worker);
    o = he_alog_lit(o, ",\"cache\":\"");
    o = he_alog_str(o, he__cache_st_name(rec->cache));
    o = he_alog_lit(o, "\",\"tls\":\"");
    o = he_alog_str(o, he_alog_tls_name(rec->tls));
    o = he_alog_lit(o, "\"}\n");
    return o;
}

size_t he_alog_format(he_alog_t *a, const he_alog_rec_t *rec, char *out, size_t cap)
{
    uint64_t real_ns = rec->end_ns + (uint64_t)a->real_minus_mono_ns;
    time_t sec = (time_t)(real_ns / 1000000000ull);
    char *end;

    if (cap < HE_ALOG_LINE_MAX) return 0; /* never, with the batch buffer */
    if (sec != a->tcache_sec) he_alog_tcache(a, sec);
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
