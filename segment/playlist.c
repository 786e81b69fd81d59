/* The HLS playlist parser (RFC 8216): master and media playlists, VOD and
 * live. The server uses it for prefetch and live freshness, loadgen to act
 * like a player, so it is strict where a mistake would change what gets
 * fetched (numbers, URIs, ranges, keys) and lenient about what a player
 * may ignore (unknown tags, comments, blank lines, stray whitespace). */
#include "segment/segment.h"
#include "segment/playlist_syntax.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parser state. Tags that apply to the next URI line are held in the
 * pending fields until that line arrives. */
typedef struct he_seg_parser {
    he_seg_playlist_t *pl;
    char *err;
    size_t errlen;
    unsigned line;
    size_t cap_variants, cap_segments;
    bool saw_master, saw_media;

    bool inf_pending; /* EXTINF seen, URI not yet */
    unsigned inf_line;
    double inf_duration;

    bool var_pending; /* EXT-X-STREAM-INF seen, URI not yet */
    unsigned var_line;
    he_seg_variant_t var; /* var.codecs is owned here until committed */

    bool range_pending;
    unsigned range_line;
    int64_t range_len, range_off; /* range_off -1: implicit */
    bool discontinuity;

    /* Current key and map strings; *_used once a segment points at them,
     * after which the segment array owns them. */
    char *key_uri, *map_uri;
    bool key_used, map_used;
} he_seg_parser_t;

static int he_seg_fail(he_seg_parser_t *p, unsigned line, const char *fmt, ...)
{
    if (p->err && p->errlen > 0) {
        int n = snprintf(p->err, p->errlen, "line %u: ", line);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -EINVAL;
}

static char *he_seg_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d == NULL) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* Grows *arr (of elem-sized items) so that one more fits. */
static int he_seg_grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    if (ncap > SIZE_MAX / elem) return -ENOMEM;
    void *a = realloc(*arr, ncap * elem);
    if (a == NULL) return -ENOMEM;
    *arr = a;
    *cap = ncap;
    return 0;
}

/* ---------------------------------------------------------------- syntax */

/* Drops surrounding spaces, tabs and the CR of a CRLF line ending. */
void he__seg_trim(const char **s, size_t *n)
{
    while (*n > 0 && ((*s)[0] == ' ' || (*s)[0] == '\t'))
        (*s)++, (*n)--;
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r'))
        (*n)--;
}

/* decimal-integer: [0-9]+ in 0 .. 2^64-1. */
int he__seg_parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    he__seg_trim(&s, &n);
    if (n == 0) return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* decimal-floating-point: [0-9]* with at most one '.', at least one digit.
 * Written by hand because strtod needs a NUL and honours the locale's
 * decimal point. Up to 19 significant digits are kept exactly and scaled
 * once, so "9.009" is the double nearest 9.009. */
int he__seg_parse_decimal(const char *s, size_t n, double *out)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    uint64_t m = 0;
    long scale = 0;
    bool dot = false, digit = false;

    he__seg_trim(&s, &n);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.' && !dot) {
            dot = true;
            continue;
        }
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9) return -1;
        digit = true;
        if (m <= (UINT64_MAX - 9) / 10) {
            m = m * 10 + d;
            scale -= dot;
        } else if (!dot) {
            scale++; /* integer digits past the kept precision */
        }
    }
    if (!digit) return -1;

    double v = (double)m;
    for (; scale < -22; scale += 22)
        v /= 1e22;
    for (; scale > 22 && v < 1e300; scale -= 22)
        v *= 1e22;
    if (scale < 0) v /= p10[-scale];
    if (scale > 0) v *= p10[scale > 22 ? 22 : scale];
    if (!(v <= 1.7e308)) return -1; /* too large to be a duration */
    *out = v;
    return 0;
}

