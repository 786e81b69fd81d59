/* The key table of conf/keys.c: every key's happy path, type error and
 * range error, through he_conf_load_string so the messages are the real
 * ones. Part of it walks the table itself, so a new key is covered the day
 * it is added. */
#include <arpa/inet.h>

#include "conf_test.h"

/* Every key: its default written out loads to the defaults; a mapping or
 * (for scalar keys) a list is a type error pointing at the value. */
static void test_every_key_generic(void)
{
    he_conf_t def;
    char yaml[512], quoted[300], want[HE_CONF_ERR_MAX], expect[256];

    he_conf_defaults(&def);
    for (size_t i = 0; i < he__conf_nkeys; i++) {
        const he__conf_key_t *k = &he__conf_keys[i];
        unsigned line, col;
        if (k->type == HE__CONF_SECTION) continue;
        key_yaml_pos(k->name, &line, &col);

        snprintf(quoted, sizeof(quoted), "\"%s\"", k->def);
        key_yaml(k->name, quoted, yaml, sizeof(yaml));
        HE_CHECK_INT(load(yaml), 0);
        HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0);

        he__conf_expect(k, expect, sizeof(expect));
        key_yaml(k->name, "{a: 1}", yaml, sizeof(yaml));
        snprintf(want, sizeof(want), "t.yaml:%u:%u: %s: expected %s, got a mapping", line, col,
                 k->name, expect);
        expect_err(yaml, -EINVAL, want);

        if (!he__conf_takes_list(k)) {
            key_yaml(k->name, "[1, 2]", yaml, sizeof(yaml));
            snprintf(want, sizeof(want), "t.yaml:%u:%u: %s: expected %s, got a list", line, col,
                     k->name, expect);
            expect_err(yaml, -EINVAL, want);
        }

        /* Range errors, from the table's own bounds. */
        if (k->type == HE__CONF_UINT || k->type == HE__CONF_DURATION || k->type == HE__CONF_SIZE) {
            const char *unit = k->type == HE__CONF_DURATION ? "ms" : "";
            char v[32];
            snprintf(v, sizeof(v), "%llu%s", (unsigned long long)k->max + 1, unit);
            key_yaml(k->name, v, yaml, sizeof(yaml));
            snprintf(want, sizeof(want), "t.yaml:%u:%u: %s: expected %s, got \"%s\"", line, col,
                     k->name, expect, v);
            expect_err(yaml, -ERANGE, want);
            if (k->min > 0) {
                snprintf(v, sizeof(v), "%llu%s", (unsigned long long)k->min - 1, unit);
                key_yaml(k->name, v, yaml, sizeof(yaml));
                snprintf(want, sizeof(want), "t.yaml:%u:%u: %s: expected %s, got \"%s\"", line, col,
                         k->name, expect, v);
                expect_err(yaml, -ERANGE, want);
            }
            /* Signs, fractions and overflow are type errors or range errors
             * with the same text. */
            key_yaml(k->name, "-1", yaml, sizeof(yaml));
            HE_CHECK_INT(load(yaml), -EINVAL);
            HE_CHECK(strstr(err, "got \"-1\"") != NULL);
            key_yaml(k->name, "1.5", yaml, sizeof(yaml));
            HE_CHECK_INT(load(yaml), -EINVAL);
            key_yaml(k->name, "99999999999999999999999", yaml, sizeof(yaml));
            HE_CHECK_INT(load(yaml), -ERANGE);
        }
        if (k->type == HE__CONF_STR) {
            char *big = malloc(k->size + 64);
            memset(big, 'a', k->size);
            big[k->size] = '\0';
            char *y = malloc(k->size + 128);
            key_yaml(k->name, big, y, k->size + 128);
            snprintf(want, sizeof(want), "t.yaml:%u:%u: %s: expected at most %zu bytes, got %zu",
                     line, col, k->name, k->size - 1, k->size);
            expect_err(y, -ENAMETOOLONG, want);
            free(big);
            free(y);
        }
        /* A NUL escaped into any value is refused, not truncated. */
        key_yaml(k->name, "\"a\\0b\"", yaml, sizeof(yaml));
        snprintf(want, sizeof(want), "t.yaml:%u:%u: %s: expected a value without NUL bytes", line,
                 col, k->name);
        expect_err(yaml, -EINVAL, want);
    }
    HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0); /* errors leave defaults */
}

