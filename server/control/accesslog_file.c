/* server/accesslog_file.c: the access log file, written by the control
 * thread in batches (he_alog_flush after each drain): one write(2) per
 * batch to an O_APPEND file, so another appender or logrotate's
 * copytruncate keeps working.
 *
 * Tried and left out: O_DIRECT writes of whole blocks (the partial last
 * block buffered, so readers see whole lines). On this machine they cost
 * the control thread more than the page cache does (164-295 ns per
 * request against 135-195, same process, toggled by reload), and as they
 * wait for the device, a slow write let the workers' rings fill and drop
 * records. See docs/performance.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/control/accesslog.h"
#include "server/base/log.h"

/* The batch: what one drain of HE_ALOG_NOTIFY_BYTES of records makes
 * (about 440 KiB combined, 760 KiB JSON), so that it is one write(2). */
#ifndef HE_ALOG_BUF
#define HE_ALOG_BUF (1024 * 1024)
#endif

void he_alog_init(he_alog_t *a)
{
    memset(a, 0, sizeof(*a));
    a->fd = -1;
}

int he_alog_open(he_alog_t *a, const char *path, he_access_log_format_t format)
{
    int fd;

    if (!path[0]) {
        he_alog_close(a);
        return 0;
    }
    if (!a->buf) {
        a->buf = malloc(HE_ALOG_BUF);
        if (!a->buf) return -ENOMEM;
        a->cap = HE_ALOG_BUF;
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    he_alog_flush(a); /* what was formatted for the old file goes there */
    if (a->fd >= 0) close(a->fd);
    a->fd = fd;
    a->format = format;
    snprintf(a->path, sizeof(a->path), "%s", path);
    return 0;
}

int he_alog_reopen(he_alog_t *a)
{
    char path[PATH_MAX];
    if (a->fd < 0) return 0;
    snprintf(path, sizeof(path), "%s", a->path);
    return he_alog_open(a, path, a->format);
}

void he_alog_close(he_alog_t *a)
{
    he_alog_flush(a);
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    a->path[0] = 0;
    free(a->buf);
    a->buf = NULL;
    a->cap = a->len = 0;
}

void he_alog_flush(he_alog_t *a)
{
    size_t off = 0;
    while (a->fd >= 0 && off < a->len) {
        ssize_t n = write(a->fd, a->buf + off, a->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* A full disk loses log lines, never requests. */
            static uint64_t last_warn;
            if (a->write_errors++ == last_warn) {
                he_log_warn("access log %s: write: %s", a->path,
                            n < 0 ? strerror(errno) : "wrote nothing");
                last_warn = a->write_errors * 2; /* warn at 1, 2, 4, 8 ... errors */
            }
            break;
        }
        off += (size_t)n;
    }
    a->len = 0;
}
