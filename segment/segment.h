/* segment: everything that knows HLS. URL rules, content types and kinds,
 * and the one playlist parser (master and media, VOD and live) used by the
 * server (prefetch, live freshness) and by loadgen (players). */
#ifndef HE_SEGMENT_H
#define HE_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- types */

/* Content type by file extension. The order is part of the config ABI:
 * conf/ indexes Cache-Control by it and names keys by he_seg_type_name(). */
typedef enum he_seg_type {
    HE_SEG_TYPE_OTHER = 0,
    HE_SEG_TYPE_M3U8, /* application/vnd.apple.mpegurl */
    HE_SEG_TYPE_TS,   /* video/mp2t */
    HE_SEG_TYPE_M4S,  /* video/iso.segment */
    HE_SEG_TYPE_MP4,  /* video/mp4 */
    HE_SEG_TYPE_AAC,  /* audio/aac */
    HE_SEG_TYPE_VTT,  /* text/vtt */
    HE_SEG_TYPE_KEY,  /* application/octet-stream (AES-128 keys) */
    HE_SEG_TYPE_COUNT
} he_seg_type_t;

/* What a response is, for statistics and freshness rules. */
typedef enum he_seg_kind {
    HE_SEG_KIND_MASTER = 0, /* master (multivariant) playlist */
    HE_SEG_KIND_MEDIA,      /* media playlist */
    HE_SEG_KIND_SEGMENT,    /* .ts .m4s .mp4 .aac .vtt */
    HE_SEG_KIND_OTHER,
    HE_SEG_KIND_COUNT
} he_seg_kind_t;

/* Type from the extension of a normalized path (case-insensitive). */
he_seg_type_t he_seg_type_from_path(const char *path, size_t len);
/* MIME type for Content-Type. Never NULL. */
const char *he_seg_type_mime(he_seg_type_t t);
/* Short name used as a config key: "m3u8", "ts", ..., "other". */
const char *he_seg_type_name(he_seg_type_t t);
/* Inverse of he_seg_type_name; -1 if unknown. */
int he_seg_type_from_name(const char *name);
/* Kind of a response. For m3u8 the first bytes of the body decide master
 * (has #EXT-X-STREAM-INF) versus media; head may be NULL for other types. */
he_seg_kind_t he_seg_kind_of(he_seg_type_t t, const char *head, size_t head_len);
const char *he_seg_kind_name(he_seg_kind_t k); /* "master", "media", "segment", "other" */

/* ---------------------------------------------------------------- URLs */

/* Turns an HTTP request-target (origin-form, "/a/b.ts?x=1") into a path
 * relative to the library root, NUL-terminated in out: no leading '/', no
 * query or fragment, percent-decoded, "//" and "/./" collapsed.
 * Returns the length, or:
 *   -EINVAL        not origin-form, bad percent escape, a decoded NUL, '\\'
 *                  (raw or %5c), an encoded '/' (%2f), any ".." segment
 *                  (raw or encoded), or control bytes;
 *   -ENAMETOOLONG  the result does not fit in cap (including the NUL).
 * "/" normalizes to "" (length 0). */
int he_seg_url_normalize(const char *target, size_t len, char *out, size_t cap);

/* The value of a hex digit (either case), or -1: the one decoder of %XX
 * escapes and chunk sizes, for every module. */
int he_seg_hex_digit(unsigned char c);

/* Resolves a URI found in a playlist against the playlist's own URL
 * (RFC 3986 section 5.2, for absolute-path and relative references and
 * absolute http(s) URLs). Returns the length written or -ENAMETOOLONG. */
int he_seg_uri_resolve(const char *base, const char *ref, char *out, size_t cap);

/* ---------------------------------------------------------------- playlists */

typedef struct he_seg_variant {
    char *uri;                  /* as written in the playlist */
    uint64_t bandwidth;         /* BANDWIDTH, bits/s */
    uint64_t average_bandwidth; /* AVERAGE-BANDWIDTH, 0 if absent */
    unsigned width, height;     /* RESOLUTION, 0 if absent */
    double frame_rate;          /* FRAME-RATE, 0 if absent */
    char *codecs;               /* CODECS or NULL */
} he_seg_variant_t;