static void test_happy_all_keys(void)
{
    static const char yaml[] = "listen: [\"127.0.0.1:80\", \"[::]:8443\", \":81\"]\n"
                               "workers: 12\n"
                               "cpus: [3, 1, 2]\n"
                               "pin: no\n"
                               "control_cpus: [0, 4]\n"
                               "numa: off\n"
                               "root: /srv/hls\n"
                               "limits:\n"
                               "  max_connections: 123456\n"
                               "  header_bytes: 16384\n"
                               "  uri_bytes: 16384\n"
                               "timeouts:\n"
                               "  header: 250ms\n"
                               "  keepalive: 0\n"
                               "  send: 2m\n"
                               "  drain: 1h\n"
                               "cors:\n"
                               "  allow_origin: https://example.com\n"
                               "cache_control:\n"
                               "  other: \"no-store\"\n"
                               "  m3u8: \"\"\n"
                               "  ts: max-age=1\n"
                               "  m4s: max-age=2\n"
                               "  mp4: max-age=3\n"
                               "  aac: max-age=4\n"
                               "  vtt: max-age=5\n"
                               "  key: \"no-cache,\\tprivate\"\n"
                               "log:\n"
                               "  level: debug\n"
                               "  file: /var/log/hlsedge/error.log\n"
                               "  access: 'access.log'\n"
                               "  access_format: json\n"
                               "admin:\n"
                               "  listen: \"[::1]:9191\"\n"
                               "stats:\n"
                               "  latency: false\n"
                               "fd_cache:\n"
                               "  entries: 16\n"
                               "  valid: 0\n";
    const struct sockaddr_in6 *a6;

    HE_CHECK_INT(load(yaml), 0);
    HE_CHECK_STR(err, "");
    HE_CHECK_INT(conf.nlisten, 3);
    HE_CHECK_STR(conf.listen[0].text, "127.0.0.1:80");
    HE_CHECK_STR(conf.listen[1].text, "[::]:8443");
    HE_CHECK_STR(conf.listen[2].text, "0.0.0.0:81");
    HE_CHECK_STR(conf.listen[3].text, "");
    HE_CHECK_INT(conf.workers, 12);
    HE_CHECK_INT(conf.ncpus, 3);
    HE_CHECK_INT(conf.cpus[0], 3);
    HE_CHECK_INT(conf.cpus[1], 1);
    HE_CHECK_INT(conf.cpus[2], 2);
    HE_CHECK(!conf.pin);
    HE_CHECK_INT(conf.ncontrol_cpus, 2);
    HE_CHECK_INT(conf.control_cpus[0], 0);
    HE_CHECK_INT(conf.control_cpus[1], 4);
    HE_CHECK(!conf.numa);
    HE_CHECK_STR(conf.root, "/srv/hls");
    HE_CHECK_INT(conf.max_connections, 123456);
    HE_CHECK_INT(conf.max_header_bytes, 16384);
    HE_CHECK_INT(conf.max_uri_bytes, 16384);
    HE_CHECK_INT(conf.header_timeout_ms, 250);
    HE_CHECK_INT(conf.keepalive_timeout_ms, 0);
    HE_CHECK_INT(conf.send_timeout_ms, 120000);
    HE_CHECK_INT(conf.drain_timeout_ms, 3600000);
    HE_CHECK_STR(conf.cors_allow_origin, "https://example.com");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_OTHER], "no-store");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_M3U8], "");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_TS], "max-age=1");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_M4S], "max-age=2");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_MP4], "max-age=3");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_AAC], "max-age=4");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_VTT], "max-age=5");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_KEY], "no-cache,\tprivate");
    HE_CHECK_INT(conf.log_level, HE_LOG_DEBUG);
    HE_CHECK_STR(conf.error_log, "/var/log/hlsedge/error.log");
    HE_CHECK_STR(conf.access_log, "access.log");
    HE_CHECK_INT(conf.access_log_format, HE_ACCESS_LOG_JSON);
    HE_CHECK_STR(conf.admin_listen.text, "[::1]:9191");
    a6 = (const struct sockaddr_in6 *)&conf.admin_listen.addr;
    HE_CHECK_INT(a6->sin6_family, AF_INET6);
    HE_CHECK_INT(ntohs(a6->sin6_port), 9191);
    HE_CHECK(!conf.stats_latency);
    HE_CHECK_INT(conf.fd_cache_entries, 16);
    HE_CHECK_INT(conf.fd_cache_valid_ms, 0);
    HE_CHECK_STR(conf.file, "");
}

