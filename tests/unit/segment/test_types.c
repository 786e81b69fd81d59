/* Content types, MIME strings, names and kinds (segment/types.c). */
#include "he_test.h"

#include "segment/segment.h"

static he_seg_type_t type_of(const char *path)
{
    return he_seg_type_from_path(path, strlen(path));
}

static void test_extensions(void)
{
    static const struct {
        const char *path;
        he_seg_type_t type;
    } cases[] = {
        {"index.m3u8", HE_SEG_TYPE_M3U8},
        {"live/ch1/index.m3u8", HE_SEG_TYPE_M3U8},
        {"INDEX.M3U8", HE_SEG_TYPE_M3U8},
        {"a.M3u8", HE_SEG_TYPE_M3U8},
        {"seg_00001.ts", HE_SEG_TYPE_TS},
        {"SEG.TS", HE_SEG_TYPE_TS},
        {"a.Ts", HE_SEG_TYPE_TS},
        {"chunk-1.m4s", HE_SEG_TYPE_M4S},
        {"chunk-1.M4S", HE_SEG_TYPE_M4S},
        {"init.mp4", HE_SEG_TYPE_MP4},
        {"init.MP4", HE_SEG_TYPE_MP4},
        {"audio/seg1.aac", HE_SEG_TYPE_AAC},
        {"audio/seg1.AAC", HE_SEG_TYPE_AAC},
        {"subs/en.vtt", HE_SEG_TYPE_VTT},
        {"subs/en.VTT", HE_SEG_TYPE_VTT},
        {"keys/k1.key", HE_SEG_TYPE_KEY},
        {"keys/k1.KEY", HE_SEG_TYPE_KEY},
        {"a.b.c.ts", HE_SEG_TYPE_TS},
        {"a..ts", HE_SEG_TYPE_TS},
        {"dir.m3u8/seg.ts", HE_SEG_TYPE_TS},
        {"dir.ts/index.m3u8", HE_SEG_TYPE_M3U8},
        {"dir/.hidden.ts", HE_SEG_TYPE_TS},
        /* no extension, or not a known one */
        {"", HE_SEG_TYPE_OTHER},
        {"README", HE_SEG_TYPE_OTHER},
        {"dir.ts/README", HE_SEG_TYPE_OTHER},
        {"a.", HE_SEG_TYPE_OTHER},
        {"a.ts.", HE_SEG_TYPE_OTHER},
        {"a.ts/", HE_SEG_TYPE_OTHER},
        {"a.m3u8/", HE_SEG_TYPE_OTHER},
        {"a.tsx", HE_SEG_TYPE_OTHER},
        {"a.t", HE_SEG_TYPE_OTHER},
        {"a.m3u", HE_SEG_TYPE_OTHER},
        {"a.m3u88", HE_SEG_TYPE_OTHER},
        {"a.html", HE_SEG_TYPE_OTHER},
        {"ts", HE_SEG_TYPE_OTHER},
        {"m3u8", HE_SEG_TYPE_OTHER},
        {"a_ts", HE_SEG_TYPE_OTHER},
        /* dotfiles: a leading dot is not an extension */
        {".ts", HE_SEG_TYPE_OTHER},
        {".m3u8", HE_SEG_TYPE_OTHER},
        {"dir/.ts", HE_SEG_TYPE_OTHER},
        {"..ts", HE_SEG_TYPE_OTHER},
        {".", HE_SEG_TYPE_OTHER},
        {"...", HE_SEG_TYPE_OTHER},
        {"/", HE_SEG_TYPE_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        he_seg_type_t t = type_of(cases[i].path);
        if (t != cases[i].type) fprintf(stderr, "path \"%s\"\n", cases[i].path);
        HE_CHECK_INT(t, cases[i].type);
    }
    /* the length bounds the path, not a NUL */
    HE_CHECK_INT(he_seg_type_from_path("a.ts.m3u8", 4), HE_SEG_TYPE_TS);
    HE_CHECK_INT(he_seg_type_from_path("a.ts", 0), HE_SEG_TYPE_OTHER);
    HE_CHECK_INT(he_seg_type_from_path(NULL, 0), HE_SEG_TYPE_OTHER);
}

static void test_mime_and_names(void)
{
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_M3U8), "application/vnd.apple.mpegurl");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_TS), "video/mp2t");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_M4S), "video/iso.segment");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_MP4), "video/mp4");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_AAC), "audio/aac");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_VTT), "text/vtt");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_KEY), "application/octet-stream");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_OTHER), "application/octet-stream");
    HE_CHECK_STR(he_seg_type_mime(HE_SEG_TYPE_COUNT), "application/octet-stream");
    HE_CHECK_STR(he_seg_type_mime((he_seg_type_t)-1), "application/octet-stream");

    static const char *const names[HE_SEG_TYPE_COUNT] = {"other", "m3u8", "ts",  "m4s",
                                                         "mp4",   "aac",  "vtt", "key"};
    for (int t = 0; t < HE_SEG_TYPE_COUNT; t++) {
        HE_CHECK_STR(he_seg_type_name((he_seg_type_t)t), names[t]);
        HE_CHECK_INT(he_seg_type_from_name(names[t]), t);
        /* round trip through the extension too, except "other" */
        if (t != HE_SEG_TYPE_OTHER) {
            char path[16];
            snprintf(path, sizeof(path), "x.%s", names[t]);
            HE_CHECK_INT(type_of(path), t);
        }
    }
    HE_CHECK_STR(he_seg_type_name(HE_SEG_TYPE_COUNT), "other");
    HE_CHECK_INT(he_seg_type_from_name("M3U8"), HE_SEG_TYPE_M3U8);
    HE_CHECK_INT(he_seg_type_from_name("Ts"), HE_SEG_TYPE_TS);
    HE_CHECK_INT(he_seg_type_from_name("html"), -1);
    HE_CHECK_INT(he_seg_type_from_name(""), -1);
    HE_CHECK_INT(he_seg_type_from_name("m3u8 "), -1);
    HE_CHECK_INT(he_seg_type_from_name(NULL), -1);
}