typedef struct he_seg_media_segment {
    char *uri;
    double duration;          /* EXTINF seconds */
    uint64_t sequence;        /* media sequence number */
    int64_t byterange_length; /* EXT-X-BYTERANGE length, -1 if none */
    int64_t byterange_offset; /* resolved offset (implicit offsets follow the previous range) */
    bool discontinuity;       /* EXT-X-DISCONTINUITY before this segment */
    char *key_uri;            /* EXT-X-KEY URI in force, NULL when METHOD=NONE */
    /* Added: EXT-X-MAP URI in force (fMP4 init section), NULL if none.
     * key_uri and map_uri strings are shared by consecutive segments that
     * use the same tag; he_seg_playlist_free frees each once. */
    char *map_uri;
} he_seg_media_segment_t;

typedef enum he_seg_playlist_type {
    HE_SEG_PLAYLIST_NONE = 0, /* no EXT-X-PLAYLIST-TYPE: live unless ENDLIST */
    HE_SEG_PLAYLIST_VOD,
    HE_SEG_PLAYLIST_EVENT
} he_seg_playlist_type_t;

typedef struct he_seg_playlist {
    bool is_master;
    unsigned version; /* EXT-X-VERSION, 1 if absent */

    /* master */
    he_seg_variant_t *variants;
    size_t nvariants;

    /* media */
    double target_duration; /* EXT-X-TARGETDURATION */
    uint64_t media_sequence;
    bool endlist;           /* EXT-X-ENDLIST: VOD or ended live */
    he_seg_playlist_type_t type;
    he_seg_media_segment_t *segments;
    size_t nsegments;
} he_seg_playlist_t;

/* Parses a master or media playlist. Returns 0, or -EINVAL with a message
 * "line N: ..." in err (e.g. missing #EXTM3U, EXTINF without a URI, a bad
 * attribute list, a bad number). Never reads past len; buf need not be
 * NUL-terminated. On error pl holds nothing to free. */
int he_seg_playlist_parse(const char *buf, size_t len, he_seg_playlist_t *pl, char *err,
                          size_t errlen);
void he_seg_playlist_free(he_seg_playlist_t *pl);
/* True for a media playlist that is live: no ENDLIST. */
bool he_seg_playlist_is_live(const he_seg_playlist_t *pl);

/* Every URI a playlist names, in the order they appear: URI lines
 * (variant streams, segments) and the URI attribute of EXT-X-MEDIA,
 * EXT-X-I-FRAME-STREAM-INF, EXT-X-MAP, EXT-X-KEY, EXT-X-SESSION-KEY,
 * EXT-X-PART, EXT-X-PRELOAD-HINT, EXT-X-RENDITION-REPORT and
 * EXT-X-SESSION-DATA. fn gets each one's offset and length in buf (without
 * quotes or surrounding blanks). Lenient, as a proxy must be: a tag whose
 * attribute list does not parse names no URI. No allocation; returns the
 * number of URIs, or -EINVAL when buf does not start with #EXTM3U. */
typedef void (*he_seg_uri_fn)(void *ctx, size_t off, size_t len);
int he_seg_playlist_uris(const char *buf, size_t len, he_seg_uri_fn fn, void *ctx);

/* ---------------------------------------------------------------- low latency */

/* The low-latency view of a media playlist (draft-pantos-hls-rfc8216bis
 * 4.4.3.7, 4.4.3.8, 4.4.5): the one parser's segments plus the LL tags.
 * URIs point into the parsed buffer, which must outlive the view. */
typedef struct he_seg_ll_part {
    const char *uri;
    size_t uri_len;
    double duration;
    uint64_t msn;    /* the segment it belongs to */
    unsigned index;  /* its place in that segment, from 0 */
    bool independent, gap;
    int64_t byterange_length; /* -1 if none */
    int64_t byterange_offset; /* -1 if implicit */
} he_seg_ll_part_t;