/* decimal-resolution: <width>x<height>. */
static int he_seg_parse_resolution(const char *s, size_t n, unsigned *w, unsigned *h)
{
    const char *x = memchr(s, 'x', n);
    uint64_t a, b;
    if (x == NULL) x = memchr(s, 'X', n);
    if (x == NULL || he__seg_parse_u64(s, (size_t)(x - s), &a) < 0 ||
        he__seg_parse_u64(x + 1, n - (size_t)(x - s) - 1, &b) < 0 || a > UINT_MAX || b > UINT_MAX)
        return -1;
    *w = (unsigned)a;
    *h = (unsigned)b;
    return 0;
}


static bool he_seg_attr_name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Reads the next attribute from *pp. Returns 1 with *a filled, 0 at the
 * end of the list, -1 on bad syntax (no name, no '=', an unterminated
 * quoted string, junk after a quoted string). Quoted values come back
 * without their quotes; commas inside them do not split the list. */
int he__seg_attr_next(const char **pp, const char *end, he__seg_attr_t *a)
{
    const char *p = *pp;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end) return 0;

    a->name = p;
    while (p < end && he_seg_attr_name_char(*p))
        p++;
    a->name_len = (size_t)(p - a->name);
    if (a->name_len == 0 || p == end || *p != '=') return -1;
    p++;

    a->quoted = p < end && *p == '"';
    if (a->quoted) {
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (q == NULL) return -1;
        a->val = p + 1;
        a->val_len = (size_t)(q - p - 1);
        p = q + 1;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p < end && *p != ',') return -1;
    } else {
        const char *q = memchr(p, ',', (size_t)(end - p));
        a->val = p;
        a->val_len = (size_t)((q ? q : end) - p);
        he__seg_trim(&a->val, &a->val_len);
        p = q ? q : end;
    }
    if (p < end) p++; /* the comma */
    *pp = p;
    return 1;
}

bool he__seg_attr_is(const he__seg_attr_t *a, const char *name)
{
    return strlen(name) == a->name_len && memcmp(a->name, name, a->name_len) == 0;
}

/* Enumerated values are unquoted; quotes some packagers add anyway were
 * already stripped by he__seg_attr_next. */
bool he__seg_val_is(const he__seg_attr_t *a, const char *val)
{
    return strlen(val) == a->val_len && memcmp(a->val, val, a->val_len) == 0;
}

/* ---------------------------------------------------------------- tags */

/* "#EXTINF:<duration>,[<title>]"; the comma is required by the RFC but
 * old encoders omit it when there is no title. */
static int he_seg_tag_extinf(he_seg_parser_t *p, const char *v, size_t n)
{
    if (p->inf_pending) return he_seg_fail(p, p->inf_line, "EXTINF without a following URI");
    const char *comma = memchr(v, ',', n);
    size_t dn = comma ? (size_t)(comma - v) : n;
    he__seg_trim(&v, &dn);
    if (he__seg_parse_decimal(v, dn, &p->inf_duration) < 0)
        return he_seg_fail(p, p->line, "bad number in EXTINF");
    p->inf_pending = true;
    p->inf_line = p->line;
    return 0;
}

static int he_seg_tag_stream_inf(he_seg_parser_t *p, const char *v, size_t n)
{
    he__seg_attr_t a;
    const char *end = v + n;
    bool have_bw = false;
    int rc;

    if (p->var_pending)
        return he_seg_fail(p, p->var_line, "EXT-X-STREAM-INF without a following URI");
    memset(&p->var, 0, sizeof(p->var));
    p->var_pending = true; /* so errors below free var.codecs */
    p->var_line = p->line;
    while ((rc = he__seg_attr_next(&v, end, &a)) > 0) {
        const char *what = NULL;
        if (he__seg_attr_is(&a, "BANDWIDTH")) {
            have_bw = true;
            if (he__seg_parse_u64(a.val, a.val_len, &p->var.bandwidth) < 0) what = "BANDWIDTH";
        } else if (he__seg_attr_is(&a, "AVERAGE-BANDWIDTH")) {
            if (he__seg_parse_u64(a.val, a.val_len, &p->var.average_bandwidth) < 0)
                what = "AVERAGE-BANDWIDTH";
        } else if (he__seg_attr_is(&a, "RESOLUTION")) {
            if (he_seg_parse_resolution(a.val, a.val_len, &p->var.width, &p->var.height) < 0)
                what = "RESOLUTION";
        } else if (he__seg_attr_is(&a, "FRAME-RATE")) {
            if (he__seg_parse_decimal(a.val, a.val_len, &p->var.frame_rate) < 0) what = "FRAME-RATE";
        } else if (he__seg_attr_is(&a, "CODECS")) {
            free(p->var.codecs);
            p->var.codecs = he_seg_strndup(a.val, a.val_len);
            if (p->var.codecs == NULL) return -ENOMEM;
        }
        if (what) return he_seg_fail(p, p->line, "bad number in %s", what);
    }
    if (rc < 0) return he_seg_fail(p, p->line, "bad attribute list");
    if (!have_bw) return he_seg_fail(p, p->line, "EXT-X-STREAM-INF without BANDWIDTH");
    return 0;
}

