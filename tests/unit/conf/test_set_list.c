/* The list setters of conf/set_list.c: tls.listen (the listen type at
 * another offset), tls.certificates, cache.key_params, origin.urls,
 * cache.ssd, features.disable (a set of names kept as bits) and
 * admin.allow (address ranges, and matching a peer against them). Part of
 * it walks the table, so every list key gets the shape checks (one
 * string, [], null, too many entries). */
#include <arpa/inet.h>
#include <limits.h>

#include "conf_test.h"

/* A valid, distinct i-th entry for list key k. */
static void list_entry(const he__conf_key_t *k, int i, char *buf, size_t len)
{
    if (k->type == HE__CONF_LISTEN)
        snprintf(buf, len, "\"127.0.0.1:%d\"", 1000 + i);
    else if (k->type == HE__CONF_STORES)
        snprintf(buf, len, "\"/cache/%d:1g\"", i);
    else if (k->flags & HE__CONF_F_URL)
        snprintf(buf, len, "\"http://origin%d.example\"", i);
    else if (k->flags & HE__CONF_F_CIDR)
        snprintf(buf, len, "\"10.%d.0.0/16\"", i);
    else
        snprintf(buf, len, "\"p%d\"", i);
}

static unsigned count_of(const he__conf_key_t *k)
{
    unsigned n;
    memcpy(&n, (const char *)&conf + k->cnt_off, sizeof(n));
    return n;
}

/* Lines that must sit beside list key k for the cross-key rules to pass:
 * HTTPS addresses need a certificate. */
static const char *list_sibling(const he__conf_key_t *k)
{
    return strcmp(k->name, "tls.listen") == 0 ? "  certificates: c.pem\n" : "";
}

/* k as a block list of entries 0..n-1, each on its own line. */
static void list_yaml(const he__conf_key_t *k, unsigned n, char *yaml, size_t len)
{
    unsigned line, col;
    char e[64];
    size_t o;

    key_yaml_pos(k->name, &line, &col);
    key_yaml(k->name, "", yaml, len);
    o = strlen(yaml);
    for (unsigned i = 0; i < n && o < len; i++) {
        list_entry(k, (int)i, e, sizeof(e));
        o += (size_t)snprintf(yaml + o, len - o, "%*s- %s\n", (int)col - 5, "", e);
    }
    if (o < len) snprintf(yaml + o, len - o, "%s", list_sibling(k));
}

/* Every list key: [], "", null and ~ give no entries where the key may be
 * empty; a lone string is a list of one; nmax entries load and one more is
 * -E2BIG, blamed on the extra entry; nested lists are refused. */
static void test_every_list_generic(void)
{
    static const char *const empties[] = {"[]", "\"\"", "", "~"};
    char yaml[4096], e[64], want[HE_CONF_ERR_MAX];

    for (size_t i = 0; i < he__conf_nkeys; i++) {
        const he__conf_key_t *k = &he__conf_keys[i];
        unsigned line, col;
        if (k->type != HE__CONF_LISTEN && k->type != HE__CONF_STRS && k->type != HE__CONF_STORES)
            continue;
        HE_CHECK(he__conf_takes_list(k));
        HE_CHECK(k->nmax > 0 && k->item != NULL && k->items != NULL);
        key_yaml_pos(k->name, &line, &col);

        if (k->flags & HE__CONF_F_EMPTY_OK) {
            for (size_t j = 0; j < sizeof(empties) / sizeof(empties[0]); j++) {
                key_yaml(k->name, empties[j], yaml, sizeof(yaml));
                HE_CHECK_INT(load(yaml), 0);
                HE_CHECK_INT(count_of(k), 0);
            }
        }

        list_entry(k, 0, e, sizeof(e));
        key_yaml(k->name, e, yaml, sizeof(yaml));
        strcat(yaml, list_sibling(k));
        HE_CHECK_INT(load(yaml), 0);
        HE_CHECK_INT(count_of(k), 1);

        list_yaml(k, k->nmax, yaml, sizeof(yaml));
        HE_CHECK_INT(load(yaml), 0);
        HE_CHECK_INT(count_of(k), k->nmax);

        list_yaml(k, k->nmax + 1, yaml, sizeof(yaml));
        snprintf(want, sizeof(want), "t.yaml:%u:%u: %s: expected at most %u %s", line + k->nmax + 1,
                 col - 2, k->name, k->nmax, k->items);
        expect_err(yaml, -E2BIG, want);

        key_yaml(k->name, "[[a]]", yaml, sizeof(yaml));
        snprintf(want, sizeof(want),
                 "t.yaml:%u:%u: %s: expected a list of scalars, got a list in it", line, col + 1,
                 k->name);
        expect_err(yaml, -EINVAL, want);
    }
}

