/* cache/fill.c driven by hand as a fake origin: N waiters make one fill,
 * each streams bytes as they arrive and all bodies are identical; a fill
 * failing midway ends every waiter with ERROR and leaves no entry; a 304
 * refreshes and serves the stale object; an origin failure inside the
 * stale-if-error window serves stale; no-store responses stream but are
 * not kept; a waiter may leave early; finished objects go to the SSD; a
 * purge while a fill runs is not undone by the fill; a 304 extends the
 * SSD copy only if it is the version the 304 validated; a response that
 * may not be stored answers only the request that made the fill
 * (hit-for-miss). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/fill.h"
#include "cache/fresh.h"
#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/origin.h"
#include "cache/stats.h"
#include "cache/store.h"
#include "he_test.h"

#define NOW 1700000000000ll
#define N 50
#define BODY 100000

typedef struct client {
    he_cache_waiter_t w;
    char *buf;
    uint64_t got;
    int headers, data, done, error;
    int status;
    bool leave_on_data;
} client_t;

static void client_notify(he_cache_waiter_t *w, he_cache_fill_ev_t ev)
{
    client_t *c = w->ctx;
    he_cache_fill_t *f = w->fill;
    if (ev == HE_CACHE_FILL_EV_HEADERS) {
        c->headers++;
        c->status = he_cache_fill_status(f);
    }
    if (ev == HE_CACHE_FILL_EV_DATA) c->data++;
    if (ev == HE_CACHE_FILL_EV_ERROR) {
        c->error++;
        he_cache_fill_leave(w);
        return;
    }
    /* stream whatever is there now */
    he_cache_obj_t *o = he_cache_fill_obj(f);
    if (o) {
        const void *p;
        size_t n;
        while ((n = he_cache_obj_peek(o, c->got, &p, NULL)) > 0) {
            memcpy(c->buf + c->got, p, n);
            c->got += n;
        }
    }
    if (ev == HE_CACHE_FILL_EV_DONE) {
        c->done++;
        he_cache_fill_leave(w);
    } else if (c->leave_on_data && ev == HE_CACHE_FILL_EV_DATA) {
        he_cache_fill_leave(w);
    }
}

static he_conf_t conf;
static he_cache_ram_t *ram;
static he_cache_stats_t st;
static char src[BODY];

static void clients_init(client_t *c, int n)
{
    for (int i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].w.notify = client_notify;
        c[i].w.ctx = &c[i];
        c[i].buf = malloc(BODY);
    }
}

static void clients_free(client_t *c, int n)
{
    for (int i = 0; i < n; i++)
        free(c[i].buf);
}

static he_cache_http_resp_t resp200(const char *cc, int64_t len)
{
    he_cache_http_resp_t r;
    memset(&r, 0, sizeof(r));
    r.status = 200;
    r.content_length = len;
    r.age_s = -1;
    he_cache_cc_parse(&r.cc, cc, strlen(cc));
    strcpy(r.etag, "\"v1\"");
    return r;
}

