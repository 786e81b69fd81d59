/* cache/prefetch.c: segment N gives N+1..N+k from the rendition's media
 * playlist (relative, absolute-path and foreign URIs; the query kept in
 * the target, not in the key); cached and in-flight segments are skipped
 * without counting hits; the playlist's freshness is reported; a live
 * playlist update moves the window; renditions are forgotten LRU; master
 * playlists refused; the playlist read from a cached object; a prefetched
 * object's first hit counts as used. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cache/fill.h"
#include "cache/fresh.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/origin.h"
#include "cache/prefetch.h"
#include "cache/stats.h"
#include "he_test.h"

#define NOW 1700000000000ll

static he_conf_t conf;

static const char vod[] = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n"
                          "#EXT-X-PLAYLIST-TYPE:VOD\n"
                          "#EXTINF:4,\nseg_0.ts\n#EXTINF:4,\nseg_1.ts\n#EXTINF:4,\nseg_2.ts\n"
                          "#EXTINF:4,\nseg_3.ts\n#EXTINF:4,\nhttp://other.example/seg_4.ts\n"
                          "#EXTINF:4,\nseg_5.ts?tok=abc\n#EXTINF:4,\n../shared/seg_6.ts\n"
                          "#EXTINF:4,\n/abs/seg_7.ts\n#EXTINF:4,\nseg_8.ts\n#EXT-X-ENDLIST\n";

typedef struct present {
    const char *skip;
    int calls;
} present_t;

static bool fake_present(void *ctx, const he_cache_key_t *key)
{
    present_t *p = ctx;
    p->calls++;
    return p->skip && strcmp(key->s, p->skip) == 0;
}

static void test_window(void)
{
    he_cache_prefetch_t *p = he_cache_prefetch_new(&conf, 4);
    he_cache_prefetch_item_t out[8];
    present_t pr = {0};
    bool stale;
    int n;

    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "vod/720p/index.m3u8", NULL, vod, strlen(vod), NOW + 1000),
        0);
    conf.prefetch_segments = 2;
    n = he_cache_prefetch_next(p, "vod/720p/seg_1.ts", NOW, fake_present, &pr, out, 8, &stale);
    HE_CHECK_INT(n, 2);
    HE_CHECK(!stale);
    HE_CHECK_STR(out[0].key.s, "vod/720p/seg_2.ts");
    HE_CHECK_STR(out[0].target, "/vod/720p/seg_2.ts");
    HE_CHECK_STR(out[1].key.s, "vod/720p/seg_3.ts");

    /* the foreign URI is skipped, the query stays in the target only */
    conf.prefetch_segments = 4;
    n = he_cache_prefetch_next(p, "vod/720p/seg_3.ts", NOW, fake_present, &pr, out, 8, &stale);
    HE_CHECK_INT(n, 3);
    HE_CHECK_STR(out[0].key.s, "vod/720p/seg_5.ts");
    HE_CHECK_STR(out[0].target, "/vod/720p/seg_5.ts?tok=abc");
    HE_CHECK_STR(out[1].key.s, "vod/shared/seg_6.ts");
    HE_CHECK_STR(out[2].key.s, "abs/seg_7.ts");
    HE_CHECK_STR(out[2].target, "/abs/seg_7.ts");
    /* segments under other directories are found too */
    n = he_cache_prefetch_next(p, "vod/shared/seg_6.ts", NOW, fake_present, &pr, out, 8, &stale);
    HE_CHECK_INT(n, 2);
    HE_CHECK_STR(out[1].key.s, "vod/720p/seg_8.ts");
    /* a key parameter named by the config goes into the key */
    strcpy(conf.cache_key_params[0], "tok");
    conf.ncache_key_params = 1;
    n = he_cache_prefetch_next(p, "vod/720p/seg_3.ts", NOW, NULL, NULL, out, 1, &stale);
    HE_CHECK_INT(n, 1);
    HE_CHECK_STR(out[0].key.s, "vod/720p/seg_5.ts?tok=abc");
    conf.ncache_key_params = 0;

    /* what is present is skipped; max bounds the output */
    pr.skip = "vod/720p/seg_2.ts";
    n = he_cache_prefetch_next(p, "vod/720p/seg_0.ts", NOW, fake_present, &pr, out, 2, &stale);
    HE_CHECK_INT(n, 2);
    HE_CHECK_STR(out[0].key.s, "vod/720p/seg_1.ts");
    HE_CHECK_STR(out[1].key.s, "vod/720p/seg_3.ts");
    pr.skip = NULL;
    /* the end of the playlist, an unknown segment, a stale playlist */
    HE_CHECK_INT(he_cache_prefetch_next(p, "vod/720p/seg_8.ts", NOW, NULL, NULL, out, 8, &stale),
                 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, "vod/480p/seg_1.ts", NOW, NULL, NULL, out, 8, &stale),
                 0);
    HE_CHECK(!stale);
    he_cache_prefetch_next(p, "vod/720p/seg_1.ts", NOW + 1000, NULL, NULL, out, 8, &stale);
    HE_CHECK(stale);
    /* the same bytes again only extend the freshness */
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "vod/720p/index.m3u8", NULL, vod, strlen(vod), NOW + 5000),
        0);
    he_cache_prefetch_next(p, "vod/720p/seg_1.ts", NOW + 1000, NULL, NULL, out, 8, &stale);
    HE_CHECK(!stale);

    /* master playlists and garbage are refused */
    static const char master[] = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\n720p/index.m3u8\n";
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "vod/master.m3u8", NULL, master, strlen(master), NOW),
        -EINVAL);
    HE_CHECK_INT(he_cache_prefetch_playlist(p, "vod/x.m3u8", NULL, "junk", 4, NOW), -EINVAL);
    HE_CHECK_INT(he_cache_prefetch_renditions(p), 1);
    he_cache_prefetch_free(p);
}

