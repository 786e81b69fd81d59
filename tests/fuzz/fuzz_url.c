/* Fuzz target for segment/url.c. he_seg_url_normalize is checked against
 * a slow, obviously correct reference (split, decode, judge each segment)
 * and against the properties the file server relies on; he_seg_uri_resolve
 * must stay inside its buffer and report the length it wrote. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment/segment.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define CAP 8192

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool ctl(uint8_t c)
{
    return c < 0x20 || c == 0x7f;
}

/* The contract, written the slow way. Returns the length or -EINVAL. */
static int reference(const uint8_t *d, size_t n, char *out)
{
    size_t end = 1, o = 0;
    if (n == 0 || d[0] != '/') return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (ctl(d[i])) return -EINVAL;
    while (end < n && d[end] != '?' && d[end] != '#')
        end++;

    size_t i = 1;
    while (i <= end) {
        char seg[CAP];
        size_t s = 0;
        for (; i < end && d[i] != '/'; i++) {
            uint8_t c = d[i];
            if (c == '\\') return -EINVAL;
            if (c == '%') {
                /* '?' and '#' are not hex digits, so an escape never
                 * reaches past the end of the path */
                if (i + 2 >= end) return -EINVAL;
                int hi = hexval(d[i + 1]), lo = hexval(d[i + 2]);
                if (hi < 0 || lo < 0) return -EINVAL;
                c = (uint8_t)(hi * 16 + lo);
                if (c == '/' || c == '\\' || ctl(c)) return -EINVAL;
                i += 2;
            }
            seg[s++] = (char)c;
        }
        i++; /* the '/' or the end */
        if (s == 2 && seg[0] == '.' && seg[1] == '.') return -EINVAL;
        if (s == 0 || (s == 1 && seg[0] == '.')) continue;
        if (o > 0) out[o++] = '/';
        memcpy(out + o, seg, s);
        o += s;
    }
    if (end > 1 && d[end - 1] == '/' && o > 0) out[o++] = '/';
    out[o] = '\0';
    return (int)o;
}

static void check_normalize(const uint8_t *d, size_t n)
{
    static char out[CAP], ref[CAP], again[CAP + 2];
    if (n + 1 > CAP) return;
    int rc = he_seg_url_normalize((const char *)d, n, out, sizeof(out));
    int want = reference(d, n, ref);
    if (rc != want) abort();
    if (rc < 0) return;
    if (memcmp(out, ref, (size_t)rc + 1) != 0) abort();

    /* what the file server relies on, independent of the reference */
    if (out[0] == '/' || strstr(out, "//") || strchr(out, '\\')) abort();
    for (int i = 0; i < rc; i++)
        if (ctl((uint8_t)out[i])) abort();
    for (const char *p = out; *p;) {
        size_t s = strcspn(p, "/");
        if ((s == 1 && p[0] == '.') || (s == 2 && p[0] == '.' && p[1] == '.')) abort();
        p += s + (p[s] == '/');
    }

    /* the exact capacity works, one less does not */
    char *tight = malloc((size_t)rc + 1);
    if (tight == NULL) return;
    if (he_seg_url_normalize((const char *)d, n, tight, (size_t)rc + 1) != rc) abort();
    if (memcmp(tight, out, (size_t)rc + 1) != 0) abort();
    if (he_seg_url_normalize((const char *)d, n, tight, (size_t)rc) != -ENAMETOOLONG) abort();
    free(tight);

    /* idempotent where re-reading cannot change the meaning */
    if (strpbrk(out, "%?#") == NULL) {
        again[0] = '/';
        memcpy(again + 1, out, (size_t)rc);
        if (he_seg_url_normalize(again, (size_t)rc + 1, ref, sizeof(ref)) != rc) abort();
        if (memcmp(ref, out, (size_t)rc) != 0) abort();
    }
}

static void check_resolve(const uint8_t *d, size_t n)
{
    static char base[CAP], refs[CAP], out[CAP];
    const uint8_t *nl = memchr(d, '\n', n);
    size_t bn = nl ? (size_t)(nl - d) : n / 2;
    size_t rn = nl ? n - bn - 1 : n - bn;
    if (bn >= CAP || rn >= CAP) return;
    memcpy(base, d, bn);
    base[bn] = '\0';
    memcpy(refs, d + n - rn, rn);
    refs[rn] = '\0';

    int rc = he_seg_uri_resolve(base, refs, out, sizeof(out));
    if (rc >= 0 && (size_t)rc != strlen(out)) abort();
    if (rc < 0 && rc != -ENAMETOOLONG) abort();
    /* a small buffer gives the same answer or -ENAMETOOLONG, in bounds */
    char *small = malloc(16);
    if (small == NULL) return;
    int rc2 = he_seg_uri_resolve(base, refs, small, 16);
    if (rc2 >= 0 && (rc2 != rc || strcmp(small, out) != 0)) abort();
    if (rc2 < 0 && rc2 != -ENAMETOOLONG) abort();
    /* dot segments are removed after merging, so only a merge that fits
     * is sure to succeed */
    if (rc >= 0 && bn + rn + 1 < 16 && rc2 != rc) abort();
    free(small);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    check_normalize(d, n);
    check_resolve(d, n);
    return 0;
}
