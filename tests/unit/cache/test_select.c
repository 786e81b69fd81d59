/* cache/select.c: weighted rendezvous hashing (spread, weights, what moves
 * when a parent goes down and comes back), the ordered mode, and the
 * shared health table; plus weights parsed from origin.urls entries. */
#include <stdio.h>
#include <string.h>

#include "cache/key.h"
#include "cache/origin.h"
#include "cache/select.h"
#include "he_test.h"

#define NKEYS 30000

static void parents(he_cache_parent_t *p, unsigned n, const unsigned *weights)
{
    for (unsigned i = 0; i < n; i++) {
        char url[64];
        int l = snprintf(url, sizeof(url), "http://10.0.0.%u:8080", i + 1);
        p[i].id = he_cache_select_id(url, (size_t)l);
        p[i].weight = weights ? weights[i] : 1;
    }
}

static uint64_t keyhash(unsigned k)
{
    char path[64];
    int l = snprintf(path, sizeof(path), "720p/seg_%05u.ts", k);
    return he_cache_select_key(path, (size_t)l);
}

static unsigned first(const he_cache_parent_t *p, unsigned n, uint64_t kh,
                      const he_cache_health_t *h, uint64_t now)
{
    uint8_t order[HE_CONF_MAX_ORIGINS];
    he_cache_select_order(p, n, HE_CONF_SELECT_HASH, kh, h, now, order);
    return order[0];
}

static void test_spread_and_weights(void)
{
    he_cache_parent_t p[4];
    unsigned cnt[4] = {0}, w[3] = {1, 2, 1};
    parents(p, 3, NULL);
    for (unsigned k = 0; k < NKEYS; k++)
        cnt[first(p, 3, keyhash(k), NULL, 0)]++;
    for (unsigned i = 0; i < 3; i++) /* a third each, within 3 points */
        HE_CHECK(cnt[i] > NKEYS * 30 / 100 && cnt[i] < NKEYS * 36 / 100);
    memset(cnt, 0, sizeof(cnt));
    parents(p, 3, w);
    for (unsigned k = 0; k < NKEYS; k++)
        cnt[first(p, 3, keyhash(k), NULL, 0)]++;
    HE_CHECK(cnt[1] > NKEYS * 47 / 100 && cnt[1] < NKEYS * 53 / 100);
    HE_CHECK(cnt[0] > NKEYS * 22 / 100 && cnt[0] < NKEYS * 28 / 100);
    HE_CHECK(cnt[2] > NKEYS * 22 / 100 && cnt[2] < NKEYS * 28 / 100);
}

/* A parent down: exactly its keys move, spread over the others; back up:
 * they all come back. */
static void test_down_moves_only_its_keys(void)
{
    he_cache_parent_t p[4];
    he_cache_health_t *h = he_cache_health_new(4, 10000);
    static uint8_t before[NKEYS];
    unsigned moved = 0, went[4] = {0};
    parents(p, 4, NULL);
    for (unsigned k = 0; k < NKEYS; k++)
        before[k] = (uint8_t)first(p, 4, keyhash(k), h, 1000);
    HE_CHECK(he_cache_health_fail(h, 2, 1000));
    HE_CHECK(!he_cache_health_fail(h, 2, 1500)); /* already down: no second mark */
    for (unsigned k = 0; k < NKEYS; k++) {
        unsigned now = first(p, 4, keyhash(k), h, 2000);
        if (before[k] == 2) {
            HE_CHECK(now != 2);
            went[now]++;
            moved++;
        } else if (now != before[k]) {
            HE_CHECK(!"a key of a parent that is up moved");
        }
    }
    HE_CHECK(moved > NKEYS * 22 / 100 && moved < NKEYS * 28 / 100);
    for (unsigned i = 0; i < 4; i++) /* each of the three others takes a third of them */
        if (i != 2) HE_CHECK(went[i] > moved * 28 / 100 && went[i] < moved * 39 / 100);
    /* down_time passed: back, with all of its keys */
    HE_CHECK(he_cache_health_up(h, 2, 11000));
    for (unsigned k = 0; k < NKEYS; k++)
        if (first(p, 4, keyhash(k), h, 11000) != before[k]) HE_CHECK(!"a key did not come back");
    /* an answer marks it up at once */
    HE_CHECK(he_cache_health_fail(h, 2, 20000));
    HE_CHECK(!he_cache_health_up(h, 2, 20001));
    he_cache_health_ok(h, 2);
    HE_CHECK(he_cache_health_up(h, 2, 20001));
    he_cache_health_free(h);
}