/* Replaces the current key or map string. One not yet used by a segment
 * is still ours to free. */
static void he_seg_set_shared(char **cur, bool *used, char *s)
{
    if (!*used) free(*cur);
    *cur = s;
    *used = false;
}

static int he_seg_tag_key(he_seg_parser_t *p, const char *v, size_t n)
{
    he__seg_attr_t a;
    const char *end = v + n, *uri = NULL;
    size_t uri_len = 0;
    bool none = false, have_method = false, identity = true;
    int rc;

    while ((rc = he__seg_attr_next(&v, end, &a)) > 0) {
        if (he__seg_attr_is(&a, "METHOD")) {
            have_method = true;
            if (he__seg_val_is(&a, "NONE"))
                none = true;
            else if (he__seg_val_is(&a, "AES-128") || he__seg_val_is(&a, "SAMPLE-AES") ||
                     he__seg_val_is(&a, "SAMPLE-AES-CTR"))
                none = false;
            else
                return he_seg_fail(p, p->line, "bad METHOD in EXT-X-KEY");
        } else if (he__seg_attr_is(&a, "URI")) {
            uri = a.val;
            uri_len = a.val_len;
        } else if (he__seg_attr_is(&a, "KEYFORMAT")) {
            identity = he__seg_val_is(&a, "identity");
        }
    }
    if (rc < 0) return he_seg_fail(p, p->line, "bad attribute list");
    if (!have_method) return he_seg_fail(p, p->line, "EXT-X-KEY without METHOD");
    if (!none && uri == NULL) return he_seg_fail(p, p->line, "EXT-X-KEY without URI");
    /* DRM systems list their own keys (skd://, data: PSSH) beside the
     * identity one; those are license-server business, not ours. */
    if (!identity) return 0;

    char *s = NULL;
    if (!none && (s = he_seg_strndup(uri, uri_len)) == NULL) return -ENOMEM;
    he_seg_set_shared(&p->key_uri, &p->key_used, s);
    return 0;
}

static int he_seg_tag_map(he_seg_parser_t *p, const char *v, size_t n)
{
    he__seg_attr_t a;
    const char *end = v + n;
    char *s = NULL;
    int rc;

    while ((rc = he__seg_attr_next(&v, end, &a)) > 0) {
        if (he__seg_attr_is(&a, "URI")) {
            free(s);
            if ((s = he_seg_strndup(a.val, a.val_len)) == NULL) return -ENOMEM;
        }
    }
    if (rc < 0 || s == NULL) {
        free(s);
        return he_seg_fail(p, p->line, rc < 0 ? "bad attribute list" : "EXT-X-MAP without URI");
    }
    he_seg_set_shared(&p->map_uri, &p->map_used, s);
    return 0;
}

/* "<length>[@<offset>]"; a missing offset is resolved when the URI is
 * known, since it continues the previous range of the same resource. */
