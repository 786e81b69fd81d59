/* Scalar parsers of conf/value.c: listen addresses, durations, sizes,
 * integers, booleans, tokens and origin URLs. */
#include <arpa/inet.h>
#include <errno.h>

#include "conf/internal.h"
#include "he_test.h"

static void test_listen_ok(void)
{
    static const struct {
        const char *in, *text;
        int family;
        unsigned port;
    } cases[] = {
        {"0.0.0.0:8080", "0.0.0.0:8080", AF_INET, 8080},
        {"127.0.0.1:1", "127.0.0.1:1", AF_INET, 1},
        {"10.1.2.3:65535", "10.1.2.3:65535", AF_INET, 65535},
        {":80", "0.0.0.0:80", AF_INET, 80},
        {"8080", "0.0.0.0:8080", AF_INET, 8080},
        {"127.0.0.1:08080", "127.0.0.1:8080", AF_INET, 8080},
        {"[::]:8080", "[::]:8080", AF_INET6, 8080},
        {"[::1]:443", "[::1]:443", AF_INET6, 443},
        {"[2001:DB8:0:0::1]:9000", "[2001:db8::1]:9000", AF_INET6, 9000},
        {"[::ffff:1.2.3.4]:80", "[::ffff:1.2.3.4]:80", AF_INET6, 80},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        he_conf_listen_t l;
        HE_CHECK_INT(he_conf_parse_listen(cases[i].in, &l), 0);
        HE_CHECK_STR(l.text, cases[i].text);
        HE_CHECK_INT(l.addr.ss_family, cases[i].family);
        if (cases[i].family == AF_INET) {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&l.addr;
            HE_CHECK_INT(l.addrlen, sizeof(struct sockaddr_in));
            HE_CHECK_INT(ntohs(a->sin_port), cases[i].port);
        } else {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&l.addr;
            HE_CHECK_INT(l.addrlen, sizeof(struct sockaddr_in6));
            HE_CHECK_INT(ntohs(a->sin6_port), cases[i].port);
        }
    }
}

static void test_listen_bad(void)
{
    static const char *const bad[] = {
        "",                  /* empty */
        "127.0.0.1",         /* missing port: the last part is read as a port */
        "127.0.0.1:",        /* empty port */
        "127.0.0.1:0",       /* port 0 */
        "127.0.0.1:65536",   /* port too big */
        "127.0.0.1:123456",  /* too many digits */
        "127.0.0.1:-1",      /* signed port */
        "127.0.0.1:+80",     /* signed port */
        "127.0.0.1:80x",     /* garbage after port */
        "127.0.0.1: 80",     /* space */
        "localhost:80",      /* no DNS */
        "example.com:80",    /* no DNS */
        "256.1.1.1:80",      /* bad v4 */
        "1.2.3:80",          /* short v4 */
        "01.2.3.4:80",       /* leading zero (octal in some parsers) */
        "::1:80",            /* v6 without brackets */
        "[::1]",             /* v6 without port */
        "[::1]80",           /* missing colon */
        "[::1]:",            /* empty port */
        "[::1]:0",           /* port 0 */
        "[::g]:80",          /* bad v6 */
        "[1.2.3.4]:80",      /* v4 in brackets */
        "[]:80",             /* empty v6 */
        "[::1:80",           /* unclosed bracket */
        "[fe80::1%eth0]:80", /* scope ids are not supported */
        "garbage",           /* garbage */
        ":",                 /* nothing */
        "[:::::::::::::::::::::::::::::::::::::::::::::::::::::]:80", /* too long */
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        he_conf_listen_t l;
        int rc = he_conf_parse_listen(bad[i], &l);
        if (rc != -EINVAL) fprintf(stderr, "accepted listen \"%s\"\n", bad[i]);
        HE_CHECK_INT(rc, -EINVAL);
        HE_CHECK_INT(l.addrlen, 0);
    }
    HE_CHECK_INT(he_conf_parse_listen(NULL, &(he_conf_listen_t){0}), -EINVAL);
    HE_CHECK_INT(he_conf_parse_listen("1.2.3.4:5", NULL), -EINVAL);
}