static void test_order_and_views(void)
{
    he_cache_parent_t p[3];
    he_cache_health_t *h = he_cache_health_new(3, 5000);
    he_cache_health_view_t v;
    uint8_t o[3];
    parents(p, 3, NULL);
    /* ordered: by index, those that are down last */
    he_cache_select_order(p, 3, HE_CONF_SELECT_ORDERED, 42, h, 0, o);
    HE_CHECK(o[0] == 0 && o[1] == 1 && o[2] == 2);
    he_cache_health_fail(h, 0, 100);
    he_cache_select_order(p, 3, HE_CONF_SELECT_ORDERED, 42, h, 200, o);
    HE_CHECK(o[0] == 1 && o[1] == 2 && o[2] == 0);
    /* all down: still a full order (the first is tried anyway) */
    he_cache_health_fail(h, 1, 100);
    he_cache_health_fail(h, 2, 100);
    he_cache_select_order(p, 3, HE_CONF_SELECT_ORDERED, 42, h, 200, o);
    HE_CHECK(o[0] == 0 && o[1] == 1 && o[2] == 2);
    /* hash: the full preference order, the same with everyone down */
    uint8_t up[3], down[3];
    he_cache_select_order(p, 3, HE_CONF_SELECT_HASH, keyhash(7), NULL, 0, up);
    he_cache_select_order(p, 3, HE_CONF_SELECT_HASH, keyhash(7), h, 200, down);
    HE_CHECK(memcmp(up, down, 3) == 0);
    HE_CHECK(up[0] != up[1] && up[1] != up[2] && up[0] != up[2]);
    he_cache_health_get(h, 1, 1100, &v);
    HE_CHECK(!v.up);
    HE_CHECK_INT(v.down_left_ms, 4000);
    HE_CHECK_INT(v.marked_down, 1);
    he_cache_health_get(h, 1, 5100, &v);
    HE_CHECK(v.up && v.down_left_ms == 0);
    HE_CHECK_INT(he_cache_health_count(h), 3);
    he_cache_health_free(h);
    /* down_time 0: never marked */
    h = he_cache_health_new(2, 0);
    HE_CHECK(!he_cache_health_fail(h, 0, 1));
    HE_CHECK(he_cache_health_up(h, 0, 2));
    he_cache_health_free(h);
}

/* Every box agrees: a parent's id comes from its URL, not its place in
 * the list, and a key's hash from its path alone. */
static void test_ids_and_keys(void)
{
    he_conf_t conf;
    he_cache_origin_t a, b;
    he_cache_key_t k1, k2;
    char err[256];
    HE_CHECK_INT(he_cache_origin_parse("http://10.0.0.2:8080 weight=2", &a, err, sizeof(err)), 0);
    HE_CHECK_INT(he_cache_origin_parse("http://10.0.0.2:8080", &b, err, sizeof(err)), 0);
    HE_CHECK_INT(a.parent.weight, 2);
    HE_CHECK_INT(b.parent.weight, 1);
    HE_CHECK(a.parent.id == b.parent.id);
    HE_CHECK_INT(a.port, 8080);
    HE_CHECK_STR(a.base, "");
    HE_CHECK_INT(he_cache_origin_parse("http://10.0.0.2:8080 weight=0", &a, err, sizeof(err)),
                 -EINVAL);
    HE_CHECK(strstr(err, "weight=N") != NULL);
    HE_CHECK_INT(he_cache_origin_parse("http://10.0.0.2 weight=x", &a, err, sizeof(err)), -EINVAL);

    he_conf_defaults(&conf);
    snprintf(conf.cache_key_params[0], sizeof(conf.cache_key_params[0]), "lang");
    conf.ncache_key_params = 1;
    HE_CHECK_INT(he_cache_key_make(&conf, "/live/a.m3u8?_HLS_msn=12&_HLS_part=1&token=abc&lang=en",
                                   54, &k1),
                 0);
    HE_CHECK_INT(he_cache_key_make(&conf, "/live/a.m3u8?token=zzz", 22, &k2), 0);
    HE_CHECK(he_cache_select_key(k1.s, k1.path_len) == he_cache_select_key(k2.s, k2.path_len));
}

static void test_conf_weights(void)
{
    size_t ul;
    unsigned w;
    const char *what = NULL;
    HE_CHECK_INT(he_conf_origin_url_split("http://a:1 weight=7", 19, &ul, &w, &what), 0);
    HE_CHECK_INT(ul, 10);
    HE_CHECK_INT(w, 7);
    HE_CHECK_INT(he_conf_origin_url_split("http://a:1", 10, &ul, &w, &what), 0);
    HE_CHECK_INT(w, 1);
    HE_CHECK_INT(he_conf_origin_url_split("http://a:1 weight=1001", 22, &ul, &w, &what), -EINVAL);
    HE_CHECK(what && strstr(what, "1..1000"));
}

int main(void)
{
    test_spread_and_weights();
    test_down_moves_only_its_keys();
    test_order_and_views();
    test_ids_and_keys();
    test_conf_weights();
    HE_TEST_MAIN_END();
}
