/* The libyaml walk of conf/yaml.c: document shape, unknown and duplicate
 * keys, YAML syntax errors, and where each error points. */
#include <errno.h>
#include <time.h>

#include "conf/internal.h"
#include "he_test.h"

static he_conf_t conf;
static char err[HE_CONF_ERR_MAX];

static int load(const char *yaml)
{
    return he_conf_load_string(&conf, "t.yaml", yaml, strlen(yaml), err, sizeof(err));
}

static void expect_err(const char *yaml, int rc, const char *msg)
{
    int got = load(yaml);
    if (got != rc || strcmp(err, msg) != 0)
        fprintf(stderr, "yaml:\n%s\n-> rc %d, err: %s\n", yaml, got, err);
    HE_CHECK_INT(got, rc);
    HE_CHECK_STR(err, msg);
}

static void test_empty_is_defaults(void)
{
    static const char *const empty[] = {
        "",
        "\n\n",
        "# only a comment\n",
        "---\n",
        "--- \n...\n",
        "~\n",
        "{}\n",
        "%YAML 1.1\n---\n",
        "limits:\n  # every key commented out\n",
    };
    he_conf_t def;

    he_conf_defaults(&def);
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        memset(&conf, 0x5a, sizeof(conf));
        strcpy(err, "stale");
        int rc = load(empty[i]);
        if (rc != 0) fprintf(stderr, "\"%s\": %s\n", empty[i], err);
        HE_CHECK_INT(rc, 0);
        HE_CHECK_STR(err, "");
        HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0);
    }
    /* NULL text with length 0, and no error buffer at all. */
    HE_CHECK_INT(he_conf_load_string(&conf, "t.yaml", NULL, 0, err, sizeof(err)), 0);
    HE_CHECK_INT(he_conf_load_string(&conf, NULL, "workers: 3\n", 11, NULL, 0), 0);
    HE_CHECK_INT(conf.workers, 3);
    HE_CHECK_INT(he_conf_load_string(&conf, NULL, "workers: x\n", 11, NULL, 0), -EINVAL);
    HE_CHECK_INT(he_conf_load_string(&conf, NULL, "workers: x\n", 11, err, sizeof(err)), -EINVAL);
    HE_CHECK_STR(err, "(string):1:10: workers: expected a positive integer or \"auto\", got \"x\"");
    /* Only len bytes are read: the text need not be NUL-terminated. */
    HE_CHECK_INT(he_conf_load_string(&conf, "t.yaml", "workers: 7garbage", 10, err, sizeof(err)),
                 0);
    HE_CHECK_INT(conf.workers, 7);
}

