/* The low-latency view (segment/playlist_ll.c): LL tags, "holds msn M
 * part N" for blocking reloads (draft-pantos-hls-rfc8216bis 6.2.5.2) and
 * delta updates (4.4.5.2, 6.2.5.1, section 8). */
#include "he_test.h"

#include <errno.h>
#include <math.h>

#include "segment/segment.h"

static char err[256];

static int parse(const char *text, he_seg_ll_t *ll)
{
    err[0] = '\0';
    return he_seg_ll_parse(text, strlen(text), ll, err, sizeof(err));
}

#define CHECK_NEAR(a, b) HE_CHECK(fabs((double)(a) - (double)(b)) < 1e-9)

/* The shape of Apple's LL-HLS sample: 4 s segments of 1 s parts, the
 * segment in progress (msn 103) with two parts and a hint for the third. */
static const char *ll_live = "#EXTM3U\n"
                             "#EXT-X-VERSION:6\n"
                             "#EXT-X-TARGETDURATION:4\n"
                             "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=8.0,"
                             "CAN-SKIP-DATERANGES=YES,PART-HOLD-BACK=3.0,HOLD-BACK=12\n"
                             "#EXT-X-PART-INF:PART-TARGET=1.0\n"
                             "#EXT-X-MEDIA-SEQUENCE:100\n"
                             "#EXT-X-MAP:URI=\"init.mp4\"\n"
                             "#EXT-X-DATERANGE:ID=\"ad1\",START-DATE=\"2026-01-01T00:00:00Z\"\n"
                             "#EXTINF:4.0,\n"
                             "s100.m4s\n"
                             "#EXTINF:4.0,\n"
                             "s101.m4s\n"
                             "#EXT-X-PART:DURATION=1.0,URI=\"p102.0.m4s\",INDEPENDENT=YES\n"
                             "#EXT-X-PART:DURATION=1.0,URI=\"p102.1.m4s\"\n"
                             "#EXT-X-PART:DURATION=1.0,URI=\"p102.2.m4s\",GAP=YES\n"
                             "#EXT-X-PART:DURATION=1.0,URI=\"s102.m4s\",BYTERANGE=1000@200\n"
                             "#EXTINF:4.0,\n"
                             "s102.m4s\n"
                             "#EXT-X-PART:DURATION=1.0,URI=\"p103.0.m4s\",INDEPENDENT=YES\n"
                             "#EXT-X-PART:DURATION=1.0,URI=\"p103.1.m4s\"\n"
                             "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"p103.2.m4s\","
                             "BYTERANGE-START=10\n"
                             "#EXT-X-RENDITION-REPORT:URI=\"../b/index.m3u8\",LAST-MSN=103\n";

static void test_tags(void)
{
    he_seg_ll_t ll;
    HE_CHECK_INT(parse(ll_live, &ll), 0);
    HE_CHECK(ll.can_block_reload);
    HE_CHECK(ll.can_skip_dateranges);
    CHECK_NEAR(ll.can_skip_until, 8.0);
    CHECK_NEAR(ll.part_hold_back, 3.0);
    CHECK_NEAR(ll.hold_back, 12.0);
    CHECK_NEAR(ll.part_target, 1.0);
    CHECK_NEAR(ll.pl.target_duration, 4.0);
    HE_CHECK(!ll.pl.endlist);
    HE_CHECK(ll.has_segments);
    HE_CHECK_INT(ll.first_msn, 100);
    HE_CHECK_INT(ll.last_msn, 102);
    HE_CHECK_INT(ll.nparts, 6);
    HE_CHECK_INT(ll.parts[0].msn, 102);
    HE_CHECK_INT(ll.parts[0].index, 0);
    HE_CHECK(ll.parts[0].independent);
    HE_CHECK(!ll.parts[1].independent);
    HE_CHECK(ll.parts[2].gap);
    HE_CHECK_INT(ll.parts[3].byterange_length, 1000);
    HE_CHECK_INT(ll.parts[3].byterange_offset, 200);
    HE_CHECK_INT(ll.parts[1].byterange_length, -1);
    HE_CHECK_INT(ll.parts[4].msn, 103);
    HE_CHECK_INT(ll.parts[5].index, 1);
    HE_CHECK(ll.parts[5].uri_len == 10 && memcmp(ll.parts[5].uri, "p103.1.m4s", 10) == 0);
    HE_CHECK(ll.has_parts);
    HE_CHECK_INT(ll.last_part_msn, 103);
    HE_CHECK_INT(ll.last_part_index, 1);
    HE_CHECK(ll.has_hint && !ll.hint_is_map);
    HE_CHECK(ll.hint_uri_len == 10 && memcmp(ll.hint_uri, "p103.2.m4s", 10) == 0);
    HE_CHECK_INT(ll.hint_start, 10);
    HE_CHECK_INT(ll.hint_length, -1); /* open-ended (RFC 8673) */
    HE_CHECK(!ll.is_delta);
    he_seg_ll_free(&ll);
    HE_CHECK(ll.parts == NULL && ll.pl.segments == NULL);
}