static int he_seg_tag_byterange(he_seg_parser_t *p, const char *v, size_t n)
{
    const char *at = memchr(v, '@', n);
    uint64_t len, off = 0;
    size_t ln = at ? (size_t)(at - v) : n;
    if (he__seg_parse_u64(v, ln, &len) < 0 || len > INT64_MAX ||
        (at && (he__seg_parse_u64(at + 1, n - ln - 1, &off) < 0 || off > INT64_MAX - len)))
        return he_seg_fail(p, p->line, "bad number in EXT-X-BYTERANGE");
    p->range_pending = true;
    p->range_line = p->line;
    p->range_len = (int64_t)len;
    p->range_off = at ? (int64_t)off : -1;
    return 0;
}

static int he_seg_tag_number(he_seg_parser_t *p, const char *tag, const char *v, size_t n,
                             uint64_t *out)
{
    if (he__seg_parse_u64(v, n, out) < 0) return he_seg_fail(p, p->line, "bad number in %s", tag);
    return 0;
}

/* ---------------------------------------------------------------- lines */

enum { HE_SEG_TAG_BOTH = 0, HE_SEG_TAG_MASTER, HE_SEG_TAG_MEDIA };

typedef struct he_seg_tag {
    const char *name;
    unsigned char scope;
} he_seg_tag_t;

/* Tags whose presence makes a playlist master or media (RFC 8216 4.3.3,
 * 4.3.4 and the low-latency additions); the rest are BOTH or unknown. */
static const he_seg_tag_t he_seg_tags[] = {
    {"#EXT-X-STREAM-INF", HE_SEG_TAG_MASTER},
    {"#EXT-X-I-FRAME-STREAM-INF", HE_SEG_TAG_MASTER},
    {"#EXT-X-MEDIA", HE_SEG_TAG_MASTER},
    {"#EXT-X-SESSION-DATA", HE_SEG_TAG_MASTER},
    {"#EXT-X-SESSION-KEY", HE_SEG_TAG_MASTER},
    {"#EXT-X-CONTENT-STEERING", HE_SEG_TAG_MASTER},
    {"#EXTINF", HE_SEG_TAG_MEDIA},
    {"#EXT-X-TARGETDURATION", HE_SEG_TAG_MEDIA},
    {"#EXT-X-MEDIA-SEQUENCE", HE_SEG_TAG_MEDIA},
    {"#EXT-X-DISCONTINUITY-SEQUENCE", HE_SEG_TAG_MEDIA},
    {"#EXT-X-PLAYLIST-TYPE", HE_SEG_TAG_MEDIA},
    {"#EXT-X-ENDLIST", HE_SEG_TAG_MEDIA},
    {"#EXT-X-I-FRAMES-ONLY", HE_SEG_TAG_MEDIA},
    {"#EXT-X-BYTERANGE", HE_SEG_TAG_MEDIA},
    {"#EXT-X-DISCONTINUITY", HE_SEG_TAG_MEDIA},
    {"#EXT-X-KEY", HE_SEG_TAG_MEDIA},
    {"#EXT-X-MAP", HE_SEG_TAG_MEDIA},
    {"#EXT-X-PROGRAM-DATE-TIME", HE_SEG_TAG_MEDIA},
    {"#EXT-X-DATERANGE", HE_SEG_TAG_MEDIA},
    {"#EXT-X-GAP", HE_SEG_TAG_MEDIA},
    {"#EXT-X-BITRATE", HE_SEG_TAG_MEDIA},
    {"#EXT-X-PART", HE_SEG_TAG_MEDIA},
    {"#EXT-X-PART-INF", HE_SEG_TAG_MEDIA},
    {"#EXT-X-SERVER-CONTROL", HE_SEG_TAG_MEDIA},
    {"#EXT-X-PRELOAD-HINT", HE_SEG_TAG_MEDIA},
    {"#EXT-X-RENDITION-REPORT", HE_SEG_TAG_MEDIA},
    {"#EXT-X-SKIP", HE_SEG_TAG_MEDIA},
};

static bool he_seg_name_is(const char *name, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(name, lit, n) == 0;
}

