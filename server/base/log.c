#include "server/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

volatile int he_log_level = HE_LOG_INFO;
static volatile int he_log_fd = 2;
static int he_log_stderr = -1; /* a copy of the original stderr */
static char he_log_path[PATH_MAX];

static const char *const he_log_names[] = {"error", "warn", "info", "debug"};

void he_log_set_fd(int fd)
{
    he_log_fd = fd;
}

int he_log_get_fd(void)
{
    return he_log_fd;
}

int he_log_open(const char *path)
{
    int src;

    if (he_log_stderr < 0) {
        int mine;
        he_log_stderr = fcntl(2, F_DUPFD_CLOEXEC, 3);
        mine = fcntl(2, F_DUPFD_CLOEXEC, 3);
        if (he_log_stderr < 0 || mine < 0) {
            int e = -errno;
            if (he_log_stderr >= 0) close(he_log_stderr);
            if (mine >= 0) close(mine);
            he_log_stderr = -1;
            return e;
        }
        he_log_fd = mine;
    }
    if (path[0]) {
        src = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (src < 0) return -errno;
    } else {
        src = he_log_stderr;
    }
    if (dup3(src, he_log_fd, O_CLOEXEC) < 0) {
        int e = -errno;
        if (src != he_log_stderr) close(src);
        return e;
    }
    if (src != he_log_stderr) close(src);
    snprintf(he_log_path, sizeof(he_log_path), "%s", path);
    return 0;
}

int he_log_reopen(void)
{
    char path[PATH_MAX];
    if (!he_log_path[0]) return 0; /* stderr: nothing to reopen */
    snprintf(path, sizeof(path), "%s", he_log_path);
    return he_log_open(path);
}

void he_log_write(he_log_level_t level, const char *fmt, ...)
{
    char line[2048];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    int n;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ [%s] ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (int)(tv.tv_usec / 1000), he_log_names[level]);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* A log line is best-effort: a full disk must not stop serving. */
    if (write(he_log_fd, line, (size_t)n) < 0) {
    }
}
