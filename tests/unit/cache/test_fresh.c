/* cache/fresh.c with an injected clock: Cache-Control directives, Expires
 * and Date, Age, heuristics, per-kind overrides, live playlists, the
 * stale windows and negative caching; and the state at each instant. */
#include <string.h>

#include "cache/fresh.h"
#include "cache/origin.h"
#include "he_test.h"

#define T0 1700000000000ll /* 2023-11-14T22:13:20Z */

static he_conf_t conf;

static he_cache_http_resp_t resp(int status, const char *cc)
{
    he_cache_http_resp_t r;
    memset(&r, 0, sizeof(r));
    r.status = status;
    r.age_s = -1;
    r.content_length = -1;
    he_cache_cc_parse(&r.cc, cc, strlen(cc));
    return r;
}

/* lifetime in ms, or -1 when not storable */
static long long life(he_seg_kind_t kind, const he_cache_http_resp_t *r, const char *body)
{
    he_cache_fresh_t f;
    if (!he_cache_fresh_compute(&conf, kind, r, body, body ? strlen(body) : 0, T0, &f)) return -1;
    /* stored_ms is when the response was generated: Age seconds ago */
    if (f.stored_ms != T0 - (r->age_s > 0 ? r->age_s * 1000 : 0)) return -2;
    return f.expires_ms - T0;
}

static void test_dates(void)
{
    int64_t ms;
    HE_CHECK_INT(he_cache_http_date_parse("Tue, 14 Nov 2023 22:13:20 GMT", 29, &ms), 0);
    HE_CHECK_INT(ms, T0);
    HE_CHECK_INT(he_cache_http_date_parse("Tuesday, 14-Nov-23 22:13:20 GMT", 31, &ms), 0);
    HE_CHECK_INT(ms, T0);
    HE_CHECK_INT(he_cache_http_date_parse("Tue Nov 14 22:13:20 2023", 24, &ms), 0);
    HE_CHECK_INT(ms, T0);
    HE_CHECK_INT(he_cache_http_date_parse(" Tue, 14 Nov 2023 22:13:20 GMT ", 31, &ms), 0);
    HE_CHECK(he_cache_http_date_parse("0", 1, &ms) < 0);
    HE_CHECK(he_cache_http_date_parse("", 0, &ms) < 0);
    HE_CHECK(he_cache_http_date_parse("Tue, 14 Nov 2023 22:13:20 GMT junk", 34, &ms) < 0);
}