static void test_coalesce(he_cache_store_t *store)
{
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .node = 0, .store = store, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    static client_t c[N];
    he_cache_key_t k;
    he_cache_fill_t *f = NULL;
    int created = 0;
    he_cache_http_resp_t r = resp200("max-age=60", BODY);

    clients_init(c, N);
    he_cache_key_set(&k, "live/720p/seg_1.ts", 18);
    memset(&st, 0, sizeof(st));
    for (int i = 0; i < N; i++) {
        bool cr;
        he_cache_fill_t *g = he_cache_fill_join(fs, &k, &c[i].w, NULL, false, &cr);
        created += cr;
        if (f) HE_CHECK(g == f);
        f = g;
    }
    HE_CHECK_INT(created, 1); /* exactly one origin request */
    HE_CHECK_INT(st.fills, 1);
    HE_CHECK_INT(st.coalesced_waiters, N - 1);
    HE_CHECK_INT(he_cache_fills_active(fs), 1);

    he_cache_sink_t sink = he_cache_fill_sink(f);
    HE_CHECK_INT(sink.headers(sink.ctx, &r), 0);
    for (size_t off = 0; off < BODY; off += 1000) {
        HE_CHECK_INT(sink.body(sink.ctx, src + off, 1000), 0);
        if (off == 0) {
            /* read-while-fill: everybody already has the first bytes */
            int streaming = 0;
            for (int i = 0; i < N; i++)
                streaming += c[i].got == 1000;
            HE_CHECK_INT(streaming, N);
        }
        if (off == BODY / 2) {
            /* a late joiner catches up from the object */
            static client_t late;
            bool cr;
            clients_init(&late, 1);
            HE_CHECK(he_cache_fill_join(fs, &k, &late.w, NULL, false, &cr) == f && !cr);
            HE_CHECK(he_cache_fill_status(f) == 200 && he_cache_fill_obj(f) != NULL);
            HE_CHECK_INT(he_cache_fill_resp(f)->content_length, BODY);
            he_cache_fill_leave(&late.w);
            clients_free(&late, 1);
        }
    }
    he_cache_fill_end(f, 0, 0, NOW);
    HE_CHECK_INT(he_cache_fills_active(fs), 0);
    for (int i = 0; i < N; i++) {
        HE_CHECK_INT(c[i].headers, 1);
        HE_CHECK_INT(c[i].done, 1);
        HE_CHECK_INT(c[i].status, 200);
        HE_CHECK_INT(c[i].got, BODY);
        HE_CHECK(memcmp(c[i].buf, src, BODY) == 0);
        HE_CHECK(c[i].w.fill == NULL);
    }
    HE_CHECK_INT(st.bytes_filled, BODY);
    /* published */
    he_cache_obj_t *o = he_cache_ram_lookup(ram, 0, &k, &st);
    HE_CHECK(o != NULL);
    if (o) {
        HE_CHECK_INT(he_cache_obj_len(o), BODY);
        HE_CHECK_STR(he_cache_obj_meta(o)->content_type, "video/mp2t");
        HE_CHECK_STR(he_cache_obj_meta(o)->etag, "\"v1\"");
        HE_CHECK_INT(he_cache_obj_meta(o)->fresh.expires_ms, NOW + 60000);
        he_cache_obj_unref(o);
    }
    /* and handed to the SSD writer */
    if (store) {
        he_cache_swrite_t *w;
        he_cache_store_hit_t h;
        /* queued until pulled: the worker keeps its purge mark meanwhile */
        HE_CHECK_INT(he_cache_fills_pending_writes(fs), 1);
        w = he_cache_fills_next_write(fs);
        HE_CHECK(w != NULL);
        HE_CHECK_INT(he_cache_fills_pending_writes(fs), 0);
        HE_CHECK_INT(he_cache_swrite_run_sync(w, &st, NULL, NULL), 0);
        he_cache_swrite_free(w);
        HE_CHECK(he_cache_fills_next_write(fs) == NULL);
        HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, &st), 0);
        HE_CHECK_INT(h.body_len, BODY);
    }
    clients_free(c, N);
    he_cache_fills_free(fs);
}

static void test_fail_midway(void)
{
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .node = 0, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    static client_t c[N];
    he_cache_key_t k;
    he_cache_fill_t *f = NULL;
    bool cr;
    he_cache_http_resp_t r = resp200("max-age=60", BODY);
    uint64_t used_before = he_cache_ram_used(ram, 0);

    clients_init(c, N);
    memset(&st, 0, sizeof(st));
    he_cache_key_set(&k, "cut.ts", 6);
    for (int i = 0; i < N; i++)
        f = he_cache_fill_join(fs, &k, &c[i].w, NULL, false, &cr);
    he_cache_sink_t sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    sink.body(sink.ctx, src, BODY / 3);
    he_cache_fill_end(f, -EPIPE, HE_CACHE_OERR_TRUNCATED, NOW);
    for (int i = 0; i < N; i++) {
        HE_CHECK_INT(c[i].error, 1);
        HE_CHECK_INT(c[i].done, 0);
        HE_CHECK_INT(c[i].got, BODY / 3); /* what they streamed was right... */
        HE_CHECK(memcmp(c[i].buf, src, BODY / 3) == 0);
    }
    /* ...but nothing is left: no entry, no memory, no SSD write */
    HE_CHECK(he_cache_ram_lookup(ram, 0, &k, &st) == NULL);
    HE_CHECK(he_cache_fill_find(fs, &k) == NULL);
    HE_CHECK_INT(he_cache_fills_active(fs), 0);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), used_before);
    HE_CHECK_INT(st.fills_failed, 1);
    HE_CHECK(he_cache_fills_next_write(fs) == NULL);

    /* the next request starts a fresh fill */
    f = he_cache_fill_join(fs, &k, NULL, NULL, false, &cr);
    HE_CHECK(cr);
    he_cache_fill_end(f, -ECONNREFUSED, HE_CACHE_OERR_CONNECT, NOW);
    HE_CHECK_INT(he_cache_fills_active(fs), 0);
    clients_free(c, N);
    he_cache_fills_free(fs);
}

