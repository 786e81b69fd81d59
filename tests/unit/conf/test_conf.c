/* The public API of conf/conf.c: defaults, loading a real file, file
 * errors, and the documented conf/hlsedge.yaml agreeing with the built-in
 * defaults field by field. */
#include <arpa/inet.h>
#include <errno.h>
#include <unistd.h>

#include "conf/internal.h"
#include "he_test.h"

static he_conf_t conf, def;
static char err[HE_CONF_ERR_MAX];

/* conf/hlsedge.yaml, found from this file's path so the test runs from any
 * build directory. */
static void doc_path(char *buf, size_t len)
{
    const char *me = __FILE__, *tail = strstr(me, "tests/unit/conf/test_conf.c");
    snprintf(buf, len, "%.*sconf/hlsedge.yaml", tail ? (int)(tail - me) : 0, me);
}

static void test_defaults(void)
{
    const struct sockaddr_in *a;

    he_conf_defaults(&conf);
    HE_CHECK_STR(conf.file, "");
    HE_CHECK_INT(conf.generation, 0);
    HE_CHECK_INT(conf.nlisten, 1);
    HE_CHECK_STR(conf.listen[0].text, "0.0.0.0:8080");
    a = (const struct sockaddr_in *)&conf.listen[0].addr;
    HE_CHECK_INT(a->sin_family, AF_INET);
    HE_CHECK_INT(ntohs(a->sin_port), 8080);
    HE_CHECK_INT(a->sin_addr.s_addr, htonl(INADDR_ANY));
    HE_CHECK_INT(conf.workers, 0);
    HE_CHECK_INT(conf.ncpus, 0);
    HE_CHECK(conf.pin);
    HE_CHECK(conf.numa);
    HE_CHECK_STR(conf.root, "demo/library");
    HE_CHECK_INT(conf.max_connections, 10000);
    HE_CHECK_INT(conf.max_header_bytes, 8192);
    HE_CHECK_INT(conf.max_uri_bytes, 4096);
    HE_CHECK_INT(conf.header_timeout_ms, 10000);
    HE_CHECK_INT(conf.keepalive_timeout_ms, 75000);
    HE_CHECK_INT(conf.send_timeout_ms, 30000);
    HE_CHECK_INT(conf.drain_timeout_ms, 10000);
    HE_CHECK_STR(conf.cors_allow_origin, "*");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_OTHER], "public, max-age=3600");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_M3U8], "public, max-age=1");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_TS], "public, max-age=86400, immutable");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_M4S], "public, max-age=86400, immutable");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_MP4], "public, max-age=86400, immutable");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_AAC], "public, max-age=86400, immutable");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_VTT], "public, max-age=86400");
    HE_CHECK_STR(conf.cache_control[HE_SEG_TYPE_KEY], "private, max-age=300");
    HE_CHECK_INT(conf.log_level, HE_LOG_INFO);
    HE_CHECK_STR(conf.error_log, "");
    HE_CHECK_STR(conf.access_log, "");
    HE_CHECK_INT(conf.access_log_format, HE_ACCESS_LOG_COMBINED);
    HE_CHECK_STR(conf.admin_listen.text, "127.0.0.1:9090");
    HE_CHECK(conf.stats_latency);
    HE_CHECK_INT(conf.fd_cache_entries, 1024);
    HE_CHECK_INT(conf.fd_cache_valid_ms, 5000);
    HE_CHECK_INT(conf.ntls_listen, 0);
    HE_CHECK_INT(conf.tls_listen[0].addrlen, 0);
    HE_CHECK_INT(conf.ntls_certs, 0);
    HE_CHECK_STR(conf.tls_certs[0], "");
    HE_CHECK(conf.tls_ktls);
    HE_CHECK(conf.tls_seal_records);
    HE_CHECK(conf.tls_tickets);
    HE_CHECK_INT(conf.tls_ticket_rotate_ms, 3600000);
    HE_CHECK_INT(conf.tls_session_cache, 20480);
    HE_CHECK_INT(conf.tls_handshake_timeout_ms, 10000);
    HE_CHECK_INT(conf.cache_ram_bytes, 256ull << 20);
    HE_CHECK_INT(conf.cache_ram_object_max, 16ull << 20);
    HE_CHECK_INT(conf.ncache_stores, 0);
    HE_CHECK_STR(conf.cache_stores[0], "");
    HE_CHECK_INT(conf.cache_store_bytes[0], 0);
    HE_CHECK(conf.cache_admission);
    HE_CHECK_INT(conf.cache_negative_ttl_ms, 5000);
    HE_CHECK_INT(conf.cache_stale_while_revalidate_ms, 10000);
    HE_CHECK_INT(conf.cache_stale_if_error_ms, 60000);
    HE_CHECK_INT(conf.cache_live_fraction_pct, 50);
    for (int k = 0; k < HE_SEG_KIND_COUNT; k++)
        HE_CHECK_INT(conf.cache_ttl_ms[k], 0);
    HE_CHECK_INT(conf.ncache_key_params, 0);
    HE_CHECK_INT(conf.prefetch_segments, 2);
    HE_CHECK_INT(conf.cache_zero_copy_min, 256 << 10);
    HE_CHECK(conf.cache_zero_copy_adapt);
    HE_CHECK_INT(conf.norigin_urls, 0);
    HE_CHECK_STR(conf.origin_urls[0], "");
    HE_CHECK(!conf.origin_first);
    HE_CHECK_INT(conf.origin_connect_timeout_ms, 2000);
    HE_CHECK_INT(conf.origin_read_timeout_ms, 10000);
    HE_CHECK_INT(conf.origin_total_timeout_ms, 60000);
    HE_CHECK_INT(conf.origin_retries, 1);
    HE_CHECK_INT(conf.origin_pool, 16);
    HE_CHECK_STR(conf.origin_tls_ca_file, "");
    HE_CHECK_INT(conf.features_disabled, 0);

    /* Defaults are deterministic to the byte and pass the cross-key rules. */
    unsigned char seen[HE__CONF_MAX_KEYS] = {0};
    char why[HE_CONF_ERR_MAX];
    int bad = -1;
    memset(&def, 0xa5, sizeof(def));
    he_conf_defaults(&def);
    HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0);
    HE_CHECK_INT(he__conf_check(&def, seen, &bad, why, sizeof(why)), 0);
}

