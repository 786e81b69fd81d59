/* auth_cache.c: an output is found again only for the same rule
 * generation, path, stored version (ETag and size) and token; it goes
 * when its token expires, when a newer version of the playlist is kept
 * for the same token, and least recently used first when the entry or
 * byte bound is reached; references held by responses outlive it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "he_test.h"
#include "server/handler/auth.h"

static he_auth_buf_t *buf(size_t cap)
{
    he_auth_buf_t *b = calloc(1, sizeof(*b));
    b->p = calloc(1, cap);
    b->cap = cap;
    b->len = 0; /* the bounds below count capacity; test_memfd_counted the length */
    b->refs = 1;
    return b;
}

static he_auth_cache_key_t key(const char *path, const char *etag, const char *text)
{
    he_auth_cache_key_t k = {.gen = 1, .rule = 0, .path = path, .path_len = strlen(path),
                             .etag = etag, .etag_len = strlen(etag), .text = text,
                             .text_len = strlen(text), .size = 100};
    return k;
}

static void test_found_by_whole_key(void)
{
    he_auth_cache_t *c = he_auth_cache_new(8, 1 << 20);
    he_auth_cache_key_t k = key("/v/index.m3u8", "\"e1\"", "__token__=a");
    he_auth_buf_t *b = buf(1000), *got;

    HE_CHECK(he_auth_cache_put(c, &k, b, 200, 100));
    HE_CHECK_INT(b->refs, 2);
    HE_CHECK(!he_auth_cache_put(c, &k, b, 200, 100)); /* there already */
    got = he_auth_cache_get(c, &k, 150);
    HE_CHECK(got == b);
    HE_CHECK_INT(b->refs, 3);
    he_auth_buf_unref(got);

    he_auth_cache_key_t o = k;
    o.text = "__token__=b"; /* another viewer */
    HE_CHECK(!he_auth_cache_get(c, &o, 150));
    o = k;
    o.etag = "\"e2\""; /* another version */
    HE_CHECK(!he_auth_cache_get(c, &o, 150));
    o = k;
    o.size = 101;
    HE_CHECK(!he_auth_cache_get(c, &o, 150));
    o = k;
    o.gen = 2; /* a reload */
    HE_CHECK(!he_auth_cache_get(c, &o, 150));
    o = k;
    o.path = "/v/index.m3u9";
    HE_CHECK(!he_auth_cache_get(c, &o, 150));
    /* the key was copied: the caller's strings may go */
    char path[] = "/v/index.m3u8";
    o = k;
    o.path = path;
    HE_CHECK(he_auth_cache_get(c, &o, 150) == b);
    he_auth_buf_unref(b);

    /* the token's end: dropped, not returned */
    HE_CHECK(!he_auth_cache_get(c, &k, 200));
    HE_CHECK_INT(he_auth_cache_entries(c), 0);
    HE_CHECK_INT(b->refs, 1);
    HE_CHECK(!he_auth_cache_put(c, &k, b, 100, 100)); /* expired already */
    he_auth_buf_unref(b);
    he_auth_cache_free(c);
}

static void test_newer_version_replaces(void)
{
    he_auth_cache_t *c = he_auth_cache_new(8, 1 << 20);
    he_auth_cache_key_t k1 = key("/live/a.m3u8", "\"v1\"", "__token__=a");
    he_auth_cache_key_t k2 = key("/live/a.m3u8", "\"v2\"", "__token__=a");
    he_auth_cache_key_t other = key("/live/a.m3u8", "\"v1\"", "__token__=b");
    he_auth_buf_t *b1 = buf(10), *b2 = buf(10), *b3 = buf(10);

    HE_CHECK(he_auth_cache_put(c, &k1, b1, 1000, 0));
    HE_CHECK(he_auth_cache_put(c, &other, b3, 1000, 0));
    HE_CHECK(he_auth_cache_put(c, &k2, b2, 1000, 0));
    HE_CHECK_INT(he_auth_cache_entries(c), 2);
    HE_CHECK_INT(b1->refs, 1); /* v1 for this token went */
    HE_CHECK(!he_auth_cache_get(c, &k1, 1));
    HE_CHECK(he_auth_cache_get(c, &other, 1) == b3); /* another token's stays */
    he_auth_buf_unref(b3);
    he_auth_buf_unref(b1);
    he_auth_buf_unref(b2);
    he_auth_buf_unref(b3);
    he_auth_cache_free(c);
}

