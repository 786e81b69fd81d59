/* Content types by extension and response kinds. he_seg_type_from_path
 * runs per request: one backward scan finds the extension, then at most
 * seven short compares against the names, with no copy of the path. */
#include "segment/segment.h"

#include <string.h>
#include <strings.h>

static const char *const he_seg_type_names[HE_SEG_TYPE_COUNT] = {
    [HE_SEG_TYPE_OTHER] = "other", [HE_SEG_TYPE_M3U8] = "m3u8", [HE_SEG_TYPE_TS] = "ts",
    [HE_SEG_TYPE_M4S] = "m4s",     [HE_SEG_TYPE_MP4] = "mp4",   [HE_SEG_TYPE_AAC] = "aac",
    [HE_SEG_TYPE_VTT] = "vtt",     [HE_SEG_TYPE_KEY] = "key",
};

static const char *const he_seg_type_mimes[HE_SEG_TYPE_COUNT] = {
    [HE_SEG_TYPE_OTHER] = "application/octet-stream",
    [HE_SEG_TYPE_M3U8] = "application/vnd.apple.mpegurl",
    [HE_SEG_TYPE_TS] = "video/mp2t",
    [HE_SEG_TYPE_M4S] = "video/iso.segment",
    [HE_SEG_TYPE_MP4] = "video/mp4",
    [HE_SEG_TYPE_AAC] = "audio/aac",
    [HE_SEG_TYPE_VTT] = "text/vtt",
    [HE_SEG_TYPE_KEY] = "application/octet-stream",
};

static const char *const he_seg_kind_names[HE_SEG_KIND_COUNT] = {
    [HE_SEG_KIND_MASTER] = "master",
    [HE_SEG_KIND_MEDIA] = "media",
    [HE_SEG_KIND_SEGMENT] = "segment",
    [HE_SEG_KIND_OTHER] = "other",
};

he_seg_type_t he_seg_type_from_path(const char *path, size_t len)
{
    /* The extension is what follows the last '.' of the last path
     * component. Leading dots name a hidden file, not an extension, so
     * ".ts" is OTHER; "a.ts/" names a directory and is OTHER too. */
    size_t i = len, dot = 0;
    if (path == NULL) return HE_SEG_TYPE_OTHER;
    while (i > 0 && path[i - 1] != '/') {
        if (path[i - 1] == '.' && dot == 0) dot = i;
        i--;
    }
    while (i < len && path[i] == '.')
        i++;
    if (dot == 0 || dot <= i) return HE_SEG_TYPE_OTHER;

    const char *ext = path + dot;
    size_t n = len - dot;
    for (int t = HE_SEG_TYPE_M3U8; t < HE_SEG_TYPE_COUNT; t++) {
        const char *name = he_seg_type_names[t];
        if (strlen(name) == n && strncasecmp(ext, name, n) == 0) return (he_seg_type_t)t;
    }
    return HE_SEG_TYPE_OTHER;
}

const char *he_seg_type_mime(he_seg_type_t t)
{
    if ((unsigned)t >= HE_SEG_TYPE_COUNT) t = HE_SEG_TYPE_OTHER;
    return he_seg_type_mimes[t];
}

const char *he_seg_type_name(he_seg_type_t t)
{
    if ((unsigned)t >= HE_SEG_TYPE_COUNT) t = HE_SEG_TYPE_OTHER;
    return he_seg_type_names[t];
}

int he_seg_type_from_name(const char *name)
{
    /* Config keys are matched without regard to case: "M3U8" is as clear
     * as "m3u8" and rejecting it would only annoy. */
    if (name == NULL) return -1;
    for (int t = 0; t < HE_SEG_TYPE_COUNT; t++)
        if (strcasecmp(name, he_seg_type_names[t]) == 0) return t;
    return -1;
}

/* True when line [p, end) is the tag `tag` (no ':' in it), that is the
 * tag name followed by ':', the end of the line or trailing whitespace. */
static bool he_seg_line_is_tag(const char *p, const char *end, const char *tag)
{
    size_t n = strlen(tag);
    if ((size_t)(end - p) < n || memcmp(p, tag, n) != 0) return false;
    return p + n == end || p[n] == ':' || p[n] == '\r' || p[n] == ' ' || p[n] == '\t';
}

/* Sniffs whether the start of an m3u8 body is a master playlist. Only
 * line starts count, so a URI or quoted attribute that happens to contain
 * a tag name cannot fool it. Variant tags are decisive; rendition and
 * session tags only say "master" when no EXTINF shows up in the head. */
static he_seg_kind_t he_seg_sniff_m3u8(const char *head, size_t len)
{
    const char *p = head, *end = head + len;
    bool master_hint = false;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        if (eol - p > 4 && p[0] == '#' && p[1] == 'E' && p[2] == 'X' && p[3] == 'T') {
            if (he_seg_line_is_tag(p, eol, "#EXT-X-STREAM-INF") ||
                he_seg_line_is_tag(p, eol, "#EXT-X-I-FRAME-STREAM-INF"))
                return HE_SEG_KIND_MASTER;
            if (he_seg_line_is_tag(p, eol, "#EXTINF") ||
                he_seg_line_is_tag(p, eol, "#EXT-X-TARGETDURATION"))
                return HE_SEG_KIND_MEDIA;
            if (he_seg_line_is_tag(p, eol, "#EXT-X-MEDIA") ||
                he_seg_line_is_tag(p, eol, "#EXT-X-SESSION-DATA") ||
                he_seg_line_is_tag(p, eol, "#EXT-X-SESSION-KEY"))
                master_hint = true;
        }
        p = nl ? nl + 1 : end;
    }
    return master_hint ? HE_SEG_KIND_MASTER : HE_SEG_KIND_MEDIA;
}

he_seg_kind_t he_seg_kind_of(he_seg_type_t t, const char *head, size_t head_len)
{
    switch (t) {
    case HE_SEG_TYPE_M3U8:
        /* Without a body we cannot tell; media playlists are the common
         * case (one master fans out to several media playlists). */
        if (head == NULL || head_len == 0) return HE_SEG_KIND_MEDIA;
        return he_seg_sniff_m3u8(head, head_len);
    case HE_SEG_TYPE_TS:
    case HE_SEG_TYPE_M4S:
    case HE_SEG_TYPE_MP4:
    case HE_SEG_TYPE_AAC:
    case HE_SEG_TYPE_VTT:
        return HE_SEG_KIND_SEGMENT;
    default:
        return HE_SEG_KIND_OTHER;
    }
}

const char *he_seg_kind_name(he_seg_kind_t k)
{
    if ((unsigned)k >= HE_SEG_KIND_COUNT) k = HE_SEG_KIND_OTHER;
    return he_seg_kind_names[k];
}
