/* cache/store_hdr.c: an object file's header round-trips key, meta, body
 * length and CRC; a flipped byte, a short read, another magic or another
 * format version are refused. Files on disk are test_store.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "he_test.h"

static int build(char *buf, he_cache_key_t *k, he_cache_meta_t *m)
{
    he_cache_key_set(k, "vod/a/seg-7.ts?lang=en", strlen("vod/a/seg-7.ts?lang=en"));
    memset(m, 0, sizeof(*m));
    m->status = 404;
    m->kind = 3;
    m->fresh = (he_cache_fresh_t){
        .stored_ms = 1700000000123, .expires_ms = 1700000060123, .swr_ms = 5000, .sie_ms = 60000};
    snprintf(m->content_type, sizeof(m->content_type), "video/mp2t");
    snprintf(m->etag, sizeof(m->etag), "\"abc\"");
    snprintf(m->last_modified, sizeof(m->last_modified), "Tue, 14 Nov 2023 22:13:20 GMT");
    snprintf(m->content_encoding, sizeof(m->content_encoding), "gzip");
    return he__cache_hdr_build(buf, k, m, 123456789, 0xdeadbeef);
}

static void test_round_trip(void)
{
    static char buf[HE__CACHE_HDR_MAX];
    he_cache_key_t k, k2;
    he_cache_meta_t m, m2;
    uint32_t hl, crc;
    uint64_t bl;
    int n = build(buf, &k, &m);

    HE_CHECK(n > HE__CACHE_HDR_FIXED);
    HE_CHECK_INT(he__cache_hdr_parse(buf, (size_t)n, &k2, &m2, &hl, &bl, &crc), 0);
    HE_CHECK_INT(hl, n);
    HE_CHECK_INT(bl, 123456789);
    HE_CHECK_INT(crc, 0xdeadbeef);
    HE_CHECK_STR(k2.s, k.s);
    HE_CHECK(k2.hash == k.hash && k2.len == k.len);
    HE_CHECK(m2.status == 404 && m2.kind == 3);
    HE_CHECK(m2.fresh.stored_ms == m.fresh.stored_ms && m2.fresh.expires_ms == m.fresh.expires_ms);
    HE_CHECK(m2.fresh.swr_ms == 5000 && m2.fresh.sie_ms == 60000);
    HE_CHECK_STR(m2.content_type, "video/mp2t");
    HE_CHECK_STR(m2.etag, "\"abc\"");
    HE_CHECK_STR(m2.last_modified, m.last_modified);
    HE_CHECK_STR(m2.content_encoding, "gzip");
    /* more bytes after the header (the body) are fine */
    HE_CHECK_INT(he__cache_hdr_parse(buf, sizeof(buf), &k2, &m2, &hl, &bl, &crc), 0);
}

static void test_refused(void)
{
    static char buf[HE__CACHE_HDR_MAX], bad[HE__CACHE_HDR_MAX];
    he_cache_key_t k;
    he_cache_meta_t m;
    uint32_t hl, crc, v;
    uint64_t bl;
    int n = build(buf, &k, &m);

    /* any flipped byte: the CRC (or a check before it) says no */
    for (int i = 0; i < n; i++) {
        memcpy(bad, buf, (size_t)n);
        bad[i] ^= 0x20;
        if (he__cache_hdr_parse(bad, (size_t)n, &k, &m, &hl, &bl, &crc) == 0) {
            fprintf(stderr, "byte %d flipped: accepted\n", i);
            HE_CHECK(0);
        }
    }
    /* short reads */
    HE_CHECK_INT(he__cache_hdr_parse(buf, (size_t)n - 1, &k, &m, &hl, &bl, &crc), -EBADMSG);
    HE_CHECK_INT(he__cache_hdr_parse(buf, 10, &k, &m, &hl, &bl, &crc), -EBADMSG);
    /* another format version: told apart from corruption */
    memcpy(bad, buf, (size_t)n);
    v = HE__CACHE_STORE_VERSION + 1;
    memcpy(bad + 4, &v, 4);
    HE_CHECK_INT(he__cache_hdr_parse(bad, (size_t)n, &k, &m, &hl, &bl, &crc), -EPROTONOSUPPORT);
    memcpy(bad, buf, (size_t)n);
    memcpy(bad, "XXXX", 4);
    HE_CHECK_INT(he__cache_hdr_parse(bad, (size_t)n, &k, &m, &hl, &bl, &crc), -EBADMSG);
}

int main(void)
{
    test_round_trip();
    test_refused();
    HE_TEST_MAIN_END();
}