static void test_happy_forms(void)
{
    /* listen as one string; workers/cpus auto; booleans in every spelling. */
    HE_CHECK_INT(load("listen: \"[::]:80\"\nworkers: auto\ncpus: auto\n"), 0);
    HE_CHECK_INT(conf.nlisten, 1);
    HE_CHECK_STR(conf.listen[0].text, "[::]:80");
    HE_CHECK_INT(conf.workers, 0);
    HE_CHECK_INT(conf.ncpus, 0);
    HE_CHECK_INT(load("workers: 1024\ncpus: 255\n"), 0);
    HE_CHECK_INT(conf.workers, 1024);
    HE_CHECK_INT(conf.ncpus, 1);
    HE_CHECK_INT(conf.cpus[0], 255);
    HE_CHECK_INT(load("workers: \"1\"\ncpus:\n  - 0\n  - 7\n"), 0);
    HE_CHECK_INT(conf.workers, 1);
    HE_CHECK_INT(conf.ncpus, 2);
    HE_CHECK_INT(conf.cpus[1], 7);

    static const char *const truths[] = {"true", "True", "TRUE", "yes", "Yes", "on", "ON"};
    static const char *const lies[] = {"false", "False", "no", "NO", "off", "Off"};
    char yaml[64];
    for (size_t i = 0; i < sizeof(truths) / sizeof(truths[0]); i++) {
        snprintf(yaml, sizeof(yaml), "pin: %s\nnuma: %s\n", lies[i % 6], truths[i]);
        HE_CHECK_INT(load(yaml), 0);
        HE_CHECK(!conf.pin);
        HE_CHECK(conf.numa);
    }

    /* Every enum value, every duration unit. */
    for (int l = HE_LOG_ERROR; l <= HE_LOG_DEBUG; l++) {
        snprintf(yaml, sizeof(yaml), "log:\n  level: %s\n", he_conf_log_level_name(l));
        HE_CHECK_INT(load(yaml), 0);
        HE_CHECK_INT(conf.log_level, l);
    }
    HE_CHECK_STR(he_conf_log_level_name(HE_LOG_WARN), "warn");
    HE_CHECK_STR(he_conf_log_level_name((he_log_level_t)42), "unknown");
    HE_CHECK_INT(load("log: {access_format: combined}\n"), 0);
    HE_CHECK_INT(conf.access_log_format, HE_ACCESS_LOG_COMBINED);
    HE_CHECK_INT(load("timeouts: {header: 100ms, keepalive: 2m, send: 3600, drain: 0s}\n"), 0);
    HE_CHECK_INT(conf.header_timeout_ms, 100);
    HE_CHECK_INT(conf.keepalive_timeout_ms, 120000);
    HE_CHECK_INT(conf.send_timeout_ms, 3600000);
    HE_CHECK_INT(conf.drain_timeout_ms, 0);

    /* admin off, both spellings, and YAML null for strings. */
    HE_CHECK_INT(load("admin:\n  listen: off\n"), 0);
    HE_CHECK_INT(conf.admin_listen.addrlen, 0);
    HE_CHECK_INT(((struct sockaddr_in *)&conf.admin_listen.addr)->sin_port, 0);
    HE_CHECK_INT(load("admin:\n  listen: \"\"\n"), 0);
    HE_CHECK_INT(conf.admin_listen.addrlen, 0);
    HE_CHECK_INT(load("cors:\n  allow_origin:\nlog:\n  file: ~\n"), 0);
    HE_CHECK_STR(conf.cors_allow_origin, "");
    HE_CHECK_STR(conf.error_log, "");
    HE_CHECK_INT(load("cors:\n  allow_origin: 'null'\n"), 0); /* quoted: a string */
    HE_CHECK_STR(conf.cors_allow_origin, "null");

    /* Limits at their bounds; uri_bytes may equal header_bytes. */
    HE_CHECK_INT(load("limits: {max_connections: 1, header_bytes: 256, uri_bytes: 16}\n"), 0);
    HE_CHECK_INT(conf.max_connections, 1);
    HE_CHECK_INT(conf.max_header_bytes, 256);
    HE_CHECK_INT(conf.max_uri_bytes, 16);
    HE_CHECK_INT(load("limits: {max_connections: 10000000, header_bytes: 1048576, "
                      "uri_bytes: 1048576}\n"),
                 0);
    HE_CHECK_INT(conf.max_connections, 10000000);
    HE_CHECK_INT(load("fd_cache: {entries: 1048576, valid: 1h}\n"), 0);
    HE_CHECK_INT(conf.fd_cache_entries, 1048576);
    HE_CHECK_INT(conf.fd_cache_valid_ms, 3600000);

    /* listen: 16 addresses is the limit, not an error. */
    char big[1024] = "listen:\n";
    for (int i = 0; i < HE_CONF_MAX_LISTEN; i++)
        snprintf(big + strlen(big), sizeof(big) - strlen(big), "  - 127.0.0.1:%d\n", 1000 + i);
    HE_CHECK_INT(load(big), 0);
    HE_CHECK_INT(conf.nlisten, HE_CONF_MAX_LISTEN);
    HE_CHECK_STR(conf.listen[15].text, "127.0.0.1:1015");
}

