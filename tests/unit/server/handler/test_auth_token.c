/* auth_token.c: EdgeAuth 2.0 and secure_link against vectors made by an
 * independent implementation (auth_vectors.h, from Python's hmac through
 * gen_auth_vectors.py) and nginx's documented secure_link example; the
 * parser's refusals; ACL globs; key rotation. */
#include <string.h>

#include "he_test.h"
#include "segment/segment.h"
#include "server/handler/auth.h"

#include "auth_vectors.h"

static void rule_with_key(he_conf_auth_t *r, const char *hex)
{
    size_t n = strlen(hex);
    memset(r, 0, sizeof(*r));
    r->clock_skew_ms = 30000;
    r->nkeys = 1;
    r->key_len[0] = (unsigned)(n / 2);
    for (size_t i = 0; i < n; i += 2)
        r->keys[0][i / 2] = (unsigned char)(he_seg_hex_digit((unsigned char)hex[i]) << 4 |
                                            he_seg_hex_digit((unsigned char)hex[i + 1]));
}

static he_stats_auth_t check(const he_conf_auth_t *r, const char *tok, const char *path,
                             const char *ip)
{
    he_auth_edgeauth_t t;
    if (he_auth_edgeauth_parse(tok, strlen(tok), &t) < 0) return HE_STATS_AUTH_MALFORMED;
    return he_auth_edgeauth_verify(tok, &t, r, path, strlen(path), ip, AV_NOW);
}

static void test_vectors(void)
{
    he_conf_auth_t r;
    for (size_t i = 0; i < sizeof(auth_vectors) / sizeof(auth_vectors[0]); i++) {
        const struct auth_vector *v = &auth_vectors[i];
        rule_with_key(&r, v->key);
        he_stats_auth_t got = check(&r, v->token, v->path, v->ip);
        if (got != v->want) fprintf(stderr, "vector %s\n", v->name);
        HE_CHECK_INT(got, v->want);
    }
}

static void test_tampered_and_keys(void)
{
    he_conf_auth_t r;
    char tok[512];
    const struct auth_vector *v = &auth_vectors[0]; /* acl=/live/... under K1 */

    rule_with_key(&r, v->key);
    /* any byte of the signed part changed: another exp, another ACL */
    snprintf(tok, sizeof(tok), "%s", v->token);
    tok[4] = tok[4] == '9' ? '8' : '9';
    HE_CHECK_INT(check(&r, tok, v->path, v->ip), HE_STATS_AUTH_BAD_SIGNATURE);
    snprintf(tok, sizeof(tok), "%s", v->token);
    char *acl = strstr(tok, "acl=/live/*");
    HE_CHECK(acl != NULL);
    if (acl) acl[5] = 'x'; /* acl=/xive/... */
    HE_CHECK_INT(check(&r, tok, "/xive/a.ts", v->ip), HE_STATS_AUTH_BAD_SIGNATURE);
    /* the hmac itself changed */
    snprintf(tok, sizeof(tok), "%s", v->token);
    tok[strlen(tok) - 1] = tok[strlen(tok) - 1] == '0' ? '1' : '0';
    HE_CHECK_INT(check(&r, tok, v->path, v->ip), HE_STATS_AUTH_BAD_SIGNATURE);

    /* wrong key; then rotation: the old key second in the list still validates */
    rule_with_key(&r, "9f01");
    HE_CHECK_INT(check(&r, auth_vector_other_key, "/a.ts", "127.0.0.1"),
                 HE_STATS_AUTH_BAD_SIGNATURE);
    he_conf_auth_t two; /* keys: [9f01, K1] */
    rule_with_key(&two, v->key);
    memcpy(two.keys[1], two.keys[0], sizeof(two.keys[0]));
    two.key_len[1] = two.key_len[0];
    two.keys[0][0] = 0x9f, two.keys[0][1] = 0x01, two.key_len[0] = 2;
    two.nkeys = 2;
    HE_CHECK_INT(check(&two, auth_vector_other_key, "/a.ts", "127.0.0.1"), HE_STATS_AUTH_OK);
}