/* admin.allow: addresses, ranges, loopback; matching, IPv4-mapped peers
 * included. */
static void test_admin_allow(void)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};

    HE_CHECK_INT(load(""), 0);
    HE_CHECK_INT(conf.nadmin_allow, 1);
    HE_CHECK_STR(conf.admin_allow[0], "loopback");
    inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr);
    HE_CHECK(he_conf_addr_allowed(&conf, (struct sockaddr *)&a4));
    inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
    HE_CHECK(!he_conf_addr_allowed(&conf, (struct sockaddr *)&a4));
    inet_pton(AF_INET6, "::1", &a6.sin6_addr);
    HE_CHECK(he_conf_addr_allowed(&conf, (struct sockaddr *)&a6));
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &a6.sin6_addr);
    HE_CHECK(he_conf_addr_allowed(&conf, (struct sockaddr *)&a6));

    HE_CHECK_INT(load("admin:\n  allow: [\"10.0.0.0/8\", \"192.0.2.7\", \"2001:db8::/32\"]\n"), 0);
    inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
    HE_CHECK(he_conf_addr_allowed(&conf, (struct sockaddr *)&a4));
    inet_pton(AF_INET, "192.0.2.7", &a4.sin_addr);
    HE_CHECK(he_conf_addr_allowed(&conf, (struct sockaddr *)&a4));
    inet_pton(AF_INET, "192.0.2.8", &a4.sin_addr);
    HE_CHECK(!he_conf_addr_allowed(&conf, (struct sockaddr *)&a4));
    inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr); /* loopback no longer listed */
    HE_CHECK(!he_conf_addr_allowed(&conf, (struct sockaddr *)&a4));
    inet_pton(AF_INET6, "::ffff:10.9.9.9", &a6.sin6_addr);
    HE_CHECK(he_conf_addr_allowed(&conf, (struct sockaddr *)&a6));
    inet_pton(AF_INET6, "2001:db8:1::5", &a6.sin6_addr);
    HE_CHECK(he_conf_addr_allowed(&conf, (struct sockaddr *)&a6));
    inet_pton(AF_INET6, "2001:db9::5", &a6.sin6_addr);
    HE_CHECK(!he_conf_addr_allowed(&conf, (struct sockaddr *)&a6));

    expect_err("admin:\n  allow: [\"10.0.0.1/8\"]\n", -EINVAL,
               "t.yaml:2:11: admin.allow: expected an address, a range like 10.0.0.0/8 (no host "
               "bits) or loopback, got \"10.0.0.1/8\"");
    expect_err("admin:\n  allow: \"10.0.0.0/33\"\n", -EINVAL,
               "t.yaml:2:10: admin.allow: expected an address, a range like 10.0.0.0/8 (no host "
               "bits) or loopback, got \"10.0.0.0/33\"");
    expect_err("admin:\n  allow: \"example.com\"\n", -EINVAL,
               "t.yaml:2:10: admin.allow: expected an address, a range like 10.0.0.0/8 (no host "
               "bits) or loopback, got \"example.com\"");
}

