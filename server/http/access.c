/* The access-log record of one response: what the worker has at hand,
 * stored into its own ring (base/); the control thread formats it. */
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "server/base/alog_ring.h"
#include "server/http/http.h"
#include "server/net/tls.h"

/* A short copy without memcpy: GCC inlines a variable-length copy to an
 * aligned destination as rep movsq, whose start-up alone cost more than
 * the rest of the push (measured: 40 -> 12 ns per record). Eight bytes at
 * a time, the last eight overlapping, so a usual target is two or three
 * moves. */
static void he_alog_copy(char *dst, const char *src, size_t n)
{
    uint64_t v;
    size_t i = 0;
    if (n < 8) {
        for (; i < n; i++)
            dst[i] = src[i];
        return;
    }
    for (; i + 8 < n; i += 8) {
        __builtin_memcpy(&v, src + i, 8);
        __builtin_memcpy(dst + i, &v, 8);
    }
    __builtin_memcpy(&v, src + n - 8, 8);
    __builtin_memcpy(dst + n - 8, &v, 8);
}

/* The target with the signed-URL parameters handler/auth.c took out of it
 * put back with "-" for each value: the log shows that a token came and
 * under which name, never the token. Its length (at most cap). */
static size_t he_alog_masked(const he_req_t *r, char *out, size_t cap)
{
    size_t o = r->url_len < cap ? r->url_len : cap;
    const char *s = r->auth_text, *end = r->auth_text + r->auth_text_len;
    char sep = memchr(r->url, '?', r->url_len) ? '&' : '?';
    memcpy(out, r->url, o);
    while (s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s)), *pe = amp ? amp : end;
        const char *eq = memchr(s, '=', (size_t)(pe - s));
        size_t nn = (size_t)((eq ? eq : pe) - s);
        if (o + nn + 3 > cap) break;
        out[o++] = sep;
        memcpy(out + o, s, nn);
        o += nn;
        out[o++] = '=';
        out[o++] = '-';
        sep = '&';
        s = amp ? amp + 1 : end;
    }
    return o;
}

void he__http_alog_push(he_worker_t *w, const he_conn_t *c, const he_req_t *r, uint64_t end_ns,
                        uint64_t ttfb_us, uint64_t total_us)
{
    char masked[HE_ALOG_TARGET_MAX];
    const char *target = r->url;
    size_t full = r->url_len;
    if (r->auth_text_len && r->auth_text != r->cookie) { /* a cookie's token was never in it */
        full = he_alog_masked(r, masked, sizeof(masked));
        target = masked;
        if (full == sizeof(masked)) full++; /* cut: marked truncated */
    }
    size_t n = full > HE_ALOG_TARGET_MAX ? HE_ALOG_TARGET_MAX : full;
    he_alog_rec_t *rec = he_alog_reserve_in(w->alog, n);
    uint64_t a0 = 0, a1 = 0;

    if (!rec) {
        w->stats.log_dropped++;
        return;
    }
    rec->target_len = (uint16_t)n;
    rec->status = (uint16_t)r->status;
    rec->end_ns = end_ns;
    rec->bytes_sent = c->bytes_sent;
    rec->duration_us = total_us > UINT32_MAX ? UINT32_MAX : (uint32_t)total_us;
    rec->ttfb_us = ttfb_us > UINT32_MAX ? UINT32_MAX : (uint32_t)ttfb_us;
    rec->head_len = r->head_len;
    rec->worker = (uint16_t)w->id;
    rec->method = r->method;
    rec->http_major = r->http_major;
    rec->http_minor = r->http_minor;
    rec->tls = !c->tls           ? HE_ALOG_TLS_NONE
               : c->tls->ktls_tx ? HE_ALOG_TLS_KTLS
                                 : HE_ALOG_TLS_USERSPACE;
    rec->cache = r->cache_st; /* a number here; the control thread names it */
    rec->truncated = full > HE_ALOG_TARGET_MAX;
    rec->family = (uint8_t)c->peer.ss_family;
    if (c->peer.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&c->peer;
        uint32_t v4;
        __builtin_memcpy(&v4, &a->sin_addr, 4);
        a0 = v4;
    } else if (c->peer.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&c->peer;
        __builtin_memcpy(&a0, &a->sin6_addr, 8);
        __builtin_memcpy(&a1, (const char *)&a->sin6_addr + 8, 8);
    } else {
        rec->family = 0;
    }
    /* all 16 bytes, zeros after an IPv4 address: the formatter's address
     * cache compares them as two words */
    __builtin_memcpy(rec->addr, &a0, 8);
    __builtin_memcpy(rec->addr + 8, &a1, 8);
    he_alog_copy(rec->target, target, n);
    he_alog_commit_in(w->alog, rec);
}