static he_cache_obj_t *stale_body(const char *name, he_seg_kind_t kind, const char *body,
                                  int64_t expires, uint32_t sie)
{
    he_cache_key_t k;
    he_cache_meta_t m = {.status = 200, .kind = (uint8_t)kind};
    he_cache_obj_t *o;
    he_cache_key_set(&k, name, strlen(name));
    o = he_cache_obj_new(ram, 0, &k, strlen(body));
    he_cache_obj_append(o, body, strlen(body), NULL);
    m.fresh.stored_ms = NOW - 100000;
    m.fresh.expires_ms = expires;
    m.fresh.sie_ms = sie;
    he_cache_obj_set_meta(o, &m);
    he_cache_obj_finish(o);
    he_cache_ram_insert(ram, o, NULL);
    return o;
}

static he_cache_obj_t *stale_obj(const char *name, int64_t expires, uint32_t sie)
{
    return stale_body(name, HE_SEG_KIND_SEGMENT, "stale", expires, sie);
}

static void test_stale(void)
{
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .node = 0, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    client_t c[2];
    he_cache_fill_t *f;
    he_cache_fresh_t fr;
    bool cr;

    /* 304: refreshed and served */
    memset(&st, 0, sizeof(st));
    clients_init(c, 2);
    he_cache_obj_t *s = stale_obj("st.ts", NOW - 1000, 0);
    f = he_cache_fill_join(fs, he_cache_obj_key(s), &c[0].w, s, false, &cr);
    he_cache_fill_join(fs, he_cache_obj_key(s), &c[1].w, s, false, &cr);
    HE_CHECK_INT(st.revalidations, 1);
    he_cache_http_resp_t r = resp200("max-age=30", -1);
    r.status = 304;
    he_cache_sink_t sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    HE_CHECK(he_cache_fill_stale(f));
    he_cache_fill_end(f, 0, 0, NOW);
    for (int i = 0; i < 2; i++) {
        HE_CHECK(c[i].done == 1 && c[i].status == 200 && c[i].got == 5);
        HE_CHECK(memcmp(c[i].buf, "stale", 5) == 0);
    }
    he_cache_obj_fresh(s, &fr);
    HE_CHECK_INT(fr.expires_ms, NOW + 30000);
    HE_CHECK_INT(st.revalidated_304, 1);
    clients_free(c, 2);
    he_cache_obj_unref(s);

    /* 304 max-age=30 for a live playlist (target duration 2): still
     * capped at half the target duration, or the playlist freezes */
    {
        static const char live[] = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n"
                                   "#EXTINF:2,\ns7.ts\n#EXTINF:2,\ns8.ts\n";
        static const char vod[] = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns0.ts\n"
                                  "#EXT-X-ENDLIST\n";
        static const struct {
            const char *name, *body;
            int64_t life;
        } pl[] = {{"live/i.m3u8", live, 1000}, {"vod/i.m3u8", vod, 30000}};
        conf.cache_live_fraction_pct = 50;
        for (size_t i = 0; i < 2; i++) {
            clients_init(c, 1);
            s = stale_body(pl[i].name, HE_SEG_KIND_MEDIA, pl[i].body, NOW - 1000, 0);
            f = he_cache_fill_join(fs, he_cache_obj_key(s), &c[0].w, s, false, &cr);
            r = resp200("max-age=30", -1);
            r.status = 304;
            sink = he_cache_fill_sink(f);
            sink.headers(sink.ctx, &r);
            he_cache_fill_end(f, 0, 0, NOW);
            HE_CHECK(c[0].done == 1 && c[0].got == strlen(pl[i].body));
            he_cache_obj_fresh(s, &fr);
            HE_CHECK_INT(fr.expires_ms - NOW, pl[i].life);
            clients_free(c, 1);
            he_cache_obj_unref(s);
        }
    }

    /* origin down, within stale-if-error: served stale */
    clients_init(c, 1);
    s = stale_obj("sie.ts", NOW - 1000, 5000);
    f = he_cache_fill_join(fs, he_cache_obj_key(s), &c[0].w, s, false, &cr);
    he_cache_fill_end(f, -ECONNREFUSED, HE_CACHE_OERR_CONNECT, NOW);
    HE_CHECK(c[0].done == 1 && c[0].error == 0 && c[0].got == 5);
    HE_CHECK_INT(st.stale_serves, 1);
    clients_free(c, 1);
    he_cache_obj_unref(s);

    /* origin down, past the window: an error */
    clients_init(c, 1);
    s = stale_obj("old.ts", NOW - 10000, 5000);
    f = he_cache_fill_join(fs, he_cache_obj_key(s), &c[0].w, s, false, &cr);
    he_cache_fill_end(f, -ECONNREFUSED, HE_CACHE_OERR_CONNECT, NOW);
    HE_CHECK(c[0].done == 0 && c[0].error == 1);
    clients_free(c, 1);
    he_cache_obj_unref(s);
    he_cache_fills_free(fs);
}

