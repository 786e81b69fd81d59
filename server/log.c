#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

volatile int he_log_level = HE_LOG_INFO;
static volatile int he_log_fd = 2;

static const char *const he_log_names[] = {"error", "warn", "info", "debug"};

void he_log_set_fd(int fd)
{
    he_log_fd = fd;
}

int he_log_get_fd(void)
{
    return he_log_fd;
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