/* Type and range errors with their full messages, per key. */
static void test_key_errors(void)
{
    expect_err("workers: many\n", -EINVAL,
               "t.yaml:1:10: workers: expected a positive integer or \"auto\", got \"many\"");
    expect_err("workers: 0\n", -EINVAL,
               "t.yaml:1:10: workers: expected a positive integer or \"auto\", got \"0\"");
    expect_err("workers: -2\n", -EINVAL,
               "t.yaml:1:10: workers: expected a positive integer or \"auto\", got \"-2\"");
    expect_err("workers: 2.5\n", -EINVAL,
               "t.yaml:1:10: workers: expected a positive integer or \"auto\", got \"2.5\"");
    expect_err("workers: 1025\n", -ERANGE,
               "t.yaml:1:10: workers: expected \"auto\" or an integer in 1..1024, got \"1025\"");
    expect_err("workers: 99999999999999999999\n", -ERANGE,
               "t.yaml:1:10: workers: expected \"auto\" or an integer in 1..1024, got "
               "\"99999999999999999999\"");
    expect_err("workers: Auto\n", -EINVAL,
               "t.yaml:1:10: workers: expected a positive integer or \"auto\", got \"Auto\"");

    /* control_cpus: the same shape as cpus, its own list */
    HE_CHECK_INT(load("cpus: [1, 2]\ncontrol_cpus: 0\n"), 0);
    HE_CHECK_INT(conf.ncpus, 2);
    HE_CHECK_INT(conf.ncontrol_cpus, 1);
    HE_CHECK_INT(conf.control_cpus[0], 0);
    HE_CHECK_INT(load("control_cpus: auto\n"), 0);
    HE_CHECK_INT(conf.ncontrol_cpus, 0);
    expect_err("control_cpus: [2, 2]\n", -EEXIST,
               "t.yaml:1:19: control_cpus: duplicate CPU 2");
    expect_err("control_cpus: [0, 999]\n", -ERANGE,
               "t.yaml:1:19: control_cpus: expected a CPU number in 0..255, got \"999\"");
    expect_err("cpus: [0, 256]\n", -ERANGE,
               "t.yaml:1:11: cpus: expected a CPU number in 0..255, got \"256\"");
    expect_err("cpus: 300\n", -ERANGE,
               "t.yaml:1:7: cpus: expected a CPU number in 0..255, got \"300\"");
    expect_err("cpus: [1, -1]\n", -EINVAL,
               "t.yaml:1:11: cpus: expected \"auto\" or a list of CPU numbers in 0..255, got "
               "\"-1\"");
    expect_err("cpus: [auto]\n", -EINVAL,
               "t.yaml:1:8: cpus: expected \"auto\" or a list of CPU numbers in 0..255, got "
               "\"auto\"");
    expect_err("cpus: [1, 2, 1]\n", -EEXIST, "t.yaml:1:14: cpus: duplicate CPU 1");
    expect_err("cpus: []\n", -EINVAL,
               "t.yaml:1:7: cpus: expected \"auto\" or a list of CPU numbers in 0..255, got an "
               "empty list");
    expect_err("cpus: [[1]]\n", -EINVAL,
               "t.yaml:1:8: cpus: expected a list of scalars, got a list in it");

    expect_err("pin: maybe\n", -EINVAL, "t.yaml:1:6: pin: expected true or false, got \"maybe\"");
    expect_err("numa: 1\n", -EINVAL, "t.yaml:1:7: numa: expected true or false, got \"1\"");
    expect_err("root: \"\"\n", -EINVAL, "t.yaml:1:7: root: expected a non-empty string, got \"\"");
    expect_err("root:\n", -EINVAL, "t.yaml:1:6: root: expected a non-empty string, got \"\"");

    expect_err("limits:\n  max_connections: 0\n", -ERANGE,
               "t.yaml:2:20: limits.max_connections: expected an integer in 1..10000000, got "
               "\"0\"");
    expect_err("limits:\n  header_bytes: 8k\n", -EINVAL,
               "t.yaml:2:17: limits.header_bytes: expected an integer in 256..1048576, got "
               "\"8k\"");
    expect_err("limits:\n  uri_bytes: +100\n", -EINVAL,
               "t.yaml:2:14: limits.uri_bytes: expected an integer in 16..1048576, got \"+100\"");

    expect_err("timeouts:\n  header: 10\n  keepalive: 5 s\n", -EINVAL,
               "t.yaml:3:14: timeouts.keepalive: expected a duration in 0s..1h such as "
               "\"250ms\", \"10s\" or \"2m\", got \"5 s\"");
    expect_err("timeouts:\n  header: 99ms\n", -ERANGE,
               "t.yaml:2:11: timeouts.header: expected a duration in 100ms..1h such as "
               "\"250ms\", \"10s\" or \"2m\", got \"99ms\"");
    expect_err("timeouts:\n  send: 61m\n", -ERANGE,
               "t.yaml:2:9: timeouts.send: expected a duration in 100ms..1h such as \"250ms\", "
               "\"10s\" or \"2m\", got \"61m\"");
    expect_err("timeouts:\n  drain: 1.5s\n", -EINVAL,
               "t.yaml:2:10: timeouts.drain: expected a duration in 0s..1h such as \"250ms\", "
               "\"10s\" or \"2m\", got \"1.5s\"");
    expect_err("fd_cache:\n  valid: forever\n", -EINVAL,
               "t.yaml:2:10: fd_cache.valid: expected a duration in 0s..1h such as \"250ms\", "
               "\"10s\" or \"2m\", got \"forever\"");
    expect_err("fd_cache:\n  entries: 15\n", -ERANGE,
               "t.yaml:2:12: fd_cache.entries: expected an integer in 16..1048576, got \"15\"");

    expect_err("cors:\n  allow_origin: \"a\\r\\nSet-Cookie: x\"\n", -EINVAL,
               "t.yaml:2:17: cors.allow_origin: expected a header value without control "
               "characters");
    expect_err("cache_control:\n  ts: \"max-age=1\\x7f\"\n", -EINVAL,
               "t.yaml:2:7: cache_control.ts: expected a header value without control "
               "characters");

    expect_err("log:\n  level: verbose\n", -EINVAL,
               "t.yaml:2:10: log.level: expected one of error, warn, info, debug, got "
               "\"verbose\"");
    expect_err("log:\n  level: INFO\n", -EINVAL,
               "t.yaml:2:10: log.level: expected one of error, warn, info, debug, got \"INFO\"");
    expect_err("log:\n  access_format: common\n", -EINVAL,
               "t.yaml:2:18: log.access_format: expected one of combined, json, got \"common\"");

    expect_err("admin:\n  listen: 9090x\n", -EINVAL,
               "t.yaml:2:11: admin.listen: expected an address \"host:port\" or \"[v6]:port\" "
               "(IP literal, port 1..65535), or \"off\", got \"9090x\"");
    expect_err("admin:\n  listen: \"127.0.0.1:0\"\n", -EINVAL,
               "t.yaml:2:11: admin.listen: expected an address \"host:port\" or \"[v6]:port\" "
               "(IP literal, port 1..65535), or \"off\", got \"127.0.0.1:0\"");
    expect_err("admin:\n  listen: [\"127.0.0.1:1\"]\n", -EINVAL,
               "t.yaml:2:11: admin.listen: expected an address \"host:port\" or \"[v6]:port\" "
               "(IP literal, port 1..65535), or \"off\", got a list");
}