/* 6.2.5.2: segment M, or part N of it, or a later one. */
static void test_holds(void)
{
    he_seg_ll_t ll;
    HE_CHECK_INT(parse(ll_live, &ll), 0);
    HE_CHECK(he_seg_ll_holds(&ll, 100, -1));
    HE_CHECK(he_seg_ll_holds(&ll, 102, -1));
    HE_CHECK(!he_seg_ll_holds(&ll, 103, -1)); /* in progress: not complete */
    HE_CHECK(he_seg_ll_holds(&ll, 103, 0));
    HE_CHECK(he_seg_ll_holds(&ll, 103, 1));
    HE_CHECK(!he_seg_ll_holds(&ll, 103, 2));
    HE_CHECK(!he_seg_ll_holds(&ll, 104, 0));
    HE_CHECK(he_seg_ll_holds(&ll, 102, 3));
    /* past the last part of complete 102 (4 parts): part 0 of 103 */
    HE_CHECK(he_seg_ll_holds(&ll, 102, 4));
    HE_CHECK(he_seg_ll_holds(&ll, 101, 7)); /* parts gone, segment complete */
    /* the Advance Part Limit: 3 parts at PART-TARGET 1 s */
    HE_CHECK_INT(he_seg_ll_advance_part_limit(&ll), 3);
    HE_CHECK_INT(he_seg_ll_parts_ahead(&ll, 103, 2), 1);
    HE_CHECK_INT(he_seg_ll_parts_ahead(&ll, 103, 1), 0);
    HE_CHECK_INT(he_seg_ll_parts_ahead(&ll, 104, 0), 3); /* 4 parts a segment: 103.2 103.3 104.0 */
    HE_CHECK_INT(he_seg_ll_parts_ahead(&ll, 104, 1), 4);
    HE_CHECK_INT(he_seg_ll_parts_ahead(&ll, 100, 9), 0);
    he_seg_ll_free(&ll);

    /* the last segment just completed, nothing of the next yet */
    const char *edge =
        "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PART-INF:PART-TARGET=0.5\n"
        "#EXT-X-MEDIA-SEQUENCE:7\n"
        "#EXT-X-PART:DURATION=0.5,URI=\"a.0\"\n#EXT-X-PART:DURATION=0.5,URI=\"a.1\"\n"
        "#EXTINF:1.0,\na.m4s\n";
    HE_CHECK_INT(parse(edge, &ll), 0);
    HE_CHECK_INT(ll.last_msn, 7);
    HE_CHECK(he_seg_ll_holds(&ll, 7, 1));
    HE_CHECK(!he_seg_ll_holds(&ll, 7, 2)); /* = 8.0, not there yet */
    HE_CHECK(!he_seg_ll_holds(&ll, 8, 0));
    HE_CHECK_INT(he_seg_ll_advance_part_limit(&ll), 6); /* 3 / 0.5 */
    HE_CHECK_INT(he_seg_ll_parts_ahead(&ll, 8, 0), 1);
    HE_CHECK_INT(he_seg_ll_parts_ahead(&ll, 9, 0), 5);
    he_seg_ll_free(&ll);
}

/* 4.4.5.2 and 6.2.5.1: segments that end CAN-SKIP-UNTIL or more before
 * the end go; tags of the whole playlist, the key and map in force stay. */
