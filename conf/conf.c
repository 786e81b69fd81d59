/* conf/conf.c: the public API. Defaults are the table's default strings
 * run through the same setters as a file's values, so a default can never
 * be something a file could not say. Loads go into a scratch copy so that a
 * bad file leaves the caller with clean defaults, never half a config. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/internal.h"

/* A config is a few kilobytes; anything this big is the wrong file. */
#define HE_CONF_MAX_FILE (1u << 20)

static he_conf_warn_fn he_conf_warn_handler;
static void *he_conf_warn_arg;

void he_conf_set_warn(he_conf_warn_fn fn, void *arg)
{
    he_conf_warn_handler = fn;
    he_conf_warn_arg = arg;
}

void he__conf_warn(const char *fmt, ...)
{
    char msg[HE_CONF_ERR_MAX];
    va_list ap;

    if (he_conf_warn_handler == NULL) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    he_conf_warn_handler(he_conf_warn_arg, msg);
}

const char *he__conf_msg_name(const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);

    if (n <= HE__CONF_NAME_MAX) return name;
    snprintf(buf, len, "...%s", name + n - HE__CONF_NAME_MAX);
    return buf;
}

void he_conf_defaults(he_conf_t *c)
{
    char why[HE_CONF_ERR_MAX];

    /* Zero padding too: tests compare configs with memcmp. */
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < he__conf_nkeys; i++) {
        const he__conf_key_t *k = &he__conf_keys[i];
        if (k->def == NULL) continue;
        if (he__conf_set(c, k, k->def, strlen(k->def), -1, why, sizeof(why)) < 0) {
            /* A bad row in keys.c: fail loudly, every test would. */
            fprintf(stderr, "conf: bad built-in default for %s: %s\n", k->name, why);
            abort();
        }
    }
}

static int he_conf_read_file(const char *path, char **out, size_t *outlen, char *err, size_t errlen);

/* admin.token_file: the token is read with the configuration, so that
 * hlsedge -t checks it and a reload takes a new one. One line of visible
 * ASCII (RFC 6750 b64token and a few more), at least 16 bytes: a short
 * token is guessed. */
static int he_conf_read_token(he_conf_t *c, const char *name, char *err, size_t errlen)
{
    char *buf = NULL, ferr[HE_CONF_ERR_MAX];
    size_t len = 0;
    int rc;

    c->admin_token[0] = 0;
    if (!c->admin_token_file[0]) return 0;
    rc = he_conf_read_file(c->admin_token_file, &buf, &len, ferr, sizeof(ferr));
    if (rc < 0) {
        snprintf(err, errlen, "%s: admin.token_file: %s", name, ferr);
        return rc;
    }
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        len--;
    rc = len < 16 || len > HE_CONF_TOKEN_MAX ? -EINVAL : 0;
    for (size_t i = 0; rc == 0 && i < len; i++)
        if (buf[i] < 0x21 || buf[i] > 0x7e) rc = -EINVAL;
    if (rc < 0)
        snprintf(err, errlen,
                 "%s: admin.token_file: %s must hold one token of 16 to %d visible ASCII bytes",
                 name, c->admin_token_file, HE_CONF_TOKEN_MAX);
    else
        memcpy(c->admin_token, buf, len), c->admin_token[len] = 0;
    free(buf);
    return rc;
}

int he_conf_load_string(he_conf_t *c, const char *name, const char *yaml, size_t len, char *err,
                        size_t errlen)
{
    he_conf_t *tmp = malloc(sizeof(*tmp));
    int rc;

    if (err && errlen) err[0] = '\0';
    if (tmp == NULL) {
        he_conf_defaults(c);
        if (err && errlen) snprintf(err, errlen, "(string): out of memory");
        return -ENOMEM;
    }
    he_conf_defaults(tmp);
    rc = he__conf_yaml_load(tmp, name, yaml ? yaml : "", yaml ? len : 0, err, errlen);
    if (rc == 0) {
        char scratch[HE_CONF_ERR_MAX];
        rc = he_conf_read_token(tmp, name, err && errlen ? err : scratch,
                                err && errlen ? errlen : sizeof(scratch));
    }
    if (rc == 0)
        memcpy(c, tmp, sizeof(*c));
    else
        he_conf_defaults(c);
    free(tmp);
    return rc;
}

/* Reads all of path into a malloc'd buffer. */
static int he_conf_read_file(const char *path, char **out, size_t *outlen, char *err, size_t errlen)
{
    char namebuf[HE__CONF_NAME_MAX + 4];
    const char *name = he__conf_msg_name(path, namebuf, sizeof(namebuf));
    struct stat st;
    size_t cap = 4096, len = 0;
    char *buf = NULL;
    int fd, rc = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot open: %s", name, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        if ((unsigned long long)st.st_size > HE_CONF_MAX_FILE) goto too_big;
        cap = (size_t)st.st_size + 1;
    }
    for (;;) {
        ssize_t n;
        if (len == cap || buf == NULL) {
            char *nb;
            if (buf != NULL) {
                if (cap >= HE_CONF_MAX_FILE + 1) goto too_big;
                cap = cap * 2 > HE_CONF_MAX_FILE + 1 ? HE_CONF_MAX_FILE + 1 : cap * 2;
            }
            nb = realloc(buf, cap);
            if (nb == NULL) {
                rc = -ENOMEM;
                snprintf(err, errlen, "%s: out of memory", name);
                goto out;
            }
            buf = nb;
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: cannot read: %s", name, strerror(-rc));
            goto out;
        }
        if (n == 0) break;
        len += (size_t)n;
    }
    *out = buf;
    *outlen = len;
    buf = NULL;
    goto out;

too_big:
    rc = -EFBIG;
    snprintf(err, errlen, "%s: cannot read: larger than %u bytes", name, HE_CONF_MAX_FILE);
out:
    free(buf);
    close(fd);
    return rc;
}

int he_conf_load(he_conf_t *c, const char *path, char *err, size_t errlen)
{
    char scratch[HE_CONF_ERR_MAX];
    char *buf = NULL;
    size_t len = 0;
    int rc;

    /* Messages always need a buffer internally; the caller's is optional. */
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    err[0] = '\0';
    if (path == NULL || strlen(path) >= sizeof(c->file)) {
        char namebuf[HE__CONF_NAME_MAX + 4];
        he_conf_defaults(c);
        snprintf(err, errlen, "%s: cannot open: %s",
                 path ? he__conf_msg_name(path, namebuf, sizeof(namebuf)) : "(null)",
                 strerror(path ? ENAMETOOLONG : EINVAL));
        return path ? -ENAMETOOLONG : -EINVAL;
    }
    rc = he_conf_read_file(path, &buf, &len, err, errlen);
    if (rc < 0) {
        he_conf_defaults(c);
        return rc;
    }
    rc = he_conf_load_string(c, path, buf, len, err, errlen);
    free(buf);
    if (rc == 0) snprintf(c->file, sizeof(c->file), "%s", path);
    return rc;
}

bool he_conf_feature_disabled(const he_conf_t *c, const char *name)
{
    for (unsigned i = 0; i < HE_CONF_FEATURE_COUNT; i++)
        if (strcmp(he_conf_feature_names[i], name) == 0)
            return (c->features_disabled & HE_CONF_FEATURE_BIT(i)) != 0;
    return false;
}

const char *he_conf_log_level_name(he_log_level_t l)
{
    if ((unsigned)l > HE_LOG_DEBUG) return "unknown";
    return he__conf_log_level_names[l];
}
