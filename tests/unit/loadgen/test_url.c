/* loadgen/url.c: command-line URLs. */
#include "he_test.h"
#include "loadgen/url.c"

int main(void)
{
    he_lg_url_t u;
    HE_CHECK_INT(he_lg_url_parse("http://127.0.0.1:8080/live/master.m3u8?x=1", &u), 0);
    HE_CHECK(!u.tls);
    HE_CHECK_STR(u.host, "127.0.0.1");
    HE_CHECK_INT(u.port, 8080);
    HE_CHECK_STR(u.target, "/live/master.m3u8?x=1");

    HE_CHECK_INT(he_lg_url_parse("https://example.test/a.ts#frag", &u), 0);
    HE_CHECK(u.tls);
    HE_CHECK_INT(u.port, 443);
    HE_CHECK_STR(u.target, "/a.ts");

    HE_CHECK_INT(he_lg_url_parse("HTTP://h", &u), 0);
    HE_CHECK_INT(u.port, 80);
    HE_CHECK_STR(u.target, "/");
    HE_CHECK_INT(he_lg_url_parse("http://h?q=1", &u), 0);
    HE_CHECK_STR(u.target, "/?q=1");

    HE_CHECK_INT(he_lg_url_parse("http://[::1]:9000/x", &u), 0);
    HE_CHECK_STR(u.host, "::1");
    HE_CHECK_INT(u.port, 9000);
    HE_CHECK_STR(u.target, "/x");

    const char *bad[] = {"",
                         "ftp://h/x",
                         "127.0.0.1:80/x",
                         "http://",
                         "http:///x",
                         "http://h:0/",
                         "http://h:65536/",
                         "http://h:123456/",
                         "http://h:/x",
                         "http://h:80x/",
                         "http://user@h/",
                         "http://[::1/x",
                         "http://h/a b",
                         "http://h/a\r\nX: y"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = he_lg_url_parse(bad[i], &u);
        if (rc != -EINVAL) fprintf(stderr, "accepted: '%s'\n", bad[i]);
        HE_CHECK_INT(rc, -EINVAL);
    }
    char big[HE_LG_URL_MAX + 64] = "http://h/";
    memset(big + 9, 'a', sizeof(big) - 10);
    big[sizeof(big) - 1] = 0;
    HE_CHECK_INT(he_lg_url_parse(big, &u), -ENAMETOOLONG);

    /* endpoints: resolved once, same index for the same host:port:scheme */
    int a = he_lg_endpoint_get("127.0.0.1", 8080, false);
    HE_CHECK(a >= 0);
    HE_CHECK_INT(he_lg_endpoint_get("127.0.0.1", 8080, false), a);
    int b = he_lg_endpoint_get("127.0.0.1", 8080, true);
    HE_CHECK(b >= 0 && b != a);
    HE_CHECK_STR(he_lg_endpoint_at(a)->hosthdr, "127.0.0.1:8080");
    int c = he_lg_endpoint_get("127.0.0.1", 80, false);
    HE_CHECK_STR(he_lg_endpoint_at(c)->hosthdr, "127.0.0.1");
    int d = he_lg_endpoint_get("::1", 8080, false);
    if (d >= 0) HE_CHECK_STR(he_lg_endpoint_at(d)->hosthdr, "[::1]:8080");
    HE_CHECK(he_lg_endpoint_get("no-such-host.invalid", 80, false) < 0);
    he_lg_endpoints_reset();
    HE_TEST_MAIN_END();
}
