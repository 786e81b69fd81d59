/* The playlist parser (segment/playlist.c) on the shapes real packagers
 * write, and every error path with its "line N:" message. */
#include "he_test.h"

#include <errno.h>
#include <math.h>

#include "segment/segment.h"

static char err[256];

static int parse(const char *text, he_seg_playlist_t *pl)
{
    err[0] = '\0';
    return he_seg_playlist_parse(text, strlen(text), pl, err, sizeof(err));
}

#define CHECK_NEAR(a, b) HE_CHECK(fabs((double)(a) - (double)(b)) < 1e-9)

/* What ffmpeg writes with -master_pl_name and a five-way var_stream_map. */
static const char *ffmpeg_master = "#EXTM3U\n"
                                   "#EXT-X-VERSION:3\n"
                                   "#EXT-X-STREAM-INF:BANDWIDTH=6740800,AVERAGE-BANDWIDTH=5500000,"
                                   "RESOLUTION=1920x1080,FRAME-RATE=29.970,"
                                   "CODECS=\"avc1.640028,mp4a.40.2\"\n"
                                   "stream_0/index.m3u8\n"
                                   "\n"
                                   "#EXT-X-STREAM-INF:BANDWIDTH=3740800,RESOLUTION=1280x720,"
                                   "CODECS=\"avc1.64001f,mp4a.40.2\"\n"
                                   "stream_1/index.m3u8\n"
                                   "\n"
                                   "#EXT-X-STREAM-INF:BANDWIDTH=1940800,RESOLUTION=854x480,"
                                   "CODECS=\"avc1.64001e,mp4a.40.2\"\n"
                                   "stream_2/index.m3u8\n"
                                   "\n"
                                   "#EXT-X-STREAM-INF:BANDWIDTH=1040800,RESOLUTION=640x360,"
                                   "CODECS=\"avc1.64001e,mp4a.40.2\"\n"
                                   "stream_3/index.m3u8\n"
                                   "\n"
                                   "#EXT-X-STREAM-INF:BANDWIDTH=140800,CODECS=\"mp4a.40.2\"\n"
                                   "stream_4/index.m3u8\n";

static void test_master(void)
{
    he_seg_playlist_t pl;
    HE_CHECK_INT(parse(ffmpeg_master, &pl), 0);
    HE_CHECK_STR(err, "");
    HE_CHECK(pl.is_master);
    HE_CHECK(!he_seg_playlist_is_live(&pl));
    HE_CHECK_INT(pl.version, 3);
    HE_CHECK_INT(pl.nvariants, 5);
    HE_CHECK_INT(pl.nsegments, 0);
    if (pl.nvariants == 5) {
        he_seg_variant_t *v = pl.variants;
        HE_CHECK_STR(v[0].uri, "stream_0/index.m3u8");
        HE_CHECK_INT(v[0].bandwidth, 6740800);
        HE_CHECK_INT(v[0].average_bandwidth, 5500000);
        HE_CHECK_INT(v[0].width, 1920);
        HE_CHECK_INT(v[0].height, 1080);
        CHECK_NEAR(v[0].frame_rate, 29.97);
        HE_CHECK_STR(v[0].codecs, "avc1.640028,mp4a.40.2");
        HE_CHECK_STR(v[1].uri, "stream_1/index.m3u8");
        HE_CHECK_INT(v[1].bandwidth, 3740800);
        HE_CHECK_INT(v[1].average_bandwidth, 0);
        HE_CHECK_INT(v[1].width, 1280);
        HE_CHECK_INT(v[1].height, 720);
        CHECK_NEAR(v[1].frame_rate, 0);
        HE_CHECK_INT(v[2].width, 854);
        HE_CHECK_INT(v[3].height, 360);
        HE_CHECK_STR(v[4].uri, "stream_4/index.m3u8");
        HE_CHECK_INT(v[4].bandwidth, 140800);
        HE_CHECK_INT(v[4].width, 0);
        HE_CHECK_INT(v[4].height, 0);
        HE_CHECK_STR(v[4].codecs, "mp4a.40.2");
    }
    he_seg_playlist_free(&pl);
    HE_CHECK_INT(pl.nvariants, 0);
    he_seg_playlist_free(&pl); /* freeing twice is harmless */

    /* rendition groups, I-frame playlists and unknown attributes */
    HE_CHECK_INT(parse("#EXTM3U\n"
                       "#EXT-X-INDEPENDENT-SEGMENTS\n"
                       "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",NAME=\"English\",DEFAULT=YES,"
                       "URI=\"audio/en.m3u8\"\n"
                       "#EXT-X-STREAM-INF:BANDWIDTH=800000,AUDIO=\"aud\",CLOSED-CAPTIONS=NONE,"
                       "CODECS=\"avc1.4d401f\",HDCP-LEVEL=NONE\n"
                       "http://cdn.example/v/low.m3u8\n"
                       "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI=\"low/iframe.m3u8\"\n",
                       &pl),
                 0);
    HE_CHECK(pl.is_master);
    HE_CHECK_INT(pl.nvariants, 1);
    if (pl.nvariants == 1) {
        HE_CHECK_STR(pl.variants[0].uri, "http://cdn.example/v/low.m3u8");
        HE_CHECK_INT(pl.variants[0].bandwidth, 800000);
        HE_CHECK_STR(pl.variants[0].codecs, "avc1.4d401f");
    }
    he_seg_playlist_free(&pl);
}

