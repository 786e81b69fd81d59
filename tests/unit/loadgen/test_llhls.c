/* loadgen/llhls.c: an --llhls viewer as the engine drives it, against
 * playlists written here (draft-pantos-hls-rfc8216bis): it starts
 * PART-HOLD-BACK from the end at an independent part, fetches the parts in
 * order, then the preload hint (6.2.6), then makes a blocking reload for
 * the next part with _HLS_skip=YES once it holds a full playlist that
 * advertises CAN-SKIP-UNTIL (6.2.5.1, 6.2.5.2); it counts 503 and 400
 * answers, and a reload the server answered without holding waits half a
 * part target instead of asking again at once. */
#include "he_test.h"
#include "loadgen/abr.c"
#include "loadgen/rand.c"
#include "loadgen/url.c"
#include "loadgen/verify.c"
#include "loadgen/viewer.c"
#include "loadgen/llhls.c"
#include "loadgen/audience.c"
#include "lg_client_fake.h"

/* segments 10 and 11 complete, two parts of 12 out, the hint names 12.2;
 * parts 0 and 2 of each segment start with an IDR frame */
static const char ll1[] =
    "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:4\n"
    "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=3.0,CAN-SKIP-UNTIL=24\n"
    "#EXT-X-PART-INF:PART-TARGET=1.0\n#EXT-X-MEDIA-SEQUENCE:10\n#EXT-X-MAP:URI=\"init.mp4\"\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p10.0.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p10.1.m4s\"\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p10.2.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p10.3.m4s\"\n#EXTINF:4.0,\ns10.m4s\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.0.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.1.m4s\"\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.2.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.3.m4s\"\n#EXTINF:4.0,\ns11.m4s\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p12.0.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p12.1.m4s\"\n"
    "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"p12.2.m4s\"\n";

/* the delta answer to a reload for 12.3: 12.2, 12.3 and so segment 12 out */
static const char ll2[] =
    "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:4\n"
    "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=3.0,CAN-SKIP-UNTIL=24\n"
    "#EXT-X-PART-INF:PART-TARGET=1.0\n#EXT-X-MEDIA-SEQUENCE:10\n#EXT-X-MAP:URI=\"init.mp4\"\n"
    "#EXT-X-SKIP:SKIPPED-SEGMENTS=1\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.0.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.1.m4s\"\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.2.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p11.3.m4s\"\n#EXTINF:4.0,\ns11.m4s\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p12.0.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p12.1.m4s\"\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p12.2.m4s\",INDEPENDENT=YES\n"
    "#EXT-X-PART:DURATION=1.0,URI=\"p12.3.m4s\"\n#EXTINF:4.0,\ns12.m4s\n"
    "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"p13.0.m4s\"\n";

static void respond(const he_lg_client_ops_t *ops, lg_fake_t *f, int status, const char *body)
{
    he_lg_result_t r = {.err = status >= 400 ? HE_LG_ERR_STATUS : -1,
                        .status = status,
                        .body = body,
                        .body_len = body ? strlen(body) : 0};
    r.body_bytes = body ? r.body_len : 1000;
    r.total_ns = 500000000;
    f->th.now += r.total_ns;
    ops->on_result(&f->v, &r);
}

