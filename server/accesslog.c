/* Access log: per-worker record rings (producer side runs on workers) and
 * the writer the control thread drives. See accesslog.h. */
#include "server/accesslog.h"

#include <arpa/inet.h>
#include <ctype.h>
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
#define HE_ALOG_LINE_MAX 4096 /* more than a record's longest line, escapes included */

/* ---------------------------------------------------------------- ring */

he_alog_ring_t *he_alog_ring_new(unsigned records)
{
    size_t size = sizeof(he_alog_ring_t) + (size_t)records * sizeof(he_alog_rec_t);
    he_alog_ring_t *r;

    if (records == 0 || (records & (records - 1))) return NULL;
    /* mmap: the records cost no memory until a log is on and they are
     * written. */
    r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return NULL;
    r->mask = records - 1;
    return r;
}

void he_alog_ring_free(he_alog_ring_t *r)
{
    if (r) munmap(r, sizeof(he_alog_ring_t) + (size_t)(r->mask + 1) * sizeof(he_alog_rec_t));
}

void he_alog_ring_set_notify(he_alog_ring_t *r, void *uv_async)
{
    r->notify = uv_async;
}

he_alog_rec_t *he_alog_reserve(he_alog_ring_t *r)
{
    unsigned head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (head - r->tail_seen > r->mask) {
        /* Looks full: look at the consumer's line only now, so a ring with
         * room costs the producer no shared cache-line read. */
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head - r->tail_seen > r->mask) return NULL;
    }
    return &r->recs[head & r->mask];
}

void he_alog_commit(he_alog_ring_t *r)
{
    unsigned head = atomic_load_explicit(&r->head, memory_order_relaxed) + 1;
    atomic_store_explicit(&r->head, head, memory_order_release);
    if ((head & (HE_ALOG_NOTIFY_EVERY - 1)) == 0 && r->notify) uv_async_send(r->notify);
}

void he_alog_push(struct he_worker *w, const struct he_conn *c, uint64_t end_ns, uint64_t ttfb_us,
                  uint64_t total_us)
{
    he_alog_rec_t *rec = he_alog_reserve(w->alog);
    size_t n;

    if (!rec) {
        w->stats.log_dropped++;
        return;
    }
    rec->end_ns = end_ns;
    rec->bytes_sent = c->bytes_sent;
    /* Small bodies are appended to the header buffer and sent with it, so
     * the header's length is where its blank line ends. */
    {
        const char *end = memmem(c->hdr, c->hdr_len, "\r\n\r\n", 4);
        uint64_t hlen = end ? (uint64_t)(end - c->hdr) + 4 : c->hdr_len;
        rec->body_bytes = c->bytes_sent > hlen ? c->bytes_sent - hlen : 0;
    }
    rec->duration_us = total_us > UINT32_MAX ? UINT32_MAX : (uint32_t)total_us;
    rec->ttfb_us = ttfb_us > UINT32_MAX ? UINT32_MAX : (uint32_t)ttfb_us;
    rec->status = (uint16_t)c->status;
    rec->worker = (uint16_t)w->id;
    rec->method = c->req.method;
    rec->http_major = c->req.http_major;
    rec->http_minor = c->req.http_minor;
    rec->tls = !c->tls           ? HE_ALOG_TLS_NONE
               : c->tls->ktls_tx ? HE_ALOG_TLS_KTLS
                                 : HE_ALOG_TLS_USERSPACE;
    snprintf(rec->cache, sizeof(rec->cache), "%s", he__cache_st_name(c->cache_st));
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
    }
    n = c->req.url_len;
    rec->truncated = n > HE_ALOG_TARGET_MAX;
    if (n > HE_ALOG_TARGET_MAX) n = HE_ALOG_TARGET_MAX;
    memcpy(rec->target, c->url, n);
    rec->target_len = (uint16_t)n;
    he_alog_commit(w->alog);
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

static const char *he_alog_method(uint8_t m)
{
    const char *name = llhttp_method_name((llhttp_method_t)m);
    return name && *name ? name : "-";
}

static const char *he_alog_tls_name(uint8_t t)
{
    return t == HE_ALOG_TLS_KTLS ? "ktls" : t == HE_ALOG_TLS_USERSPACE ? "tls" : "-";
}

static size_t he_alog_addr(const he_alog_rec_t *rec, char *out, size_t cap)
{
    if (rec->family == AF_INET || rec->family == AF_INET6) {
        if (inet_ntop(rec->family, rec->addr, out, (socklen_t)cap)) return strlen(out);
    }
    snprintf(out, cap, "-");
    return 1;
}

/* The target as text: combined escapes like nginx (\xHH), JSON as
 * \u00HH; both quote-safe, one byte in at most six out. */