/* A token verified once is remembered per thread (the HMAC is not
 * computed again), but only under a rule that still has its key; the
 * time, ACL and ip are checked every time. (test_vectors already asks
 * for a URL token on another path after the same token was good.) */
static void test_remembered(void)
{
    const struct auth_vector *v = &auth_vectors[0];
    he_conf_auth_t r, other;
    he_auth_edgeauth_t t;

    rule_with_key(&r, v->key);
    for (int i = 0; i < 3; i++)
        HE_CHECK_INT(check(&r, v->token, v->path, v->ip), HE_STATS_AUTH_OK);
    rule_with_key(&other, "9f01"); /* the key rotated out */
    HE_CHECK_INT(check(&other, v->token, v->path, v->ip), HE_STATS_AUTH_BAD_SIGNATURE);
    HE_CHECK_INT(check(&r, v->token, "/other/a.ts", v->ip), HE_STATS_AUTH_ACL);
    HE_CHECK(he_auth_edgeauth_parse(v->token, strlen(v->token), &t) == 0);
    HE_CHECK_INT(he_auth_edgeauth_verify(v->token, &t, &r, v->path, strlen(v->path), v->ip,
                                         t.end + 31),
                 HE_STATS_AUTH_EXPIRED);
    HE_CHECK_INT(check(&r, v->token, v->path, v->ip), HE_STATS_AUTH_OK);
}

static void test_malformed(void)
{
    static const char *const bad[] = {
        "",
        "exp=1~acl=/*",                       /* no hmac */
        "acl=/*~hmac=" /* no exp */ "0000000000000000000000000000000000000000000000000000000000000000",
        "exp=1~exp=2~acl=/*~hmac=0000000000000000000000000000000000000000000000000000000000000000",
        "exp=1~acl=/*~acl=/a~hmac=0000000000000000000000000000000000000000000000000000000000000000",
        "exp=1~acl=/*~foo=1~hmac=0000000000000000000000000000000000000000000000000000000000000000",
        "exp=1~acl=/*~hmac=00",                          /* short hmac */
        "exp=1~acl=/*~hmac=zz00000000000000000000000000000000000000000000000000000000000000",
        "exp=1~acl=/*~hmac=0000000000000000000000000000000000000000000000000000000000000000~id=1",
        "exp=1~acl=/*~hmac=0000000000000000000000000000000000000000000000000000000000000000~",
        "exp=x1~acl=/*~hmac=0000000000000000000000000000000000000000000000000000000000000000",
        "exp=1~acl=~hmac=0000000000000000000000000000000000000000000000000000000000000000",
        "exp=1~~acl=/*~hmac=0000000000000000000000000000000000000000000000000000000000000000",
        "hmac=0000000000000000000000000000000000000000000000000000000000000000",
    };
    he_auth_edgeauth_t t;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = he_auth_edgeauth_parse(bad[i], strlen(bad[i]), &t);
        if (rc == 0) fprintf(stderr, "accepted: %s\n", bad[i]);
        HE_CHECK_INT(rc, -22);
    }
    const char *ok = "st=5~exp=10~acl=/*~hmac=00000000000000000000000000000000000000000000000000000000000000ff";
    HE_CHECK_INT(he_auth_edgeauth_parse(ok, strlen(ok), &t), 0);
    HE_CHECK_INT(t.start, 5);
    HE_CHECK_INT(t.end, 10);
    HE_CHECK_INT(t.signed_len, strlen("st=5~exp=10~acl=/*"));
}