static void test_unknown_keys(void)
{
    expect_err("wrokers: 4\n", -EINVAL,
               "t.yaml:1:1: wrokers: unknown key, did you mean \"workers\"? (valid here: listen, "
               "workers, cpus, pin, control_cpus, numa, root, limits, timeouts, cors, cache_control, log, "
               "admin, stats, fd_cache, auth_cache, llhls, tls, cache, origin, http2, send, ring, features)");
    expect_err(
        "listen: \":80\"\nbogus_option: 1\n", -EINVAL,
        "t.yaml:2:1: bogus_option: unknown key (valid here: listen, workers, cpus, pin, "
        "control_cpus, numa, root, limits, timeouts, cors, cache_control, log, admin, stats, fd_cache, auth_cache, llhls, tls, cache, "
        "origin, http2, send, ring, features)");
    expect_err("limits:\n  max_connections: 5\n  header_byte: 1024\n", -EINVAL,
               "t.yaml:3:3: limits.header_byte: unknown key, did you mean \"header_bytes\"? "
               "(valid here: max_connections, header_bytes, uri_bytes)");
    expect_err("cache_control:\n  webm: x\n", -EINVAL,
               "t.yaml:2:3: cache_control.webm: unknown key (valid here: other, m3u8, ts, m4s, "
               "mp4, aac, vtt, key)");
    /* A dotted path is not a key: the layout is nested. */
    expect_err("limits.uri_bytes: 100\n", -EINVAL,
               "t.yaml:1:1: limits.uri_bytes: unknown key (valid here: listen, workers, cpus, "
               "pin, control_cpus, numa, root, limits, timeouts, cors, cache_control, log, admin, stats, fd_cache, auth_cache, llhls, tls, "
               "cache, origin, http2, send, ring, features)");
    /* Sections nest: an unknown key in cache.ttl names its full path and the
     * keys valid there, and a typo is caught one level down too. */
    expect_err("cache:\n  ttl:\n    medai: 1s\n", -EINVAL,
               "t.yaml:3:5: cache.ttl.medai: unknown key, did you mean \"media\"? (valid here: "
               "master, media, segment, other)");
    expect_err("cache:\n  ram: 1g\n", -EINVAL,
               "t.yaml:2:3: cache.ram: unknown key (valid here: ram_size, ram_object_max, ssd, "
               "admission, negative_ttl, stale_while_revalidate, stale_if_error, live_fraction, "
               "ttl, key_params, prefetch, zero_copy_min, zero_copy_adapt, ram_sendfile, ram_splice, ram_huge_pages)");
    expect_err("tls:\n  certificate: a.pem\n", -EINVAL,
               "t.yaml:2:3: tls.certificate: unknown key, did you mean \"certificates\"? (valid "
               "here: listen, certificates, ktls, seal_records, session_tickets, ticket_rotate, session_cache, "
               "handshake_timeout, first_record, write_buffer)");
    expect_err("origin:\n  url: http://a\n", -EINVAL,
               "t.yaml:2:3: origin.url: unknown key, did you mean \"urls\"? (valid here: urls, "
               "sources, connect_timeout, read_timeout, total_timeout, retries, pool, tls_ca_file, select, down_time)");
    /* A nested section's key one level up is unknown there. */
    expect_err("cache:\n  media: 1s\n", -EINVAL,
               "t.yaml:2:3: cache.media: unknown key (valid here: ram_size, ram_object_max, ssd, "
               "admission, negative_ttl, stale_while_revalidate, stale_if_error, live_fraction, "
               "ttl, key_params, prefetch, zero_copy_min, zero_copy_adapt, ram_sendfile, ram_splice, ram_huge_pages)");
    /* Keys are case-sensitive; a section's key at the top level is unknown. */
    HE_CHECK_INT(load("Workers: 4\n"), -EINVAL);
    HE_CHECK(strstr(err, "t.yaml:1:1: Workers: unknown key, did you mean \"workers\"?") == err);
    HE_CHECK_INT(load("header_bytes: 4096\n"), -EINVAL);
    HE_CHECK(strstr(err, "t.yaml:1:1: header_bytes: unknown key (valid here: listen,") == err);
    /* Unprintable bytes in a key are shown as '?'. */
    HE_CHECK_INT(load("\"a\\tb\": 1\n"), -EINVAL);
    HE_CHECK(strstr(err, "t.yaml:1:1: a?b: unknown key") == err);
    HE_CHECK_INT(load("\"\": 1\n"), -EINVAL);
    HE_CHECK(strstr(err, "t.yaml:1:1: : unknown key") == err);
    /* A very long key is cut, and the message still fits. */
    char yaml[600];
    memset(yaml, 'k', 500);
    strcpy(yaml + 500, ": 1\n");
    HE_CHECK_INT(load(yaml), -EINVAL);
    HE_CHECK(strlen(err) < sizeof(err));
    HE_CHECK(strstr(err, "unknown key") != NULL);
}

static void test_duplicates(void)
{
    expect_err("workers: 2\npin: true\nworkers: 3\n", -EINVAL,
               "t.yaml:3:1: workers: duplicate key (first given at line 1)");
    expect_err("limits:\n  uri_bytes: 100\n  uri_bytes: 200\n", -EINVAL,
               "t.yaml:3:3: limits.uri_bytes: duplicate key (first given at line 2)");
    expect_err("log:\n  level: info\nlog:\n  file: x\n", -EINVAL,
               "t.yaml:3:1: log: duplicate key (first given at line 1)");
    expect_err("timeouts: {send: 1s, send: 2s}\n", -EINVAL,
               "t.yaml:1:22: timeouts.send: duplicate key (first given at line 1)");
}