/* The table itself: sections (which may nest, cache.ttl) precede their
 * keys, names are unique, every key but a section has a default, every row
 * a doc line; list rows name their count and capacity, and an enum stored
 * as a bool has exactly two names. */
static void test_table(void)
{
    HE_CHECK(he__conf_nkeys <= HE__CONF_MAX_KEYS);
    for (size_t i = 0; i < he__conf_nkeys; i++) {
        const he__conf_key_t *k = &he__conf_keys[i];
        const char *dot = strrchr(k->name, '.');
        HE_CHECK(k->type == HE__CONF_SECTION ? k->def == NULL : k->def != NULL);
        HE_CHECK(k->type < HE__CONF_TYPE_COUNT);
        if (k->type == HE__CONF_LISTEN || k->type == HE__CONF_STRS || k->type == HE__CONF_STORES) {
            HE_CHECK(k->nmax > 0 && k->cnt_off != 0 && k->item && k->items);
            HE_CHECK(k->type == HE__CONF_LISTEN || k->size > 1);
        }
        if (k->type == HE__CONF_STORES) HE_CHECK(k->aux_off != 0);
        if (k->type == HE__CONF_FLAGS) {
            size_t n = 0;
            while (k->names[n])
                n++;
            HE_CHECK(n > 0 && n <= 32 && k->size == sizeof(uint32_t) && k->item && k->items);
        }
        if (k->type == HE__CONF_ENUM) {
            size_t n = 0;
            while (k->names[n])
                n++;
            HE_CHECK(k->size == sizeof(unsigned) || (k->size == sizeof(bool) && n == 2));
        }
        if (k->type == HE__CONF_UINT || k->type == HE__CONF_DURATION)
            HE_CHECK(k->min <= k->max && k->max <= UINT_MAX);
        for (size_t j = 0; j < i; j++)
            HE_CHECK(strcmp(k->name, he__conf_keys[j].name) != 0);
        if (dot) {
            int parent = -1;
            for (size_t j = 0; j < i; j++) {
                const he__conf_key_t *p = &he__conf_keys[j];
                if (strlen(p->name) == (size_t)(dot - k->name) &&
                    strncmp(p->name, k->name, (size_t)(dot - k->name)) == 0)
                    parent = (int)j;
            }
            HE_CHECK(parent >= 0 && he__conf_keys[parent].type == HE__CONF_SECTION);
            HE_CHECK(parent >= 0 && he__conf_in_section(i, parent));
        }
        HE_CHECK(k->doc != NULL && k->doc[0] != '\0');
    }
}