static void test_delta(void)
{
    he_seg_ll_t ll;
    char *out;
    size_t n;
    HE_CHECK_INT(parse(ll_live, &ll), 0);
    /* 100 ends 8 s before the end (101 and 102 follow): skipped; 101 not */
    HE_CHECK_INT(he_seg_ll_delta(ll_live, strlen(ll_live), &ll, HE_SEG_LL_SKIP_YES, NULL, &out, &n),
                 0);
    HE_CHECK(out && strlen(out) == n);
    HE_CHECK(strstr(out, "#EXT-X-VERSION:9\n") != NULL); /* section 8 */
    HE_CHECK(strstr(out, "#EXT-X-VERSION:6") == NULL);
    HE_CHECK(strstr(out, "#EXT-X-SKIP:SKIPPED-SEGMENTS=1\n") != NULL);
    HE_CHECK(strstr(out, "s100.m4s") == NULL);
    HE_CHECK(strstr(out, "s101.m4s") != NULL);
    HE_CHECK(strstr(out, "#EXT-X-MEDIA-SEQUENCE:100\n") != NULL);
    HE_CHECK(strstr(out, "#EXT-X-MAP:URI=\"init.mp4\"") != NULL);
    HE_CHECK(strstr(out, "ID=\"ad1\"") != NULL); /* YES keeps date ranges */
    HE_CHECK(strstr(out, "PRELOAD-HINT") != NULL);
    /* the delta parses, and its segments keep their numbers */
    he_seg_ll_t d;
    HE_CHECK_INT(parse(out, &d), 0);
    HE_CHECK(d.is_delta);
    HE_CHECK_INT(d.first_msn, 101);
    HE_CHECK_INT(d.last_msn, 102);
    HE_CHECK_INT(d.last_part_msn, 103);
    he_seg_ll_free(&d);
    /* a delta is not made from a delta */
    char *o2;
    size_t n2;
    HE_CHECK_INT(parse(out, &d), 0);
    HE_CHECK_INT(he_seg_ll_delta(out, n, &d, HE_SEG_LL_SKIP_YES, NULL, &o2, &n2), -EINVAL);
    he_seg_ll_free(&d);
    free(out);

    HE_CHECK_INT(
        he_seg_ll_delta(ll_live, strlen(ll_live), &ll, HE_SEG_LL_SKIP_V2, "ad0\tad9", &out, &n), 0);
    HE_CHECK(strstr(out, "#EXT-X-VERSION:10\n") != NULL);
    HE_CHECK(strstr(out, "SKIPPED-SEGMENTS=1,RECENTLY-REMOVED-DATERANGES=\"ad0\tad9\"\n") != NULL);
    HE_CHECK(strstr(out, "ID=\"ad1\"") == NULL); /* v2 skips date ranges too */
    free(out);
    he_seg_ll_free(&ll);

    /* nothing old enough: the full playlist answers */
    const char *short_pl = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n"
                           "#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=24\n"
                           "#EXTINF:4,\na.ts\n#EXTINF:4,\nb.ts\n";
    HE_CHECK_INT(parse(short_pl, &ll), 0);
    HE_CHECK_INT(
        he_seg_ll_delta(short_pl, strlen(short_pl), &ll, HE_SEG_LL_SKIP_YES, NULL, &out, &n), 1);
    HE_CHECK(out == NULL);
    he_seg_ll_free(&ll);
    /* no CAN-SKIP-UNTIL: no delta */
    const char *plain = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\na.ts\n";
    HE_CHECK_INT(parse(plain, &ll), 0);
    HE_CHECK_INT(he_seg_ll_delta(plain, strlen(plain), &ll, HE_SEG_LL_SKIP_YES, NULL, &out, &n),
                 -EINVAL);
    he_seg_ll_free(&ll);
}

static void test_errors(void)
{
    he_seg_ll_t ll;
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-PART:URI=\"a\"\n", &ll), -EINVAL);
    HE_CHECK_STR(err, "line 2: EXT-X-PART without DURATION");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-PART:DURATION=1\n", &ll), -EINVAL);
    HE_CHECK_STR(err, "line 2: EXT-X-PART without URI");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-PART:DURATION=x,URI=\"a\"\n", &ll), -EINVAL);
    HE_CHECK_STR(err, "line 2: bad number in DURATION");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=-1\n", &ll), -EINVAL);
    HE_CHECK_STR(err, "line 2: bad number in CAN-SKIP-UNTIL");
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-PRELOAD-HINT:URI=\"a\"\n", &ll), -EINVAL);
    HE_CHECK_STR(err, "line 2: EXT-X-PRELOAD-HINT without TYPE or URI");
    HE_CHECK_INT(parse("#EXTM3U\n#EXTINF:1,\na\n#EXT-X-SKIP:SKIPPED-SEGMENTS=3\n", &ll), -EINVAL);
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n", &ll), -EINVAL);
    HE_CHECK_STR(err, "line 1: a master playlist has no low-latency view");
    HE_CHECK_INT(parse("#EXTM3U\n#EXTINF:1,\n", &ll), -EINVAL); /* the parser's own errors */
    HE_CHECK_STR(err, "line 2: EXTINF without a following URI");
    HE_CHECK(ll.parts == NULL && ll.nparts == 0);
    /* ENDLIST and a MAP hint */
    HE_CHECK_INT(parse("#EXTM3U\n#EXT-X-PRELOAD-HINT:TYPE=MAP,URI=\"i.mp4\"\n#EXTINF:1,\na\n"
                       "#EXT-X-ENDLIST\n",
                       &ll),
                 0);
    HE_CHECK(ll.pl.endlist);
    HE_CHECK(ll.has_hint && ll.hint_is_map);
    HE_CHECK(!ll.has_parts);
    he_seg_ll_free(&ll);
}

int main(void)
{
    test_tags();
    test_holds();
    test_delta();
    test_errors();
    HE_TEST_MAIN_END();
}