/* tls.listen: the listen type at another field, same syntax and messages. */
static void test_tls_listen(void)
{
    HE_CHECK_INT(load("tls:\n  listen: [\"127.0.0.1:8443\", \"[::]:443\", \":444\"]\n"
                      "  certificates: /etc/hlsedge/a.pem\n"),
                 0);
    HE_CHECK_INT(conf.ntls_listen, 3);
    HE_CHECK_STR(conf.tls_listen[0].text, "127.0.0.1:8443");
    HE_CHECK_STR(conf.tls_listen[1].text, "[::]:443");
    HE_CHECK_INT(conf.tls_listen[1].addr.ss_family, AF_INET6);
    HE_CHECK_STR(conf.tls_listen[2].text, "0.0.0.0:444");
    HE_CHECK_STR(conf.tls_listen[3].text, "");
    /* The HTTP list is untouched. */
    HE_CHECK_INT(conf.nlisten, 1);
    HE_CHECK_STR(conf.listen[0].text, "0.0.0.0:8080");

    HE_CHECK_INT(load("tls: {listen: \"[::1]:8443\", certificates: a.pem}\n"), 0);
    HE_CHECK_INT(conf.ntls_listen, 1);
    HE_CHECK_STR(conf.tls_listen[0].text, "[::1]:8443");

    expect_err("tls:\n  listen: [\":443\", \"x\"]\n", -EINVAL,
               "t.yaml:2:20: tls.listen: expected an address \"host:port\" or \"[v6]:port\" (IP "
               "literal, port 1..65535), or a list of them, got \"x\"");
    expect_err("tls:\n  listen: \"127.0.0.1:0\"\n", -EINVAL,
               "t.yaml:2:11: tls.listen: expected an address \"host:port\" or \"[v6]:port\" (IP "
               "literal, port 1..65535), or a list of them, got \"127.0.0.1:0\"");
    expect_err("tls:\n  listen:\n    - \":443\"\n    - \"0.0.0.0:443\"\n", -EEXIST,
               "t.yaml:4:7: tls.listen: duplicate address 0.0.0.0:443");
    expect_err("tls:\n  listen: [{a: 1}]\n", -EINVAL,
               "t.yaml:2:12: tls.listen: expected a list of scalars, got a mapping in it");
    /* The top-level listen still needs an address. */
    expect_err("listen: []\n", -EINVAL,
               "t.yaml:1:9: listen: expected an address \"host:port\" or \"[v6]:port\" (IP "
               "literal, port 1..65535), or a list of them, got an empty list");
}

static void test_certificates(void)
{
    char *yaml;

    /* Paths are taken as written; the files are not opened here. */
    HE_CHECK_INT(load("tls:\n  certificates:\n    - /nonexistent/a.pem\n    - 'b c.pem'\n"
                      "    - ~/x.pem\n"),
                 0);
    HE_CHECK_INT(conf.ntls_certs, 3);
    HE_CHECK_STR(conf.tls_certs[0], "/nonexistent/a.pem");
    HE_CHECK_STR(conf.tls_certs[1], "b c.pem");
    HE_CHECK_STR(conf.tls_certs[2], "~/x.pem");
    HE_CHECK_STR(conf.tls_certs[3], "");

    expect_err("tls:\n  certificates: [a.pem, \"\"]\n", -EINVAL,
               "t.yaml:2:25: tls.certificates: expected a certificate file, or a list of them, "
               "got \"\"");
    expect_err("tls:\n  certificates: [a.pem, b.pem, a.pem]\n", -EEXIST,
               "t.yaml:2:32: tls.certificates: duplicate certificate file \"a.pem\"");

    yaml = malloc(PATH_MAX + 64);
    strcpy(yaml, "tls:\n  certificates: [");
    memset(yaml + strlen(yaml), 'a', PATH_MAX);
    strcpy(yaml + strlen("tls:\n  certificates: [") + PATH_MAX, "]\n");
    expect_err(yaml, -ENAMETOOLONG,
               "t.yaml:2:18: tls.certificates: expected at most 4095 bytes, got 4096");
    yaml[strlen("tls:\n  certificates: [") + PATH_MAX - 1] = ']';
    yaml[strlen("tls:\n  certificates: [") + PATH_MAX] = '\0';
    HE_CHECK_INT(load(yaml), 0);
    HE_CHECK_INT(strlen(conf.tls_certs[0]), PATH_MAX - 1);
    free(yaml);
}