static void test_directives(void)
{
    he_cache_http_resp_t r;
    he_cache_fresh_t f;

    r = resp(200, "max-age=60");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 60000);
    r = resp(200, "public, max-age=60, s-maxage=5");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 5000); /* shared cache */
    r = resp(200, "MAX-AGE=\"30\"");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 30000);
    r = resp(200, "max-age=abc");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0); /* malformed: stale */
    r = resp(200, "no-store, max-age=60");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(200, "private");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(200, "private=\"set-cookie\", max-age=9");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(200, "no-cache, max-age=60");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0);
    /* every Cache-Control line adds its directives; the smaller value of
     * a repeated one wins; a malformed s-maxage is stale too */
    r = resp(200, "max-age=60");
    he_cache_cc_parse(&r.cc, "private", 7);
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(200, "max-age=60");
    he_cache_cc_parse(&r.cc, " max-age=5 , x-ext=\"a, b\"", 25);
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 5000);
    r = resp(200, "max-age=60, s-maxage=x");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0);
    r = resp(200, "max-age=60, max-age");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0);
    r = resp(200, "max-age=60, stale-while-revalidate=x, private=\"a,b\"");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    /* the length bounds the value: nothing is read past it */
    r = resp(200, "");
    he_cache_cc_parse(&r.cc, "max-age=12no-store", 10);
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 12000);
    r = resp(200, "max-age=60");
    r.age_s = 20;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 40000);
    r.age_s = 100;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0);

    /* Expires relative to Date (clock skew between us and the origin
     * does not matter), or to now without Date */
    r = resp(200, "");
    strcpy(r.date, "Tue, 14 Nov 2023 20:00:00 GMT");
    strcpy(r.expires, "Tue, 14 Nov 2023 20:01:00 GMT");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 60000);
    r.date[0] = '\0';
    strcpy(r.expires, "Tue, 14 Nov 2023 22:13:50 GMT");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 30000);
    strcpy(r.expires, "0");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0);
    strcpy(r.expires, "Tue, 14 Nov 2023 20:01:00 GMT"); /* in the past */
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0);
    r = resp(200, "max-age=10"); /* max-age beats Expires */
    strcpy(r.expires, "Tue, 14 Nov 2023 23:13:20 GMT");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 10000);

    /* heuristic: 10% of the time since Last-Modified, at most a day */
    r = resp(200, "");
    strcpy(r.last_modified, "Tue, 14 Nov 2023 21:13:20 GMT");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 360000);
    strcpy(r.last_modified, "Tue, 14 Nov 2000 21:13:20 GMT");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 24ll * 3600 * 1000);
    r.last_modified[0] = '\0';
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 0); /* stored, but stale at once */

    /* statuses */
    r = resp(203, "max-age=1");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 1000);
    static const int no[] = {206, 301, 302, 403, 500, 502, 503};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        r = resp(no[i], "max-age=60");
        HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    }

    /* stale windows: the origin's, else the config's; forbidden by
     * must-revalidate and no-cache */
    conf.cache_stale_while_revalidate_ms = 7000;
    conf.cache_stale_if_error_ms = 9000;
    r = resp(200, "max-age=1");
    HE_CHECK(he_cache_fresh_compute(&conf, HE_SEG_KIND_SEGMENT, &r, NULL, 0, T0, &f));
    HE_CHECK_INT(f.swr_ms, 7000);
    HE_CHECK_INT(f.sie_ms, 9000);
    r = resp(200, "max-age=1, stale-while-revalidate=2, stale-if-error=3");
    HE_CHECK(he_cache_fresh_compute(&conf, HE_SEG_KIND_SEGMENT, &r, NULL, 0, T0, &f));
    HE_CHECK_INT(f.swr_ms, 2000);
    HE_CHECK_INT(f.sie_ms, 3000);
    r = resp(200, "max-age=1, stale-while-revalidate=2, must-revalidate");
    HE_CHECK(he_cache_fresh_compute(&conf, HE_SEG_KIND_SEGMENT, &r, NULL, 0, T0, &f));
    HE_CHECK(f.swr_ms == 0 && f.sie_ms == 0);
    r = resp(200, "max-age=1, proxy-revalidate");
    HE_CHECK(he_cache_fresh_compute(&conf, HE_SEG_KIND_SEGMENT, &r, NULL, 0, T0, &f));
    HE_CHECK(f.swr_ms == 0 && f.sie_ms == 0);
    conf.cache_stale_while_revalidate_ms = conf.cache_stale_if_error_ms = 0;
}

static void test_negative(void)
{
    he_cache_http_resp_t r = resp(404, "max-age=600");
    he_cache_fresh_t f;
    conf.cache_negative_ttl_ms = 0;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    conf.cache_negative_ttl_ms = 2000;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 2000);
    conf.cache_stale_if_error_ms = 5000;
    HE_CHECK(he_cache_fresh_compute(&conf, HE_SEG_KIND_SEGMENT, &r, NULL, 0, T0, &f));
    HE_CHECK(f.swr_ms == 0 && f.sie_ms == 0); /* a 404 is never served stale */
    r = resp(404, "no-store");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    /* the origin may shorten the negative TTL (a live segment not
     * produced yet), never lengthen it */
    r = resp(404, "no-cache");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(404, "max-age=0");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(404, "max-age=1");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 1000);
    r = resp(404, "max-age=600, s-maxage=1");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 1000);
    r = resp(404, "max-age=2");
    r.age_s = 1;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 1000);
    r = resp(404, "");
    strcpy(r.expires, "0");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    strcpy(r.date, "Tue, 14 Nov 2023 20:00:00 GMT");
    strcpy(r.expires, "Tue, 14 Nov 2023 20:00:01 GMT");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 1000);
    r = resp(404, ""); /* nothing said: the TTL */
    strcpy(r.last_modified, "Tue, 14 Nov 2000 21:13:20 GMT");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 2000);
    conf.cache_stale_if_error_ms = 0;
}

static void test_overrides(void)
{
    he_cache_http_resp_t r = resp(200, "max-age=60");
    conf.cache_ttl_ms[HE_SEG_KIND_SEGMENT] = 86400000;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 86400000);
    HE_CHECK_INT(life(HE_SEG_KIND_OTHER, &r, NULL), 60000); /* other kinds keep the origin's */
    r = resp(200, "");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 86400000);
    r.age_s = 50; /* Age only shortens origin lifetimes */
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 86400000);
    r = resp(200, "no-store"); /* no-store still wins */
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    conf.cache_ttl_ms[HE_SEG_KIND_SEGMENT] = 0;
}