static he_seg_kind_t m3u8_kind(const char *body)
{
    return he_seg_kind_of(HE_SEG_TYPE_M3U8, body, body ? strlen(body) : 0);
}

static void test_kinds(void)
{
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_TS, NULL, 0), HE_SEG_KIND_SEGMENT);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_M4S, NULL, 0), HE_SEG_KIND_SEGMENT);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_MP4, NULL, 0), HE_SEG_KIND_SEGMENT);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_AAC, NULL, 0), HE_SEG_KIND_SEGMENT);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_VTT, NULL, 0), HE_SEG_KIND_SEGMENT);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_KEY, NULL, 0), HE_SEG_KIND_OTHER);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_OTHER, NULL, 0), HE_SEG_KIND_OTHER);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_COUNT, NULL, 0), HE_SEG_KIND_OTHER);
    /* a segment's body is irrelevant, even if it looks like a playlist */
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_TS, "#EXT-X-STREAM-INF:", 18), HE_SEG_KIND_SEGMENT);

    HE_CHECK_INT(m3u8_kind(NULL), HE_SEG_KIND_MEDIA);
    HE_CHECK_INT(m3u8_kind(""), HE_SEG_KIND_MEDIA);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n"), HE_SEG_KIND_MEDIA);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n"),
                 HE_SEG_KIND_MASTER);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\r\n#EXT-X-STREAM-INF:BANDWIDTH=1\r\nv.m3u8\r\n"),
                 HE_SEG_KIND_MASTER);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"i.m3u8\"\n"),
                 HE_SEG_KIND_MASTER);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\"\n"),
                 HE_SEG_KIND_MASTER);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6,\ns1.ts\n"),
                 HE_SEG_KIND_MEDIA);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:5\n#EXTINF:6,\ns1.ts\n"),
                 HE_SEG_KIND_MEDIA);
    /* EXT-X-MEDIA-SEQUENCE is not EXT-X-MEDIA */
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:5\n"), HE_SEG_KIND_MEDIA);
    /* only line starts count: a tag name inside a URI or title is not a tag */
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXTINF:6,#EXT-X-STREAM-INF\nx#EXT-X-STREAM-INF.ts\n"),
                 HE_SEG_KIND_MEDIA);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n# #EXT-X-STREAM-INF\n"), HE_SEG_KIND_MEDIA);
    /* a head cut mid-line still sees the tag */
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-STREAM-INF"), HE_SEG_KIND_MASTER);
    HE_CHECK_INT(m3u8_kind("#EXTM3U\n#EXT-X-STREAM-INFO:X=1\n"), HE_SEG_KIND_MEDIA);
    /* head_len bounds the look */
    const char *master = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n";
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_M3U8, master, 8), HE_SEG_KIND_MEDIA);
    HE_CHECK_INT(he_seg_kind_of(HE_SEG_TYPE_M3U8, master, 0), HE_SEG_KIND_MEDIA);

    HE_CHECK_STR(he_seg_kind_name(HE_SEG_KIND_MASTER), "master");
    HE_CHECK_STR(he_seg_kind_name(HE_SEG_KIND_MEDIA), "media");
    HE_CHECK_STR(he_seg_kind_name(HE_SEG_KIND_SEGMENT), "segment");
    HE_CHECK_STR(he_seg_kind_name(HE_SEG_KIND_OTHER), "other");
    HE_CHECK_STR(he_seg_kind_name(HE_SEG_KIND_COUNT), "other");
}

int main(void)
{
    test_extensions();
    test_mime_and_names();
    test_kinds();
    HE_TEST_MAIN_END();
}