/* The documented config file must say exactly what the defaults are. */
static void test_doc_file_is_defaults(void)
{
    char path[4096];
    int rc;

    doc_path(path, sizeof(path));
    rc = he_conf_load(&conf, path, err, sizeof(err));
    if (rc != 0) fprintf(stderr, "%s\n", err);
    HE_CHECK_INT(rc, 0);
    HE_CHECK_STR(conf.file, path);
    memset(conf.file, 0, sizeof(conf.file));
    he_conf_defaults(&def);
    /* Field by field first, so a drift names the field. */
    HE_CHECK(memcmp(conf.listen, def.listen, sizeof(def.listen)) == 0);
    HE_CHECK_INT(conf.nlisten, def.nlisten);
    HE_CHECK_INT(conf.workers, def.workers);
    HE_CHECK_INT(conf.ncpus, def.ncpus);
    HE_CHECK_INT(conf.pin, def.pin);
    HE_CHECK_INT(conf.numa, def.numa);
    HE_CHECK_STR(conf.root, def.root);
    HE_CHECK_INT(conf.max_connections, def.max_connections);
    HE_CHECK_INT(conf.max_header_bytes, def.max_header_bytes);
    HE_CHECK_INT(conf.max_uri_bytes, def.max_uri_bytes);
    HE_CHECK_INT(conf.header_timeout_ms, def.header_timeout_ms);
    HE_CHECK_INT(conf.keepalive_timeout_ms, def.keepalive_timeout_ms);
    HE_CHECK_INT(conf.send_timeout_ms, def.send_timeout_ms);
    HE_CHECK_INT(conf.drain_timeout_ms, def.drain_timeout_ms);
    HE_CHECK_STR(conf.cors_allow_origin, def.cors_allow_origin);
    for (int t = 0; t < HE_SEG_TYPE_COUNT; t++)
        HE_CHECK_STR(conf.cache_control[t], def.cache_control[t]);
    HE_CHECK_INT(conf.log_level, def.log_level);
    HE_CHECK_STR(conf.error_log, def.error_log);
    HE_CHECK_STR(conf.access_log, def.access_log);
    HE_CHECK_INT(conf.access_log_format, def.access_log_format);
    HE_CHECK(memcmp(&conf.admin_listen, &def.admin_listen, sizeof(def.admin_listen)) == 0);
    HE_CHECK_INT(conf.stats_latency, def.stats_latency);
    HE_CHECK_INT(conf.fd_cache_entries, def.fd_cache_entries);
    HE_CHECK_INT(conf.fd_cache_valid_ms, def.fd_cache_valid_ms);
    HE_CHECK(memcmp(conf.tls_listen, def.tls_listen, sizeof(def.tls_listen)) == 0);
    HE_CHECK_INT(conf.ntls_listen, def.ntls_listen);
    HE_CHECK(memcmp(conf.tls_certs, def.tls_certs, sizeof(def.tls_certs)) == 0);
    HE_CHECK_INT(conf.ntls_certs, def.ntls_certs);
    HE_CHECK_INT(conf.tls_ktls, def.tls_ktls);
    HE_CHECK_INT(conf.tls_tickets, def.tls_tickets);
    HE_CHECK_INT(conf.tls_ticket_rotate_ms, def.tls_ticket_rotate_ms);
    HE_CHECK_INT(conf.tls_session_cache, def.tls_session_cache);
    HE_CHECK_INT(conf.tls_handshake_timeout_ms, def.tls_handshake_timeout_ms);
    HE_CHECK_INT(conf.cache_ram_bytes, def.cache_ram_bytes);
    HE_CHECK_INT(conf.cache_ram_object_max, def.cache_ram_object_max);
    HE_CHECK(memcmp(conf.cache_stores, def.cache_stores, sizeof(def.cache_stores)) == 0);
    HE_CHECK(memcmp(conf.cache_store_bytes, def.cache_store_bytes, sizeof(def.cache_store_bytes)) ==
             0);
    HE_CHECK_INT(conf.ncache_stores, def.ncache_stores);
    HE_CHECK_INT(conf.cache_admission, def.cache_admission);
    HE_CHECK(memcmp(conf.origin_urls, def.origin_urls, sizeof(def.origin_urls)) == 0);
    HE_CHECK_INT(conf.norigin_urls, def.norigin_urls);
    HE_CHECK_INT(conf.origin_first, def.origin_first);
    HE_CHECK_INT(conf.origin_connect_timeout_ms, def.origin_connect_timeout_ms);
    HE_CHECK_INT(conf.origin_read_timeout_ms, def.origin_read_timeout_ms);
    HE_CHECK_INT(conf.origin_total_timeout_ms, def.origin_total_timeout_ms);
    HE_CHECK_INT(conf.origin_retries, def.origin_retries);
    HE_CHECK_INT(conf.origin_pool, def.origin_pool);
    HE_CHECK_STR(conf.origin_tls_ca_file, def.origin_tls_ca_file);
    HE_CHECK_INT(conf.cache_negative_ttl_ms, def.cache_negative_ttl_ms);
    HE_CHECK_INT(conf.cache_stale_while_revalidate_ms, def.cache_stale_while_revalidate_ms);
    HE_CHECK_INT(conf.cache_stale_if_error_ms, def.cache_stale_if_error_ms);
    HE_CHECK_INT(conf.cache_live_fraction_pct, def.cache_live_fraction_pct);
    for (int k = 0; k < HE_SEG_KIND_COUNT; k++)
        HE_CHECK_INT(conf.cache_ttl_ms[k], def.cache_ttl_ms[k]);
    HE_CHECK(memcmp(conf.cache_key_params, def.cache_key_params, sizeof(def.cache_key_params)) ==
             0);
    HE_CHECK_INT(conf.ncache_key_params, def.ncache_key_params);
    HE_CHECK_INT(conf.prefetch_segments, def.prefetch_segments);
    HE_CHECK_INT(conf.cache_zero_copy_min, def.cache_zero_copy_min);
    HE_CHECK_INT(conf.cache_zero_copy_adapt, def.cache_zero_copy_adapt);
    HE_CHECK_INT(conf.features_disabled, def.features_disabled);
    /* Then all of it, so a field added to he_conf_t is covered too. */
    HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0);
}

