/* Fuzz target for handler/auth_token.c: any bytes as an EdgeAuth token
 * (parse, then verify under a fixed key when it parses), as a
 * percent-encoded one, as an ACL against a path, and as a secure_link md5
 * and expires. Nothing may read past the input; a parsed token's fields
 * must lie inside it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/handler/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static void inside(const char *buf, size_t n, const he_auth_field_t *f)
{
    if (f->p && (f->p < buf || f->p + f->len > buf + n)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char *buf = malloc(n ? n : 1), dec[4096];
    he_conf_auth_t rule;
    he_auth_edgeauth_t t;
    if (!buf) return 0;
    memcpy(buf, d, n);
    memset(&rule, 0, sizeof(rule));
    rule.nkeys = 2;
    rule.key_len[0] = 16;
    rule.key_len[1] = 1;
    rule.clock_skew_ms = 30000;
    snprintf(rule.template_, sizeof(rule.template_), "$expires$uri$remote_addr $secret");

    if (he_auth_edgeauth_parse(buf, n, &t) == 0) {
        inside(buf, n, &t.ip), inside(buf, n, &t.st), inside(buf, n, &t.exp);
        inside(buf, n, &t.acl), inside(buf, n, &t.id), inside(buf, n, &t.data);
        inside(buf, n, &t.hmac);
        if (t.signed_len > n) abort();
        if (he_auth_edgeauth_verify(buf, &t, &rule, "/live/a.ts", 10, "127.0.0.1", 1700000000) >=
            HE_STATS_AUTH_COUNT)
            abort();
    }
    int dn = he_auth_pct_decode(buf, n, dec, sizeof(dec));
    if (dn >= (int)sizeof(dec)) abort();
    if (dn >= 0) he_auth_edgeauth_parse(dec, (size_t)dn, &t);
    size_t half = n / 2;
    he_auth_acl_match(buf, half, buf + half, n - half);
    he_auth_secure_link_verify(&rule, buf, half, buf + half, n - half, "/s/x", 4, "::1", 1);
    free(buf);
    return 0;
}