static void test_nostore_leave_prefetch(void)
{
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .node = 0, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    client_t c[2];
    he_cache_key_t k;
    he_cache_fill_t *f;
    bool cr;

    clients_init(c, 2);
    he_cache_key_set(&k, "private.ts", 10);
    f = he_cache_fill_join(fs, &k, &c[0].w, NULL, false, &cr);
    c[1].leave_on_data = true;
    he_cache_fill_join(fs, &k, &c[1].w, NULL, false, &cr);
    he_cache_http_resp_t r = resp200("no-store", 10);
    he_cache_sink_t sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    sink.body(sink.ctx, "0123456789", 10);
    he_cache_fill_end(f, 0, 0, NOW);
    HE_CHECK(c[0].done == 1 && c[0].got == 10);
    HE_CHECK(c[1].done == 0 && c[1].w.fill == NULL);
    HE_CHECK(he_cache_ram_lookup(ram, 0, &k, NULL) == NULL);
    clients_free(c, 2);

    /* a prefetch with nobody waiting: published with the prefetched mark,
     * and its first hit counts as used */
    memset(&st, 0, sizeof(st));
    he_cache_key_set(&k, "pf.ts", 5);
    f = he_cache_fill_join(fs, &k, NULL, NULL, true, &cr);
    HE_CHECK_INT(st.prefetch_issued, 1);
    r = resp200("max-age=60", 3);
    sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    sink.body(sink.ctx, "abc", 3);
    he_cache_fill_end(f, 0, 0, NOW);
    he_cache_obj_t *o = he_cache_ram_lookup(ram, 0, &k, &st);
    HE_CHECK(o != NULL);
    HE_CHECK_INT(st.prefetch_used, 1);
    if (o) he_cache_obj_unref(o);
    he_cache_fills_free(fs);
}

/* Content-Encoding from the origin (a store answering gzip whatever we
 * asked): kept with the object in RAM and on disk, and a playlist's
 * encoded bytes are not parsed. A file of the previous on-disk format is
 * dropped at start-up without counting as a disk error. */
static void test_content_encoding(void)
{
    he_cache_ram_opts_t ro = {.bytes = 16 << 20, .chunk_size = 16384};
    he_cache_ram_t *r2 = he_cache_ram_new(&ro);
    he_cache_store_opts_t so = {.ndirs = 1};
    he_cache_store_t *store;
    he_cache_stats_t st2;
    he_cache_store_hit_t h;
    char dir[] = "/tmp/he_test_fill_ce.XXXXXX", cmd[64], path[256], old[256];
    static const char live[] = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns1.ts\n";
    he_cache_key_t k, kp;
    he_cache_fill_t *f;
    he_cache_sink_t sink;
    he_cache_http_resp_t r;
    he_cache_obj_t *o;
    bool cr;

    if (!mkdtemp(dir) || !r2) return;
    so.dirs[0] = dir;
    so.bytes[0] = 64 << 20;
    memset(&st2, 0, sizeof(st2));
    HE_CHECK_INT(he_cache_store_open(&store, &so, NOW, &st2), 0);
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = r2, .store = store, .stats = &st2};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);

    he_cache_key_set(&k, "z/a.ts", 6);
    f = he_cache_fill_join(fs, &k, NULL, NULL, false, &cr);
    r = resp200("max-age=60", 4);
    strcpy(r.content_encoding, "gzip");
    sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    sink.body(sink.ctx, "\x1f\x8b\x08\x00", 4);
    he_cache_fill_end(f, 0, 0, NOW);
    o = he_cache_ram_lookup(r2, 0, &k, NULL);
    HE_CHECK(o && strcmp(he_cache_obj_meta(o)->content_encoding, "gzip") == 0);
    if (o) he_cache_obj_unref(o);

    /* a gzip live playlist: not parsed, so the origin's lifetime stands */
    conf.cache_live_fraction_pct = 50;
    he_cache_key_set(&kp, "z/i.m3u8", 8);
    f = he_cache_fill_join(fs, &kp, NULL, NULL, false, &cr);
    r = resp200("max-age=30", (int64_t)strlen(live));
    strcpy(r.content_encoding, "gzip"); /* pretend: the parser must not look */
    sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    sink.body(sink.ctx, live, strlen(live));
    he_cache_fill_end(f, 0, 0, NOW);
    o = he_cache_ram_lookup(r2, 0, &kp, NULL);
    HE_CHECK(o != NULL);
    if (o) {
        HE_CHECK_INT(he_cache_obj_meta(o)->kind, HE_SEG_KIND_MEDIA);
        HE_CHECK_INT(he_cache_obj_meta(o)->fresh.expires_ms, NOW + 30000);
        he_cache_obj_unref(o);
    }

    /* to disk and back */
    for (he_cache_swrite_t *w; (w = he_cache_fills_next_write(fs)) != NULL;) {
        HE_CHECK_INT(he_cache_swrite_run_sync(w, &st2, NULL, NULL), 0);
        he_cache_swrite_free(w);
    }
    HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, &st2), 0);
    HE_CHECK_STR(h.meta.content_encoding, "gzip");
    /* a copy of the file as the previous format (version 1) wrote it */
    snprintf(path, sizeof(path), "%s/%s", dir, h.path);
    snprintf(old, sizeof(old), "%.*s0000000000000001.obj", (int)(strlen(path) - 20), path);
    {
        FILE *in = fopen(path, "rb"), *out = fopen(old, "wb");
        char buf[8192];
        size_t n = in ? fread(buf, 1, sizeof(buf), in) : 0;
        HE_CHECK(in && out && n > 8);
        if (n > 8) buf[4] = 1, buf[5] = buf[6] = buf[7] = 0;
        if (out) fwrite(buf, 1, n, out);
        if (in) fclose(in);
        if (out) fclose(out);
    }
    he_cache_fills_free(fs);
    he_cache_store_close(store);

    memset(&st2, 0, sizeof(st2));
    HE_CHECK_INT(he_cache_store_open(&store, &so, NOW, &st2), 0);
    HE_CHECK_INT(he_cache_store_count(store), 2);
    HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, &st2), 0);
    HE_CHECK_STR(h.meta.content_encoding, "gzip");
    HE_CHECK_INT(he_cache_store_lookup(store, &kp, &h, &st2), 0);
    HE_CHECK_STR(h.meta.content_encoding, "gzip");
    HE_CHECK(access(old, F_OK) != 0); /* dropped */
    for (int i = 0; i < HE_CACHE_DERR_COUNT; i++)
        HE_CHECK_INT(st2.disk_errors[i], 0); /* and not called corrupt */
    he_cache_store_close(store);
    he_cache_ram_free(r2);
    conf.cache_live_fraction_pct = 0;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    HE_CHECK(system(cmd) == 0);
}