/* Every key of the table appears in the doc file (a default left out of the
 * file would still compare equal). */
static void test_doc_file_lists_every_key(void)
{
    /* path[d] is the key at indentation 2 * d, so nested sections give
     * "cache.ttl.media". */
    char path[4096], line[512], parts[4][64] = {{0}};
    unsigned char found[HE__CONF_MAX_KEYS] = {0};
    FILE *f;

    doc_path(path, sizeof(path));
    f = fopen(path, "r");
    HE_CHECK(f != NULL);
    if (f == NULL) return;
    while (fgets(line, sizeof(line), f)) {
        char name[600] = "", *colon = strchr(line, ':');
        size_t indent = strspn(line, " "), depth = indent / 2;
        if (line[indent] == '#' || line[indent] == '\n' || line[indent] == '-' || colon == NULL)
            continue;
        HE_CHECK(indent % 2 == 0 && depth < 4);
        if (indent % 2 != 0 || depth >= 4) continue;
        *colon = '\0';
        snprintf(parts[depth], sizeof(parts[depth]), "%.63s", line + indent);
        for (size_t d = 0; d <= depth; d++)
            snprintf(name + strlen(name), sizeof(name) - strlen(name), "%s%s", d ? "." : "",
                     parts[d]);
        for (size_t i = 0; i < he__conf_nkeys; i++)
            if (strcmp(he__conf_keys[i].name, name) == 0) found[i] = 1;
    }
    fclose(f);
    for (size_t i = 0; i < he__conf_nkeys; i++) {
        if (!found[i]) fprintf(stderr, "hlsedge.yaml lacks %s\n", he__conf_keys[i].name);
        HE_CHECK(found[i]);
    }
}