typedef enum he_seg_ll_skip {
    HE_SEG_LL_SKIP_NONE = 0,
    HE_SEG_LL_SKIP_YES, /* _HLS_skip=YES: media segments */
    HE_SEG_LL_SKIP_V2,  /* _HLS_skip=v2: and EXT-X-DATERANGE tags */
} he_seg_ll_skip_t;

typedef struct he_seg_ll {
    he_seg_playlist_t pl; /* the one parser's view */
    /* EXT-X-SERVER-CONTROL; 0 when absent */
    bool can_block_reload, can_skip_dateranges;
    double can_skip_until, part_hold_back, hold_back;
    double part_target; /* EXT-X-PART-INF PART-TARGET, 0 if absent */
    he_seg_ll_part_t *parts; /* every EXT-X-PART, in order */
    size_t nparts;
    /* EXT-X-PRELOAD-HINT (the last one of TYPE=PART, else of TYPE=MAP) */
    bool has_hint, hint_is_map;
    const char *hint_uri;
    size_t hint_uri_len;
    int64_t hint_start;  /* BYTERANGE-START, 0 if absent */
    int64_t hint_length; /* BYTERANGE-LENGTH, -1: to the end (RFC 8673) */
    /* EXT-X-SKIP: the playlist is itself a delta update */
    bool is_delta;
    uint64_t skipped_segments;
    /* the first and the last complete segment's MSN; has_segments false
     * when there is none (then last_msn + 1 is the first segment's) */
    bool has_segments;
    uint64_t first_msn, last_msn;
    /* the last part: of segment last_part_msn, index last_part_index;
     * has_parts false when there is none */
    bool has_parts;
    uint64_t last_part_msn;
    unsigned last_part_index;
} he_seg_ll_t;

/* Parses buf as a media playlist into its LL view. 0, or -EINVAL ("line
 * N: ..." in err) for what the parser refuses, a master playlist, or a bad
 * LL tag; -ENOMEM. On error ll holds nothing to free. */
int he_seg_ll_parse(const char *buf, size_t len, he_seg_ll_t *ll, char *err, size_t errlen);
void he_seg_ll_free(he_seg_ll_t *ll);
/* Whether the playlist holds segment msn (part < 0) or part `part` of it,
 * or a later one (6.2.5.2: a part index past the last part of a complete
 * segment is part 0 of the next). */
bool he_seg_ll_holds(const he_seg_ll_t *ll, uint64_t msn, int64_t part);
/* How far (msn, part) runs past the playlist's last part, in parts, or
 * its last segment when it has no parts: 0 when it does not. */
uint64_t he_seg_ll_parts_ahead(const he_seg_ll_t *ll, uint64_t msn, int64_t part);
/* The Advance Part Limit of 6.2.5.2: 3 parts, or 3 / PART-TARGET when
 * PART-TARGET is under a second. */
unsigned he_seg_ll_advance_part_limit(const he_seg_ll_t *ll);
/* The delta update (4.4.5.2, 6.2.5.1) of the full playlist in buf (ll its
 * view): segments that end CAN-SKIP-UNTIL or more before the end replaced
 * by EXT-X-SKIP, with v2 also their EXT-X-DATERANGE tags and
 * RECENTLY-REMOVED-DATERANGES (removed: tab-separated IDs, may be NULL),
 * and EXT-X-VERSION raised to 9 (10 for v2, section 8). Writes a malloc'ed
 * playlist to *out; 0, or 1 when nothing can be skipped (*out NULL:
 * answer the full playlist), -EINVAL when ll has no CAN-SKIP-UNTIL or is a
 * delta already, -ENOMEM. */
int he_seg_ll_delta(const char *buf, size_t len, const he_seg_ll_t *ll, he_seg_ll_skip_t mode,
                    const char *removed, char **out, size_t *out_len);

#endif
