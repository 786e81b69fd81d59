/* Fuzz target for server/http_util.c: Range, dates, ETags and the
 * conditional headers. The input is lines: size, Range, If-Modified-Since,
 * If-None-Match, If-Match, If-Unmodified-Since, If-Range, mtime; missing
 * lines are absent headers. The .c is included so the target does not
 * depend on the rest of he_server. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/http_util.c"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

enum { F_SIZE, F_RANGE, F_IMS, F_INM, F_IM, F_IUS, F_IF_RANGE, F_MTIME, F_COUNT };

static uint64_t number(const char *s, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (uint64_t)(s[i] & 15); /* wraps; any value will do */
    return v;
}

static void check_range(const char *v, size_t n, uint64_t size)
{
    uint64_t first = 1, last = 1;
    he_http_range_result_t r = he_http_range_parse(v, n, size, &first, &last);
    if (r == HE_HTTP_RANGE_OK) {
        if (first > last || last >= size) abort();
    } else if (r == HE_HTTP_RANGE_NONE || r == HE_HTTP_RANGE_UNSATISFIABLE) {
        if (first != 0 || last != 0) abort();
    } else {
        abort();
    }
}

static void check_date(const char *v, size_t n)
{
    time_t t;
    char buf[30];
    if (he_http_date_parse(v, n, &t) != 0) return;
    if (t < HE_HTTP_TIME_MIN || t > HE_HTTP_TIME_MAX + 1) abort(); /* +1: leap second */
    if (t > HE_HTTP_TIME_MAX) return;
    if (he_http_date_format(t, buf) != HE_HTTP_DATE_LEN || buf[29] != '\0') abort();
    time_t back;
    if (he_http_date_parse(buf, 29, &back) != 0 || back != t) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    /* each field in its own allocation, so overreads are caught */
    char *f[F_COUNT] = {0};
    size_t len[F_COUNT] = {0};
    const char *p = (const char *)d, *end = p + n;
    for (int i = 0; i < F_COUNT && p <= end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        len[i] = (size_t)((nl ? nl : end) - p);
        f[i] = malloc(len[i] ? len[i] : 1);
        if (f[i] == NULL) goto out;
        memcpy(f[i], p, len[i]);
        if (nl == NULL) break;
        p = nl + 1;
    }

    uint64_t size = f[F_SIZE] ? number(f[F_SIZE], len[F_SIZE]) : 0;
    time_t mtime = f[F_MTIME] ? (time_t)number(f[F_MTIME], len[F_MTIME]) : 0;

    if (f[F_RANGE]) {
        check_range(f[F_RANGE], len[F_RANGE], size);
        check_range(f[F_RANGE], len[F_RANGE], 0);
        check_range(f[F_RANGE], len[F_RANGE], 1);
        check_range(f[F_RANGE], len[F_RANGE], UINT64_MAX);
    }
    for (int i = F_IMS; i <= F_IF_RANGE; i++)
        if (f[i]) check_date(f[i], len[i]);

    char etag[HE_HTTP_ETAG_MAX];
    size_t elen = he_http_etag(etag, sizeof(etag), mtime, size);
    if (elen >= sizeof(etag) || elen != strlen(etag)) abort();

    he_http_cond_t c = {f[F_INM], len[F_INM], f[F_IMS], len[F_IMS],
                        f[F_IM],  len[F_IM],  f[F_IUS], len[F_IUS]};
    he_http_cond_result_t r = he_http_cond_eval(&c, etag, elen, mtime);
    if (r > HE_HTTP_COND_PRECONDITION_FAILED) abort();
    (void)he_http_if_range_ok(f[F_IF_RANGE], len[F_IF_RANGE], etag, elen, mtime);

    /* our own validators always hold */
    he_http_cond_t self = {etag, elen, NULL, 0, etag, elen, NULL, 0};
    if (he_http_cond_eval(&self, etag, elen, mtime) != HE_HTTP_COND_NOT_MODIFIED) abort();
    if (!he_http_if_range_ok(etag, elen, etag, elen, mtime)) abort();

out:
    for (int i = 0; i < F_COUNT; i++)
        free(f[i]);
    return 0;
}
