/* server/accesslog_file.c: the access log file, written by the control
 * thread in batches (he_alog_flush after each drain).
 *
 * Buffered (the default): one write(2) per batch to an O_APPEND file, so
 * another appender or logrotate's copytruncate keeps working.
 *
 * Direct (log.access_direct): whole blocks with O_DIRECT, so the log's
 * bytes skip the page cache, the kernel's copy and the page allocator
 * (and leave the page cache to the video files sendfile serves). A batch
 * rarely ends on a block boundary: its last partial block also goes out
 * buffered, so readers always see whole lines, and stays at the start of
 * the buffer (the carry) to be written again as part of the next whole
 * block; the kernel writes back and drops that one cached page first.
 * The file's size is checked before each batch: if it is not where the
 * last batch left it (copytruncate, another writer), the writer takes the
 * file's end as it is and goes on from there. A file system without
 * O_DIRECT (tmpfs, some FUSE), a pipe or a device is written buffered. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/accesslog.h"
#include "server/log.h"

/* The batch: what one drain of HE_ALOG_NOTIFY_BYTES of records makes
 * (about 220 KiB combined, 380 KiB JSON), so that it is one write(2). */
#define HE_ALOG_BUF (512 * 1024)
/* Memory alignment of the batch and the least block of direct writes. */
#define HE_ALOG_ALIGN 4096u

void he_alog_init(he_alog_t *a)
{
    memset(a, 0, sizeof(*a));
    a->fd = -1;
}

/* Lines lost to a failed write are counted; the warning backs off. */
static void he_alog_write_failed(he_alog_t *a, int err)
{
    static uint64_t last_warn;
    if (a->write_errors++ == last_warn) {
        he_log_warn("access log %s: write: %s", a->path, strerror(err));
        last_warn = a->write_errors * 2; /* warn at 1, 2, 4, 8 ... errors */
    }
}

static int he_alog_set_direct(he_alog_t *a, bool on)
{
    int fl = fcntl(a->fd, F_GETFL);
    if (fl < 0) return -errno;
    if (!!(fl & O_DIRECT) == on) return 0;
    return fcntl(a->fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT) < 0 ? -errno : 0;
}

static int he_alog_pwrite_all(int fd, const char *p, size_t n, off_t off)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -errno;
        if (w == 0) return -EIO;
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

/* Direct mode: makes the file's current end the place to go on from.
 * buf[keep..len) are lines not in the file yet; they end up after the
 * file's last partial block, which is read into buf as the carry. */
static int he_alog_adopt_end(he_alog_t *a, size_t keep)
{
    struct stat st;
    off_t base;
    size_t part, fresh = a->len - keep;
    ssize_t n;
    int rc;

    if (fstat(a->fd, &st) < 0) return -errno;
    base = st.st_size & ~(off_t)(a->align - 1);
    part = (size_t)(st.st_size - base);
    memmove(a->buf + part, a->buf + keep, fresh);
    if (part) {
        if ((rc = he_alog_set_direct(a, false)) < 0) return rc;
        n = pread(a->fd, a->buf, part, base);
        if (n != (ssize_t)part) return n < 0 ? -errno : -EIO;
    }
    a->off = base;
    a->carry = part;
    a->len = part + fresh;
    return 0;
}

/* Direct mode is off for this file from now on: writes go on appending. */
static void he_alog_direct_off(he_alog_t *a, int why)
{
    int fl = fcntl(a->fd, F_GETFL);
    if (fl >= 0) fcntl(a->fd, F_SETFL, (fl & ~O_DIRECT) | O_APPEND);
    a->direct = false;
    he_log_warn("access log %s: direct writes failed (%s): writing through the page cache", a->path,
                strerror(-why));
}