static int he_seg_tag_line(he_seg_parser_t *p, const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t name_len = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vn = colon ? n - name_len - 1 : 0;
    he_seg_playlist_t *pl = p->pl;
    uint64_t u;
    int rc;

    for (size_t i = 0; i < sizeof(he_seg_tags) / sizeof(he_seg_tags[0]); i++) {
        if (!he_seg_name_is(s, name_len, he_seg_tags[i].name)) continue;
        bool master = he_seg_tags[i].scope == HE_SEG_TAG_MASTER;
        if (master ? p->saw_media : p->saw_master)
            return he_seg_fail(p, p->line, "%.*s mixes master and media tags", (int)name_len, s);
        *(master ? &p->saw_master : &p->saw_media) = true;
        break;
    }

    if (he_seg_name_is(s, name_len, "#EXTINF")) return he_seg_tag_extinf(p, v, vn);
    if (he_seg_name_is(s, name_len, "#EXT-X-STREAM-INF")) return he_seg_tag_stream_inf(p, v, vn);
    if (he_seg_name_is(s, name_len, "#EXT-X-BYTERANGE")) return he_seg_tag_byterange(p, v, vn);
    if (he_seg_name_is(s, name_len, "#EXT-X-KEY")) return he_seg_tag_key(p, v, vn);
    if (he_seg_name_is(s, name_len, "#EXT-X-MAP")) return he_seg_tag_map(p, v, vn);
    if (he_seg_name_is(s, name_len, "#EXT-X-DISCONTINUITY")) {
        p->discontinuity = true;
    } else if (he_seg_name_is(s, name_len, "#EXT-X-ENDLIST")) {
        pl->endlist = true;
    } else if (he_seg_name_is(s, name_len, "#EXT-X-TARGETDURATION")) {
        if (he__seg_parse_decimal(v, vn, &pl->target_duration) < 0)
            return he_seg_fail(p, p->line, "bad number in EXT-X-TARGETDURATION");
    } else if (he_seg_name_is(s, name_len, "#EXT-X-MEDIA-SEQUENCE")) {
        return he_seg_tag_number(p, "EXT-X-MEDIA-SEQUENCE", v, vn, &pl->media_sequence);
    } else if (he_seg_name_is(s, name_len, "#EXT-X-VERSION")) {
        if ((rc = he_seg_tag_number(p, "EXT-X-VERSION", v, vn, &u)) < 0) return rc;
        if (u > UINT_MAX) return he_seg_fail(p, p->line, "bad number in EXT-X-VERSION");
        pl->version = (unsigned)u;
    } else if (he_seg_name_is(s, name_len, "#EXT-X-PLAYLIST-TYPE")) {
        if (he_seg_name_is(v, vn, "VOD"))
            pl->type = HE_SEG_PLAYLIST_VOD;
        else if (he_seg_name_is(v, vn, "EVENT"))
            pl->type = HE_SEG_PLAYLIST_EVENT;
        else
            return he_seg_fail(p, p->line, "bad EXT-X-PLAYLIST-TYPE");
    }
    return 0; /* unknown tags are ignored, as RFC 8216 6.3.1 requires */
}

static int he_seg_add_variant(he_seg_parser_t *p, const char *uri, size_t n)
{
    he_seg_playlist_t *pl = p->pl;
    if (he_seg_grow((void **)&pl->variants, &p->cap_variants, pl->nvariants,
                    sizeof(*pl->variants)) < 0)
        return -ENOMEM;
    if ((p->var.uri = he_seg_strndup(uri, n)) == NULL) return -ENOMEM;
    pl->variants[pl->nvariants++] = p->var;
    memset(&p->var, 0, sizeof(p->var));
    p->var_pending = false;
    return 0;
}