static void test_media_vod(void)
{
    he_seg_playlist_t pl;
    HE_CHECK_INT(parse("#EXTM3U\n"
                       "#EXT-X-VERSION:3\n"
                       "#EXT-X-TARGETDURATION:4\n"
                       "#EXT-X-MEDIA-SEQUENCE:0\n"
                       "#EXT-X-PLAYLIST-TYPE:VOD\n"
                       "#EXTINF:4.004000,\n"
                       "stream_0_000.ts\n"
                       "#EXTINF:4.004000,\n"
                       "stream_0_001.ts\n"
                       "#EXTINF:1.501500,\n"
                       "stream_0_002.ts\n"
                       "#EXT-X-ENDLIST\n",
                       &pl),
                 0);
    HE_CHECK(!pl.is_master);
    HE_CHECK_INT(pl.version, 3);
    CHECK_NEAR(pl.target_duration, 4);
    HE_CHECK_INT(pl.media_sequence, 0);
    HE_CHECK_INT(pl.type, HE_SEG_PLAYLIST_VOD);
    HE_CHECK(pl.endlist);
    HE_CHECK(!he_seg_playlist_is_live(&pl));
    HE_CHECK_INT(pl.nsegments, 3);
    if (pl.nsegments == 3) {
        HE_CHECK_STR(pl.segments[0].uri, "stream_0_000.ts");
        HE_CHECK(pl.segments[0].duration == 4.004);
        HE_CHECK(pl.segments[2].duration == 1.5015);
        HE_CHECK_STR(pl.segments[2].uri, "stream_0_002.ts");
        for (size_t i = 0; i < 3; i++) {
            HE_CHECK_INT(pl.segments[i].sequence, i);
            HE_CHECK_INT(pl.segments[i].byterange_length, -1);
            HE_CHECK(!pl.segments[i].discontinuity);
            HE_CHECK(pl.segments[i].key_uri == NULL);
            HE_CHECK(pl.segments[i].map_uri == NULL);
        }
    }
    he_seg_playlist_free(&pl);

    /* version defaults to 1; integer durations; title after the comma */
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,Intro, part 1\na.ts\n"
                       "#EXTINF:9\nb.ts\n#EXT-X-ENDLIST",
                       &pl),
                 0);
    HE_CHECK_INT(pl.version, 1);
    HE_CHECK_INT(pl.type, HE_SEG_PLAYLIST_NONE);
    HE_CHECK(pl.endlist);
    HE_CHECK_INT(pl.nsegments, 2);
    if (pl.nsegments == 2) {
        CHECK_NEAR(pl.segments[0].duration, 10);
        CHECK_NEAR(pl.segments[1].duration, 9);
        HE_CHECK_STR(pl.segments[1].uri, "b.ts");
    }
    he_seg_playlist_free(&pl);
}