static void he_alog_flush_direct(he_alog_t *a)
{
    struct stat st;
    size_t whole, from;
    int rc;

    if (a->len == a->carry) return;
    if (fstat(a->fd, &st) == 0 && st.st_size != a->off + (off_t)a->carry &&
        (rc = he_alog_adopt_end(a, a->carry)) < 0) {
        he_alog_write_failed(a, -rc);
        a->len = a->carry = 0;
        return;
    }
    whole = a->len & ~(size_t)(a->align - 1);
    if (whole) {
        rc = he_alog_set_direct(a, true);
        if (rc == 0) rc = he_alog_pwrite_all(a->fd, a->buf, whole, a->off);
        if (rc == -EINVAL) { /* the file system took the flag but not the I/O */
            he_alog_direct_off(a, rc);
            if ((rc = he_alog_pwrite_all(a->fd, a->buf + a->carry, a->len - a->carry,
                                         a->off + (off_t)a->carry)) < 0)
                he_alog_write_failed(a, -rc);
            a->len = a->carry = 0;
            return;
        }
        if (rc < 0) { /* the next batch starts from the file's end, wherever it is */
            he_alog_write_failed(a, -rc);
            a->len = a->carry;
            return;
        }
    }
    /* the partial block, buffered: readers see every line now */
    from = whole ? whole : a->carry;
    if (a->len > from) {
        rc = he_alog_set_direct(a, false);
        if (rc == 0)
            rc = he_alog_pwrite_all(a->fd, a->buf + from, a->len - from, a->off + (off_t)from);
        if (rc < 0) he_alog_write_failed(a, -rc);
    }
    memmove(a->buf, a->buf + whole, a->len - whole);
    a->off += (off_t)whole;
    a->len -= whole;
    a->carry = a->len;
}

void he_alog_flush(he_alog_t *a)
{
    size_t off = 0;

    if (a->fd >= 0 && a->direct) {
        he_alog_flush_direct(a);
        return;
    }
    while (a->fd >= 0 && off < a->len) {
        ssize_t n = write(a->fd, a->buf + off, a->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* A full disk loses log lines, never requests. */
            he_alog_write_failed(a, n < 0 ? errno : EIO);
            break;
        }
        off += (size_t)n;
    }
    a->len = 0;
}

/* Direct writes for the file now open, if it and its file system take
 * them; 0, or why not (-errno). */
static int he_alog_try_direct(he_alog_t *a)
{
    struct stat st;
    int rc;

    if (fstat(a->fd, &st) < 0) return -errno;
    if (!S_ISREG(st.st_mode)) return -ENOTSUP;
    if ((rc = he_alog_set_direct(a, true)) < 0) return rc;
    a->align = HE_ALOG_ALIGN;
    /* a block size above a page (rare) is the least a direct write may be */
    if (st.st_blksize > (blksize_t)a->align && st.st_blksize <= 65536 &&
        (st.st_blksize & (st.st_blksize - 1)) == 0)
        a->align = (unsigned)st.st_blksize;
    a->direct = true;
    a->len = a->carry = 0;
    if ((rc = he_alog_adopt_end(a, 0)) < 0) a->direct = false;
    return rc;
}

int he_alog_open(he_alog_t *a, const char *path, he_access_log_format_t format, bool direct)
{
    int fd, old, rc;

    if (!path[0]) {
        he_alog_close(a);
        return 0;
    }
    if (!a->buf) {
        if (posix_memalign((void **)&a->buf, HE_ALOG_ALIGN, HE_ALOG_BUF) != 0) return -ENOMEM;
        /* a block's room to spare: he_alog_adopt_end may put up to a
         * block of the file's end before a full batch */
        a->cap = HE_ALOG_BUF - HE_ALOG_ALIGN;
    }
    /* direct: read too, for the file's last partial block (he_alog_adopt_end) */
    fd = open(path, O_CREAT | O_CLOEXEC | (direct ? O_RDWR : O_WRONLY | O_APPEND), 0644);
    if (fd < 0) return -errno;
    he_alog_flush(a); /* what was formatted for the old file goes there */
    old = a->fd;
    a->fd = fd;
    a->len = a->carry = 0;
    a->direct = false;
    if (old >= 0) close(old);
    a->format = format;
    a->want_direct = direct;
    snprintf(a->path, sizeof(a->path), "%s", path);
    if (direct && (rc = he_alog_try_direct(a)) < 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, (fl & ~O_DIRECT) | O_APPEND);
        a->len = a->carry = 0;
        he_log_warn("access log %s: no direct writes here (%s): writing through the page cache",
                    path, strerror(-rc));
    }
    return 0;
}

int he_alog_reopen(he_alog_t *a)
{
    char path[PATH_MAX];
    if (a->fd < 0) return 0;
    snprintf(path, sizeof(path), "%s", a->path);
    return he_alog_open(a, path, a->format, a->want_direct);
}

void he_alog_close(he_alog_t *a)
{
    he_alog_flush(a);
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    a->direct = false;
    a->path[0] = 0;
    free(a->buf);
    a->buf = NULL;
    a->cap = a->len = a->carry = 0;
}
