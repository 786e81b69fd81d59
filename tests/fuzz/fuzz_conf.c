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
    }
    return 0;
}
