/* Helpers shared by the conf unit tests: load a YAML string into a static
 * config, expect an exact error, and write a dotted key as nested YAML. */
#ifndef HE_CONF_TEST_H
#define HE_CONF_TEST_H

#include <errno.h>

#include "conf/internal.h"
#include "he_test.h"

static he_conf_t conf;
static char err[HE_CONF_ERR_MAX];

static inline int load(const char *yaml)
{
    return he_conf_load_string(&conf, "t.yaml", yaml, strlen(yaml), err, sizeof(err));
}

/* Loads yaml, expects rc and exactly msg. */
static inline void expect_err(const char *yaml, int rc, const char *msg)
{
    int got = load(yaml);
    if (got != rc || strcmp(err, msg) != 0)
        fprintf(stderr, "yaml:\n%s\n-> rc %d, err: %s\n", yaml, got, err);
    HE_CHECK_INT(got, rc);
    HE_CHECK_STR(err, msg);
}

/* Writes "key: value" for a dotted key as nested YAML, two spaces a level:
 * "cache.ttl.media" -> "cache:\n  ttl:\n    media: value\n". */
static inline void key_yaml(const char *name, const char *value, char *buf, size_t len)
{
    const char *p = name, *dot;
    size_t o = 0;
    int depth = 0;

    buf[0] = '\0';
    while ((dot = strchr(p, '.')) != NULL && o < len) {
        o += (size_t)snprintf(buf + o, len - o, "%*s%.*s:\n", 2 * depth, "", (int)(dot - p), p);
        depth++;
        p = dot + 1;
    }
    if (o < len) snprintf(buf + o, len - o, "%*s%s: %s\n", 2 * depth, "", p, value);
}

/* Line and column (1-based) of the value key_yaml writes. */
static inline void key_yaml_pos(const char *name, unsigned *line, unsigned *col)
{
    const char *leaf = strrchr(name, '.');
    unsigned depth = 0;

    for (const char *p = name; *p; p++)
        depth += *p == '.';
    *line = depth + 1;
    *col = 2 * depth + (unsigned)strlen(leaf ? leaf + 1 : name) + 3;
}

#endif