int main(void)
{
    char *urls[] = {"http://127.0.0.1:8080/live/360p/index.m3u8"};
    const he_lg_client_ops_t *ops = &he_lg_viewer_ops;
    lg_fake_t f;
    HE_CHECK(lg_ops_complete(ops) && ops->leave);

    lg_fake_init(&f, urls, 1, HE_LG_MODE_HLS);
    f.cfg.llhls = true;
    f.cfg.pace = HE_LG_PACE_REALTIME;
    ops->start(&f.v);
    HE_CHECK_STR(f.target, "/live/360p/index.m3u8");
    respond(ops, &f, 200, ll1);
    HE_CHECK(he_lg_llhls_active(&f.v));
    /* 3 s back from the end (12.1) is 11.3; the independent part before it: 11.2 */
    HE_CHECK_STR(f.target, "/live/360p/p11.2.m4s");
    HE_CHECK(!f.want_body);
    respond(ops, &f, 200, NULL);
    HE_CHECK_STR(f.target, "/live/360p/p11.3.m4s");
    respond(ops, &f, 200, NULL);
    HE_CHECK_STR(f.target, "/live/360p/p12.0.m4s"); /* past the segment's last part */
    respond(ops, &f, 200, NULL);
    HE_CHECK_STR(f.target, "/live/360p/p12.1.m4s");
    respond(ops, &f, 200, NULL);
    /* nothing listed is left: the preload hint */
    HE_CHECK_STR(f.target, "/live/360p/p12.2.m4s");
    respond(ops, &f, 200, NULL);
    HE_CHECK_INT(f.th.stats.ll.hints, 1);
    HE_CHECK_INT(f.th.stats.ll.parts, 5);
    /* then a blocking reload for the part after it, asking for a delta */
    HE_CHECK_STR(f.target, "/live/360p/index.m3u8?_HLS_msn=12&_HLS_part=3&_HLS_skip=YES");
    HE_CHECK(f.want_body);
    respond(ops, &f, 200, ll2);
    HE_CHECK_INT(f.th.stats.ll.reloads, 1);
    HE_CHECK_INT(f.th.stats.ll.deltas, 1);
    HE_CHECK_INT(f.th.stats.ll.hold_us.count, 1);
    HE_CHECK_INT(f.th.stats.ll.latency_ms.count, 1); /* the play head has a place in ll2 */
    HE_CHECK_STR(f.target, "/live/360p/p12.3.m4s");
    respond(ops, &f, 200, NULL);
    HE_CHECK_STR(f.target, "/live/360p/p13.0.m4s"); /* the new hint */
    /* the hint fails (not there): a blocking reload for that part instead */
    respond(ops, &f, 404, "gone");
    HE_CHECK_STR(f.target, "/live/360p/index.m3u8?_HLS_msn=13&_HLS_part=0&_HLS_skip=YES");
    /* 503: counted, the same reload again after a part target */
    int timers = f.timers;
    respond(ops, &f, 503, "");
    HE_CHECK_INT(f.th.stats.ll.st503, 1);
    HE_CHECK_INT(f.timers, timers + 1);
    ops->on_timer(&f.v);
    HE_CHECK_STR(f.target, "/live/360p/index.m3u8?_HLS_msn=13&_HLS_part=0&_HLS_skip=YES");
    /* the same playlist back at once: the server did not hold; no tight loop */
    int reqs = f.requests;
    respond(ops, &f, 200, ll2);
    HE_CHECK_INT(f.th.stats.ll.not_held, 1);
    HE_CHECK_INT(f.requests, reqs);
    HE_CHECK(f.timer_at >= f.th.now + 400000000ull);
    ops->on_timer(&f.v);
    HE_CHECK_INT(f.requests, reqs + 1);
    /* 400: counted, then a reload without directives */
    respond(ops, &f, 400, "");
    HE_CHECK_INT(f.th.stats.ll.st400, 1);
    HE_CHECK_STR(f.target, "/live/360p/index.m3u8");
    HE_CHECK_INT(f.th.stats.stalls, 0);

    ops->finish(&f.v);
    ops->free(&f.v);
    lg_fake_free(&f);

    /* a playlist without parts is not one an LL viewer can play */
    lg_fake_init(&f, urls, 1, HE_LG_MODE_HLS);
    f.cfg.llhls = true;
    ops->start(&f.v);
    respond(ops, &f, 200, "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns0.ts\n");
    HE_CHECK(!he_lg_llhls_active(&f.v));
    HE_CHECK_INT(f.th.stats.err[HE_LG_ERR_PLAYLIST], 1);
    ops->free(&f.v);
    lg_fake_free(&f);
    he_lg_endpoints_reset();
    HE_TEST_MAIN_END();
}
