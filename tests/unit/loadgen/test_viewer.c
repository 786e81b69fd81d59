/* loadgen/viewer.c: the HLS viewer as the engine drives it, through
 * he_lg_viewer_ops only: master, media playlist, segments, the staggered
 * start through the timer, and the end of the run. */
#include "he_test.h"
#include "loadgen/abr.c"
#include "loadgen/rand.c"
#include "loadgen/url.c"
#include "loadgen/verify.c"
#include "loadgen/viewer.c"
#include "loadgen/llhls.c"
#include "loadgen/audience.c"
#include "lg_client_fake.h"

static const char master[] = "#EXTM3U\n"
                             "#EXT-X-STREAM-INF:BANDWIDTH=400000\nhi/index.m3u8\n"
                             "#EXT-X-STREAM-INF:BANDWIDTH=200000\nlo/index.m3u8\n";
static const char media[] = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
                            "#EXTINF:2.0,\ns0.ts\n#EXTINF:2.0,\ns1.ts\n#EXT-X-ENDLIST\n";

static void respond(const he_lg_client_ops_t *ops, lg_fake_t *f, const char *body)
{
    he_lg_result_t r = {
        .err = -1, .status = 200, .body = body, .body_len = body ? strlen(body) : 0};
    r.body_bytes = body ? r.body_len : 1000;
    r.total_ns = 1000000;
    ops->on_result(&f->v, &r);
}

int main(void)
{
    char *urls[] = {"http://127.0.0.1:8080/m/master.m3u8"};
    const he_lg_client_ops_t *ops = &he_lg_viewer_ops;
    lg_fake_t f;

    HE_CHECK(lg_ops_complete(ops));
    HE_CHECK_STR(ops->noun, "viewers");
    HE_CHECK(ops->stagger);

    /* a session: master, the lowest rendition (ABR starts low), segments */
    lg_fake_init(&f, urls, 1, HE_LG_MODE_HLS);
    ops->start(&f.v);
    HE_CHECK_INT(f.requests, 1);
    HE_CHECK_STR(f.target, "/m/master.m3u8");
    HE_CHECK(f.want_body);
    respond(ops, &f, master);
    HE_CHECK_INT(f.requests, 2);
    HE_CHECK_STR(f.target, "/m/lo/index.m3u8");
    respond(ops, &f, media);
    HE_CHECK_INT(f.requests, 3);
    HE_CHECK_STR(f.target, "/m/lo/s0.ts");
    HE_CHECK(!f.want_body);
    respond(ops, &f, NULL);
    HE_CHECK_INT(f.th.stats.segments, 1);
    HE_CHECK_INT(f.th.stats.playlists, 2);
    HE_CHECK_STR(f.target, "/m/lo/s1.ts");

    /* the run ends: finish once, then nothing moves it */
    ops->finish(&f.v);
    HE_CHECK_INT(f.v.stage, HE_LG_V_DONE);
    HE_CHECK_INT(f.th.stats.active, 0);
    ops->finish(&f.v);
    HE_CHECK_INT(f.th.stats.active, 0);
    respond(ops, &f, NULL);
    HE_CHECK_INT(f.requests, 4);
    HE_CHECK_INT(f.th.stats.segments, 1);
    ops->free(&f.v); /* the playlists it held: ASan sees a leak otherwise */
    lg_fake_free(&f);

    /* a staggered start: the engine arms the timer on a fresh slot and the
     * viewer's session begins in on_timer */
    lg_fake_init(&f, urls, 1, HE_LG_MODE_HLS);
    ops->on_timer(&f.v);
    HE_CHECK_INT(f.requests, 1);
    HE_CHECK_STR(f.target, "/m/master.m3u8");

    /* an error without a media playlist backs off on the timer, which then
     * starts a new session */
    he_lg_result_t fail = {.err = HE_LG_ERR_CLOSED};
    ops->on_result(&f.v, &fail);
    HE_CHECK_INT(f.timers, 1);
    HE_CHECK_INT(f.v.stage, HE_LG_V_BACKOFF);
    ops->on_timer(&f.v);
    HE_CHECK_INT(f.requests, 2);
    HE_CHECK_STR(f.target, "/m/master.m3u8");
    ops->finish(&f.v);
    HE_CHECK_INT(f.th.stats.active, 0);
    ops->free(&f.v);
    lg_fake_free(&f);
    he_lg_endpoints_reset();
    HE_TEST_MAIN_END();
}