/* A purge that comes while a fill downloads: the purge finds the fill,
 * the waiters still get their bytes, but nothing is published in either
 * tier, and a later request starts a fill of its own. Also when only the
 * store's part of the purge came before the fill ended (the RAM part after
 * it): the SSD write must not bring the bytes back. */
static void test_purge_during_fill(he_cache_store_t *store)
{
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .node = 0, .store = store, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    client_t c[2];
    he_cache_key_t k;
    he_cache_fill_t *f, *g;
    he_cache_sink_t sink;
    he_cache_http_resp_t r = resp200("max-age=60", 10);
    he_cache_store_hit_t h;
    bool cr;

    he_cache_key_set(&k, "purged/seg.ts", 13);
    for (int store_first = 0; store_first < 2; store_first++) {
        clients_init(c, 2);
        f = he_cache_fill_join(fs, &k, &c[0].w, NULL, false, &cr);
        HE_CHECK(cr);
        sink = he_cache_fill_sink(f);
        sink.headers(sink.ctx, &r);
        sink.body(sink.ctx, "01234", 5);
        if (store_first) {
            /* the purge's SSD part finds the fill's registration */
            HE_CHECK_INT(he_cache_store_remove(store, &k), 0);
        } else {
            HE_CHECK_INT(he_cache_store_remove(store, &k), 0);
            HE_CHECK_INT(he_cache_ram_remove(ram, &k), 1); /* the fill */
            /* a request after the purge does not get the old bytes */
            g = he_cache_fill_join(fs, &k, &c[1].w, NULL, false, &cr);
            HE_CHECK(cr && g != f);
            he_cache_fill_end(g, -ECONNREFUSED, HE_CACHE_OERR_CONNECT, NOW);
            HE_CHECK_INT(c[1].error, 1);
        }
        sink.body(sink.ctx, "56789", 5);
        he_cache_fill_end(f, 0, 0, NOW);
        if (store_first) HE_CHECK_INT(he_cache_ram_remove(ram, &k), 0);
        HE_CHECK(c[0].done == 1 && c[0].got == 10 && memcmp(c[0].buf, "0123456789", 10) == 0);
        HE_CHECK(he_cache_ram_lookup(ram, 0, &k, NULL) == NULL);
        HE_CHECK(he_cache_fills_next_write(fs) == NULL);
        HE_CHECK(he_cache_store_lookup(store, &k, &h, NULL) == -ENOENT);
        HE_CHECK_INT(he_cache_fills_active(fs), 0);
        clients_free(c, 2);
    }
    /* a purge of another key changes nothing */
    clients_init(c, 1);
    f = he_cache_fill_join(fs, &k, &c[0].w, NULL, false, &cr);
    sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    {
        he_cache_key_t other;
        he_cache_key_set(&other, "purged/seg2.ts", 14);
        HE_CHECK_INT(he_cache_ram_remove(ram, &other), 0);
        HE_CHECK_INT(he_cache_store_remove(store, &other), -ENOENT);
    }
    HE_CHECK(he_cache_fill_find(fs, &k) == f);
    sink.body(sink.ctx, "0123456789", 10);
    he_cache_fill_end(f, 0, 0, NOW);
    {
        he_cache_obj_t *o = he_cache_ram_lookup(ram, 0, &k, NULL);
        HE_CHECK(o != NULL);
        if (o) he_cache_obj_unref(o);
    }
    for (he_cache_swrite_t *w; (w = he_cache_fills_next_write(fs)) != NULL;) {
        HE_CHECK_INT(he_cache_swrite_run_sync(w, &st, NULL, NULL), 0);
        he_cache_swrite_free(w);
    }
    HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, NULL), 0);
    he_cache_ram_remove(ram, &k);
    he_cache_store_remove(store, &k);
    clients_free(c, 1);
    he_cache_fills_free(fs);
}