static void test_bounds(void)
{
    he_auth_cache_t *c = he_auth_cache_new(3, 10000);
    char paths[6][16];
    he_auth_cache_key_t k[6];
    he_auth_buf_t *b[6];

    for (int i = 0; i < 6; i++) {
        snprintf(paths[i], sizeof(paths[i]), "/p%d.m3u8", i);
        k[i] = key(paths[i], "\"e\"", "__token__=a");
        b[i] = buf(2000);
    }
    for (int i = 0; i < 3; i++)
        HE_CHECK(he_auth_cache_put(c, &k[i], b[i], 1000, 0));
    /* p0 used: p1 is the least recently used when p3 needs room */
    he_auth_buf_unref(he_auth_cache_get(c, &k[0], 1));
    HE_CHECK(he_auth_cache_put(c, &k[3], b[3], 1000, 1));
    HE_CHECK_INT(he_auth_cache_entries(c), 3);
    HE_CHECK(!he_auth_cache_get(c, &k[1], 1));
    HE_CHECK_INT(b[1]->refs, 1);
    /* bytes: two of 5000 and their keys pass 10000 */
    he_auth_cache_t *s = he_auth_cache_new(8, 10000);
    he_auth_buf_t *big1 = buf(5000), *big2 = buf(5000), *huge = buf(20000);
    HE_CHECK(he_auth_cache_put(s, &k[4], big1, 1000, 0));
    HE_CHECK(he_auth_cache_put(s, &k[5], big2, 1000, 0));
    HE_CHECK_INT(he_auth_cache_entries(s), 1); /* two would pass 10000 with their keys */
    HE_CHECK(he_auth_cache_bytes(s) <= 10000);
    HE_CHECK(!he_auth_cache_put(s, &k[0], huge, 1000, 0)); /* larger than the whole cache */
    HE_CHECK_INT(huge->refs, 1);
    /* expired entries make room before live ones */
    he_auth_cache_free(s);
    s = he_auth_cache_new(2, 1 << 20);
    HE_CHECK(he_auth_cache_put(s, &k[0], b[0], 10, 0));
    HE_CHECK(he_auth_cache_put(s, &k[1], b[1], 1000, 0));
    he_auth_buf_unref(he_auth_cache_get(s, &k[0], 5)); /* k0 most recently used, but ends at 10 */
    HE_CHECK(he_auth_cache_put(s, &k[2], b[2], 1000, 20));
    /* a response still sending keeps its buffer after the cache lets go */
    he_auth_buf_t *sending = he_auth_cache_get(s, &k[1], 20);
    HE_CHECK(sending == b[1]);
    he_auth_cache_free(s);
    he_auth_cache_free(c);
    for (int i = 0; i < 6; i++)
        HE_CHECK_INT(b[i]->refs, i == 1 ? 2 : 1);
    he_auth_buf_unref(sending);
    for (int i = 0; i < 6; i++)
        he_auth_buf_unref(b[i]);
    he_auth_buf_unref(big1);
    he_auth_buf_unref(big2);
    he_auth_buf_unref(huge);
    HE_CHECK(!he_auth_cache_new(0, 100));
    HE_CHECK(!he_auth_cache_get(NULL, &k[0], 0));
}

/* an output's length counts once more: the memfd copy auth.c may make */
static void test_memfd_counted(void)
{
    he_auth_cache_t *c = he_auth_cache_new(8, 10000);
    he_auth_cache_key_t k = key("/a.m3u8", "\"e\"", "t=1");
    he_auth_buf_t *b = buf(4000), *big = buf(6000);
    b->len = 4000;
    big->len = 6000;
    HE_CHECK(he_auth_cache_put(c, &k, b, 100, 0));
    HE_CHECK(he_auth_cache_bytes(c) >= 8000);
    HE_CHECK(!he_auth_cache_put(c, &k, big, 100, 0) || he_auth_cache_entries(c) == 1);
    he_auth_cache_free(c);
    HE_CHECK_INT(b->refs, 1);
    he_auth_buf_unref(b);
    if (big->refs) he_auth_buf_unref(big);
}

int main(void)
{
    test_found_by_whole_key();
    test_newer_version_replaces();
    test_bounds();
    test_memfd_counted();
    HE_TEST_MAIN_END();
}
