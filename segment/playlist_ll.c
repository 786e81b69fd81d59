/* The low-latency view of a media playlist (draft-pantos-hls-rfc8216bis):
 * the one parser (playlist.c) reads segments, target duration, media
 * sequence and ENDLIST; this file adds the LL tags on the same grammar,
 * answers "does this copy hold segment M part N" for blocking reloads
 * (6.2.5.2) and makes delta updates (4.4.5.2, 6.2.5.1) from a full copy. */
#include "segment/segment.h"
#include "segment/playlist_syntax.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct he_seg_ll_scan {
    he_seg_ll_t *ll;
    char *err;
    size_t errlen;
    unsigned line;
    size_t cap_parts;
    uint64_t nuris;    /* complete segments so far */
    unsigned cur_part; /* parts of the segment in progress */
} he_seg_ll_scan_t;

static int he_seg_ll_fail(he_seg_ll_scan_t *s, const char *fmt, ...)
{
    if (s->err && s->errlen > 0) {
        int n = snprintf(s->err, s->errlen, "line %u: ", s->line);
        if (n >= 0 && (size_t)n < s->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -EINVAL;
}

static bool he_seg_ll_tag_is(const char *l, size_t n, const char *tag, const char **v, size_t *vn)
{
    size_t tn = strlen(tag);
    if (n < tn || memcmp(l, tag, tn) != 0) return false;
    if (n == tn) {
        *v = l + n;
        *vn = 0;
        return true;
    }
    if (l[tn] != ':') return false;
    *v = l + tn + 1;
    *vn = n - tn - 1;
    return true;
}

static bool he_seg_ll_yes(const he__seg_attr_t *a)
{
    return he__seg_val_is(a, "YES");
}

static int he_seg_ll_decimal(he_seg_ll_scan_t *s, const he__seg_attr_t *a, double *out)
{
    if (he__seg_parse_decimal(a->val, a->val_len, out) < 0)
        return he_seg_ll_fail(s, "bad number in %.*s", (int)a->name_len, a->name);
    return 0;
}

static int he_seg_ll_int(he_seg_ll_scan_t *s, const he__seg_attr_t *a, int64_t *out)
{
    uint64_t u;
    if (he__seg_parse_u64(a->val, a->val_len, &u) < 0 || u > INT64_MAX)
        return he_seg_ll_fail(s, "bad number in %.*s", (int)a->name_len, a->name);
    *out = (int64_t)u;
    return 0;
}

static int he_seg_ll_server_control(he_seg_ll_scan_t *s, const char *v, size_t n)
{
    he_seg_ll_t *ll = s->ll;
    he__seg_attr_t a;
    const char *end = v + n;
    int rc;
    while ((rc = he__seg_attr_next(&v, end, &a)) > 0) {
        int e = 0;
        if (he__seg_attr_is(&a, "CAN-BLOCK-RELOAD"))
            ll->can_block_reload = he_seg_ll_yes(&a);
        else if (he__seg_attr_is(&a, "CAN-SKIP-DATERANGES"))
            ll->can_skip_dateranges = he_seg_ll_yes(&a);
        else if (he__seg_attr_is(&a, "CAN-SKIP-UNTIL"))
            e = he_seg_ll_decimal(s, &a, &ll->can_skip_until);
        else if (he__seg_attr_is(&a, "PART-HOLD-BACK"))
            e = he_seg_ll_decimal(s, &a, &ll->part_hold_back);
        else if (he__seg_attr_is(&a, "HOLD-BACK"))
            e = he_seg_ll_decimal(s, &a, &ll->hold_back);
        if (e < 0) return e;
    }
    return rc < 0 ? he_seg_ll_fail(s, "bad attribute list") : 0;
}

static int he_seg_ll_part_inf(he_seg_ll_scan_t *s, const char *v, size_t n)
{
    he__seg_attr_t a;
    const char *end = v + n;
    int rc;
    while ((rc = he__seg_attr_next(&v, end, &a)) > 0)
        if (he__seg_attr_is(&a, "PART-TARGET") && he_seg_ll_decimal(s, &a, &s->ll->part_target) < 0)
            return -EINVAL;
    return rc < 0 ? he_seg_ll_fail(s, "bad attribute list") : 0;
}

/* "<length>[@<offset>]" of EXT-X-PART's BYTERANGE. */
static int he_seg_ll_byterange(he_seg_ll_scan_t *s, const he__seg_attr_t *a, he_seg_ll_part_t *p)
{
    const char *at = memchr(a->val, '@', a->val_len);
    size_t ln = at ? (size_t)(at - a->val) : a->val_len;
    uint64_t len, off = 0;
    if (he__seg_parse_u64(a->val, ln, &len) < 0 || len > INT64_MAX ||
        (at && (he__seg_parse_u64(at + 1, a->val_len - ln - 1, &off) < 0 || off > INT64_MAX - len)))
        return he_seg_ll_fail(s, "bad number in BYTERANGE");
    p->byterange_length = (int64_t)len;
    p->byterange_offset = at ? (int64_t)off : -1;
    return 0;
}

static int he_seg_ll_part(he_seg_ll_scan_t *s, const char *v, size_t n)
{
    he_seg_ll_t *ll = s->ll;
    he_seg_ll_part_t p = {.byterange_length = -1, .byterange_offset = -1};
    he__seg_attr_t a;
    const char *end = v + n;
    bool have_dur = false;
    int rc;
    while ((rc = he__seg_attr_next(&v, end, &a)) > 0) {
        if (he__seg_attr_is(&a, "URI")) {
            p.uri = a.val;
            p.uri_len = a.val_len;
        } else if (he__seg_attr_is(&a, "DURATION")) {
            if (he_seg_ll_decimal(s, &a, &p.duration) < 0) return -EINVAL;
            have_dur = true;
        } else if (he__seg_attr_is(&a, "INDEPENDENT")) {
            p.independent = he_seg_ll_yes(&a);
        } else if (he__seg_attr_is(&a, "GAP")) {
            p.gap = he_seg_ll_yes(&a);
        } else if (he__seg_attr_is(&a, "BYTERANGE")) {
            if (he_seg_ll_byterange(s, &a, &p) < 0) return -EINVAL;
        }
    }
    if (rc < 0) return he_seg_ll_fail(s, "bad attribute list");
    if (p.uri == NULL || p.uri_len == 0) return he_seg_ll_fail(s, "EXT-X-PART without URI");
    if (!have_dur) return he_seg_ll_fail(s, "EXT-X-PART without DURATION");
    if (ll->nparts == s->cap_parts) {
        size_t ncap = s->cap_parts ? s->cap_parts * 2 : 16;
        he_seg_ll_part_t *np = realloc(ll->parts, ncap * sizeof(*np));
        if (np == NULL) return -ENOMEM;
        ll->parts = np;
        s->cap_parts = ncap;
    }
    p.msn = s->nuris; /* a segment index until the scan ends */
    p.index = s->cur_part++;
    ll->parts[ll->nparts++] = p;
    return 0;
}

static int he_seg_ll_hint(he_seg_ll_scan_t *s, const char *v, size_t n)
{
    he_seg_ll_t *ll = s->ll;
    he__seg_attr_t a;
    const char *end = v + n, *uri = NULL;
    size_t uri_len = 0;
    int64_t start = 0, length = -1;
    int type = -1; /* 0 PART, 1 MAP */
    int rc;
    while ((rc = he__seg_attr_next(&v, end, &a)) > 0) {
        if (he__seg_attr_is(&a, "TYPE")) {
            type = he__seg_val_is(&a, "PART") ? 0 : he__seg_val_is(&a, "MAP") ? 1 : 2;
        } else if (he__seg_attr_is(&a, "URI")) {
            uri = a.val;
            uri_len = a.val_len;
        } else if (he__seg_attr_is(&a, "BYTERANGE-START")) {
            if (he_seg_ll_int(s, &a, &start) < 0) return -EINVAL;
        } else if (he__seg_attr_is(&a, "BYTERANGE-LENGTH")) {
            if (he_seg_ll_int(s, &a, &length) < 0) return -EINVAL;
        }
    }
    if (rc < 0) return he_seg_ll_fail(s, "bad attribute list");
    if (type < 0 || uri == NULL || uri_len == 0)
        return he_seg_ll_fail(s, "EXT-X-PRELOAD-HINT without TYPE or URI");
    if (type == 2) return 0; /* a type we do not know: ignored (6.3.1) */
    if (length >= 0 && start > INT64_MAX - length)
        return he_seg_ll_fail(s, "bad number in BYTERANGE-LENGTH");
    if (ll->has_hint && !ll->hint_is_map && type == 1) return 0; /* the part hint wins */
    ll->has_hint = true;
    ll->hint_is_map = type == 1;
    ll->hint_uri = uri;
    ll->hint_uri_len = uri_len;
    ll->hint_start = start;
    ll->hint_length = length;
    return 0;
}

static int he_seg_ll_skip(he_seg_ll_scan_t *s, const char *v, size_t n)
{
    he__seg_attr_t a;
    const char *end = v + n;
    bool have = false;
    int rc;
    while ((rc = he__seg_attr_next(&v, end, &a)) > 0) {
        if (!he__seg_attr_is(&a, "SKIPPED-SEGMENTS")) continue;
        if (he__seg_parse_u64(a.val, a.val_len, &s->ll->skipped_segments) < 0)
            return he_seg_ll_fail(s, "bad number in SKIPPED-SEGMENTS");
        have = true;
    }
    if (rc < 0) return he_seg_ll_fail(s, "bad attribute list");
    if (!have || s->nuris || s->ll->nparts)
        return he_seg_ll_fail(s, "EXT-X-SKIP without SKIPPED-SEGMENTS or after a segment");
    s->ll->is_delta = true;
    return 0;
}

static int he_seg_ll_line(he_seg_ll_scan_t *s, const char *l, size_t n)
{
    const char *v;
    size_t vn;
    if (l[0] != '#') { /* the parser checked: every URI line is a segment */
        s->nuris++;
        s->cur_part = 0;
        return 0;
    }
    if (he_seg_ll_tag_is(l, n, "#EXT-X-PART", &v, &vn)) return he_seg_ll_part(s, v, vn);
    if (he_seg_ll_tag_is(l, n, "#EXT-X-SERVER-CONTROL", &v, &vn))
        return he_seg_ll_server_control(s, v, vn);
    if (he_seg_ll_tag_is(l, n, "#EXT-X-PART-INF", &v, &vn)) return he_seg_ll_part_inf(s, v, vn);
    if (he_seg_ll_tag_is(l, n, "#EXT-X-PRELOAD-HINT", &v, &vn)) return he_seg_ll_hint(s, v, vn);
    if (he_seg_ll_tag_is(l, n, "#EXT-X-SKIP", &v, &vn)) return he_seg_ll_skip(s, v, vn);
    return 0;
}

/* Calls fn on each line after #EXTM3U, trimmed, blank ones left out; stops
 * at fn's first negative result. */
typedef int (*he_seg_ll_line_fn)(void *ctx, const char *l, size_t n, const char *raw,
                                 size_t raw_len);

static int he_seg_ll_lines(const char *buf, size_t len, unsigned *line, he_seg_ll_line_fn fn,
                           void *ctx)
{
    const char *p = buf, *end = buf + len;
    int rc;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    for (*line = 0; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *raw = p, *l = p;
        size_t n = (size_t)((nl ? nl : end) - p);
        p = nl ? nl + 1 : end;
        ++*line;
        he__seg_trim(&l, &n);
        if (*line == 1 || n == 0) continue;
        if ((rc = fn(ctx, l, n, raw, (size_t)(p - raw))) < 0) return rc;
    }
    return 0;
}

static int he_seg_ll_scan_line(void *ctx, const char *l, size_t n, const char *raw, size_t rn)
{
    (void)raw, (void)rn;
    return he_seg_ll_line(ctx, l, n);
}

int he_seg_ll_parse(const char *buf, size_t len, he_seg_ll_t *ll, char *err, size_t errlen)
{
    he_seg_ll_scan_t s = {.ll = ll, .err = err, .errlen = errlen};
    int rc;

    memset(ll, 0, sizeof(*ll));
    if ((rc = he_seg_playlist_parse(buf, len, &ll->pl, err, errlen)) < 0) return rc;
    if (ll->pl.is_master) {
        s.line = 1;
        rc = he_seg_ll_fail(&s, "a master playlist has no low-latency view");
    } else {
        rc = he_seg_ll_lines(buf, len, &s.line, he_seg_ll_scan_line, &s);
    }
    if (rc < 0) {
        if (rc == -ENOMEM && err && errlen) snprintf(err, errlen, "line %u: out of memory", s.line);
        he_seg_ll_free(ll);
        return rc;
    }
    /* A delta's first segment is the first one after those it skipped. */
    uint64_t base = ll->pl.media_sequence + ll->skipped_segments;
    if (base < ll->pl.media_sequence || base + ll->pl.nsegments + 1 < base) {
        s.line = 1;
        he_seg_ll_free(ll);
        return he_seg_ll_fail(&s, "media sequence numbers overflow");
    }
    for (size_t i = 0; i < ll->pl.nsegments; i++)
        ll->pl.segments[i].sequence = base + i;
    for (size_t i = 0; i < ll->nparts; i++)
        ll->parts[i].msn += base;
    ll->has_segments = ll->pl.nsegments > 0;
    ll->first_msn = base;
    ll->last_msn = base + ll->pl.nsegments - 1; /* meaningful with has_segments */
    if (ll->nparts) {
        ll->has_parts = true;
        ll->last_part_msn = ll->parts[ll->nparts - 1].msn;
        ll->last_part_index = ll->parts[ll->nparts - 1].index;
    }
    return 0;
}

void he_seg_ll_free(he_seg_ll_t *ll)
{
    if (ll == NULL) return;
    he_seg_playlist_free(&ll->pl);
    free(ll->parts);
    memset(ll, 0, sizeof(*ll));
}

/* ---------------------------------------------------------------- blocking reload */

static uint64_t he_seg_ll_next_msn(const he_seg_ll_t *ll)
{
    return ll->has_segments ? ll->last_msn + 1 : ll->first_msn;
}

static unsigned he_seg_ll_parts_in(const he_seg_ll_t *ll, uint64_t msn)
{
    unsigned n = 0;
    for (size_t i = ll->nparts; i-- > 0 && ll->parts[i].msn >= msn;)
        n += ll->parts[i].msn == msn;
    return n;
}

bool he_seg_ll_holds(const he_seg_ll_t *ll, uint64_t msn, int64_t part)
{
    uint64_t next = he_seg_ll_next_msn(ll);
    bool complete = ll->has_segments && msn <= ll->last_msn;
    if (part < 0) return complete;
    if (complete) {
        unsigned np = he_seg_ll_parts_in(ll, msn);
        /* a complete segment whose parts already left holds them all */
        if (np == 0 || part < (int64_t)np || msn < ll->last_msn) return true;
        return he_seg_ll_parts_in(ll, next) >= 1; /* past its last part: part 0 of the next */
    }
    return msn == next && part < (int64_t)he_seg_ll_parts_in(ll, next);
}

/* Parts in a segment, for distances beyond the playlist's end. */
static uint64_t he_seg_ll_parts_per_segment(const he_seg_ll_t *ll)
{
    if (ll->part_target <= 0 || ll->pl.target_duration <= 0) return 1;
    double q = ceil(ll->pl.target_duration / ll->part_target - 1e-9);
    return q < 1 ? 1 : q > 1e6 ? 1000000 : (uint64_t)q;
}

uint64_t he_seg_ll_parts_ahead(const he_seg_ll_t *ll, uint64_t msn, int64_t part)
{
    uint64_t pps = he_seg_ll_parts_per_segment(ll), next = he_seg_ll_next_msn(ll);
    /* the reference: the last part when it is of the segment in progress,
     * else the start of that segment (index -1) */
    int64_t ref = ll->has_parts && ll->last_part_msn == next ? (int64_t)ll->last_part_index : -1;
    if (part < 0 || msn < next) return 0;
    uint64_t segs = msn - next > 1000000 ? 1000000 : msn - next;
    int64_t d = (int64_t)(segs * pps) + (part > 1000000000 ? 1000000000 : part) - ref;
    return d > 0 ? (uint64_t)d : 0;
}

unsigned he_seg_ll_advance_part_limit(const he_seg_ll_t *ll)
{
    if (ll->part_target > 0 && ll->part_target < 1) {
        double l = floor(3.0 / ll->part_target + 0.5);
        return l > 1000 ? 1000 : (unsigned)l;
    }
    return 3;
}

/* ---------------------------------------------------------------- delta updates */

typedef struct he_seg_ll_out {
    char *p;
    size_t len, cap;
    bool oom;
} he_seg_ll_out_t;

static void he_seg_ll_put(he_seg_ll_out_t *o, const char *s, size_t n)
{
    if (o->oom) return;
    if (o->len + n + 1 > o->cap) {
        size_t ncap = (o->cap + n + 1) * 2;
        char *np = realloc(o->p, ncap);
        if (np == NULL) {
            o->oom = true;
            return;
        }
        o->p = np;
        o->cap = ncap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void he_seg_ll_putline(he_seg_ll_out_t *o, const char *s, size_t n)
{
    he_seg_ll_put(o, s, n);
    he_seg_ll_put(o, "\n", 1);
}

/* Tags of the playlist as a whole (4.4.3, 4.4.2): they stay in a delta
 * wherever they stand. */
static bool he_seg_ll_header_tag(const char *l, size_t n)
{
    static const char *const tags[] = {
        "#EXT-X-VERSION",
        "#EXT-X-TARGETDURATION",
        "#EXT-X-MEDIA-SEQUENCE",
        "#EXT-X-DISCONTINUITY-SEQUENCE",
        "#EXT-X-PLAYLIST-TYPE",
        "#EXT-X-I-FRAMES-ONLY",
        "#EXT-X-PART-INF",
        "#EXT-X-SERVER-CONTROL",
        "#EXT-X-INDEPENDENT-SEGMENTS",
        "#EXT-X-START",
        "#EXT-X-DEFINE",
    };
    const char *v;
    size_t vn;
    for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
        if (he_seg_ll_tag_is(l, n, tags[i], &v, &vn)) return true;
    return false;
}

typedef struct he_seg_ll_delta {
    he_seg_ll_out_t out;
    he_seg_ll_skip_t mode;
    uint64_t skip, uris;
    unsigned version;
    const char *removed;
    const char *key, *map; /* the last of each in the skipped part */
    size_t key_len, map_len;
    he_seg_ll_out_t dateranges; /* kept from the skipped part (YES) */
} he_seg_ll_delta_t;

static void he_seg_ll_delta_version(he_seg_ll_delta_t *d)
{
    char v[40];
    int n = snprintf(v, sizeof(v), "#EXT-X-VERSION:%u", d->version);
    he_seg_ll_putline(&d->out, v, (size_t)n);
}

static void he_seg_ll_delta_skip_tag(he_seg_ll_delta_t *d)
{
    char t[80];
    int n =
        snprintf(t, sizeof(t), "#EXT-X-SKIP:SKIPPED-SEGMENTS=%llu", (unsigned long long)d->skip);
    he_seg_ll_put(&d->out, t, (size_t)n);
    if (d->mode == HE_SEG_LL_SKIP_V2) {
        he_seg_ll_put(&d->out, ",RECENTLY-REMOVED-DATERANGES=\"", 30);
        if (d->removed) he_seg_ll_put(&d->out, d->removed, strlen(d->removed));
        he_seg_ll_put(&d->out, "\"", 1);
    }
    he_seg_ll_put(&d->out, "\n", 1);
    if (d->key) he_seg_ll_putline(&d->out, d->key, d->key_len);
    if (d->map) he_seg_ll_putline(&d->out, d->map, d->map_len);
    if (d->dateranges.len) he_seg_ll_put(&d->out, d->dateranges.p, d->dateranges.len);
}

static int he_seg_ll_delta_line(void *ctx, const char *l, size_t n, const char *raw, size_t rn)
{
    he_seg_ll_delta_t *d = ctx;
    const char *v;
    size_t vn;
    bool skipping = d->uris < d->skip;

    if (he_seg_ll_tag_is(l, n, "#EXT-X-VERSION", &v, &vn)) return 0;
    if (!skipping) {
        he_seg_ll_put(&d->out, raw, rn);
        if (rn == 0 || raw[rn - 1] != '\n') he_seg_ll_put(&d->out, "\n", 1);
        return 0;
    }
    if (he_seg_ll_header_tag(l, n)) {
        he_seg_ll_putline(&d->out, l, n);
    } else if (he_seg_ll_tag_is(l, n, "#EXT-X-KEY", &v, &vn)) {
        d->key = l, d->key_len = n;
    } else if (he_seg_ll_tag_is(l, n, "#EXT-X-MAP", &v, &vn)) {
        d->map = l, d->map_len = n;
    } else if (he_seg_ll_tag_is(l, n, "#EXT-X-DATERANGE", &v, &vn)) {
        if (d->mode != HE_SEG_LL_SKIP_V2) he_seg_ll_putline(&d->dateranges, l, n);
    } else if (l[0] != '#' && ++d->uris == d->skip) {
        he_seg_ll_delta_skip_tag(d); /* the last skipped segment's URI */
    }
    /* the rest belongs to the skipped segments: EXTINF, parts, dates ... */
    return d->out.oom || d->dateranges.oom ? -ENOMEM : 0;
}

int he_seg_ll_delta(const char *buf, size_t len, const he_seg_ll_t *ll, he_seg_ll_skip_t mode,
                    const char *removed, char **out, size_t *out_len)
{
    he_seg_ll_delta_t d = {.mode = mode, .removed = removed};
    const he_seg_playlist_t *pl = &ll->pl;
    double after = 0;
    unsigned line;
    int rc;

    *out = NULL;
    *out_len = 0;
    if (ll->is_delta || !(ll->can_skip_until > 0) || mode == HE_SEG_LL_SKIP_NONE) return -EINVAL;
    /* v2 asks for date ranges to go too; a server that cannot skip them
     * answers as for YES (6.2.5.1) */
    if (mode == HE_SEG_LL_SKIP_V2 && !ll->can_skip_dateranges) d.mode = HE_SEG_LL_SKIP_YES;
    /* 6.2.5.1: a segment may be skipped once it ends CAN-SKIP-UNTIL or
     * more before the end of the playlist */
    for (size_t i = pl->nsegments; i-- > 0;) {
        if (after >= ll->can_skip_until) {
            d.skip = i + 1;
            break;
        }
        after += pl->segments[i].duration;
    }
    if (d.skip == 0) return 1;
    d.version = pl->version;
    /* section 8: EXT-X-SKIP needs version 9, RECENTLY-REMOVED-DATERANGES 10 */
    unsigned need = d.mode == HE_SEG_LL_SKIP_V2 ? 10 : 9;
    if (d.version < need) d.version = need;

    he_seg_ll_putline(&d.out, "#EXTM3U", 7);
    he_seg_ll_delta_version(&d); /* the one EXT-X-VERSION: the others are dropped */
    rc = he_seg_ll_lines(buf, len, &line, he_seg_ll_delta_line, &d);
    free(d.dateranges.p);
    if (rc < 0 || d.out.oom) {
        free(d.out.p);
        return -ENOMEM;
    }
    *out = d.out.p;
    *out_len = d.out.len;
    return 0;
}
