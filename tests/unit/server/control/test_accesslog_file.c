/* server/accesslog_file.c: the access log file. After every batch the
 * file must hold exactly the lines written so far, whole: batches of one
 * line or of many; a file that already holds lines; a file truncated under
 * the writer (logrotate's copytruncate: no hole, no NULs), another
 * appender, a reopen after a rename, close; a device; a full disk, whose
 * failed writes are counted and lose only their batch. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "he_test.h"
#include "server/control/accesslog.h"

/* What the file should hold. */
static char *he_t_want;
static size_t he_t_wlen, he_t_wcap;

static void he_t_expect(const char *p, size_t n)
{
    if (he_t_wlen + n > he_t_wcap) {
        he_t_wcap = (he_t_wlen + n) * 2;
        he_t_want = realloc(he_t_want, he_t_wcap);
    }
    memcpy(he_t_want + he_t_wlen, p, n);
    he_t_wlen += n;
}

/* Whether the file at path holds exactly what is expected. */
static int he_t_same(const char *path)
{
    struct stat st;
    char *got;
    int fd = open(path, O_RDONLY), same;
    ssize_t n;

    if (fd < 0 || fstat(fd, &st) < 0) return 0;
    got = malloc((size_t)st.st_size + 1);
    n = read(fd, got, (size_t)st.st_size + 1);
    close(fd);
    same = n == (ssize_t)he_t_wlen && memcmp(got, he_t_want, he_t_wlen) == 0;
    if (!same) {
        size_t at = 0;
        while (at < he_t_wlen && (ssize_t)at < n && got[at] == he_t_want[at])
            at++;
        fprintf(stderr, "%s: %zd bytes, expected %zu (first difference at %zu)\n", path, n,
                he_t_wlen, at);
    }
    free(got);
    return same;
}

/* Formats `lines` log-like lines of varying length into the batch, as a
 * drain does, and flushes. */
static unsigned he_t_seq;
static void he_t_batch(he_alog_t *a, unsigned lines)
{
    for (unsigned i = 0; i < lines; i++) {
        char line[400];
        unsigned pad = (he_t_seq * 7919u) % 300;
        int n =
            snprintf(line, sizeof(line), "127.0.0.1 - - \"GET /seg_%06u.ts HTTP/1.1\" 200 %*s\n",
                     he_t_seq++, (int)pad, "x");
        if (a->cap - a->len < (size_t)n) he_alog_flush(a);
        memcpy(a->buf + a->len, line, (size_t)n);
        a->len += (size_t)n;
        he_t_expect(line, (size_t)n);
    }
    he_alog_flush(a);
}

static void test_file(const char *dir)
{
    char path[256], moved[300];
    he_alog_t a;
    int fd;
    static const unsigned sizes[] = {1, 3, 17, 40, 1, 200, 2, 1500, 5, 9, 64};

    snprintf(path, sizeof(path), "%s/he-alog-file-%d.log", dir, (int)getpid());
    snprintf(moved, sizeof(moved), "%s.1", path);
    unlink(path);
    he_t_wlen = 0;

    /* a file that already holds lines: they stay, ours follow */
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    HE_CHECK(fd >= 0);
    for (int i = 0; i < 120; i++) {
        char line[64];
        int n = snprintf(line, sizeof(line), "an earlier line %d\n", i);
        HE_CHECK_INT(write(fd, line, (size_t)n), n);
        he_t_expect(line, (size_t)n);
    }
    close(fd);

    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, path, HE_ACCESS_LOG_COMBINED), 0);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        he_t_batch(&a, sizes[i]);
        HE_CHECK(he_t_same(path));
    }
    HE_CHECK_INT(a.write_errors, 0);

    /* copytruncate: the next lines start the file again, no hole */
    HE_CHECK_INT(truncate(path, 0), 0);
    he_t_wlen = 0;
    he_t_batch(&a, 33);
    HE_CHECK(he_t_same(path));
    he_t_batch(&a, 2);
    HE_CHECK(he_t_same(path));

    /* another appender: our lines go after its */
    fd = open(path, O_WRONLY | O_APPEND);
    HE_CHECK_INT(write(fd, "someone else\n", 13), 13);
    he_t_expect("someone else\n", 13);
    close(fd);
    he_t_batch(&a, 50);
    HE_CHECK(he_t_same(path));

    /* logrotate: rename, reopen; the old file keeps what it had */
    HE_CHECK_INT(rename(path, moved), 0);
    he_t_batch(&a, 3); /* before the reopen: still the old file */
    HE_CHECK(he_t_same(moved));
    HE_CHECK_INT(he_alog_reopen(&a), 0);
    he_t_wlen = 0;
    he_t_batch(&a, 700);
    HE_CHECK(he_t_same(path));
    /* close writes what is left */
    memcpy(a.buf + a.len, "last\n", 5);
    a.len += 5;
    he_t_expect("last\n", 5);
    he_alog_close(&a);
    HE_CHECK(he_t_same(path));
    HE_CHECK_INT(a.fd, -1);
    unlink(path);
    unlink(moved);
}

/* A device: written like a file. A full disk: each failed batch is
 * counted and dropped, the writer goes on. */
static void test_devices(void)
{
    he_alog_t a;

    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, "/dev/null", HE_ACCESS_LOG_JSON), 0);
    he_t_batch(&a, 10);
    HE_CHECK_INT(a.write_errors, 0);
    HE_CHECK_INT(a.len, 0);
    if (access("/dev/full", W_OK) == 0) {
        HE_CHECK_INT(he_alog_open(&a, "/dev/full", HE_ACCESS_LOG_JSON), 0);
        he_t_batch(&a, 10);
        HE_CHECK_INT(a.write_errors, 1);
        he_t_batch(&a, 3);
        HE_CHECK_INT(a.write_errors, 2);
        HE_CHECK_INT(a.len, 0);
        HE_CHECK_INT(a.written, 0); /* the drain counts records, not this test */
    }
    /* a path that cannot be opened keeps the open log */
    HE_CHECK_INT(he_alog_open(&a, "/nonexistent/dir/access.log", HE_ACCESS_LOG_JSON), -ENOENT);
    HE_CHECK(a.fd >= 0);
    he_alog_close(&a);
    HE_CHECK_INT(a.fd, -1);
}

int main(void)
{
    test_file("/tmp");
    if (access("/dev/shm", W_OK) == 0) test_file("/dev/shm"); /* tmpfs */
    test_devices();
    free(he_t_want);
    HE_TEST_MAIN_END();
}