static void live_playlist(char *buf, size_t cap, unsigned first, unsigned count)
{
    size_t n = (size_t)snprintf(buf, cap,
                                "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
                                "#EXT-X-MEDIA-SEQUENCE:%u\n",
                                first);
    for (unsigned i = first; i < first + count; i++)
        n += (size_t)snprintf(buf + n, cap - n, "#EXTINF:2.0,\nseg_%u.ts\n", i);
}

static void test_live_and_lru(void)
{
    he_cache_prefetch_t *p = he_cache_prefetch_new(&conf, 2);
    he_cache_prefetch_item_t out[8];
    char pl[2048];
    bool stale;
    conf.prefetch_segments = 3;

    live_playlist(pl, sizeof(pl), 10, 4); /* 10..13 */
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "live/a/index.m3u8", NULL, pl, strlen(pl), NOW + 1000), 0);
    /* at the live edge: only what the playlist has */
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/a/seg_12.ts", NOW, NULL, NULL, out, 8, &stale), 1);
    HE_CHECK_STR(out[0].key.s, "live/a/seg_13.ts");
    /* the playlist moves on: 12..16 */
    live_playlist(pl, sizeof(pl), 12, 5);
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "live/a/index.m3u8", NULL, pl, strlen(pl), NOW + 2000), 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/a/seg_12.ts", NOW, NULL, NULL, out, 8, &stale), 3);
    HE_CHECK_STR(out[2].key.s, "live/a/seg_15.ts");
    /* segments that left the playlist are forgotten */
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/a/seg_10.ts", NOW, NULL, NULL, out, 8, &stale), 0);

    /* two renditions kept: a third pushes out the least recently used */
    live_playlist(pl, sizeof(pl), 0, 4);
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "live/b/index.m3u8", NULL, pl, strlen(pl), NOW + 2000), 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/a/seg_13.ts", NOW, NULL, NULL, out, 8, &stale), 3);
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "live/c/index.m3u8", NULL, pl, strlen(pl), NOW + 2000), 0);
    HE_CHECK_INT(he_cache_prefetch_renditions(p), 2);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/b/seg_0.ts", NOW, NULL, NULL, out, 8, &stale), 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/a/seg_13.ts", NOW, NULL, NULL, out, 8, &stale), 3);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/c/seg_0.ts", NOW, NULL, NULL, out, 8, &stale), 3);
    he_cache_prefetch_free(p);
}