static int he_seg_add_segment(he_seg_parser_t *p, const char *uri, size_t n)
{
    he_seg_playlist_t *pl = p->pl;
    he_seg_media_segment_t seg = {.duration = p->inf_duration,
                                  .byterange_length = -1,
                                  .discontinuity = p->discontinuity,
                                  .key_uri = p->key_uri,
                                  .map_uri = p->map_uri};

    if (p->range_pending) {
        int64_t off = p->range_off;
        if (off < 0) {
            /* RFC 8216 4.3.2.2: continue the previous segment's range if
             * it is of the same resource; otherwise start at 0. */
            const he_seg_media_segment_t *prev =
                pl->nsegments ? &pl->segments[pl->nsegments - 1] : NULL;
            off = 0;
            if (prev && prev->byterange_length >= 0 && strlen(prev->uri) == n &&
                memcmp(prev->uri, uri, n) == 0) {
                if (prev->byterange_offset > INT64_MAX - prev->byterange_length - p->range_len)
                    return he_seg_fail(p, p->range_line, "bad number in EXT-X-BYTERANGE");
                off = prev->byterange_offset + prev->byterange_length;
            }
        }
        seg.byterange_length = p->range_len;
        seg.byterange_offset = off;
    }
    if (he_seg_grow((void **)&pl->segments, &p->cap_segments, pl->nsegments,
                    sizeof(*pl->segments)) < 0)
        return -ENOMEM;
    if ((seg.uri = he_seg_strndup(uri, n)) == NULL) return -ENOMEM;
    pl->segments[pl->nsegments++] = seg;
    p->key_used = p->key_uri != NULL;
    p->map_used = p->map_uri != NULL;
    p->inf_pending = p->range_pending = p->discontinuity = false;
    return 0;
}

static int he_seg_uri_line(he_seg_parser_t *p, const char *s, size_t n)
{
    if (p->var_pending) return he_seg_add_variant(p, s, n);
    if (p->inf_pending) return he_seg_add_segment(p, s, n);
    return he_seg_fail(p, p->line, "media segment without EXTINF");
}

static int he_seg_parse_lines(he_seg_parser_t *p, const char *buf, size_t len)
{
    const char *s = buf, *end = buf + len;
    int rc;

    if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* UTF-8 BOM */
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *line = s;
        size_t n = (size_t)((nl ? nl : end) - s);
        s = nl ? nl + 1 : end;
        p->line++;

        he__seg_trim(&line, &n); /* also drops the CR of CRLF */
        if (p->line == 1) {
            if (!he_seg_name_is(line, n, "#EXTM3U")) return he_seg_fail(p, 1, "missing #EXTM3U");
            continue;
        }
        /* A NUL or stray CR would silently cut a URI short later. */
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
                return he_seg_fail(p, p->line, "control character");
        if (n == 0) continue;
        if (line[0] != '#')
            rc = he_seg_uri_line(p, line, n);
        else if (n >= 4 && memcmp(line, "#EXT", 4) == 0)
            rc = he_seg_tag_line(p, line, n);
        else
            rc = 0; /* comment */
        if (rc < 0) return rc;
    }
    if (p->line == 0) return he_seg_fail(p, 1, "missing #EXTM3U");
    if (p->inf_pending) return he_seg_fail(p, p->inf_line, "EXTINF without a following URI");
    if (p->var_pending)
        return he_seg_fail(p, p->var_line, "EXT-X-STREAM-INF without a following URI");
    return 0;
}

int he_seg_playlist_parse(const char *buf, size_t len, he_seg_playlist_t *pl, char *err,
                          size_t errlen)
{
    he_seg_parser_t p = {.pl = pl, .err = err, .errlen = errlen};
    int rc;

    memset(pl, 0, sizeof(*pl));
    pl->version = 1;
    if (err && errlen) err[0] = '\0';
    rc = buf ? he_seg_parse_lines(&p, buf, len) : he_seg_fail(&p, 1, "missing #EXTM3U");

    if (!p.key_used) free(p.key_uri);
    if (!p.map_used) free(p.map_uri);
    free(p.var.codecs);
    if (rc < 0) {
        if (rc == -ENOMEM && err && errlen) snprintf(err, errlen, "line %u: out of memory", p.line);
        he_seg_playlist_free(pl);
        return rc;
    }
    pl->is_master = p.saw_master;
    for (size_t i = 0; i < pl->nsegments; i++)
        pl->segments[i].sequence = pl->media_sequence + i;
    return 0;
}