static void test_media_live_and_event(void)
{
    he_seg_playlist_t pl;
    HE_CHECK_INT(parse("#EXTM3U\n"
                       "#EXT-X-VERSION:6\n"
                       "#EXT-X-TARGETDURATION:2\n"
                       "#EXT-X-MEDIA-SEQUENCE:1234\n"
                       "#EXT-X-PROGRAM-DATE-TIME:2024-01-01T00:00:00.000Z\n"
                       "#EXTINF:2.000,\n"
                       "live_1234.ts\n"
                       "#EXTINF:2.000,\n"
                       "live_1235.ts\n"
                       "#EXTINF:2.000,\n"
                       "live_1236.ts\n",
                       &pl),
                 0);
    HE_CHECK(!pl.is_master);
    HE_CHECK(!pl.endlist);
    HE_CHECK(he_seg_playlist_is_live(&pl));
    HE_CHECK_INT(pl.media_sequence, 1234);
    HE_CHECK_INT(pl.nsegments, 3);
    if (pl.nsegments == 3) {
        HE_CHECK_INT(pl.segments[0].sequence, 1234);
        HE_CHECK_INT(pl.segments[1].sequence, 1235);
        HE_CHECK_INT(pl.segments[2].sequence, 1236);
        HE_CHECK_STR(pl.segments[2].uri, "live_1236.ts");
    }
    he_seg_playlist_free(&pl);

    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:EVENT\n"
                       "#EXTINF:6.0,\ne0.ts\n",
                       &pl),
                 0);
    HE_CHECK_INT(pl.type, HE_SEG_PLAYLIST_EVENT);
    HE_CHECK(he_seg_playlist_is_live(&pl));
    he_seg_playlist_free(&pl);

    /* an ended event */
    HE_CHECK_INT(
        parse("#EXTM3U\n#EXT-X-PLAYLIST-TYPE:EVENT\n#EXTINF:6,\ne0.ts\n#EXT-X-ENDLIST\n", &pl), 0);
    HE_CHECK(!he_seg_playlist_is_live(&pl));
    he_seg_playlist_free(&pl);

    /* a live playlist with no segments yet */
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-TARGETDURATION:6\n", &pl), 0);
    HE_CHECK_INT(pl.nsegments, 0);
    HE_CHECK(he_seg_playlist_is_live(&pl));
    he_seg_playlist_free(&pl);
    HE_CHECK(!he_seg_playlist_is_live(NULL));
}