/* Warnings the loader reports, as the server's log would get them. */
static char warned[4][HE_CONF_ERR_MAX + 64];
static unsigned nwarned;

static void record_warning(void *arg, const char *msg)
{
    HE_CHECK(arg == &nwarned);
    if (nwarned < 4) snprintf(warned[nwarned], sizeof(warned[0]), "%s", msg);
    nwarned++;
}

/* A file that sets no key loads (it is the defaults) but is most likely
 * not the file that was meant: the loader says so, once, naming it. */
static void test_empty_file_warns(void)
{
    static const char *const empty[] = {"",    "\n\n", "# only comments\n# here\n",   "---\n",
                                        "~\n", "{}\n", "limits:\n  # commented out\n"};
    char path[] = "/tmp/he_conf_test_XXXXXX", want[HE_CONF_ERR_MAX + 64];
    int fd = mkstemp(path);
    FILE *f;

    HE_CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    snprintf(want, sizeof(want), "%s is empty: running on built-in defaults", path);
    he_conf_set_warn(record_warning, &nwarned);
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        f = fopen(path, "w");
        fputs(empty[i], f);
        fclose(f);
        nwarned = 0;
        HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), 0);
        HE_CHECK_STR(err, "");
        HE_CHECK_STR(conf.file, path);
        HE_CHECK_INT(nwarned, 1);
        HE_CHECK_STR(warned[0], want);
    }
    /* A file that sets a key, even to its default, says nothing; nor does
     * one that fails (its error says enough). */
    f = fopen(path, "w");
    fputs("workers: auto\n", f);
    fclose(f);
    nwarned = 0;
    HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), 0);
    HE_CHECK_INT(nwarned, 0);
    f = fopen(path, "w");
    fputs("workers: none\n", f);
    fclose(f);
    HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), -EINVAL);
    HE_CHECK_INT(nwarned, 0);
    /* A string is named as the caller names it. */
    HE_CHECK_INT(he_conf_load_string(&conf, "inline.yaml", "", 0, err, sizeof(err)), 0);
    HE_CHECK_INT(nwarned, 1);
    HE_CHECK_STR(warned[0], "inline.yaml is empty: running on built-in defaults");
    /* Without a handler, warnings are dropped. */
    he_conf_set_warn(NULL, NULL);
    nwarned = 0;
    f = fopen(path, "w");
    fclose(f);
    HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), 0);
    HE_CHECK_INT(nwarned, 0);
    unlink(path);
}