void he_seg_playlist_free(he_seg_playlist_t *pl)
{
    if (pl == NULL) return;
    for (size_t i = 0; i < pl->nvariants; i++) {
        free(pl->variants[i].uri);
        free(pl->variants[i].codecs);
    }
    /* Shared key and map strings appear in runs of consecutive segments
     * (each tag allocates afresh), so free each at the start of its run. */
    for (size_t i = 0; i < pl->nsegments; i++) {
        he_seg_media_segment_t *s = &pl->segments[i], *prev = i ? s - 1 : NULL;
        free(s->uri);
        if (!prev || prev->key_uri != s->key_uri) free(s->key_uri);
        if (!prev || prev->map_uri != s->map_uri) free(s->map_uri);
    }
    free(pl->variants);
    free(pl->segments);
    memset(pl, 0, sizeof(*pl));
    pl->version = 1;
}

bool he_seg_playlist_is_live(const he_seg_playlist_t *pl)
{
    return pl != NULL && !pl->is_master && !pl->endlist;
}

/* ---------------------------------------------------------------- URIs */

/* Tags whose URI attribute names a resource a player fetches, without
 * their "#EXT-X-" (every one has it), with their lengths: a long media
 * playlist's #EXTINF lines are turned away by one byte compare. */
#define HE_SEG_URI_TAG(s) {s, sizeof(s) - 1}
static const struct {
    const char *name;
    size_t len;
} he_seg_uri_tags[] = {
    HE_SEG_URI_TAG("MEDIA"),        HE_SEG_URI_TAG("I-FRAME-STREAM-INF"),
    HE_SEG_URI_TAG("MAP"),          HE_SEG_URI_TAG("KEY"),
    HE_SEG_URI_TAG("SESSION-KEY"),  HE_SEG_URI_TAG("PART"),
    HE_SEG_URI_TAG("PRELOAD-HINT"), HE_SEG_URI_TAG("RENDITION-REPORT"),
    HE_SEG_URI_TAG("SESSION-DATA"),
};

int he_seg_playlist_uris(const char *buf, size_t len, he_seg_uri_fn fn, void *ctx)
{
    const char *s = buf, *end = buf + len;
    unsigned line = 0;
    int n = 0;

    if (!buf) return -EINVAL;
    if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* UTF-8 BOM */
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *l = s;
        size_t ln = (size_t)((nl ? nl : end) - s);
        s = nl ? nl + 1 : end;
        he__seg_trim(&l, &ln);
        if (line++ == 0) {
            if (!he_seg_name_is(l, ln, "#EXTM3U")) return -EINVAL;
            continue;
        }
        if (ln == 0) continue;
        if (l[0] != '#') { /* a URI line: a variant stream or a segment */
            fn(ctx, (size_t)(l - buf), ln);
            n++;
            continue;
        }
        if (ln < 8 || memcmp(l, "#EXT-X-", 7) != 0) continue; /* #EXTINF, comments */
        const char *colon = memchr(l + 7, ':', ln - 7);
        if (!colon) continue;
        size_t name_len = (size_t)(colon - l - 7);
        bool wanted = false;
        for (size_t i = 0; !wanted && i < sizeof(he_seg_uri_tags) / sizeof(he_seg_uri_tags[0]); i++)
            wanted = he_seg_uri_tags[i].len == name_len &&
                     memcmp(l + 7, he_seg_uri_tags[i].name, name_len) == 0;
        if (!wanted) continue;
        const char *v = colon + 1, *vend = l + ln;
        he__seg_attr_t a;
        while (he__seg_attr_next(&v, vend, &a) > 0) {
            if (!he__seg_attr_is(&a, "URI") || a.val_len == 0) continue;
            fn(ctx, (size_t)(a.val - buf), a.val_len);
            n++;
        }
    }
    return line ? n : -EINVAL;
}