static void test_byteranges(void)
{
    he_seg_playlist_t pl;
    HE_CHECK_INT(parse("#EXTM3U\n"
                       "#EXT-X-VERSION:4\n"
                       "#EXT-X-TARGETDURATION:10\n"
                       "#EXTINF:10,\n"
                       "#EXT-X-BYTERANGE:75232@0\n"
                       "main.ts\n"
                       "#EXT-X-BYTERANGE:82112\n" /* implicit: 75232 */
                       "#EXTINF:10,\n"
                       "main.ts\n"
                       "#EXTINF:10,\n"
                       "#EXT-X-BYTERANGE:69864\n" /* implicit: 157344 */
                       "main.ts\n"
                       "#EXTINF:10,\n"
                       "#EXT-X-BYTERANGE:1000@500\n" /* explicit resets */
                       "main.ts\n"
                       "#EXTINF:10,\n"
                       "#EXT-X-BYTERANGE:100\n" /* 1500 */
                       "main.ts\n"
                       "#EXTINF:10,\n"
                       "#EXT-X-BYTERANGE:100\n" /* other resource: starts at 0 */
                       "other.ts\n"
                       "#EXTINF:10,\n"
                       "whole.ts\n"
                       "#EXTINF:10,\n"
                       "#EXT-X-BYTERANGE:50\n" /* after a whole segment: 0 */
                       "whole.ts\n"
                       "#EXT-X-ENDLIST\n",
                       &pl),
                 0);
    HE_CHECK_INT(pl.nsegments, 8);
    if (pl.nsegments == 8) {
        he_seg_media_segment_t *s = pl.segments;
        HE_CHECK_INT(s[0].byterange_length, 75232);
        HE_CHECK_INT(s[0].byterange_offset, 0);
        HE_CHECK_INT(s[1].byterange_length, 82112);
        HE_CHECK_INT(s[1].byterange_offset, 75232);
        HE_CHECK_INT(s[2].byterange_length, 69864);
        HE_CHECK_INT(s[2].byterange_offset, 157344);
        HE_CHECK_INT(s[3].byterange_length, 1000);
        HE_CHECK_INT(s[3].byterange_offset, 500);
        HE_CHECK_INT(s[4].byterange_offset, 1500);
        HE_CHECK_STR(s[5].uri, "other.ts");
        HE_CHECK_INT(s[5].byterange_offset, 0);
        HE_CHECK_INT(s[6].byterange_length, -1);
        HE_CHECK_INT(s[7].byterange_length, 50);
        HE_CHECK_INT(s[7].byterange_offset, 0);
    }
    he_seg_playlist_free(&pl);

    HE_CHECK_INT(parse("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:9223372036854775807@0\na.ts\n", &pl),
                 0);
    he_seg_playlist_free(&pl);
    HE_CHECK_INT(parse("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:9223372036854775807@1\na.ts\n", &pl),
                 -EINVAL);
    HE_CHECK_STR(err, "line 3: bad number in EXT-X-BYTERANGE");
    HE_CHECK_INT(parse("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:9223372036854775807\na.ts\n"
                       "#EXTINF:1,\n#EXT-X-BYTERANGE:1\na.ts\n",
                       &pl),
                 -EINVAL);
    HE_CHECK_STR(err, "line 6: bad number in EXT-X-BYTERANGE");
    HE_CHECK_INT(parse("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:1@x\na.ts\n", &pl), -EINVAL);
    HE_CHECK_STR(err, "line 3: bad number in EXT-X-BYTERANGE");
}

