/* Fuzz target for segment/playlist.c: any bytes through the parser. It
 * must return 0 with a consistent playlist, or -EINVAL with a "line N:"
 * message and nothing left allocated (LSan checks the latter). The sniffer
 * in segment/types.c runs on the same bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segment/segment.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    he_seg_playlist_t pl;
    char err[128];
    /* a private copy, so that reading one byte past n is an ASan error */
    char *buf = malloc(n ? n : 1);
    if (buf == NULL) return 0;
    memcpy(buf, d, n);

    int rc = he_seg_playlist_parse(buf, n, &pl, err, sizeof(err));
    if (rc != 0 && rc != -EINVAL && rc != -ENOMEM) abort();
    if (rc != 0) {
        if (strncmp(err, "line ", 5) != 0 || memchr(err, '\0', sizeof(err)) == NULL) abort();
        if (pl.variants || pl.segments || pl.nvariants || pl.nsegments) abort();
    } else {
        if (err[0] != '\0') abort();
        if (pl.is_master ? pl.nsegments != 0 : pl.nvariants != 0) abort();
        if (pl.type > HE_SEG_PLAYLIST_EVENT) abort();
        for (size_t i = 0; i < pl.nvariants; i++)
            if (pl.variants[i].uri == NULL || pl.variants[i].uri[0] == '\0') abort();
        for (size_t i = 0; i < pl.nsegments; i++) {
            const he_seg_media_segment_t *s = &pl.segments[i];
            if (s->uri == NULL || s->uri[0] == '\0' || s->uri[0] == '#') abort();
            if (s->sequence != pl.media_sequence + i) abort();
            if (!(s->duration >= 0)) abort();
            if (s->byterange_length < -1 || s->byterange_offset < 0) abort();
            if (s->byterange_length >= 0 && s->byterange_offset > INT64_MAX - s->byterange_length)
                abort();
        }
        if (he_seg_playlist_is_live(&pl) != (!pl.is_master && !pl.endlist)) abort();
        he_seg_playlist_free(&pl);
        if (pl.nsegments || pl.segments || pl.nvariants || pl.variants) abort();
    }

    he_seg_kind_t k = he_seg_kind_of(HE_SEG_TYPE_M3U8, buf, n);
    if (k != HE_SEG_KIND_MASTER && k != HE_SEG_KIND_MEDIA) abort();
    free(buf);
    return 0;
}