static size_t he_alog_escape(const char *s, size_t n, bool json, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') {
            out[o++] = (char)ch;
        } else if (json && (ch == '"' || ch == '\\')) {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (json) {
            memcpy(out + o, "\\u00", 4);
            out[o + 4] = hex[ch >> 4];
            out[o + 5] = hex[ch & 15];
            o += 6;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    return o;
}

size_t he_alog_format(he_alog_t *a, const he_alog_rec_t *rec, char *out, size_t cap)
{
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    char addr[INET6_ADDRSTRLEN + 1], target[HE_ALOG_TARGET_MAX * 6 + 4], cache[16];
    uint64_t real_ns = rec->end_ns + (uint64_t)a->real_minus_mono_ns;
    time_t sec = (time_t)(real_ns / 1000000000ull);
    struct tm tm;
    size_t tlen;
    int n;

    he_alog_addr(rec, addr, sizeof(addr));
    tlen = he_alog_escape(rec->target, rec->target_len, a->format == HE_ACCESS_LOG_JSON, target);
    if (rec->truncated) {
        memcpy(target + tlen, "...", 3);
        tlen += 3;
    }
    target[tlen] = 0;
    /* The cache status is a word like HIT or MISS; anything else is shown
     * as '_' so the line stays parseable. */
    {
        size_t cl = strnlen(rec->cache, sizeof(rec->cache));
        for (size_t i = 0; i < cl; i++) {
            char ch = rec->cache[i];
            cache[i] = isalnum((unsigned char)ch) || ch == '-' ? ch : '_';
        }
        cache[cl] = 0;
        if (cl == 0) memcpy(cache, "-", 2);
    }

    if (a->format == HE_ACCESS_LOG_JSON) {
        gmtime_r(&sec, &tm);
        n = snprintf(out, cap,
                     "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03uZ\",\"client\":\"%s\","
                     "\"port\":%u,\"method\":\"%s\",\"target\":\"%s\",\"protocol\":\"HTTP/%u.%u\","
                     "\"status\":%u,\"bytes\":%llu,\"bytes_sent\":%llu,\"duration_us\":%u,"
                     "\"ttfb_us\":%u,\"worker\":%u,\"cache\":\"%s\",\"tls\":\"%s\"}\n",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (unsigned)(real_ns / 1000000 % 1000), addr, rec->port,
                     he_alog_method(rec->method), target, rec->http_major, rec->http_minor,
                     rec->status, (unsigned long long)rec->body_bytes,
                     (unsigned long long)rec->bytes_sent, rec->duration_us, rec->ttfb_us,
                     rec->worker, cache, he_alog_tls_name(rec->tls));
    } else {
        if (sec != a->tcache_sec) {
            gmtime_r(&sec, &tm);
            snprintf(a->tcache, sizeof(a->tcache), "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday,
                     mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
            a->tcache_sec = sec;
        }
        /* combined, then what it lacks as key=value pairs (the server
         * keeps neither Referer nor User-Agent: "-") */
        n = snprintf(out, cap,
                     "%s - - [%s] \"%s %s HTTP/%u.%u\" %u %llu \"-\" \"-\" rt=%u.%06u "
                     "ttfb=%u.%06u worker=%u cache=%s tls=%s\n",
                     addr, a->tcache, he_alog_method(rec->method), target, rec->http_major,
                     rec->http_minor, rec->status, (unsigned long long)rec->body_bytes,
                     rec->duration_us / 1000000, rec->duration_us % 1000000, rec->ttfb_us / 1000000,
                     rec->ttfb_us % 1000000, rec->worker, cache, he_alog_tls_name(rec->tls));
    }
    if (n < 0) return 0;
    if ((size_t)n >= cap) { /* cannot happen with HE_ALOG_LINE_MAX; keep the line whole */
        out[cap - 2] = '\n';
        return cap - 1;
    }
    return (size_t)n;
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

size_t he_alog_drain(he_alog_t *a, he_alog_ring_t *r)
{
    unsigned tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    unsigned head = atomic_load_explicit(&r->head, memory_order_acquire);
    size_t count = head - tail;

    if (count == 0) return 0;
    if (a->fd < 0 || !a->buf) { /* the log was turned off: discard */
        atomic_store_explicit(&r->tail, head, memory_order_release);
        return count;
    }
    he_alog_clock(a);
    for (; tail != head; tail++) {
        if (a->cap - a->len < HE_ALOG_LINE_MAX) {
            /* Free the slots already formatted before the write. */
            atomic_store_explicit(&r->tail, tail, memory_order_release);
            he_alog_flush(a);
        }
        a->len += he_alog_format(a, &r->recs[tail & r->mask], a->buf + a->len, a->cap - a->len);
    }
    atomic_store_explicit(&r->tail, tail, memory_order_release);
    a->written += count;
    return count;
}

#define HE_ALOG_MERGE_MAX 64

size_t he_alog_drain_many(he_alog_t *a, he_alog_ring_t *const *rings, unsigned n)
{
    unsigned tail[HE_ALOG_MERGE_MAX], head[HE_ALOG_MERGE_MAX];
    size_t count = 0;

    if (n > HE_ALOG_MERGE_MAX || a->fd < 0 || !a->buf) {
        /* many workers: ring by ring (each in order) */
        for (unsigned i = 0; i < n; i++)
            count += he_alog_drain(a, rings[i]);
        return count;
    }
    for (unsigned i = 0; i < n; i++) {
        tail[i] = atomic_load_explicit(&rings[i]->tail, memory_order_relaxed);
        head[i] = atomic_load_explicit(&rings[i]->head, memory_order_acquire);
        count += head[i] - tail[i];
    }
    if (count == 0) return 0;
    he_alog_clock(a);
    for (;;) {
        const he_alog_rec_t *best = NULL;
        unsigned bi = 0;
        for (unsigned i = 0; i < n; i++) {
            const he_alog_rec_t *r;
            if (tail[i] == head[i]) continue;
            r = &rings[i]->recs[tail[i] & rings[i]->mask];
            if (!best || r->end_ns < best->end_ns) best = r, bi = i;
        }
        if (!best) break;
        if (a->cap - a->len < HE_ALOG_LINE_MAX) {
            for (unsigned i = 0; i < n; i++)
                atomic_store_explicit(&rings[i]->tail, tail[i], memory_order_release);
            he_alog_flush(a);
        }
        a->len += he_alog_format(a, best, a->buf + a->len, a->cap - a->len);
        tail[bi]++;
    }
    for (unsigned i = 0; i < n; i++)
        atomic_store_explicit(&rings[i]->tail, tail[i], memory_order_release);
    a->written += count;
    return count;
}
