/* The rules of conf/check.c that span keys, checked after the whole file is
 * read and blamed on one key, pointing at that key's value. */
#include "conf_test.h"

/* uri_bytes <= header_bytes, blaming the key the file gave. */
static void test_uri_le_header(void)
{
    expect_err("limits:\n  uri_bytes: 9000\n", -EINVAL,
               "t.yaml:2:14: limits.uri_bytes: expected at most limits.header_bytes (8192), got "
               "9000");
    expect_err("limits:\n  uri_bytes: 600\n  header_bytes: 512\n", -EINVAL,
               "t.yaml:2:14: limits.uri_bytes: expected at most limits.header_bytes (512), got "
               "600");
    expect_err("limits:\n  header_bytes: 1024\n", -EINVAL,
               "t.yaml:2:17: limits.header_bytes: expected at least limits.uri_bytes (4096), got "
               "1024");
    HE_CHECK_INT(load("limits:\n  header_bytes: 1024\n  uri_bytes: 1024\n"), 0);
}

/* ram_object_max <= ram_size, unless ram_size is 0 (no RAM tier). */
static void test_ram_object_max(void)
{
    expect_err("cache:\n  ram_object_max: 512m\n", -EINVAL,
               "t.yaml:2:19: cache.ram_object_max: expected at most cache.ram_size (256m), got "
               "512m");
    expect_err("cache:\n  ram_size: 8m\n", -EINVAL,
               "t.yaml:2:13: cache.ram_size: expected at least cache.ram_object_max (16m) or 0, "
               "got 8m");
    expect_err("cache:\n  ram_size: 1000000\n  ram_object_max: 1000001\n", -EINVAL,
               "t.yaml:3:19: cache.ram_object_max: expected at most cache.ram_size (1000000), "
               "got 1000001");
    expect_err("cache: {ram_object_max: 2g, ram_size: 1536m}\n", -EINVAL,
               "t.yaml:1:25: cache.ram_object_max: expected at most cache.ram_size (1536m), got "
               "2g");
    HE_CHECK_INT(load("cache:\n  ram_size: 0\n  ram_object_max: 1t\n"), 0);
    HE_CHECK_INT(conf.cache_ram_bytes, 0);
    HE_CHECK_INT(conf.cache_ram_object_max, 1ull << 40);
    HE_CHECK_INT(load("cache:\n  ram_size: 0\n"), 0);
    HE_CHECK_INT(load("cache:\n  ram_size: 16m\n"), 0);
    HE_CHECK_INT(load("cache:\n  ram_size: 1g\n  ram_object_max: 1g\n"), 0);
}

/* HTTPS addresses need a certificate and must not be HTTP addresses too. */
static void test_tls(void)
{
    expect_err("tls:\n  listen: \":443\"\n", -EINVAL,
               "t.yaml:2:11: tls.listen: expected at least one tls.certificates entry to serve "
               "HTTPS with");
    expect_err("tls:\n  certificates: []\n  listen: [\":443\"]\n", -EINVAL,
               "t.yaml:3:11: tls.listen: expected at least one tls.certificates entry to serve "
               "HTTPS with");
    HE_CHECK_INT(load("tls:\n  certificates: a.pem\n"), 0); /* certificates alone are fine */
    HE_CHECK_INT(conf.ntls_listen, 0);
    HE_CHECK_INT(conf.ntls_certs, 1);

    expect_err("listen: [\":80\", \"127.0.0.1:443\"]\ntls:\n  listen: [\"[::]:443\", "
               "\"127.0.0.1:443\"]\n  certificates: a.pem\n",
               -EEXIST,
               "t.yaml:3:11: tls.listen: duplicate address 127.0.0.1:443 (also in listen)");
    /* Compared as normalized: ":8080" is the default listen 0.0.0.0:8080. */
    expect_err("tls:\n  certificates: a.pem\n  listen: \":8080\"\n", -EEXIST,
               "t.yaml:3:11: tls.listen: duplicate address 0.0.0.0:8080 (also in listen)");
    expect_err("listen: \"[::1]:443\"\ntls: {listen: [\"[0:0::1]:443\"], certificates: [a]}\n",
               -EEXIST, "t.yaml:2:15: tls.listen: duplicate address [::1]:443 (also in listen)");
    /* Different addresses on one port are different sockets. */
    HE_CHECK_INT(load("listen: \"0.0.0.0:443\"\ntls:\n  listen: [\"127.0.0.1:443\", "
                      "\"[::]:443\"]\n  certificates: a.pem\n"),
                 0);
    HE_CHECK_INT(conf.ntls_listen, 2);
    /* The certificate rule comes first. */
    expect_err("tls:\n  listen: \":8080\"\n", -EINVAL,
               "t.yaml:2:11: tls.listen: expected at least one tls.certificates entry to serve "
               "HTTPS with");
}

/* origin-first needs an origin. */
static void test_origin_first(void)
{
    expect_err("origin:\n  sources: origin-first\n", -EINVAL,
               "t.yaml:2:12: origin.sources: expected at least one origin.urls entry for "
               "origin-first");
    expect_err("origin:\n  urls: []\n  sources: origin-first\n", -EINVAL,
               "t.yaml:3:12: origin.sources: expected at least one origin.urls entry for "
               "origin-first");
    HE_CHECK_INT(load("origin:\n  sources: origin-first\n  urls: http://o\n"), 0);
    HE_CHECK(conf.origin_first);
    HE_CHECK_INT(load("origin:\n  sources: root-first\n"), 0);
    HE_CHECK(!conf.origin_first);
}

/* A failed rule leaves the defaults, as every error does. */
static void test_failure_leaves_defaults(void)
{
    he_conf_t def;

    he_conf_defaults(&def);
    HE_CHECK_INT(load("workers: 3\norigin:\n  sources: origin-first\n"), -EINVAL);
    HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0);
}

int main(void)
{
    test_uri_le_header();
    test_ram_object_max();
    test_tls();
    test_origin_first();
    test_failure_leaves_defaults();
    HE_TEST_MAIN_END();
}