static void test_key_params(void)
{
    char yaml[256];

    HE_CHECK_INT(
        load("cache:\n  key_params: [token, Token, \"x-Id\", \"a.b~c\", \"!#$%'*+-.^_`|~\"]\n"), 0);
    HE_CHECK_INT(conf.ncache_key_params, 5);
    HE_CHECK_STR(conf.cache_key_params[0], "token");
    HE_CHECK_STR(conf.cache_key_params[1], "Token"); /* parameters are case-sensitive */
    HE_CHECK_STR(conf.cache_key_params[2], "x-Id");
    HE_CHECK_STR(conf.cache_key_params[3], "a.b~c");
    HE_CHECK_STR(conf.cache_key_params[4], "!#$%'*+-.^_`|~");
    HE_CHECK_INT(load("cache:\n  key_params: v\n"), 0);
    HE_CHECK_INT(conf.ncache_key_params, 1);
    HE_CHECK_STR(conf.cache_key_params[0], "v");

    /* '&' is a token character but the query's separator (a name of
     * "to&ken" would make key "?to&ken=1" for two parameters or one) */
    static const char *const bad[] = {"a b",     "a=b",   "a/b", "a?",
                                      "\\u00e9", "a\\tb", "[x]", "to&ken"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[HE_CONF_ERR_MAX], shown[32];
        snprintf(yaml, sizeof(yaml), "cache:\n  key_params: [ok, \"%s\"]\n", bad[i]);
        snprintf(shown, sizeof(shown), "%s", bad[i]);
        if (strcmp(bad[i], "\\u00e9") == 0) snprintf(shown, sizeof(shown), "??");
        if (strcmp(bad[i], "a\\tb") == 0) snprintf(shown, sizeof(shown), "a?b");
        snprintf(want, sizeof(want),
                 "t.yaml:2:20: cache.key_params: expected a parameter name of letters, digits and "
                 "!#$%%'*+-.^_`|~, or a list of them, got \"%s\"",
                 shown);
        expect_err(yaml, -EINVAL, want);
    }
    expect_err("cache:\n  key_params: [\"\"]\n", -EINVAL,
               "t.yaml:2:16: cache.key_params: expected a parameter name of letters, digits and "
               "!#$%'*+-.^_`|~, or a list of them, got \"\"");
    expect_err("cache:\n  key_params: [a, b, a]\n", -EEXIST,
               "t.yaml:2:22: cache.key_params: duplicate parameter name \"a\"");

    /* 63 bytes fit, 64 do not. */
    snprintf(yaml, sizeof(yaml), "cache:\n  key_params: [%.63s]\n",
             "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp");
    HE_CHECK_INT(load(yaml), 0);
    HE_CHECK_INT(strlen(conf.cache_key_params[0]), 63);
    snprintf(yaml, sizeof(yaml), "cache:\n  key_params: [%.64s]\n",
             "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp");
    expect_err(yaml, -ENAMETOOLONG,
               "t.yaml:2:16: cache.key_params: expected at most 63 bytes, got 64");
}