static void test_keys_discontinuity_map(void)
{
    he_seg_playlist_t pl;
    HE_CHECK_INT(parse("#EXTM3U\n"
                       "#EXT-X-VERSION:7\n"
                       "#EXT-X-TARGETDURATION:6\n"
                       "#EXT-X-MAP:URI=\"init.mp4\"\n"
                       "#EXTINF:6,\n"
                       "s0.m4s\n"
                       "#EXT-X-KEY:METHOD=AES-128,URI=\"https://keys.example/k1.key\","
                       "IV=0x00000000000000000000000000000001\n"
                       "#EXTINF:6,\n"
                       "s1.m4s\n"
                       "#EXTINF:6,\n"
                       "s2.m4s\n"
                       "#EXT-X-DISCONTINUITY\n"
                       "#EXT-X-MAP:URI=\"init2.mp4\"\n"
                       "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"k2.key\",KEYFORMAT=\"identity\"\n"
                       "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://drm/k\","
                       "KEYFORMAT=\"com.apple.streamingkeydelivery\"\n"
                       "#EXTINF:6,\n"
                       "s3.m4s\n"
                       "#EXT-X-KEY:METHOD=NONE\n"
                       "#EXTINF:6,\n"
                       "s4.m4s\n"
                       "#EXT-X-KEY:METHOD=AES-128,URI=\"unused.key\"\n"
                       "#EXT-X-ENDLIST\n",
                       &pl),
                 0);
    HE_CHECK_INT(pl.nsegments, 5);
    if (pl.nsegments == 5) {
        he_seg_media_segment_t *s = pl.segments;
        HE_CHECK(s[0].key_uri == NULL);
        HE_CHECK_STR(s[0].map_uri, "init.mp4");
        HE_CHECK_STR(s[1].key_uri, "https://keys.example/k1.key");
        HE_CHECK_STR(s[2].key_uri, "https://keys.example/k1.key");
        HE_CHECK(s[1].key_uri == s[2].key_uri); /* shared, freed once */
        HE_CHECK(s[0].map_uri == s[2].map_uri);
        HE_CHECK(!s[2].discontinuity);
        HE_CHECK(s[3].discontinuity);
        HE_CHECK(!s[4].discontinuity);
        HE_CHECK_STR(s[3].key_uri, "k2.key"); /* the DRM key is not ours */
        HE_CHECK_STR(s[3].map_uri, "init2.mp4");
        HE_CHECK(s[4].key_uri == NULL);
        HE_CHECK_STR(s[4].map_uri, "init2.mp4");
    }
    he_seg_playlist_free(&pl);

    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-KEY:URI=\"k\"\n", &pl), -EINVAL);
    HE_CHECK_STR(err, "line 2: EXT-X-KEY without METHOD");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-KEY:METHOD=AES-256,URI=\"k\"\n", &pl), -EINVAL);
    HE_CHECK_STR(err, "line 2: bad METHOD in EXT-X-KEY");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128\n", &pl), -EINVAL);
    HE_CHECK_STR(err, "line 2: EXT-X-KEY without URI");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\n", &pl), -EINVAL);
    HE_CHECK_STR(err, "line 2: bad attribute list");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-MAP:BYTERANGE=\"1@0\"\n", &pl), -EINVAL);
    HE_CHECK_STR(err, "line 2: EXT-X-MAP without URI");
    /* errors after keys and maps are in use free them all (LSan checks) */
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n"
                       "#EXTINF:1,\na.ts\n#EXT-X-KEY:METHOD=AES-128,URI=\"k2\"\n"
                       "#EXT-X-MAP:URI=\"i2.mp4\"\n#EXTINF:x,\nb.ts\n",
                       &pl),
                 -EINVAL);
    HE_CHECK_STR(err, "line 8: bad number in EXTINF");
}

static void test_line_endings(void)
{
    he_seg_playlist_t pl;
    /* CRLF, a UTF-8 BOM, blank lines, comments and stray whitespace */
    HE_CHECK_INT(parse("\xEF\xBB\xBF#EXTM3U\r\n"
                       "\r\n"
                       "# a comment\r\n"
                       "#EXT-X-TARGETDURATION:6\r\n"
                       "#EXT-X-UNKNOWN-TAG:whatever\r\n"
                       "#EXTINF:6.0,\r\n"
                       "  seg 1.ts  \r\n"
                       "\r\n"
                       "#EXTINF:6.0,\r\n"
                       "seg2.ts\r\n"
                       "#EXT-X-ENDLIST\r\n",
                       &pl),
                 0);
    HE_CHECK_INT(pl.nsegments, 2);
    if (pl.nsegments == 2) {
        HE_CHECK_STR(pl.segments[0].uri, "seg 1.ts");
        HE_CHECK_STR(pl.segments[1].uri, "seg2.ts");
    }
    HE_CHECK(pl.endlist);
    he_seg_playlist_free(&pl);

    /* CRLF master with no final newline */
    HE_CHECK_INT(parse("#EXTM3U\r\n#EXT-X-STREAM-INF:BANDWIDTH=1000\r\nv.m3u8", &pl), 0);
    HE_CHECK_INT(pl.nvariants, 1);
    if (pl.nvariants == 1) HE_CHECK_STR(pl.variants[0].uri, "v.m3u8");
    he_seg_playlist_free(&pl);

    /* the length bounds the buffer: no NUL needed, none read past */
    const char text[] = "#EXTM3U\n#EXTINF:1,\na.ts\n#EXTINF:1,\nb.ts\n";
    HE_CHECK_INT(he_seg_playlist_parse(text, 24, &pl, err, sizeof(err)), 0);
    HE_CHECK_INT(pl.nsegments, 1);
    he_seg_playlist_free(&pl);
    HE_CHECK_INT(he_seg_playlist_parse(text, 35, &pl, err, sizeof(err)), -EINVAL);
    HE_CHECK_STR(err, "line 4: EXTINF without a following URI");
}

