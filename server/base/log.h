/* Logging: one write(2) per line so lines from workers never interleave.
 * The level is read without a lock; it changes only on reload. */
#ifndef HE_LOG_H
#define HE_LOG_H

#include "conf/conf.h"

extern volatile int he_log_level;

void he_log_set_fd(int fd);
int he_log_get_fd(void);
/* Points the error log at path ("" = the original stderr). After the first
 * call the log's descriptor number never changes: a new file is dup2()ed
 * onto it, so a thread writing at that moment writes to the old file or to
 * the new one, never to a number reused for a socket. 0 or -errno (the log
 * is unchanged then). Control thread only. */
int he_log_open(const char *path);
/* Opens the same file again, for logrotate (SIGUSR1). */
int he_log_reopen(void);
void he_log_write(he_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define he_log(level, ...)                                                                         \
    do {                                                                                           \
        if ((int)(level) <= he_log_level) he_log_write(level, __VA_ARGS__);                        \
    } while (0)
#define he_log_error(...) he_log(HE_LOG_ERROR, __VA_ARGS__)
#define he_log_warn(...) he_log(HE_LOG_WARN, __VA_ARGS__)
#define he_log_info(...) he_log(HE_LOG_INFO, __VA_ARGS__)
#define he_log_debug(...) he_log(HE_LOG_DEBUG, __VA_ARGS__)

#endif