/* An object with the given ETag and Last-Modified, complete, expired. */
static he_cache_obj_t *version(const he_cache_key_t *k, const char *etag, const char *lm,
                               const char *body)
{
    he_cache_meta_t m = {.status = 200, .kind = HE_SEG_KIND_SEGMENT};
    he_cache_obj_t *o = he_cache_obj_new(ram, 0, k, strlen(body));
    he_cache_obj_append(o, body, strlen(body), NULL);
    m.fresh.stored_ms = NOW - 100000;
    m.fresh.expires_ms = NOW - 1000;
    strcpy(m.etag, etag);
    strcpy(m.last_modified, lm);
    he_cache_obj_set_meta(o, &m);
    he_cache_obj_finish(o);
    return o;
}

static void write_sync(he_cache_store_t *store, he_cache_obj_t *o)
{
    he_cache_swrite_t *w = he_cache_swrite_new(store, o, &st);
    HE_CHECK(w != NULL);
    if (!w) return;
    HE_CHECK_INT(he_cache_swrite_run_sync(w, &st, NULL, NULL), 0);
    he_cache_swrite_free(w);
}

/* Revalidates stale (in RAM) with a 304 max-age=60. */
static void revalidate_304(he_cache_fills_t *fs, he_cache_obj_t *stale)
{
    client_t c[1];
    he_cache_http_resp_t r = resp200("max-age=60", -1);
    he_cache_sink_t sink;
    he_cache_fill_t *f;
    bool cr;
    clients_init(c, 1);
    r.status = 304;
    f = he_cache_fill_join(fs, he_cache_obj_key(stale), &c[0].w, stale, false, &cr);
    sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    he_cache_fill_end(f, 0, 0, NOW);
    HE_CHECK(c[0].done == 1 && c[0].got == strlen("v2 bytes"));
    clients_free(c, 1);
}

/* A 304 validates the RAM copy it was asked about. The SSD copy of the key
 * is extended with it only if it is the same version: RAM holds v2 whose
 * SSD write failed while the SSD still holds v1; a 304 for v2 must not
 * make v1 fresh (it would be served as fresh once v2 leaves RAM). */
static void test_304_refreshes_ssd_only_same_version(he_cache_store_t *store)
{
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .node = 0, .store = store, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    static const char *const lm1 = "Mon, 13 Nov 2023 22:13:20 GMT",
                             *lm2 = "Tue, 14 Nov 2023 22:13:20 GMT";
    he_cache_store_hit_t h;
    he_cache_obj_t *v1, *v2;
    he_cache_key_t k;

    he_cache_key_set(&k, "ver/seg.ts", 10);
    /* by ETag */
    v1 = version(&k, "\"v1\"", lm1, "v1 bytes");
    write_sync(store, v1);
    v2 = version(&k, "\"v2\"", lm2, "v2 bytes");
    he_cache_ram_insert(ram, v2, NULL); /* its SSD write never happened */
    revalidate_304(fs, v2);
    HE_CHECK_INT(he_cache_obj_meta(v2)->fresh.expires_ms, NOW - 1000); /* meta: as stored */
    {
        he_cache_fresh_t fr;
        he_cache_obj_fresh(v2, &fr);
        HE_CHECK_INT(fr.expires_ms, NOW + 60000); /* RAM: refreshed */
    }
    HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, NULL), 0);
    HE_CHECK_STR(h.meta.etag, "\"v1\"");
    HE_CHECK_INT(h.meta.fresh.expires_ms, NOW - 1000); /* SSD v1: not extended */
    HE_CHECK_INT(he_cache_store_refresh(store, &k, he_cache_obj_meta(v2), &h.meta.fresh), -ESTALE);

    /* the SSD copy of v2 itself is extended */
    write_sync(store, v2);
    revalidate_304(fs, v2);
    HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, NULL), 0);
    HE_CHECK_STR(h.meta.etag, "\"v2\"");
    HE_CHECK_INT(h.meta.fresh.expires_ms, NOW + 60000);
    he_cache_obj_unref(v1);
    he_cache_obj_unref(v2);
    he_cache_ram_remove(ram, &k);
    he_cache_store_remove(store, &k);

    /* without ETags: by Last-Modified */
    v1 = version(&k, "", lm1, "v1 bytes");
    write_sync(store, v1);
    v2 = version(&k, "", lm2, "v2 bytes");
    he_cache_ram_insert(ram, v2, NULL);
    revalidate_304(fs, v2);
    HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, NULL), 0);
    HE_CHECK_INT(h.meta.fresh.expires_ms, NOW - 1000);
    write_sync(store, v2);
    revalidate_304(fs, v2);
    HE_CHECK_INT(he_cache_store_lookup(store, &k, &h, NULL), 0);
    HE_CHECK_INT(h.meta.fresh.expires_ms, NOW + 60000);
    he_cache_obj_unref(v1);
    he_cache_obj_unref(v2);
    he_cache_ram_remove(ram, &k);
    he_cache_store_remove(store, &k);
    he_cache_store_unlink_sync(store);
    he_cache_fills_free(fs);
}