static void test_listen_errors(void)
{
    static const char *const bad[] = {
        "listen: 127.0.0.1\n",
        "listen: \"127.0.0.1:0\"\n",
        "listen: \"127.0.0.1:65536\"\n",
        "listen: \"[::1\"\n",
        "listen: \"[::zz]:80\"\n",
        "listen: \"::1:80\"\n",
        "listen: localhost:80\n",
        "listen: \"\"\n",
        "listen:\n",
        "listen: ~\n",
    };
    char big[1024] = "listen:\n";

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        HE_CHECK_INT(load(bad[i]), -EINVAL);
        HE_CHECK(strncmp(err, "t.yaml:1:", 9) == 0);
        HE_CHECK(strstr(err, ": listen: expected an address \"host:port\" or \"[v6]:port\"") !=
                 NULL);
    }
    expect_err("listen: \"127.0.0.1:65536\"\n", -EINVAL,
               "t.yaml:1:9: listen: expected an address \"host:port\" or \"[v6]:port\" (IP "
               "literal, port 1..65535), or a list of them, got \"127.0.0.1:65536\"");
    /* The error points at the bad entry of a list. */
    expect_err("listen:\n  - \":80\"\n  - \"[::1]:0\"\n", -EINVAL,
               "t.yaml:3:5: listen: expected an address \"host:port\" or \"[v6]:port\" (IP "
               "literal, port 1..65535), or a list of them, got \"[::1]:0\"");
    expect_err("listen: [\":80\", \"0.0.0.0:80\"]\n", -EEXIST,
               "t.yaml:1:17: listen: duplicate address 0.0.0.0:80");
    expect_err("listen: []\n", -EINVAL,
               "t.yaml:1:9: listen: expected an address \"host:port\" or \"[v6]:port\" (IP "
               "literal, port 1..65535), or a list of them, got an empty list");
    expect_err("listen: [{a: 1}]\n", -EINVAL,
               "t.yaml:1:10: listen: expected a list of scalars, got a mapping in it");

    /* Too many listen entries: the 17th is blamed. */
    for (int i = 0; i <= HE_CONF_MAX_LISTEN; i++)
        snprintf(big + strlen(big), sizeof(big) - strlen(big), "  - 127.0.0.1:%d\n", 1000 + i);
    expect_err(big, -E2BIG, "t.yaml:18:5: listen: expected at most 16 addresses");
}

/* Every scalar key of the tls, cache and origin sections at a value other
 * than its default (the list keys are in test_set_list.c). */