static void test_duration(void)
{
    static const struct {
        const char *in;
        int rc;
        unsigned ms;
    } cases[] = {
        {"250ms", 0, 250},
        {"10s", 0, 10000},
        {"2m", 0, 120000},
        {"1h", 0, 3600000},
        {"10", 0, 10000},
        {"0", 0, 0},
        {"0ms", 0, 0},
        {"4294967295ms", 0, 4294967295u},
        {"4294967296ms", -ERANGE, 0},
        {"4294968s", -ERANGE, 0},
        {"99999999999999999999s", -ERANGE, 0},
        {"1193h", 0, 4294800000u},
        {"1194h", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"s", -EINVAL, 0},
        {"ms", -EINVAL, 0},
        {"-1s", -EINVAL, 0},
        {"+1s", -EINVAL, 0},
        {"1.5s", -EINVAL, 0},
        {"10 s", -EINVAL, 0},
        {" 10s", -EINVAL, 0},
        {"10S", -EINVAL, 0},
        {"10sec", -EINVAL, 0},
        {"1m30s", -EINVAL, 0},
        {"10d", 0, 864000000},
        {"30d", 0, 2592000000u},
        {"49d", 0, 4233600000u},
        {"50d", -ERANGE, 0},
        {"1D", -EINVAL, 0},
        {"1w", -EINVAL, 0},
        {"1dd", -EINVAL, 0},
        {"1e3", -EINVAL, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned ms = 12345;
        int rc = he_conf_parse_duration_ms(cases[i].in, &ms);
        if (rc != cases[i].rc) fprintf(stderr, "duration \"%s\": rc %d\n", cases[i].in, rc);
        HE_CHECK_INT(rc, cases[i].rc);
        HE_CHECK_INT(ms, cases[i].rc == 0 ? cases[i].ms : 12345);
    }
    HE_CHECK_INT(he_conf_parse_duration_ms(NULL, &(unsigned){0}), -EINVAL);
}

static void test_uint_bool_fmt(void)
{
    unsigned n;
    bool b;
    char buf[32];

    HE_CHECK_INT(he__conf_parse_uint("0", 1, &n), 0);
    HE_CHECK_INT(n, 0);
    HE_CHECK_INT(he__conf_parse_uint("4294967295", 10, &n), 0);
    HE_CHECK_INT(n, 4294967295u);
    HE_CHECK_INT(he__conf_parse_uint("4294967296", 10, &n), -ERANGE);
    HE_CHECK_INT(he__conf_parse_uint("123456789012345678901234", 24, &n), -ERANGE);
    HE_CHECK_INT(he__conf_parse_uint("99999999999x", 12, &n), -EINVAL);
    HE_CHECK_INT(he__conf_parse_uint("", 0, &n), -EINVAL);
    HE_CHECK_INT(he__conf_parse_uint("-1", 2, &n), -EINVAL);
    HE_CHECK_INT(he__conf_parse_uint("+1", 2, &n), -EINVAL);
    HE_CHECK_INT(he__conf_parse_uint("1.0", 3, &n), -EINVAL);
    HE_CHECK_INT(he__conf_parse_uint("0x10", 4, &n), -EINVAL);
    HE_CHECK_INT(he__conf_parse_uint("12", 1, &n), 0); /* length-bounded */
    HE_CHECK_INT(n, 1);

    HE_CHECK_INT(he__conf_parse_bool("true", &b), 0);
    HE_CHECK(b);
    HE_CHECK_INT(he__conf_parse_bool("Yes", &b), 0);
    HE_CHECK(b);
    HE_CHECK_INT(he__conf_parse_bool("ON", &b), 0);
    HE_CHECK(b);
    HE_CHECK_INT(he__conf_parse_bool("false", &b), 0);
    HE_CHECK(!b);
    HE_CHECK_INT(he__conf_parse_bool("no", &b), 0);
    HE_CHECK(!b);
    HE_CHECK_INT(he__conf_parse_bool("Off", &b), 0);
    HE_CHECK(!b);
    HE_CHECK_INT(he__conf_parse_bool("1", &b), -EINVAL);
    HE_CHECK_INT(he__conf_parse_bool("", &b), -EINVAL);
    HE_CHECK_INT(he__conf_parse_bool("y", &b), -EINVAL);

    he__conf_fmt_ms(0, buf, sizeof(buf));
    HE_CHECK_STR(buf, "0s");
    he__conf_fmt_ms(250, buf, sizeof(buf));
    HE_CHECK_STR(buf, "250ms");
    he__conf_fmt_ms(10000, buf, sizeof(buf));
    HE_CHECK_STR(buf, "10s");
    he__conf_fmt_ms(120000, buf, sizeof(buf));
    HE_CHECK_STR(buf, "2m");
    he__conf_fmt_ms(7200000, buf, sizeof(buf));
    HE_CHECK_STR(buf, "2h");
    he__conf_fmt_ms(1500, buf, sizeof(buf));
    HE_CHECK_STR(buf, "1500ms");
    he__conf_fmt_ms(86400000, buf, sizeof(buf));
    HE_CHECK_STR(buf, "1d");
    he__conf_fmt_ms(2592000000u, buf, sizeof(buf));
    HE_CHECK_STR(buf, "30d");
    he__conf_fmt_ms(90000000, buf, sizeof(buf));
    HE_CHECK_STR(buf, "25h");
}

static void test_size(void)
{
    static const struct {
        const char *in;
        int rc;
        unsigned long long bytes;
    } cases[] = {
        {"0", 0, 0},
        {"0k", 0, 0},
        {"512", 0, 512},
        {"1k", 0, 1024},
        {"1K", 0, 1024},
        {"512m", 0, 512ull << 20},
        {"512M", 0, 512ull << 20},
        {"2g", 0, 2ull << 30},
        {"2G", 0, 2ull << 30},
        {"1t", 0, 1ull << 40},
        {"1T", 0, 1ull << 40},
        {"007m", 0, 7ull << 20},
        {"18446744073709551615", 0, 18446744073709551615ull},
        {"16777215t", 0, 16777215ull << 40},
        {"18446744073709551616", -ERANGE, 0},
        {"16777216t", -ERANGE, 0},
        {"17179869184g", -ERANGE, 0},
        {"99999999999999999999999k", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"k", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"+1", -EINVAL, 0},
        {"1.5g", -EINVAL, 0},
        {"1 g", -EINVAL, 0},
        {" 1g", -EINVAL, 0},
        {"1g ", -EINVAL, 0},
        {"1gb", -EINVAL, 0},
        {"1GB", -EINVAL, 0},
        {"1b", -EINVAL, 0},
        {"1p", -EINVAL, 0},
        {"1kk", -EINVAL, 0},
        {"0x10", -EINVAL, 0},
        {"1e3", -EINVAL, 0},
    };
    char buf[32];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int rc = he__conf_parse_size(cases[i].in, strlen(cases[i].in), &v);
        if (rc != cases[i].rc) fprintf(stderr, "size \"%s\": rc %d\n", cases[i].in, rc);
        HE_CHECK_INT(rc, cases[i].rc);
        HE_CHECK(v == (cases[i].rc == 0 ? cases[i].bytes : 12345));
    }
    /* Length-bounded: the suffix is the last byte of len, not of the string. */
    uint64_t v;
    HE_CHECK_INT(he__conf_parse_size("2gx", 2, &v), 0);
    HE_CHECK(v == 2ull << 30);

    static const struct {
        unsigned long long bytes;
        const char *text;
    } fmt[] = {{0, "0"},
               {1, "1"},
               {1023, "1023"},
               {1024, "1k"},
               {1536, "1536"},
               {1ull << 20, "1m"},
               {1536ull << 20, "1536m"},
               {256ull << 20, "256m"},
               {1ull << 30, "1g"},
               {64ull << 40, "64t"},
               {1ull << 50, "1024t"},
               {18446744073709551615ull, "18446744073709551615"}};
    for (size_t i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
        he__conf_fmt_size(fmt[i].bytes, buf, sizeof(buf));
        HE_CHECK_STR(buf, fmt[i].text);
    }
}