static void test_live(void)
{
    static const char live[] = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:10\n"
                               "#EXTINF:6,\ns10.ts\n#EXTINF:6,\ns11.ts\n";
    static const char vod[] = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n"
                              "#EXTINF:6,\ns0.ts\n#EXT-X-ENDLIST\n";
    he_cache_http_resp_t r = resp(200, "max-age=60");
    he_cache_fresh_t f;

    conf.cache_live_fraction_pct = 50;
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, live), 3000); /* capped */
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, vod), 60000); /* VOD: normal rules */
    r = resp(200, "max-age=1");
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, live), 1000); /* shorter stays */
    r = resp(200, "");
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, live), 3000); /* no headers: the fraction */
    conf.cache_live_fraction_pct = 0;                      /* 0 = default 50% */
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, live), 3000);
    conf.cache_live_fraction_pct = 25;
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, live), 1500);
    /* even an operator override cannot freeze a live playlist */
    conf.cache_ttl_ms[HE_SEG_KIND_MEDIA] = 60000;
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, live), 1500);
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, vod), 60000);
    conf.cache_ttl_ms[HE_SEG_KIND_MEDIA] = 0;
    /* stale-while-revalidate cannot carry it past one target duration */
    r = resp(200, "max-age=60, stale-while-revalidate=30");
    HE_CHECK(he_cache_fresh_compute(&conf, HE_SEG_KIND_MEDIA, &r, live, strlen(live), T0, &f));
    HE_CHECK_INT(f.expires_ms - T0, 1500);
    HE_CHECK_INT(f.swr_ms, 4500);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 5999) == HE_CACHE_STALE_REVALIDATE);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 6000) == HE_CACHE_EXPIRED);
    /* an unparsable playlist falls back to the normal rules */
    r = resp(200, "max-age=60");
    HE_CHECK_INT(life(HE_SEG_KIND_MEDIA, &r, "garbage"), 60000);
    conf.cache_live_fraction_pct = 0;
}

static void test_states(void)
{
    he_cache_fresh_t f = {.stored_ms = T0, .expires_ms = T0 + 1000, .swr_ms = 500, .sie_ms = 2000};
    HE_CHECK(he_cache_fresh_state(&f, T0) == HE_CACHE_FRESH);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 999) == HE_CACHE_FRESH);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 1000) == HE_CACHE_STALE_REVALIDATE);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 1499) == HE_CACHE_STALE_REVALIDATE);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 1500) == HE_CACHE_STALE_IF_ERROR);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 2999) == HE_CACHE_STALE_IF_ERROR);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 3000) == HE_CACHE_EXPIRED);
    /* swr longer than sie: revalidate-stale covers the whole window */
    f.swr_ms = 3000;
    f.sie_ms = 1000;
    HE_CHECK(he_cache_fresh_state(&f, T0 + 3999) == HE_CACHE_STALE_REVALIDATE);
    HE_CHECK(he_cache_fresh_state(&f, T0 + 4000) == HE_CACHE_EXPIRED);
    f.swr_ms = f.sie_ms = 0;
    HE_CHECK(he_cache_fresh_state(&f, T0 + 1000) == HE_CACHE_EXPIRED);
    HE_CHECK_STR(he_cache_freshness_name(HE_CACHE_STALE_IF_ERROR), "stale-if-error");
}

/* Responses that must not be shared are not stored: a Set-Cookie (one
 * viewer's), Vary: * (RFC 9111 4.1: never matches; r.vary, as the parser
 * sets it). For 404s too. */
static void test_not_shared(void)
{
    he_cache_http_resp_t r = resp(200, "max-age=60");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 60000);
    r.set_cookie = true;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(200, "public, s-maxage=60");
    r.vary = true;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    conf.cache_negative_ttl_ms = 5000;
    r = resp(404, "");
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), 5000);
    r.set_cookie = true;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    r = resp(404, "");
    r.vary = true;
    HE_CHECK_INT(life(HE_SEG_KIND_SEGMENT, &r, NULL), -1);
    conf.cache_negative_ttl_ms = 0;
}

int main(void)
{
    he_conf_defaults(&conf);
    conf.cache_negative_ttl_ms = 0;
    conf.cache_stale_while_revalidate_ms = conf.cache_stale_if_error_ms = 0;
    conf.cache_live_fraction_pct = 0;
    memset(conf.cache_ttl_ms, 0, sizeof(conf.cache_ttl_ms));
    test_dates();
    test_directives();
    test_negative();
    test_overrides();
    test_live();
    test_states();
    test_not_shared();
    HE_TEST_MAIN_END();
}