static void test_origin_urls(void)
{
    static const char *const good[] = {
        "http://127.0.0.1:9000",
        "https://origin.example.com/vod",
        "http://[::1]:8080/",
        "https://[2001:db8::1]/a/b",
        "http://a",
        "http://my_origin:80/live/",
        "https://xn--bcher-kva.example:65535/%20x/",
        "http://1.2.3.4",
        "http://a.b-c.d1/~u/;p=1",
    };
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"ftp://a", "a URL starting with \"http://\" or \"https://\""},
        {"HTTP://a", "a URL starting with \"http://\" or \"https://\""},
        {"//a", "a URL starting with \"http://\" or \"https://\""},
        {"origin.example.com", "a URL starting with \"http://\" or \"https://\""},
        {"http:/a", "a URL starting with \"http://\" or \"https://\""},
        {"http://", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http:///vod", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://:80", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://a b", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://-a.com", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://a-.com", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://a..b", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://a.", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://user@a", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://256.1.1.1", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://1.2.3", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://::1", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://[::1", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://[]", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://[zz]:80", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://[1.2.3.4]", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://[fe80::1%eth0]", "a host name, IPv4 address or [IPv6] address after the scheme"},
        {"http://a:0", "a port in 1..65535 after the host"},
        {"http://a:65536", "a port in 1..65535 after the host"},
        {"http://a:", "a port in 1..65535 after the host"},
        {"http://a:/x", "a port in 1..65535 after the host"},
        {"http://a:80x", "a port in 1..65535 after the host"},
        {"http://a:-1", "a port in 1..65535 after the host"},
        {"http://a:000080", "a port in 1..65535 after the host"},
        {"http://[::1]x", "\":port\" or a path starting with \"/\" after the host"},
        {"http://a?x=1", "a base URL without a query or fragment"},
        {"http://a/vod?x=1", "a base URL without a query or fragment"},
        {"http://a:80#f", "a base URL without a query or fragment"},
        {"http://a/b c", "a path without spaces, control characters or non-ASCII bytes"},
        {"http://a/\\x7f", "a path without spaces, control characters or non-ASCII bytes"},
        {"http://a/\\u00e9", "a path without spaces, control characters or non-ASCII bytes"},
    };
    char yaml[1024], want[HE_CONF_ERR_MAX];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(yaml, sizeof(yaml), "origin:\n  urls: [\"%s\"]\n", good[i]);
        int rc = load(yaml);
        if (rc != 0) fprintf(stderr, "%s\n", err);
        HE_CHECK_INT(rc, 0);
        HE_CHECK_STR(conf.origin_urls[0], good[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char shown[64];
        size_t o = 0;
        /* As the message shows it: YAML escapes decoded, then unprintable
         * bytes as '?'. */
        for (const char *p = bad[i].url; *p && o + 1 < sizeof(shown); p++) {
            if (strncmp(p, "\\x7f", 4) == 0) {
                shown[o++] = '?';
                p += 3;
            } else if (strncmp(p, "\\u00e9", 6) == 0) {
                shown[o++] = '?';
                shown[o++] = '?';
                p += 5;
            } else {
                shown[o++] = *p;
            }
        }
        shown[o] = '\0';
        snprintf(yaml, sizeof(yaml), "origin:\n  urls:\n    - http://ok\n    - \"%s\"\n",
                 bad[i].url);
        snprintf(want, sizeof(want), "t.yaml:4:7: origin.urls: expected %s, got \"%s\"", bad[i].why,
                 shown);
        expect_err(yaml, -EINVAL, want);
    }
    expect_err("origin:\n  urls: [\"\"]\n", -EINVAL,
               "t.yaml:2:10: origin.urls: expected an http:// or https:// URL such as "
               "\"https://origin.example.com/vod\", or a list of them, got \"\"");
    expect_err("origin:\n  urls: [http://a, http://b, http://a]\n", -EEXIST,
               "t.yaml:2:30: origin.urls: duplicate URL \"http://a\"");

    /* 511 bytes fit, 512 do not. */
    char url[600] = "http://a/";
    memset(url + 9, 'p', 511 - 9);
    url[511] = '\0';
    snprintf(yaml, sizeof(yaml), "origin:\n  urls: %s\n", url);
    HE_CHECK_INT(load(yaml), 0);
    HE_CHECK_INT(strlen(conf.origin_urls[0]), 511);
    snprintf(yaml, sizeof(yaml), "origin:\n  urls: %sp\n", url);
    expect_err(yaml, -ENAMETOOLONG, "t.yaml:2:9: origin.urls: expected at most 511 bytes, got 512");
}