static he_cache_obj_t *put(he_cache_ram_t *ram, const char *name, const char *body, int kind,
                           bool prefetched, int64_t expires)
{
    he_cache_key_t k;
    he_cache_meta_t m = {.status = 200, .kind = (uint8_t)kind, .prefetched = prefetched};
    he_cache_obj_t *o;
    he_cache_key_set(&k, name, strlen(name));
    o = he_cache_obj_new(ram, 0, &k, strlen(body));
    he_cache_obj_append(o, body, strlen(body), NULL);
    m.fresh.stored_ms = NOW;
    m.fresh.expires_ms = expires;
    he_cache_obj_set_meta(o, &m);
    he_cache_obj_finish(o);
    he_cache_ram_insert(ram, o, NULL);
    return o;
}

static void test_with_cache(void)
{
    he_cache_ram_opts_t ro = {.bytes = 8 << 20, .chunk_size = 1024};
    he_cache_ram_t *ram = he_cache_ram_new(&ro);
    he_cache_stats_t st;
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    he_cache_prefetch_t *p = he_cache_prefetch_new(&conf, 8);
    he_cache_present_ctx_t pc = {.ram = ram, .fills = fs};
    he_cache_prefetch_item_t out[8];
    bool stale, created;
    char pl[2048];
    memset(&st, 0, sizeof(st));
    conf.prefetch_segments = 3;

    /* the playlist from the cache's own copy */
    live_playlist(pl, sizeof(pl), 0, 6);
    he_cache_obj_t *plo = put(ram, "live/x/index.m3u8", pl, HE_SEG_KIND_MEDIA, false, NOW + 1000);
    HE_CHECK_INT(he_cache_prefetch_playlist_obj(p, plo, NULL), 0);
    he_cache_obj_unref(plo);
    /* seg_1 is cached, seg_2 is being filled: only seg_3 is left */
    he_cache_obj_t *c1 =
        put(ram, "live/x/seg_1.ts", "one", HE_SEG_KIND_SEGMENT, false, NOW + 60000);
    he_cache_obj_unref(c1);
    he_cache_key_t k2;
    he_cache_key_set(&k2, "live/x/seg_2.ts", 15);
    he_cache_fill_t *f2 = he_cache_fill_join(fs, &k2, NULL, NULL, true, &created);
    HE_CHECK_INT(
        he_cache_prefetch_next(p, "live/x/seg_0.ts", NOW, he_cache_present, &pc, out, 8, &stale),
        1);
    HE_CHECK_STR(out[0].key.s, "live/x/seg_3.ts");
    HE_CHECK_INT(st.hits[HE_CACHE_TIER_RAM] + st.misses[HE_CACHE_TIER_RAM], 0); /* not lookups */

    /* the worker starts the fill; the object arrives with the prefetch mark */
    he_cache_fill_t *f3 = he_cache_fill_join(fs, &out[0].key, NULL, NULL, true, &created);
    HE_CHECK(created);
    HE_CHECK_INT(st.prefetch_issued, 2);
    he_cache_http_resp_t r;
    memset(&r, 0, sizeof(r));
    r.status = 200;
    r.content_length = 5;
    r.age_s = -1;
    he_cache_cc_parse(&r.cc, "max-age=60", 10);
    he_cache_sink_t sink = he_cache_fill_sink(f3);
    sink.headers(sink.ctx, &r);
    sink.body(sink.ctx, "three", 5);
    he_cache_fill_end(f3, 0, 0, NOW);
    he_cache_fill_end(f2, -ECONNREFUSED, HE_CACHE_OERR_CONNECT, NOW);
    /* present() saw it without marking it used; the viewer's hit does */
    HE_CHECK(he_cache_present(&pc, &out[0].key));
    HE_CHECK_INT(st.prefetch_used, 0);
    he_cache_obj_t *o = he_cache_ram_lookup(ram, 0, &out[0].key, &st);
    HE_CHECK(o != NULL);
    HE_CHECK_INT(st.prefetch_used, 1);
    if (o) he_cache_obj_unref(o);
    /* a second hit is not a second use */
    o = he_cache_ram_lookup(ram, 0, &out[0].key, &st);
    if (o) he_cache_obj_unref(o);
    HE_CHECK_INT(st.prefetch_used, 1);

    he_cache_prefetch_free(p);
    he_cache_fills_free(fs);
    he_cache_ram_free(ram);
}