static void test_token(void)
{
    HE_CHECK(he__conf_is_token("token", 5));
    HE_CHECK(he__conf_is_token("AZaz09!#$%&'*+-.^_`|~", 21));
    HE_CHECK(!he__conf_is_token("", 0));
    HE_CHECK(!he__conf_is_token("a b", 3));
    HE_CHECK(!he__conf_is_token("a\0b", 3));
    static const char bad[] = "\t\"(),/:;<=>?@[\\]{}\x7f\x80\xff";
    for (size_t i = 0; i < sizeof(bad) - 1; i++)
        HE_CHECK(!he__conf_is_token(bad + i, 1));
}

/* The URL checker directly; the messages around it are in test_set_list.c. */
static void test_url(void)
{
    const char *what = NULL;

    HE_CHECK_INT(he__conf_check_url("https://origin.example.com/vod", 30, &what), 0);
    HE_CHECK(what == NULL);
    HE_CHECK_INT(he__conf_check_url("http://[::ffff:1.2.3.4]:1/", 26, &what), 0);
    /* Length-bounded: what follows len is not looked at. */
    HE_CHECK_INT(he__conf_check_url("http://a:80 junk", 11, &what), 0);
    HE_CHECK_INT(he__conf_check_url("http://a:80 junk", 12, &what), -EINVAL);
    HE_CHECK_STR(what, "a port in 1..65535 after the host");
    HE_CHECK_INT(he__conf_check_url("https:/", 7, &what), -EINVAL);
    HE_CHECK_STR(what, "a URL starting with \"http://\" or \"https://\"");
    HE_CHECK_INT(he__conf_check_url("http://a\0b", 10, &what), -EINVAL);

    /* Host names: labels of 1..63, 253 in all; a numeric last label must
     * make an IPv4 literal. */
    char url[400] = "http://";
    memset(url + 7, 'a', 63);
    url[70] = '\0';
    HE_CHECK_INT(he__conf_check_url(url, strlen(url), &what), 0);
    strcat(url, "a");
    HE_CHECK_INT(he__conf_check_url(url, strlen(url), &what), -EINVAL);
    strcpy(url, "http://");
    for (int i = 0; i < 63; i++)
        strcat(url, "abc.");
    strcat(url, "a"); /* 253 bytes */
    HE_CHECK_INT(he__conf_check_url(url, strlen(url), &what), 0);
    strcat(url, "b");
    HE_CHECK_INT(he__conf_check_url(url, strlen(url), &what), -EINVAL);
    HE_CHECK_INT(he__conf_check_url("http://a.b.123", 14, &what), -EINVAL);
    HE_CHECK_INT(he__conf_check_url("http://123.a", 12, &what), 0);
    HE_CHECK_INT(he__conf_check_url("http://01.2.3.4", 15, &what), -EINVAL);
    HE_CHECK_INT(he__conf_check_url("http://1.2.3.4.5", 16, &what), -EINVAL);
}

int main(void)
{
    test_listen_ok();
    test_listen_bad();
    test_duration();
    test_uint_bool_fmt();
    test_size();
    test_token();
    test_url();
    HE_TEST_MAIN_END();
}