typedef struct bad_case {
    const char *text, *err;
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"", "line 1: missing #EXTM3U"},
    {"\xEF\xBB\xBF", "line 1: missing #EXTM3U"},
    {"#EXTINF:1,\na.ts\n", "line 1: missing #EXTM3U"},
    {"\n#EXTM3U\n", "line 1: missing #EXTM3U"},
    {"#EXTM3U8\n", "line 1: missing #EXTM3U"},
    {"<html>\n", "line 1: missing #EXTM3U"},
    {"#EXTM3U\n#EXTINF:10,\n", "line 2: EXTINF without a following URI"},
    {"#EXTM3U\n#EXTINF:10,\n#EXTINF:10,\na.ts\n", "line 2: EXTINF without a following URI"},
    {"#EXTM3U\n#EXTINF:10,\n#EXT-X-ENDLIST\n", "line 2: EXTINF without a following URI"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n",
     "line 2: EXT-X-STREAM-INF without a following URI"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n\n#EXT-X-STREAM-INF:BANDWIDTH=2\nv.m3u8\n",
     "line 2: EXT-X-STREAM-INF without a following URI"},
    {"#EXTM3U\n#EXTINF:abc,\na.ts\n", "line 2: bad number in EXTINF"},
    {"#EXTM3U\n#EXTINF:-1,\na.ts\n", "line 2: bad number in EXTINF"},
    {"#EXTM3U\n#EXTINF:1.2.3,\na.ts\n", "line 2: bad number in EXTINF"},
    {"#EXTM3U\n#EXTINF:,\na.ts\n", "line 2: bad number in EXTINF"},
    {"#EXTM3U\n#EXTINF\na.ts\n", "line 2: bad number in EXTINF"},
    {"#EXTM3U\n#EXT-X-TARGETDURATION:ten\n", "line 2: bad number in EXT-X-TARGETDURATION"},
    {"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:-1\n", "line 2: bad number in EXT-X-MEDIA-SEQUENCE"},
    {"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551616\n",
     "line 2: bad number in EXT-X-MEDIA-SEQUENCE"},
    {"#EXTM3U\n#EXT-X-VERSION:4294967296\n", "line 2: bad number in EXT-X-VERSION"},
    {"#EXTM3U\n#EXT-X-VERSION:\n", "line 2: bad number in EXT-X-VERSION"},
    {"#EXTM3U\n#EXT-X-PLAYLIST-TYPE:LIVE\n", "line 2: bad EXT-X-PLAYLIST-TYPE"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:RESOLUTION=1x1\nv.m3u8\n",
     "line 2: EXT-X-STREAM-INF without BANDWIDTH"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:\nv.m3u8\n", "line 2: EXT-X-STREAM-INF without BANDWIDTH"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=fast\nv.m3u8\n", "line 2: bad number in BANDWIDTH"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=\nv.m3u8\n", "line 2: bad number in BANDWIDTH"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,AVERAGE-BANDWIDTH=x\nv.m3u8\n",
     "line 2: bad number in AVERAGE-BANDWIDTH"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=1920\nv.m3u8\n",
     "line 2: bad number in RESOLUTION"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=x1080\nv.m3u8\n",
     "line 2: bad number in RESOLUTION"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,FRAME-RATE=fast\nv.m3u8\n",
     "line 2: bad number in FRAME-RATE"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1\nv.m3u8\n",
     "line 2: bad attribute list"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"a\"x\nv.m3u8\n",
     "line 2: bad attribute list"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH\nv.m3u8\n", "line 2: bad attribute list"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:=1\nv.m3u8\n", "line 2: bad attribute list"},
    {"#EXTM3U\n#EXT-X-TARGETDURATION:6\nseg.ts\n", "line 3: media segment without EXTINF"},
    {"#EXTM3U\n#EXTINF:6,\na.ts\nb.ts\n", "line 4: media segment without EXTINF"},
    {"#EXTM3U\nv.m3u8\n", "line 2: media segment without EXTINF"},
    {"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n#EXTINF:1,\na.ts\n",
     "line 4: #EXTINF mixes master and media tags"},
    {"#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n",
     "line 3: #EXT-X-STREAM-INF mixes master and media tags"},
    {"#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO\n#EXT-X-ENDLIST\n",
     "line 3: #EXT-X-ENDLIST mixes master and media tags"},
    {"#EXTM3U\n#EXTINF:1,\na\0b.ts\n", "line 3: control character"},
};

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        he_seg_playlist_t pl;
        const bad_case_t *c = &bad_cases[i];
        /* the one NUL-carrying case needs its real length */
        size_t len = strlen(c->text);
        if (strstr(c->err, "control")) len += 1 + strlen(c->text + len + 1);
        memset(&pl, 0x55, sizeof(pl));
        int rc = he_seg_playlist_parse(c->text, len, &pl, err, sizeof(err));
        if (rc != -EINVAL || strcmp(err, c->err) != 0) fprintf(stderr, "bad case %zu\n", i);
        HE_CHECK_INT(rc, -EINVAL);
        HE_CHECK_STR(err, c->err);
        /* on error nothing is left to free */
        HE_CHECK(pl.variants == NULL && pl.segments == NULL);
        HE_CHECK(pl.nvariants == 0 && pl.nsegments == 0);
    }

    /* err may be short or absent */
    he_seg_playlist_t pl;
    char small[8];
    HE_CHECK_INT(he_seg_playlist_parse("x", 1, &pl, small, sizeof(small)), -EINVAL);
    HE_CHECK_STR(small, "line 1:");
    HE_CHECK_INT(he_seg_playlist_parse("x", 1, &pl, NULL, 0), -EINVAL);
    HE_CHECK_INT(he_seg_playlist_parse(NULL, 0, &pl, err, sizeof(err)), -EINVAL);
}