static void test_load_file(void)
{
    char path[] = "/tmp/he_conf_test_XXXXXX";
    static const char yaml[] = "workers: 3\nlimits:\n  uri_bytes: 100\n";
    int fd = mkstemp(path);

    HE_CHECK(fd >= 0);
    if (fd < 0) return;
    HE_CHECK_INT(write(fd, yaml, sizeof(yaml) - 1), (long)(sizeof(yaml) - 1));
    close(fd);

    HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), 0);
    HE_CHECK_STR(err, "");
    HE_CHECK_STR(conf.file, path);
    HE_CHECK_INT(conf.workers, 3);
    HE_CHECK_INT(conf.max_uri_bytes, 100);
    HE_CHECK_INT(conf.max_header_bytes, 8192);

    /* A bad file: the message starts with its path, c goes back to the
     * defaults (file "" included). */
    FILE *f = fopen(path, "w");
    fputs("workers: 3\nnuma: sometimes\n", f);
    fclose(f);
    char want[HE_CONF_ERR_MAX];
    snprintf(want, sizeof(want), "%s:2:7: numa: expected true or false, got \"sometimes\"", path);
    HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), -EINVAL);
    HE_CHECK_STR(err, want);
    he_conf_defaults(&def);
    HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0);

    /* An empty file is the defaults, but remembers its name. */
    f = fopen(path, "w");
    fclose(f);
    HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), 0);
    HE_CHECK_STR(conf.file, path);
    HE_CHECK_INT(he_conf_load(&conf, path, NULL, 0), 0);

    /* Too big to be a config. */
    f = fopen(path, "w");
    for (int i = 0; i < (1 << 20) / 8; i++)
        fputs("#pad...\n", f);
    fputs("\n", f); /* one byte over */
    fclose(f);
    snprintf(want, sizeof(want), "%s: cannot read: larger than 1048576 bytes", path);
    HE_CHECK_INT(he_conf_load(&conf, path, err, sizeof(err)), -EFBIG);
    HE_CHECK_STR(err, want);
    unlink(path);

    /* Missing file, a directory, a path too long. */
    HE_CHECK_INT(he_conf_load(&conf, "/nonexistent/hlsedge.yaml", err, sizeof(err)), -ENOENT);
    HE_CHECK_STR(err, "/nonexistent/hlsedge.yaml: cannot open: No such file or directory");
    HE_CHECK(memcmp(&conf, &def, sizeof(conf)) == 0);
    HE_CHECK_INT(he_conf_load(&conf, "/tmp", err, sizeof(err)), -EISDIR);
    HE_CHECK_STR(err, "/tmp: cannot read: Is a directory");
    char longpath[PATH_MAX + 8];
    memset(longpath, 'x', sizeof(longpath) - 1);
    longpath[sizeof(longpath) - 1] = '\0';
    HE_CHECK_INT(he_conf_load(&conf, longpath, err, sizeof(err)), -ENAMETOOLONG);
    /* Long names are cut from the left so the message keeps its point. */
    HE_CHECK(strncmp(err, "...xxx", 6) == 0);
    HE_CHECK(strstr(err, "xxx: cannot open: File name too long") != NULL);
    HE_CHECK_INT(he_conf_load(&conf, NULL, err, sizeof(err)), -EINVAL);
    HE_CHECK_INT(he_conf_load(&conf, "/nonexistent", NULL, 0), -ENOENT);
}

/* admin.token_file: read with the configuration, trailing newline off;
 * a missing, short or binary one fails the load with the key's name. */
static void test_token_file(void)
{
    char tok[] = "/tmp/he_conf_tok_XXXXXX", yaml[256], want[HE_CONF_ERR_MAX];
    int fd = mkstemp(tok);
    FILE *f;

    HE_CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    f = fopen(tok, "w");
    fputs("s3cr3t-t0ken-0123456789\n", f);
    fclose(f);
    snprintf(yaml, sizeof(yaml), "admin:\n  token_file: %s\n", tok);
    HE_CHECK_INT(he_conf_load_string(&conf, "t.yaml", yaml, strlen(yaml), err, sizeof(err)), 0);
    HE_CHECK_STR(conf.admin_token, "s3cr3t-t0ken-0123456789");
    HE_CHECK_STR(conf.admin_token_file, tok);

    f = fopen(tok, "w");
    fputs("short\n", f);
    fclose(f);
    snprintf(want, sizeof(want),
             "t.yaml: admin.token_file: %s must hold one token of 16 to 255 visible ASCII bytes",
             tok);
    HE_CHECK_INT(he_conf_load_string(&conf, "t.yaml", yaml, strlen(yaml), err, sizeof(err)),
                 -EINVAL);
    HE_CHECK_STR(err, want);
    HE_CHECK_STR(conf.admin_token, ""); /* the defaults */
    unlink(tok);
    snprintf(want, sizeof(want), "t.yaml: admin.token_file: %s: cannot open: No such file or directory",
             tok);
    HE_CHECK_INT(he_conf_load_string(&conf, "t.yaml", yaml, strlen(yaml), err, sizeof(err)),
                 -ENOENT);
    HE_CHECK_STR(err, want);
}

int main(void)
{
    test_token_file();
    test_defaults();
    test_table();
    test_doc_file_is_defaults();
    test_doc_file_lists_every_key();
    test_load_file();
    test_empty_file_warns();
    HE_TEST_MAIN_END();
}
