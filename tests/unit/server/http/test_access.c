/* server/http/access.c: the access log record of a finished response,
 * pushed on the worker's side of a ring. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "he_test.h"
#include "server/base/alog_ring.h"
#include "server/control/accesslog.h"
#include "server/http/http.h"

#define HE_T_MONO_NS 1000000000ll

static unsigned he_t_lines(const char *path, const char *needle)
{
    static char buf[1 << 20];
    unsigned lines = 0;
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) close(fd);
    buf[n > 0 ? n : 0] = 0;
    for (char *p = buf; (p = strchr(p, '\n')); p++)
        lines++;
    if (needle) HE_CHECK(strstr(buf, needle) != NULL);
    return lines;
}

/* The worker's side of a full ring: he__http_alog_push returns at once, the
 * record is dropped and counted in the worker's stats (what
 * hlsedge_access_log_dropped_total shows), and once the control thread
 * has drained the ring records go in again. */
static void test_push_drops_when_full(void)
{
    he_worker_t *w = calloc(1, sizeof(*w));
    he_conn_t *c = calloc(1, sizeof(*c));
    struct sockaddr_in *sa = (struct sockaddr_in *)&c->peer;
    char url[] = "/360p/index.m3u8";
    char path[] = "/tmp/he-alog-drop-XXXXXX";
    int fd = mkstemp(path);
    unsigned kept, pushes = 200;
    he_alog_t a;

    HE_CHECK(w && c && fd >= 0);
    close(fd);
    w->alog = he_alog_ring_new(4096);
    atomic_store(&w->alog->enabled, 1);
    he_req_t r = {.conn = c, .url = url, .url_len = (uint32_t)strlen(url), .method = 1 /* GET */,
                  .http_major = 1, .http_minor = 1, .status = 200, .head_len = 200};
    c->bytes_sent = 700;
    sa->sin_family = AF_INET;
    inet_pton(AF_INET, "192.0.2.7", &sa->sin_addr);

    for (unsigned i = 0; i < pushes; i++)
        he__http_alog_push(w, c, &r, HE_T_MONO_NS + i * 1000, 10, 20);
    kept = pushes - (unsigned)w->stats.log_dropped;
    HE_CHECK(w->stats.log_dropped > 0);
    HE_CHECK(kept > 10); /* 4 KiB holds dozens */
    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, path, HE_ACCESS_LOG_COMBINED), 0);
    HE_CHECK_INT(he_alog_drain(&a, w->alog), kept);
    /* room again: the next record is kept, the count stays */
    he__http_alog_push(w, c, &r, HE_T_MONO_NS + pushes * 1000, 10, 20);
    HE_CHECK_INT(w->stats.log_dropped, pushes - kept);
    HE_CHECK_INT(he_alog_drain(&a, w->alog), 1);
    he_alog_close(&a);
    HE_CHECK_INT(he_t_lines(path, "\"GET /360p/index.m3u8 HTTP/1.1\" 200 500 "), kept + 1);
    unlink(path);
    he_alog_ring_free(w->alog);
    free(c);
    free(w);
}

int main(void)
{
    test_push_drops_when_full();
    HE_TEST_MAIN_END();
}