static void test_numbers(void)
{
    he_seg_playlist_t pl;
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXT-X-MEDIA-SEQUENCE:"
                       "18446744073709551615\n#EXTINF:.5,\na.ts\n#EXTINF:7.,\nb.ts\n"
                       "#EXTINF:0.000000000000000000000000001,\nc.ts\n"
                       "#EXTINF:12345678901234567890123,\nd.ts\n",
                       &pl),
                 0);
    HE_CHECK(pl.media_sequence == UINT64_MAX);
    HE_CHECK_INT(pl.nsegments, 4);
    if (pl.nsegments == 4) {
        CHECK_NEAR(pl.segments[0].duration, 0.5);
        CHECK_NEAR(pl.segments[1].duration, 7);
        HE_CHECK(pl.segments[2].duration < 1e-20);
        HE_CHECK(fabs(pl.segments[3].duration / 1.2345678901234567890123e22 - 1) < 1e-12);
        HE_CHECK(pl.segments[0].sequence == UINT64_MAX);
        HE_CHECK(pl.segments[1].sequence == 0); /* wraps, as unsigned does */
    }
    he_seg_playlist_free(&pl);
}

int main(void)
{
    test_master();
    test_media_vod();
    test_media_live_and_event();
    test_byteranges();
    test_keys_discontinuity_map();
    test_line_endings();
    test_errors();
    test_numbers();
    HE_TEST_MAIN_END();
}