static void test_stores(void)
{
    char *yaml;

    HE_CHECK_INT(load("cache:\n  ssd:\n    - /var/cache/hlsedge:100g\n    - rel/b:1M\n"
                      "    - \"/c:d:1T\"\n    - /:1048576\n"),
                 0);
    HE_CHECK_INT(conf.ncache_stores, 4);
    HE_CHECK_STR(conf.cache_stores[0], "/var/cache/hlsedge");
    HE_CHECK_INT(conf.cache_store_bytes[0], 100ull << 30);
    HE_CHECK_STR(conf.cache_stores[1], "rel/b");
    HE_CHECK_INT(conf.cache_store_bytes[1], 1ull << 20);
    HE_CHECK_STR(conf.cache_stores[2], "/c:d"); /* split at the last ':' */
    HE_CHECK_INT(conf.cache_store_bytes[2], 1ull << 40);
    HE_CHECK_STR(conf.cache_stores[3], "/");
    HE_CHECK_INT(conf.cache_store_bytes[3], 1ull << 20);
    HE_CHECK_STR(conf.cache_stores[4], "");
    HE_CHECK_INT(conf.cache_store_bytes[4], 0);
    HE_CHECK_INT(load("cache:\n  ssd: \"x:1024t\"\n"), 0);
    HE_CHECK_INT(conf.ncache_stores, 1);
    HE_CHECK_STR(conf.cache_stores[0], "x");
    HE_CHECK_INT(conf.cache_store_bytes[0], 1ull << 50);

    static const char *const shapeless[] = {"/var/cache/hlsedge", ":100g", "100g", ":"};
    for (size_t i = 0; i < sizeof(shapeless) / sizeof(shapeless[0]); i++) {
        char y[128], want[HE_CONF_ERR_MAX];
        snprintf(y, sizeof(y), "cache:\n  ssd: [\"%s\"]\n", shapeless[i]);
        snprintf(want, sizeof(want),
                 "t.yaml:2:9: cache.ssd: expected \"DIR:SIZE\" such as "
                 "\"/var/cache/hlsedge:100g\" (SIZE at least 1m), or a list of them, got \"%s\"",
                 shapeless[i]);
        expect_err(y, -EINVAL, want);
    }
    expect_err("cache:\n  ssd: [\"/c:100GB\"]\n", -EINVAL,
               "t.yaml:2:9: cache.ssd: expected a size in 1m..1024t such as \"100g\" after "
               "\"/c:\", got \"100GB\"");
    expect_err("cache:\n  ssd: [\"/c:\"]\n", -EINVAL,
               "t.yaml:2:9: cache.ssd: expected a size in 1m..1024t such as \"100g\" after "
               "\"/c:\", got \"\"");
    expect_err("cache:\n  ssd: [\"/c:1.5g\"]\n", -EINVAL,
               "t.yaml:2:9: cache.ssd: expected a size in 1m..1024t such as \"100g\" after "
               "\"/c:\", got \"1.5g\"");
    expect_err("cache:\n  ssd: [\"/c:1023k\"]\n", -ERANGE,
               "t.yaml:2:9: cache.ssd: expected a size in 1m..1024t such as \"100g\" after "
               "\"/c:\", got \"1023k\"");
    expect_err("cache:\n  ssd: [\"/c:1025t\"]\n", -ERANGE,
               "t.yaml:2:9: cache.ssd: expected a size in 1m..1024t such as \"100g\" after "
               "\"/c:\", got \"1025t\"");
    expect_err("cache:\n  ssd: [\"/c:99999999999999999999\"]\n", -ERANGE,
               "t.yaml:2:9: cache.ssd: expected a size in 1m..1024t such as \"100g\" after "
               "\"/c:\", got \"99999999999999999999\"");
    expect_err("cache:\n  ssd: [\"/c:1g\", \"/d:1g\", \"/c/:2g\"]\n", -EEXIST,
               "t.yaml:2:27: cache.ssd: duplicate directory \"/c/\"");
    expect_err("cache:\n  ssd: [\"c//:1g\", \"c:2g\"]\n", -EEXIST,
               "t.yaml:2:19: cache.ssd: duplicate directory \"c\"");

    /* A directory of PATH_MAX - 1 bytes fits, PATH_MAX does not. */
    yaml = malloc(PATH_MAX + 64);
    strcpy(yaml, "cache:\n  ssd: ");
    memset(yaml + 14, 'd', PATH_MAX);
    strcpy(yaml + 14 + PATH_MAX, ":1g\n");
    expect_err(yaml, -ENAMETOOLONG,
               "t.yaml:2:8: cache.ssd: expected a directory of at most 4095 bytes, got 4096");
    strcpy(yaml + 14 + PATH_MAX - 1, ":1g\n");
    HE_CHECK_INT(load(yaml), 0);
    HE_CHECK_INT(strlen(conf.cache_stores[0]), PATH_MAX - 1);
    free(yaml);
}