static void test_wrong_shapes(void)
{
    expect_err("cache:\n  ttl:\n    - media: 1s\n", -EINVAL,
               "t.yaml:3:5: cache.ttl: expected a mapping with keys master, media, segment, "
               "other, got a list");
    expect_err("cache: [ram_size]\n", -EINVAL,
               "t.yaml:1:8: cache: expected a mapping with keys ram_size, ram_object_max, ssd, "
               "admission, negative_ttl, stale_while_revalidate, stale_if_error, live_fraction, "
               "ttl, key_params, prefetch, zero_copy_min, zero_copy_adapt, ram_sendfile, ram_splice, ram_huge_pages, got a list");
    expect_err("cache:\n  ttl:\n    master:\n      x: 1\n", -EINVAL,
               "t.yaml:4:7: cache.ttl.master: expected a duration in 0s..30d such as \"250ms\", "
               "\"10s\" or \"2m\", got a mapping");
    expect_err("cache:\n  ttl: {media: 1s, media: 2s}\n", -EINVAL,
               "t.yaml:2:20: cache.ttl.media: duplicate key (first given at line 2)");
    expect_err("cache:\n  ttl: {}\n  ttl: {}\n", -EINVAL,
               "t.yaml:3:3: cache.ttl: duplicate key (first given at line 2)");
    /* A mapping where a scalar is expected, a sequence or a scalar where a
     * mapping is expected, and a top level that is not a mapping. */
    expect_err("workers:\n  count: 4\n", -EINVAL,
               "t.yaml:2:3: workers: expected a positive integer or \"auto\", got a mapping");
    expect_err("limits:\n  - max_connections: 5\n", -EINVAL,
               "t.yaml:2:3: limits: expected a mapping with keys max_connections, header_bytes, "
               "uri_bytes, got a list");
    expect_err("timeouts: 10s\n", -EINVAL,
               "t.yaml:1:11: timeouts: expected a mapping with keys header, keepalive, send, "
               "drain, got a scalar");
    expect_err("cors: \"\"\n", -EINVAL,
               "t.yaml:1:7: cors: expected a mapping with keys allow_origin, timing_allow_origin, "
               "got a scalar");
    expect_err("- listen: \":80\"\n", -EINVAL,
               "t.yaml:1:1: expected a mapping of keys at the top level, got a list");
    expect_err("just a string\n", -EINVAL,
               "t.yaml:1:1: expected a mapping of keys at the top level, got a scalar");
    expect_err("? [a, b]\n: 1\n", -EINVAL, "t.yaml:1:3: expected a key name, got a list");
    expect_err("limits:\n  ? {a: 1}\n  : 1\n", -EINVAL,
               "t.yaml:2:5: limits: expected a key name, got a mapping");
    expect_err("root: [a]\n", -EINVAL, "t.yaml:1:7: root: expected a non-empty string, got a list");
}

static void test_syntax_errors(void)
{
    expect_err("workers: 4\nlimits:\n  max_connections: 5\n uri_bytes: 6\n", -EINVAL,
               "t.yaml:4:2: YAML syntax error: did not find expected key (while parsing a "
               "block mapping at 1:1)");
    expect_err("listen: [\":80\"\n", -EINVAL,
               "t.yaml:2:1: YAML syntax error: did not find expected ',' or ']' (while parsing "
               "a flow sequence at 1:9)");
    expect_err("workers: 4: 5\n", -EINVAL,
               "t.yaml:1:11: YAML syntax error: mapping values are not allowed in this context");
    expect_err("root: \"unterminated\n", -EINVAL,
               "t.yaml:2:1: YAML syntax error: found unexpected end of stream (while scanning a "
               "quoted scalar at 1:7)");
    expect_err("cors:\n\tallow_origin: x\n", -EINVAL,
               "t.yaml:2:1: YAML syntax error: found character that cannot start any token "
               "(while scanning for the next token at 2:1)");
    expect_err("root: *nowhere\n", -EINVAL, "t.yaml:1:7: YAML syntax error: found undefined alias");
    /* Invalid UTF-8: libyaml gives a byte offset, reported as line:col. */
    expect_err("workers: 4\nroot: \xff\xfe\n", -EINVAL,
               "t.yaml:2:7: invalid YAML text: invalid leading UTF-8 octet");
    /* A second document is refused, not ignored. */
    expect_err("workers: 4\n---\nworkers: 5\n", -EINVAL,
               "t.yaml:3:1: expected a single YAML document, found a second one");
    expect_err("workers: 4\n---\nworkers: [\n", -EINVAL,
               "t.yaml:4:1: YAML syntax error: did not find expected node content (while "
               "parsing a flow node at 4:1)");
}

