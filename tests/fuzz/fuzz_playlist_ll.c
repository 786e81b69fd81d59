/* Fuzz target for segment/playlist_ll.c: any bytes through the LL view,
 * then every question a blocking reload asks of it and both delta modes.
 * A parse returns 0 with a consistent view or -EINVAL with a "line N:"
 * message; a delta made from a view parses again as a delta whose
 * segments continue the full playlist's numbering. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment/segment.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static void he_fuzz_delta(const char *buf, size_t n, const he_seg_ll_t *ll, he_seg_ll_skip_t mode)
{
    char *out = NULL, err[128];
    size_t out_len = 0;
    int rc = he_seg_ll_delta(buf, n, ll, mode, "a\tb", &out, &out_len);
    if (rc == 1 || rc == -EINVAL || rc == -ENOMEM) {
        if (out) abort();
        return;
    }
    if (rc != 0 || out == NULL || strlen(out) != out_len) abort();
    he_seg_ll_t dl;
    /* the delta must parse whenever it came from text without NULs or
     * stray CRs in a URI; the parser already refused those */
    if (he_seg_ll_parse(out, out_len, &dl, err, sizeof(err)) == 0) {
        if (!dl.is_delta || dl.pl.version < 9) abort();
        if (dl.has_segments && ll->has_segments && dl.last_msn != ll->last_msn) abort();
        he_seg_ll_free(&dl);
    } else if (strncmp(err, "line ", 5) != 0) {
        abort();
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    he_seg_ll_t ll;
    char err[128];
    char *buf = malloc(n ? n : 1); /* reading past n is an ASan error */
    if (buf == NULL) return 0;
    memcpy(buf, d, n);

    int rc = he_seg_ll_parse(buf, n, &ll, err, sizeof(err));
    if (rc != 0 && rc != -EINVAL && rc != -ENOMEM) abort();
    if (rc != 0) {
        if (strncmp(err, "line ", 5) != 0 || ll.parts || ll.nparts || ll.pl.segments) abort();
        free(buf);
        return 0;
    }
    for (size_t i = 0; i < ll.nparts; i++) {
        const he_seg_ll_part_t *p = &ll.parts[i];
        if (p->uri < buf || p->uri + p->uri_len > buf + n || p->uri_len == 0) abort();
        if (i && p->msn < p[-1].msn) abort();
        if (i && p->msn == p[-1].msn && p->index != p[-1].index + 1) abort();
        if (ll.has_segments && p->msn > ll.last_msn + 1) abort();
    }
    if (ll.has_hint && (ll.hint_uri < buf || ll.hint_uri + ll.hint_uri_len > buf + n)) abort();
    uint64_t last = ll.has_segments ? ll.last_msn : ll.first_msn;
    for (uint64_t m = last > 2 ? last - 2 : 0; m <= last + 3; m++)
        for (int64_t p = -1; p < 8; p++) {
            bool h = he_seg_ll_holds(&ll, m, p);
            if (h && p >= 0 && he_seg_ll_parts_ahead(&ll, m, p) != 0) abort();
            if (p < 0 && h != (ll.has_segments && m <= ll.last_msn)) abort();
        }
    if (he_seg_ll_advance_part_limit(&ll) < 3) abort();
    he_fuzz_delta(buf, n, &ll, HE_SEG_LL_SKIP_YES);
    he_fuzz_delta(buf, n, &ll, HE_SEG_LL_SKIP_V2);
    he_seg_ll_free(&ll);
    free(buf);
    return 0;
}