/* features.disable: names of the feature table, or "all" alone, as bits;
 * each error points at the entry at fault. */
static void test_features_disable(void)
{
    static const char names[] =
        "one of single_issuer, defer_taskrun, coop_taskrun, multishot_accept, recv_multishot, "
        "buf_ring, fixed_files, send_zc, zc_report_usage, openat2_beneath, reuseport_cbpf, ktls, "
        "min_timeout, or \"all\", or a list of them";
    static const char *const empties[] = {"[]", "\"\"", "", "~"};
    char yaml[1024], want[HE_CONF_ERR_MAX];
    size_t o;

    HE_CHECK_INT(load("features:\n  disable: send_zc\n"), 0);
    HE_CHECK_INT(conf.features_disabled, HE_CONF_FEATURE_BIT(HE_CONF_FEATURE_SEND_ZC));
    HE_CHECK(he_conf_feature_disabled(&conf, "send_zc"));
    HE_CHECK(!he_conf_feature_disabled(&conf, "ktls"));
    HE_CHECK(!he_conf_feature_disabled(&conf, "all"));
    HE_CHECK(!he_conf_feature_disabled(&conf, "bogus"));
    HE_CHECK_INT(load("features:\n  disable: [reuseport_cbpf, ktls]\n"), 0);
    HE_CHECK_INT(conf.features_disabled, HE_CONF_FEATURE_BIT(HE_CONF_FEATURE_REUSEPORT_CBPF) |
                                             HE_CONF_FEATURE_BIT(HE_CONF_FEATURE_KTLS));
    HE_CHECK(he_conf_feature_disabled(&conf, "reuseport_cbpf"));
    HE_CHECK(he_conf_feature_disabled(&conf, "ktls"));
    HE_CHECK(!he_conf_feature_disabled(&conf, "send_zc"));
    HE_CHECK_INT(load("features:\n  disable: all\n"), 0);
    HE_CHECK_INT(conf.features_disabled, HE_CONF_FEATURES_ALL);
    HE_CHECK_INT(load("features: {disable: [all]}\n"), 0);
    HE_CHECK_INT(conf.features_disabled, HE_CONF_FEATURES_ALL);
    for (size_t j = 0; j < sizeof(empties) / sizeof(empties[0]); j++) {
        snprintf(yaml, sizeof(yaml), "features:\n  disable: %s\n", empties[j]);
        HE_CHECK_INT(load(yaml), 0);
        HE_CHECK_INT(conf.features_disabled, 0);
    }

    /* Every name, one a line: all of them, by name. */
    o = (size_t)snprintf(yaml, sizeof(yaml), "features:\n  disable:\n");
    for (int f = 0; f < HE_CONF_FEATURE_COUNT; f++) {
        o += (size_t)snprintf(yaml + o, sizeof(yaml) - o, "    - %s\n", he_conf_feature_names[f]);
        HE_CHECK(he_conf_feature_names[f] != NULL);
    }
    HE_CHECK(he_conf_feature_names[HE_CONF_FEATURE_COUNT] == NULL);
    HE_CHECK_INT(load(yaml), 0);
    HE_CHECK_INT(conf.features_disabled, HE_CONF_FEATURES_ALL);
    for (int f = 0; f < HE_CONF_FEATURE_COUNT; f++)
        HE_CHECK(he_conf_feature_disabled(&conf, he_conf_feature_names[f]));
    /* ... and one more is a duplicate, not "all" alone. */
    snprintf(yaml + o, sizeof(yaml) - o, "    - ktls\n");
    snprintf(want, sizeof(want), "t.yaml:%d:7: features.disable: duplicate feature \"ktls\"",
             HE_CONF_FEATURE_COUNT + 3);
    expect_err(yaml, -EEXIST, want);

    /* Unknown names, case, the old comma form: the message lists the valid names. */
    snprintf(want, sizeof(want), "t.yaml:2:12: features.disable: expected %s, got \"sendzc\"",
             names);
    expect_err("features:\n  disable: sendzc\n", -EINVAL, want);
    snprintf(want, sizeof(want), "t.yaml:2:22: features.disable: expected %s, got \"bogus\"",
             names);
    expect_err("features:\n  disable: [send_zc, bogus]\n", -EINVAL, want);
    snprintf(want, sizeof(want), "t.yaml:3:7: features.disable: expected %s, got \"KTLS\"", names);
    expect_err("features:\n  disable:\n    - KTLS\n", -EINVAL, want);
    snprintf(want, sizeof(want), "t.yaml:2:12: features.disable: expected %s, got \"send_zc,ktls\"",
             names);
    expect_err("features:\n  disable: send_zc,ktls\n", -EINVAL, want);
    snprintf(want, sizeof(want), "t.yaml:2:13: features.disable: expected %s, got \"\"", names);
    expect_err("features:\n  disable: [\"\"]\n", -EINVAL, want);

    expect_err("features:\n  disable: [ktls, send_zc, ktls]\n", -EEXIST,
               "t.yaml:2:28: features.disable: duplicate feature \"ktls\"");
    expect_err("features:\n  disable: [all, ktls]\n", -EINVAL,
               "t.yaml:2:18: features.disable: expected \"all\" alone, not in a list with other "
               "features");
    expect_err("features:\n  disable: [ktls, all]\n", -EINVAL,
               "t.yaml:2:19: features.disable: expected \"all\" alone, not in a list with other "
               "features");
    expect_err("features:\n  disable: [all, all]\n", -EINVAL,
               "t.yaml:2:18: features.disable: expected \"all\" alone, not in a list with other "
               "features");
    expect_err("features:\n  disable: [[ktls]]\n", -EINVAL,
               "t.yaml:2:13: features.disable: expected a list of scalars, got a list in it");
    expect_err("features: [ktls]\n", -EINVAL,
               "t.yaml:1:11: features: expected a mapping with keys disable, got a list");
    /* A bad list leaves the defaults: nothing disabled. */
    HE_CHECK_INT(conf.features_disabled, 0);
}

int main(void)
{
    test_every_list_generic();
    test_tls_listen();
    test_admin_allow();
    test_certificates();
    test_key_params();
    test_origin_urls();
    test_stores();
    test_features_disable();
    HE_TEST_MAIN_END();
}