static void test_anchors(void)
{
    /* An alias cannot make the nested walk recurse either. */
    HE_CHECK_INT(load("cache:\n  ttl: &t {media: 3s}\n"), 0);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_MEDIA], 3000);
    expect_err("cache: &c\n  ttl: *c\n", -EINVAL,
               "t.yaml:2:3: cache.ttl.ttl: unknown key (valid here: master, media, segment, "
               "other)");
    /* Aliases are fine where the value fits; they cannot make the walk
     * recurse (it follows the table, not the document). */
    HE_CHECK_INT(load("timeouts: {header: &t 20s, send: *t}\n"), 0);
    HE_CHECK_INT(conf.header_timeout_ms, 20000);
    HE_CHECK_INT(conf.send_timeout_ms, 20000);
    expect_err("limits: &a {uri_bytes: 16}\ntimeouts: *a\n", -EINVAL,
               "t.yaml:1:13: timeouts.uri_bytes: unknown key (valid here: header, keepalive, "
               "send, drain)");
    expect_err("limits: &a {max_connections: *a}\n", -EINVAL,
               "t.yaml:1:9: limits.max_connections: expected an integer in 1..10000000, got a "
               "mapping");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "listen: " then n levels of open (each opens one collection) and as
 * many of close; malloc'd. */
static char *nested(unsigned n, const char *open, const char *close)
{
    size_t lo = strlen(open), lc = strlen(close), o = 0;
    char *y = malloc(16 + n * (lo + lc));

    o += (size_t)sprintf(y, "listen: ");
    for (unsigned i = 0; i < n; i++, o += lo)
        memcpy(y + o, open, lo);
    for (unsigned i = 0; i < n; i++, o += lc)
        memcpy(y + o, close, lc);
    strcpy(y + o, "\n");
    return y;
}

/* libyaml's time grows with the square of the nesting (seconds at 64k
 * levels), so nesting past 64 levels is refused as it is read, at the
 * collection that goes one level too deep; the schema needs 4. */
static void test_nesting_depth(void)
{
    char *y;
    double t0;

    /* The top mapping is level 1, listen's list level 2: 63 lists is 64
     * levels, still the usual type error; 64 lists is one too many. */
    y = nested(63, "[", "]");
    expect_err(y, -EINVAL, "t.yaml:1:10: listen: expected a list of scalars, got a list in it");
    free(y);
    y = nested(64, "[", "]");
    expect_err(y, -EINVAL, "t.yaml:1:72: YAML nested deeper than 64 levels");
    free(y);
    y = nested(64, "{a: ", "}");
    expect_err(y, -EINVAL, "t.yaml:1:261: YAML nested deeper than 64 levels");
    free(y);
    /* Block style: "- - - x" nests a list per dash. */
    y = malloc(16 + 2 * 64);
    strcpy(y, "listen:\n");
    for (int i = 0; i < 64; i++)
        strcat(y, "- ");
    strcat(y, "x\n");
    expect_err(y, -EINVAL, "t.yaml:2:127: YAML nested deeper than 64 levels");
    free(y);
    /* Past the limit in a second document too: it is never composed. */
    {
        char *d = nested(64, "[", "]");
        y = malloc(strlen(d) + 16);
        sprintf(y, "workers: 4\n---\n%s", d);
        expect_err(y, -EINVAL, "t.yaml:3:72: YAML nested deeper than 64 levels");
        free(y);
        free(d);
    }
    /* Deep nesting costs nothing: the parse stops at level 65. */
    t0 = now_s();
    y = nested(65536, "[", "]");
    expect_err(y, -EINVAL, "t.yaml:1:72: YAML nested deeper than 64 levels");
    free(y);
    y = nested(65536, "{a: ", "}");
    expect_err(y, -EINVAL, "t.yaml:1:261: YAML nested deeper than 64 levels");
    free(y);
    HE_CHECK(now_s() - t0 < 1.0);
    /* A syntax error before the limit is reported as before. */
    y = nested(10, "[", "");
    expect_err(y, -EINVAL,
               "t.yaml:2:1: YAML syntax error: did not find expected node content (while "
               "parsing a flow node at 2:1)");
    free(y);
}

static void test_error_buffer(void)
{
    char small[16];

    /* A small buffer is truncated, never overrun; errlen 0 writes nothing. */
    HE_CHECK_INT(he_conf_load_string(&conf, "t.yaml", "workers: x\n", 11, small, sizeof(small)),
                 -EINVAL);
    HE_CHECK_STR(small, "t.yaml:1:10: wo");
    small[0] = 'z';
    HE_CHECK_INT(he_conf_load_string(&conf, "t.yaml", "workers: x\n", 11, small, 0), -EINVAL);
    HE_CHECK_INT(small[0], 'z');
}

int main(void)
{
    test_empty_is_defaults();
    test_unknown_keys();
    test_duplicates();
    test_wrong_shapes();
    test_syntax_errors();
    test_anchors();
    test_nesting_depth();
    test_error_buffer();
    HE_TEST_MAIN_END();
}