/* A live rendition whose playlist expired: the viewer at the old edge
 * gets nothing from the stale list, so the playlist is filled again (one
 * coalesced fill) and the prefetch goes on from the fresh copy. */
static void test_refresh_expired(void)
{
    he_cache_ram_opts_t ro = {.bytes = 8 << 20, .chunk_size = 1024};
    he_cache_ram_t *ram = he_cache_ram_new(&ro);
    he_cache_stats_t st;
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    he_cache_prefetch_t *p = he_cache_prefetch_new(&conf, 4);
    he_cache_prefetch_item_t out[8], it, it2;
    he_cache_http_resp_t r;
    he_cache_fill_t *f;
    he_cache_sink_t sink;
    char pl[2048], seg[HE_CACHE_KEY_MAX];
    bool stale, created;
    int64_t later = NOW + 3000;
    memset(&st, 0, sizeof(st));
    conf.prefetch_segments = 3;

    live_playlist(pl, sizeof(pl), 10, 4); /* 10..13, fresh for 1 s */
    he_cache_obj_t *plo = put(ram, "live/r/index.m3u8", pl, HE_SEG_KIND_MEDIA, false, NOW + 1000);
    HE_CHECK_INT(he_cache_prefetch_playlist_obj(p, plo, "/live/r/index.m3u8?tok=1"), 0);
    he_cache_obj_unref(plo);
    /* at the edge of the expired copy: nothing to prefetch, and stale */
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/r/seg_13.ts", later, NULL, NULL, out, 8, &stale),
                 0);
    HE_CHECK(stale);
    HE_CHECK_INT(he_cache_prefetch_take_pending(p, "live/r/index.m3u8", seg, sizeof(seg)), 0);
    HE_CHECK_INT(he_cache_prefetch_refresh(p, "live/r/seg_13.ts", &it), 0);
    HE_CHECK_STR(it.key.s, "live/r/index.m3u8");
    HE_CHECK_STR(it.target, "/live/r/index.m3u8?tok=1"); /* as the viewer asked */
    HE_CHECK_INT(he_cache_prefetch_refresh(p, "live/other/seg_1.ts", &it2), -ENOENT);

    /* the worker fills it like a miss; a second stale hit joins that fill */
    f = he_cache_fill_join(fs, &it.key, NULL, NULL, false, &created);
    HE_CHECK(f != NULL && created);
    HE_CHECK_INT(he_cache_prefetch_refresh(p, "live/r/seg_13.ts", &it2), 0);
    HE_CHECK(he_cache_fill_join(fs, &it2.key, NULL, NULL, false, &created) == f && !created);
    HE_CHECK_INT(st.fills, 1);
    HE_CHECK_INT(st.prefetch_issued, 0); /* a refresh is not a prefetched segment */

    /* the origin's fresh copy: 12..16 */
    live_playlist(pl, sizeof(pl), 12, 5);
    memset(&r, 0, sizeof(r));
    r.status = 200;
    r.content_length = (int64_t)strlen(pl);
    r.age_s = -1;
    he_cache_cc_parse(&r.cc, "max-age=1", 9);
    strcpy(r.content_type, "application/vnd.apple.mpegurl");
    sink = he_cache_fill_sink(f);
    HE_CHECK_INT(sink.headers(sink.ctx, &r), 0);
    HE_CHECK_INT(sink.body(sink.ctx, pl, strlen(pl)), 0);
    he_cache_obj_t *fresh = he_cache_fill_obj(f);
    he_cache_obj_ref(fresh);
    he_cache_fill_end(f, 0, 0, later);
    /* what he_oio_fetch_done does with a filled media playlist */
    HE_CHECK_INT(he_cache_prefetch_playlist_obj(p, fresh, it.target), 0);
    he_cache_obj_unref(fresh);
    HE_CHECK_INT(he_cache_prefetch_take_pending(p, "live/r/index.m3u8", seg, sizeof(seg)), 1);
    HE_CHECK_STR(seg, "live/r/seg_13.ts");
    HE_CHECK_INT(he_cache_prefetch_take_pending(p, "live/r/index.m3u8", seg, sizeof(seg)), 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, seg, later, NULL, NULL, out, 8, &stale), 3);
    HE_CHECK(!stale);
    HE_CHECK_STR(out[0].key.s, "live/r/seg_14.ts");
    HE_CHECK_STR(out[2].key.s, "live/r/seg_16.ts");

    he_cache_prefetch_free(p);
    he_cache_fills_free(fs);
    he_cache_ram_free(ram);
}