static void test_happy_new_scalars(void)
{
    static const char yaml[] = "tls:\n"
                               "  ktls: false\n"
                               "  session_tickets: off\n"
                               "  ticket_rotate: 24h\n"
                               "  session_cache: 0\n"
                               "  handshake_timeout: 100ms\n"
                               "cache:\n"
                               "  ram_size: 2G\n"
                               "  ram_object_max: 1k\n"
                               "  admission: no\n"
                               "  negative_ttl: 0\n"
                               "  stale_while_revalidate: 1d\n"
                               "  stale_if_error: 24h\n"
                               "  live_fraction: 100\n"
                               "  ttl:\n"
                               "    master: 1s\n"
                               "    media: 500ms\n"
                               "    segment: 30d\n"
                               "    other: 2h\n"
                               "  prefetch: 32\n"
                               "  zero_copy_min: 0\n"
                               "  zero_copy_adapt: false\n"
                               "origin:\n"
                               "  urls: http://127.0.0.1:9000\n"
                               "  sources: origin-first\n"
                               "  connect_timeout: 1m\n"
                               "  read_timeout: 10m\n"
                               "  total_timeout: 1h\n"
                               "  retries: 8\n"
                               "  pool: 0\n"
                               "  tls_ca_file: /etc/hlsedge/origin-ca.pem\n";

    HE_CHECK_INT(load(yaml), 0);
    HE_CHECK_STR(err, "");
    HE_CHECK(!conf.tls_ktls);
    HE_CHECK(!conf.tls_tickets);
    HE_CHECK_INT(conf.tls_ticket_rotate_ms, 86400000);
    HE_CHECK_INT(conf.tls_session_cache, 0);
    HE_CHECK_INT(conf.tls_handshake_timeout_ms, 100);
    HE_CHECK_INT(conf.cache_ram_bytes, 2ull << 30);
    HE_CHECK_INT(conf.cache_ram_object_max, 1024);
    HE_CHECK(!conf.cache_admission);
    HE_CHECK_INT(conf.cache_negative_ttl_ms, 0);
    HE_CHECK_INT(conf.cache_stale_while_revalidate_ms, 86400000);
    HE_CHECK_INT(conf.cache_stale_if_error_ms, 86400000);
    HE_CHECK_INT(conf.cache_live_fraction_pct, 100);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_MASTER], 1000);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_MEDIA], 500);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_SEGMENT], 2592000000u);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_OTHER], 7200000);
    HE_CHECK_INT(conf.prefetch_segments, 32);
    HE_CHECK_INT(conf.cache_zero_copy_min, 0);
    HE_CHECK(!conf.cache_zero_copy_adapt);
    HE_CHECK_INT(conf.norigin_urls, 1);
    HE_CHECK_STR(conf.origin_urls[0], "http://127.0.0.1:9000");
    HE_CHECK(conf.origin_first);
    HE_CHECK_INT(conf.origin_connect_timeout_ms, 60000);
    HE_CHECK_INT(conf.origin_read_timeout_ms, 600000);
    HE_CHECK_INT(conf.origin_total_timeout_ms, 3600000);
    HE_CHECK_INT(conf.origin_retries, 8);
    HE_CHECK_INT(conf.origin_pool, 0);
    HE_CHECK_STR(conf.origin_tls_ca_file, "/etc/hlsedge/origin-ca.pem");

    /* The other bounds, and every size suffix in both cases. */
    HE_CHECK_INT(load("tls: {ticket_rotate: 1m, session_cache: 10000000, handshake_timeout: 1h}\n"
                      "cache: {ram_size: 64t, ram_object_max: 1T, live_fraction: 10, prefetch: 0,"
                      " negative_ttl: 1h, stale_while_revalidate: 0s, stale_if_error: 0}\n"
                      "origin: {sources: root-first, connect_timeout: 100ms, read_timeout: 100ms,"
                      " total_timeout: 1s, retries: 0, pool: 1024}\n"),
                 0);
    HE_CHECK_INT(conf.tls_ticket_rotate_ms, 60000);
    HE_CHECK_INT(conf.tls_session_cache, 10000000);
    HE_CHECK_INT(conf.tls_handshake_timeout_ms, 3600000);
    HE_CHECK_INT(conf.cache_ram_bytes, 64ull << 40);
    HE_CHECK_INT(conf.cache_ram_object_max, 1ull << 40);
    HE_CHECK_INT(conf.cache_live_fraction_pct, 10);
    HE_CHECK_INT(conf.prefetch_segments, 0);
    HE_CHECK_INT(conf.cache_negative_ttl_ms, 3600000);
    HE_CHECK(!conf.origin_first);
    HE_CHECK_INT(conf.origin_connect_timeout_ms, 100);
    HE_CHECK_INT(conf.origin_total_timeout_ms, 1000);
    HE_CHECK_INT(conf.origin_pool, 1024);
    /* zero_copy_min up to 1t: above every span, so no zero-copy at all. */
    HE_CHECK_INT(load("cache: {zero_copy_min: 1t, zero_copy_adapt: on}\n"), 0);
    HE_CHECK_INT(conf.cache_zero_copy_min, 1ull << 40);
    HE_CHECK(conf.cache_zero_copy_adapt);
    HE_CHECK_INT(load("cache:\n  zero_copy_min: 1048577\n"), 0);
    HE_CHECK_INT(conf.cache_zero_copy_min, 1048577);
    /* origin.tls_ca_file: null and "" are the system store. */
    HE_CHECK_INT(load("origin:\n  tls_ca_file: ca.pem\n"), 0);
    HE_CHECK_STR(conf.origin_tls_ca_file, "ca.pem");
    HE_CHECK_INT(load("origin:\n  tls_ca_file:\n"), 0);
    HE_CHECK_STR(conf.origin_tls_ca_file, "");
    HE_CHECK_INT(load("origin:\n  tls_ca_file: \"\"\n"), 0);
    HE_CHECK_STR(conf.origin_tls_ca_file, "");
    static const struct {
        const char *v;
        unsigned long long bytes;
    } sizes[] = {{"1048576", 1048576},   {"1024k", 1048576}, {"1K", 1024},
                 {"3m", 3ull << 20},     {"3M", 3ull << 20}, {"5g", 5ull << 30},
                 {"\"7G\"", 7ull << 30}, {"2t", 2ull << 40}, {"0", 0}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char y[96];
        snprintf(y, sizeof(y), "cache:\n  ram_size: %s\n  ram_object_max: 1k\n", sizes[i].v);
        HE_CHECK_INT(load(y), 0);
        HE_CHECK_INT(conf.cache_ram_bytes, sizes[i].bytes);
    }
    /* Nested sections in flow style too; a ttl section left empty. */
    HE_CHECK_INT(load("cache: {ttl: {media: 2s, other: 1d}}\n"), 0);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_MEDIA], 2000);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_OTHER], 86400000);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_MASTER], 0);
    HE_CHECK_INT(load("cache:\n  ttl:\n    # all commented out\n"), 0);
    HE_CHECK_INT(conf.cache_ttl_ms[HE_SEG_KIND_MEDIA], 0);
}