static void test_acl(void)
{
    HE_CHECK(he_auth_acl_match("/live/*", 7, "/live/a/b.ts", 12));
    HE_CHECK(!he_auth_acl_match("/live/*", 7, "/vod/a.ts", 9));
    HE_CHECK(he_auth_acl_match("/*/index.m3u8", 13, "/a/b/index.m3u8", 15));
    HE_CHECK(!he_auth_acl_match("/*/index.m3u8", 13, "/a/b/index.m3u8x", 16));
    HE_CHECK(he_auth_acl_match("/a.ts", 5, "/a.ts", 5));
    HE_CHECK(!he_auth_acl_match("/a.ts", 5, "/a.tsx", 6));
    HE_CHECK(he_auth_acl_match("/x!/y/*", 7, "/y/z", 4));
    HE_CHECK(he_auth_acl_match("*", 1, "/", 1));
    HE_CHECK(!he_auth_acl_match("", 0, "/", 1));
    /* many stars against a long near-miss stays linear enough to finish */
    char path[4096];
    memset(path, 'a', sizeof(path) - 1);
    path[sizeof(path) - 1] = 0;
    HE_CHECK(!he_auth_acl_match("*a*a*a*a*a*a*a*b", 16, path, sizeof(path) - 1));
}

static void test_secure_link(void)
{
    he_conf_auth_t r;
    rule_with_key(&r, "736563726574"); /* "secret" */
    snprintf(r.template_, sizeof(r.template_), "$expires$uri$remote_addr $secret");
    const char *md5 = secure_link_vector;
    HE_CHECK_STR(md5, "_e4Nc3iduzkWRm01TBBNYw"); /* nginx's documentation */
    HE_CHECK_INT(he_auth_secure_link_verify(&r, md5, 22, "2147483647", 10, "/s/link", 7, "127.0.0.1",
                                            AV_NOW),
                 HE_STATS_AUTH_OK);
    HE_CHECK_INT(he_auth_secure_link_verify(&r, md5, 22, "2147483647", 10, "/s/link", 7, "127.0.0.2",
                                            AV_NOW),
                 HE_STATS_AUTH_BAD_SIGNATURE);
    HE_CHECK_INT(he_auth_secure_link_verify(&r, md5, 22, "2147483647", 10, "/s/link", 7, "127.0.0.1",
                                            2147483647ull + 31),
                 HE_STATS_AUTH_EXPIRED);
    HE_CHECK_INT(he_auth_secure_link_verify(&r, "_e4Nc3iduzkWRm01TBBNY", 21, "2147483647", 10,
                                            "/s/link", 7, "127.0.0.1", AV_NOW),
                 HE_STATS_AUTH_MALFORMED);
    HE_CHECK_INT(he_auth_secure_link_verify(&r, "_e4Nc3iduzkWRm01TBBN+w", 22, "2147483647", 10,
                                            "/s/link", 7, "127.0.0.1", AV_NOW),
                 HE_STATS_AUTH_MALFORMED);
    HE_CHECK_INT(he_auth_secure_link_verify(&r, md5, 22, "21474x3647", 10, "/s/link", 7,
                                            "127.0.0.1", AV_NOW),
                 HE_STATS_AUTH_MALFORMED);
    HE_CHECK_INT(he_auth_secure_link_verify(&r, NULL, 0, NULL, 0, "/s/link", 7, "127.0.0.1", AV_NOW),
                 HE_STATS_AUTH_MISSING);
}

static void test_pct_decode(void)
{
    char out[32];
    HE_CHECK_INT(he_auth_pct_decode("acl%3D%2f*", 10, out, sizeof(out)), 6);
    HE_CHECK_STR(out, "acl=/*");
    HE_CHECK_INT(he_auth_pct_decode("%2", 2, out, sizeof(out)), -22);
    HE_CHECK_INT(he_auth_pct_decode("%00", 3, out, sizeof(out)), -22);
    HE_CHECK_INT(he_auth_pct_decode("%zz", 3, out, sizeof(out)), -22);
    HE_CHECK_INT(he_auth_pct_decode("0123456789", 10, out, 5), -36);
}

int main(void)
{
    test_vectors();
    test_tampered_and_keys();
    test_remembered();
    test_malformed();
    test_acl();
    test_secure_link();
    test_pct_decode();
    HE_TEST_MAIN_END();
}