/* The refresh asks the origin for what the viewer asked for: escapes and
 * query as sent (the key path has them decoded / dropped, another
 * resource); segments resolve against it too; no viewer's target known,
 * no refresh. */
static void test_refresh_raw_target(void)
{
    he_cache_prefetch_t *p = he_cache_prefetch_new(&conf, 4);
    he_cache_prefetch_item_t out[8], it;
    const char *raw = "/live/my%20show/idx%3Fv.m3u8?token=abc";
    he_cache_key_t k;
    char pl[2048];
    bool stale;
    conf.prefetch_segments = 2;

    HE_CHECK_INT(he_cache_key_make(&conf, raw, strlen(raw), &k), 0);
    live_playlist(pl, sizeof(pl), 10, 4);
    HE_CHECK_INT(he_cache_prefetch_playlist(p, k.s, raw, pl, strlen(pl), NOW + 1000), 0);
    HE_CHECK_INT(
        he_cache_prefetch_next(p, "live/my show/seg_10.ts", NOW, NULL, NULL, out, 8, &stale), 2);
    HE_CHECK_STR(out[0].target, "/live/my%20show/seg_11.ts");
    HE_CHECK_STR(out[0].key.s, "live/my show/seg_11.ts");
    HE_CHECK_INT(
        he_cache_prefetch_next(p, "live/my show/seg_13.ts", NOW + 3000, NULL, NULL, out, 8, &stale),
        0);
    HE_CHECK(stale);
    HE_CHECK_INT(he_cache_prefetch_refresh(p, "live/my show/seg_13.ts", &it), 0);
    HE_CHECK_STR(it.target, raw);
    HE_CHECK_STR(it.key.s, k.s);
    /* the same bytes served to a later viewer: its target is the newest */
    HE_CHECK_INT(he_cache_prefetch_playlist(p, k.s, "/live/my%20show/idx%3Fv.m3u8?token=new", pl,
                                            strlen(pl), NOW + 1000),
                 0);
    HE_CHECK_INT(he_cache_prefetch_refresh(p, "live/my show/seg_13.ts", &it), 0);
    HE_CHECK_STR(it.target, "/live/my%20show/idx%3Fv.m3u8?token=new");

    /* known only from the cache (no viewer's target): not refreshed */
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "live/u/index.m3u8", NULL, pl, strlen(pl), NOW + 1000), 0);
    HE_CHECK_INT(he_cache_prefetch_refresh(p, "live/u/seg_13.ts", &it), -ENODATA);
    he_cache_prefetch_free(p);
}

/* A playlist served again and again from one cache object is learnt once:
 * later serves only take its freshness and the viewer's target. Learning
 * other bytes for the path in between makes the object count as new. */