/* Type and range errors of the new scalar keys, with their full messages. */
static void test_new_key_errors(void)
{
    expect_err("tls:\n  ktls: maybe\n", -EINVAL,
               "t.yaml:2:9: tls.ktls: expected true or false, got \"maybe\"");
    expect_err("tls:\n  ticket_rotate: 59s\n", -ERANGE,
               "t.yaml:2:18: tls.ticket_rotate: expected a duration in 1m..1d such as \"250ms\", "
               "\"10s\" or \"2m\", got \"59s\"");
    expect_err("tls:\n  ticket_rotate: 2d\n", -ERANGE,
               "t.yaml:2:18: tls.ticket_rotate: expected a duration in 1m..1d such as \"250ms\", "
               "\"10s\" or \"2m\", got \"2d\"");
    expect_err("tls:\n  session_cache: 10000001\n", -ERANGE,
               "t.yaml:2:18: tls.session_cache: expected an integer in 0..10000000, got "
               "\"10000001\"");
    expect_err("tls:\n  handshake_timeout: 10 s\n", -EINVAL,
               "t.yaml:2:22: tls.handshake_timeout: expected a duration in 100ms..1h such as "
               "\"250ms\", \"10s\" or \"2m\", got \"10 s\"");

    expect_err("cache:\n  ram_size: 16MB\n", -EINVAL,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"16MB\"");
    expect_err("cache:\n  ram_size: 1.5g\n", -EINVAL,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"1.5g\"");
    expect_err("cache:\n  ram_size: \"1 g\"\n", -EINVAL,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"1 g\"");
    expect_err("cache:\n  ram_size: g\n", -EINVAL,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"g\"");
    expect_err("cache:\n  ram_size: 1p\n", -EINVAL,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"1p\"");
    expect_err("cache:\n  ram_size: 65t\n", -ERANGE,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"65t\"");
    expect_err("cache:\n  ram_size: 16777216t\n", -ERANGE,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"16777216t\"");
    expect_err("cache:\n  ram_size: \"\"\n", -EINVAL,
               "t.yaml:2:13: cache.ram_size: expected a size in 0..64t such as \"512m\" or "
               "\"2g\", got \"\"");
    expect_err("cache:\n  ram_object_max: 0\n", -ERANGE,
               "t.yaml:2:19: cache.ram_object_max: expected a size in 1k..1t such as \"512m\" "
               "or \"2g\", got \"0\"");
    expect_err("cache:\n  ram_object_max: 1025g\n", -ERANGE,
               "t.yaml:2:19: cache.ram_object_max: expected a size in 1k..1t such as \"512m\" "
               "or \"2g\", got \"1025g\"");
    expect_err("cache:\n  admission: 2\n", -EINVAL,
               "t.yaml:2:14: cache.admission: expected true or false, got \"2\"");
    expect_err("cache:\n  negative_ttl: 61m\n", -ERANGE,
               "t.yaml:2:17: cache.negative_ttl: expected a duration in 0s..1h such as "
               "\"250ms\", \"10s\" or \"2m\", got \"61m\"");
    expect_err("cache:\n  stale_while_revalidate: 25h\n", -ERANGE,
               "t.yaml:2:27: cache.stale_while_revalidate: expected a duration in 0s..1d such as "
               "\"250ms\", \"10s\" or \"2m\", got \"25h\"");
    expect_err("cache:\n  stale_if_error: 1w\n", -EINVAL,
               "t.yaml:2:19: cache.stale_if_error: expected a duration in 0s..1d such as "
               "\"250ms\", \"10s\" or \"2m\", got \"1w\"");
    expect_err("cache:\n  live_fraction: 9\n", -ERANGE,
               "t.yaml:2:18: cache.live_fraction: expected an integer in 10..100, got \"9\"");
    expect_err("cache:\n  live_fraction: 50%\n", -EINVAL,
               "t.yaml:2:18: cache.live_fraction: expected an integer in 10..100, got \"50%\"");
    expect_err("cache:\n  ttl:\n    segment: 31d\n", -ERANGE,
               "t.yaml:3:14: cache.ttl.segment: expected a duration in 0s..30d such as "
               "\"250ms\", \"10s\" or \"2m\", got \"31d\"");
    expect_err("cache:\n  ttl:\n    master: 1D\n", -EINVAL,
               "t.yaml:3:13: cache.ttl.master: expected a duration in 0s..30d such as "
               "\"250ms\", \"10s\" or \"2m\", got \"1D\"");
    expect_err("cache:\n  ttl: 10s\n", -EINVAL,
               "t.yaml:2:8: cache.ttl: expected a mapping with keys master, media, segment, "
               "other, got a scalar");
    expect_err("cache:\n  prefetch: 33\n", -ERANGE,
               "t.yaml:2:13: cache.prefetch: expected an integer in 0..32, got \"33\"");
    expect_err("cache:\n  zero_copy_min: 1025g\n", -ERANGE,
               "t.yaml:2:18: cache.zero_copy_min: expected a size in 0..1t such as \"512m\" or "
               "\"2g\", got \"1025g\"");
    expect_err("cache:\n  zero_copy_min: 256KiB\n", -EINVAL,
               "t.yaml:2:18: cache.zero_copy_min: expected a size in 0..1t such as \"512m\" or "
               "\"2g\", got \"256KiB\"");
    expect_err("stats:\n  latency: 1\n", -EINVAL,
               "t.yaml:2:12: stats.latency: expected true or false, got \"1\"");
    expect_err("stats: false\n", -EINVAL,
               "t.yaml:1:8: stats: expected a mapping with keys latency, got a scalar");
    expect_err("cache:\n  zero_copy_adapt: 0\n", -EINVAL,
               "t.yaml:2:20: cache.zero_copy_adapt: expected true or false, got \"0\"");

    expect_err("origin:\n  sources: origin\n", -EINVAL,
               "t.yaml:2:12: origin.sources: expected one of root-first, origin-first, got "
               "\"origin\"");
    expect_err("origin:\n  sources: Root-First\n", -EINVAL,
               "t.yaml:2:12: origin.sources: expected one of root-first, origin-first, got "
               "\"Root-First\"");
    expect_err("origin:\n  sources: true\n", -EINVAL,
               "t.yaml:2:12: origin.sources: expected one of root-first, origin-first, got "
               "\"true\"");
    expect_err("origin:\n  connect_timeout: 2m\n", -ERANGE,
               "t.yaml:2:20: origin.connect_timeout: expected a duration in 100ms..1m such as "
               "\"250ms\", \"10s\" or \"2m\", got \"2m\"");
    expect_err("origin:\n  read_timeout: 11m\n", -ERANGE,
               "t.yaml:2:17: origin.read_timeout: expected a duration in 100ms..10m such as "
               "\"250ms\", \"10s\" or \"2m\", got \"11m\"");
    expect_err("origin:\n  total_timeout: 999ms\n", -ERANGE,
               "t.yaml:2:18: origin.total_timeout: expected a duration in 1s..1h such as "
               "\"250ms\", \"10s\" or \"2m\", got \"999ms\"");
    expect_err("origin:\n  retries: 9\n", -ERANGE,
               "t.yaml:2:12: origin.retries: expected an integer in 0..8, got \"9\"");
    expect_err("origin:\n  pool: 1025\n", -ERANGE,
               "t.yaml:2:9: origin.pool: expected an integer in 0..1024, got \"1025\"");
}

int main(void)
{
    test_every_key_generic();
    test_happy_all_keys();
    test_happy_forms();
    test_key_errors();
    test_listen_errors();
    test_happy_new_scalars();
    test_new_key_errors();
    HE_TEST_MAIN_END();
}