/* Hit-for-miss: a 403 (or a private 200) answers only the request that
 * made the fill; the others are not to take it, each moves to a fill of
 * its own that nobody joins, and the first fill leaves the table. A
 * storable answer is everybody's. */
static void test_not_shared(void)
{
    he_cache_fills_opts_t fo = {.conf = &conf, .ram = ram, .node = 0, .stats = &st};
    he_cache_fills_t *fs = he_cache_fills_new(&fo);
    client_t c[3], late[1];
    he_cache_key_t k;
    he_cache_fill_t *f, *g, *h;
    he_cache_sink_t sink;
    he_cache_http_resp_t r;
    bool cr;

    he_cache_key_set(&k, "token/seg.ts", 12);
    for (int private_ = 0; private_ < 2; private_++) {
        clients_init(c, 3);
        clients_init(late, 1);
        f = he_cache_fill_join(fs, &k, &c[0].w, NULL, false, &cr);
        he_cache_fill_join(fs, &k, &c[1].w, NULL, false, &cr);
        he_cache_fill_join(fs, &k, &c[2].w, NULL, false, &cr);
        HE_CHECK(he_cache_fill_shared(f, &c[1].w)); /* no head yet */
        r = resp200(private_ ? "private, max-age=60" : "max-age=60", 9);
        if (!private_) r.status = 403;
        sink = he_cache_fill_sink(f);
        sink.headers(sink.ctx, &r);
        HE_CHECK(he_cache_fill_shared(f, &c[0].w)); /* its own request */
        HE_CHECK(!he_cache_fill_shared(f, &c[1].w));
        HE_CHECK(!he_cache_fill_shared(f, &c[2].w));
        HE_CHECK(!he_cache_fill_shared(f, NULL));
        HE_CHECK(he_cache_fill_find(fs, &k) == NULL); /* later requests: a fill of their own */
        g = he_cache_fill_alone(&c[1].w);
        HE_CHECK(g && g != f && c[1].w.fill == g);
        h = he_cache_fill_alone(&c[2].w);
        HE_CHECK(h && h != g && h != f && c[2].w.fill == h);
        HE_CHECK(he_cache_fill_find(fs, &k) == NULL);
        HE_CHECK(he_cache_fill_join(fs, &k, &late[0].w, NULL, false, &cr) != g && cr);
        HE_CHECK_INT(he_cache_fills_active(fs), 4);
        sink.body(sink.ctx, "forbidden", 9);
        he_cache_fill_end(f, 0, 0, NOW);
        HE_CHECK(c[0].done == 1 && c[0].got == 9 && memcmp(c[0].buf, "forbidden", 9) == 0);
        HE_CHECK(c[1].done == 0 && c[2].done == 0);
        /* c[1]'s own answer is a 200 that may be stored: published */
        r = resp200("max-age=60", 4);
        sink = he_cache_fill_sink(g);
        sink.headers(sink.ctx, &r);
        HE_CHECK(he_cache_fill_shared(g, &c[1].w));
        sink.body(sink.ctx, "good", 4);
        he_cache_fill_end(g, 0, 0, NOW);
        HE_CHECK(c[1].done == 1 && c[1].status == 200 && memcmp(c[1].buf, "good", 4) == 0);
        /* c[2]'s is another 403: its own, so it may take it */
        r = resp200("max-age=60", 3);
        r.status = 403;
        sink = he_cache_fill_sink(h);
        sink.headers(sink.ctx, &r);
        HE_CHECK(he_cache_fill_shared(h, &c[2].w));
        sink.body(sink.ctx, "bad", 3);
        he_cache_fill_end(h, 0, 0, NOW);
        HE_CHECK(c[2].done == 1 && c[2].status == 403);
        he_cache_fill_end(late[0].w.fill, -ECONNREFUSED, HE_CACHE_OERR_CONNECT, NOW);
        HE_CHECK_INT(he_cache_fills_active(fs), 0);
        {
            he_cache_obj_t *o = he_cache_ram_lookup(ram, 0, &k, NULL);
            HE_CHECK(o && he_cache_obj_len(o) == 4);
            if (o) he_cache_obj_unref(o);
        }
        he_cache_ram_remove(ram, &k);
        clients_free(c, 3);
        clients_free(late, 1);
    }
    /* the owner left: nobody is the fill's own request any more */
    clients_init(c, 2);
    f = he_cache_fill_join(fs, &k, &c[0].w, NULL, false, &cr);
    he_cache_fill_join(fs, &k, &c[1].w, NULL, false, &cr);
    he_cache_fill_leave(&c[0].w);
    r = resp200("private", 1);
    sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    HE_CHECK(!he_cache_fill_shared(f, &c[0].w));
    HE_CHECK(!he_cache_fill_shared(f, &c[1].w));
    he_cache_fill_leave(&c[1].w);
    he_cache_fill_end(f, 0, 0, NOW);
    /* not stored but nobody's own (no-store, a 404 with no-cache): the
     * origin would answer every joined request the same, so all take it
     * and the fill stays findable for more */
    {
        static const struct {
            int status;
            const char *cc;
        } unstored[] = {{200, "no-store"}, {404, "no-cache"}, {429, ""}, {302, "no-store"}};
        for (size_t i = 0; i < sizeof(unstored) / sizeof(unstored[0]); i++) {
            f = he_cache_fill_join(fs, &k, &c[0].w, NULL, false, &cr);
            he_cache_fill_join(fs, &k, &c[1].w, NULL, false, &cr);
            r = resp200(unstored[i].cc, 1);
            r.status = unstored[i].status;
            sink = he_cache_fill_sink(f);
            sink.headers(sink.ctx, &r);
            HE_CHECK(he_cache_fill_shared(f, &c[1].w));
            HE_CHECK(he_cache_fill_find(fs, &k) == f);
            he_cache_fill_leave(&c[0].w);
            he_cache_fill_leave(&c[1].w);
            he_cache_fill_end(f, 0, 0, NOW);
        }
    }
    /* a storable answer is everybody's */
    f = he_cache_fill_join(fs, &k, &c[0].w, NULL, false, &cr);
    he_cache_fill_join(fs, &k, &c[1].w, NULL, false, &cr);
    r = resp200("max-age=60", 1);
    sink = he_cache_fill_sink(f);
    sink.headers(sink.ctx, &r);
    HE_CHECK(he_cache_fill_shared(f, &c[1].w));
    HE_CHECK(he_cache_fill_find(fs, &k) == f);
    sink.body(sink.ctx, "x", 1);
    he_cache_fill_end(f, 0, 0, NOW);
    HE_CHECK(c[0].done == 1 && c[1].done == 1);
    he_cache_ram_remove(ram, &k);
    clients_free(c, 2);
    he_cache_fills_free(fs);
}

int main(void)
{
    he_cache_ram_opts_t ro = {.bytes = 16 << 20, .chunk_size = 16384, .admission = true};
    he_cache_store_opts_t so = {.ndirs = 1};
    he_cache_store_t *store;
    char dir[] = "/tmp/he_test_fill.XXXXXX", cmd[64];
    for (int i = 0; i < BODY; i++)
        src[i] = (char)(i * 7 + (i >> 8));
    he_conf_defaults(&conf);
    memset(conf.cache_ttl_ms, 0, sizeof(conf.cache_ttl_ms));
    ram = he_cache_ram_new(&ro);
    if (!mkdtemp(dir)) return 1;
    so.dirs[0] = dir;
    so.bytes[0] = 64 << 20;
    HE_CHECK_INT(he_cache_store_open(&store, &so, NOW, NULL), 0);
    test_coalesce(store);
    test_fail_midway();
    test_stale();
    test_nostore_leave_prefetch();
    test_content_encoding();
    test_purge_during_fill(store);
    test_304_refreshes_ssd_only_same_version(store);
    test_not_shared();
    he_cache_store_close(store);
    he_cache_ram_free(ram);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    HE_TEST_MAIN_END();
}
