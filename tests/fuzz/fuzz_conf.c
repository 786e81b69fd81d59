/* Fuzz target for conf/: any bytes through he_conf_load_string. A load must
 * return 0 or a negative errno with a message that starts with the name, and
 * must leave a config that is either the file's or exactly the defaults. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static he_conf_t c, def;
    char err[HE_CONF_ERR_MAX];
    int rc;

    rc = he_conf_load_string(&c, "fuzz.yaml", (const char *)d, n, err, sizeof(err));
    if (rc > 0 || rc < -4095) abort();
    if (rc < 0) {
        if (strncmp(err, "fuzz.yaml", 9) != 0 || memchr(err, '\0', sizeof(err)) == NULL) abort();
        he_conf_defaults(&def);
        if (memcmp(&c, &def, sizeof(c)) != 0) abort();
    } else {
        /* Whatever loaded obeys the invariants the server relies on. */
        if (c.nlisten < 1 || c.nlisten > HE_CONF_MAX_LISTEN) abort();
        if (c.ncpus > HE_CONF_MAX_CPUS || c.workers > 1024) abort();
        if (c.max_uri_bytes > c.max_header_bytes) abort();
        if (c.root[0] == '\0') abort();
        for (int t = 0; t < HE_SEG_TYPE_COUNT; t++)
            for (const char *p = c.cache_control[t]; *p; p++)
                if (*p == '\r' || *p == '\n') abort();
        /* HTTPS: a certificate for any address, none shared with HTTP. */
        if (c.ntls_listen > HE_CONF_MAX_LISTEN || c.ntls_certs > HE_CONF_MAX_CERTS) abort();
        if (c.ntls_listen > 0 && c.ntls_certs == 0) abort();
        for (unsigned i = 0; i < c.ntls_listen; i++)
            for (unsigned j = 0; j < c.nlisten; j++)
                if (strcmp(c.tls_listen[i].text, c.listen[j].text) == 0) abort();
        for (unsigned i = 0; i < c.ntls_certs; i++)
            if (c.tls_certs[i][0] == '\0') abort();
        /* Cache tiers and lists: every entry non-empty and terminated. */
        if (c.cache_ram_bytes != 0 && c.cache_ram_object_max > c.cache_ram_bytes) abort();
        if (c.ncache_stores > HE_CONF_MAX_STORES) abort();
        for (unsigned i = 0; i < c.ncache_stores; i++)
            if (c.cache_stores[i][0] == '\0' || c.cache_store_bytes[i] < (1u << 20) ||
                memchr(c.cache_stores[i], '\0', sizeof(c.cache_stores[i])) == NULL)
                abort();
        if (c.ncache_key_params > HE_CONF_MAX_KEY_PARAMS) abort();
        for (unsigned i = 0; i < c.ncache_key_params; i++)
            if (c.cache_key_params[i][0] == '\0' ||
                strpbrk(c.cache_key_params[i], " =&?/\"") != NULL)
                abort();
        if (c.cache_live_fraction_pct < 10 || c.cache_live_fraction_pct > 100) abort();
        if (c.prefetch_segments > 32) abort();
        /* Origins: http(s) URLs without a query, and one for origin-first. */
        if (c.norigin_urls > HE_CONF_MAX_ORIGINS || (c.origin_first && c.norigin_urls == 0))
            abort();
        for (unsigned i = 0; i < c.norigin_urls; i++)
            if ((strncmp(c.origin_urls[i], "http://", 7) != 0 &&
                 strncmp(c.origin_urls[i], "https://", 8) != 0) ||
                strpbrk(c.origin_urls[i], "?# ") != NULL)
                abort();
        if (c.origin_retries > 8 || c.origin_pool > 1024) abort();
        /* Only features the table names. */
        if (c.features_disabled & ~HE_CONF_FEATURES_ALL) abort();
    }
    return 0;
}