static void test_obj_learnt_once(void)
{
    he_cache_ram_opts_t ro = {.bytes = 8 << 20, .chunk_size = 1024};
    he_cache_ram_t *ram = he_cache_ram_new(&ro);
    he_cache_prefetch_t *p = he_cache_prefetch_new(&conf, 4);
    he_cache_prefetch_item_t out[8], it;
    he_cache_fresh_t fr;
    char a[2048], b[2048];
    bool stale;
    conf.prefetch_segments = 3;

    live_playlist(a, sizeof(a), 0, 6);  /* seg_0..5 */
    live_playlist(b, sizeof(b), 10, 6); /* seg_10..15 */
    he_cache_obj_t *oa = put(ram, "live/s/index.m3u8", a, HE_SEG_KIND_MEDIA, false, NOW + 1000);
    he_cache_obj_t *ob = put(ram, "live/s/other.m3u8", a, HE_SEG_KIND_MEDIA, false, NOW + 1000);
    HE_CHECK(he_cache_obj_serial(oa) != 0 && he_cache_obj_serial(ob) != 0);
    HE_CHECK(he_cache_obj_serial(oa) != he_cache_obj_serial(ob));

    HE_CHECK_INT(he_cache_prefetch_playlist_obj(p, oa, "/live/s/index.m3u8?t=1"), 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/s/seg_0.ts", NOW, NULL, NULL, out, 8, &stale), 3);
    /* the same object again, revalidated (fresh 4 s longer), another token */
    fr.stored_ms = NOW;
    fr.expires_ms = NOW + 5000;
    fr.swr_ms = fr.sie_ms = 0;
    he_cache_obj_refresh(oa, &fr);
    HE_CHECK_INT(he_cache_prefetch_playlist_obj(p, oa, "/live/s/index.m3u8?t=2"), 0);
    HE_CHECK_INT(
        he_cache_prefetch_next(p, "live/s/seg_5.ts", NOW + 3000, NULL, NULL, out, 8, &stale), 0);
    HE_CHECK(!stale); /* fresh until NOW + 5000 now */
    HE_CHECK_INT(he_cache_prefetch_refresh(p, "live/s/seg_5.ts", &it), 0);
    HE_CHECK_STR(it.target, "/live/s/index.m3u8?t=2");

    /* other bytes for the path, then the old object again: learnt again */
    HE_CHECK_INT(he_cache_prefetch_playlist(p, "live/s/index.m3u8", NULL, b, strlen(b), NOW + 1000),
                 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/s/seg_0.ts", NOW, NULL, NULL, out, 8, &stale), 0);
    HE_CHECK_INT(he_cache_prefetch_playlist_obj(p, oa, NULL), 0);
    HE_CHECK_INT(he_cache_prefetch_next(p, "live/s/seg_0.ts", NOW, NULL, NULL, out, 8, &stale), 3);
    HE_CHECK_STR(out[0].key.s, "live/s/seg_1.ts");

    /* an encoded copy (Content-Encoding from the origin) is not read as a
     * playlist, even when its bytes would parse */
    he_cache_meta_t m = *he_cache_obj_meta(ob);
    strcpy(m.content_encoding, "gzip");
    he_cache_obj_set_meta(ob, &m);
    HE_CHECK_INT(he_cache_prefetch_playlist_obj(p, ob, NULL), -EINVAL);
    HE_CHECK_INT(he_cache_prefetch_renditions(p), 1);

    he_cache_obj_unref(oa);
    he_cache_obj_unref(ob);
    he_cache_prefetch_free(p);
    he_cache_ram_free(ram);
}

/* Segment names with '?' or '%' in them (escaped in the playlist): the
 * worker asks with a key path, where they are escaped again, and the
 * items' keys are the ones a viewer's request for them gets. */
static void test_escaped_names(void)
{
    static const char pl[] = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n"
                             "#EXTINF:4,\na%3F1.ts\n#EXTINF:4,\na%3F2.ts\n#EXTINF:4,\nb%25.ts\n"
                             "#EXT-X-ENDLIST\n";
    he_cache_prefetch_t *p = he_cache_prefetch_new(&conf, 4);
    he_cache_prefetch_item_t out[8];
    he_cache_key_t k;
    bool stale;
    conf.prefetch_segments = 2;
    HE_CHECK_INT(
        he_cache_prefetch_playlist(p, "v/index.m3u8", "/v/index.m3u8", pl, strlen(pl), NOW), 0);
    HE_CHECK_INT(he_cache_key_make(&conf, "/v/a%3F1.ts", 11, &k), 0);
    k.s[k.path_len] = '\0';
    HE_CHECK_INT(he_cache_prefetch_next(p, k.s, NOW, NULL, NULL, out, 8, &stale), 2);
    HE_CHECK_STR(out[0].key.s, "v/a%3F2.ts");
    HE_CHECK_STR(out[0].target, "/v/a%3F2.ts");
    HE_CHECK_STR(out[1].key.s, "v/b%25.ts");
    HE_CHECK_INT(out[1].key.path_len, 9);
    he_cache_prefetch_free(p);
}

int main(void)
{
    he_conf_defaults(&conf);
    test_window();
    test_live_and_lru();
    test_with_cache();
    test_refresh_expired();
    test_refresh_raw_target();
    test_obj_learnt_once();
    test_escaped_names();
    HE_TEST_MAIN_END();
}
