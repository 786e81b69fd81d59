/* server/base/alog_ring.c with its consumer, server/control/accesslog.c:
 * the SPSC byte ring (variable-length records,
 * the skip at the ring's end, full, wrap-around), drained by the control
 * thread's consumer (server/control/accesslog.c). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "he_test.h"
#include "server/base/alog_ring.h"
#include "server/control/accesslog.h"
#include "alog_test.h"



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

static void test_ring(void)
{
    he_alog_ring_t *r = he_alog_ring_new(4096);
    he_alog_t a;
    char path[] = "/tmp/he-alog-XXXXXX";
    int fd = mkstemp(path);
    unsigned total = 0;

    HE_CHECK(r != NULL);
    HE_CHECK(he_alog_ring_new(6000) == NULL); /* not a power of two */
    HE_CHECK(he_alog_ring_new(1024) == NULL); /* too small */
    HE_CHECK(fd >= 0);
    close(fd);
    he_alog_init(&a);
    HE_CHECK_INT(he_alog_open(&a, path, HE_ACCESS_LOG_COMBINED), 0);

    /* Rounds of: fill until full, drain. Targets of varying length make
     * records of varying size, so the rounds end at different offsets and
     * cross the ring's end with a skip. */
    for (int round = 0; round < 6; round++) {
        unsigned n = 0;
        char target[300];
        for (;;) {
            size_t len = 1 + (size_t)((n * 37 + (unsigned)round * 11) % 250);
            he_alog_rec_t *rec;
            memset(target, 'a' + round, len);
            target[0] = '/';
            target[len] = 0;
            rec = he_alog_reserve(r, len);
            if (!rec) break; /* full: the caller drops and counts */
            HE_CHECK((((uintptr_t)rec) & 7) == 0);
            HE_CHECK((char *)rec + rec->size <= r->data + r->size); /* never wraps */
            he_t_fill(rec, target);
            rec->size = (uint32_t)((sizeof(*rec) + len + 7) & ~(size_t)7);
            rec->status = (uint16_t)(200 + n % 100);
            he_alog_commit(r, rec);
            n++;
        }
        HE_CHECK(n > 5);
        HE_CHECK_INT(he_alog_drain(&a, r), n);
        HE_CHECK_INT(he_alog_drain(&a, r), 0);
        HE_CHECK(he_alog_reserve(r, 10) != NULL);
        total += n;
    }
    HE_CHECK_INT(a.written, total);
    he_alog_close(&a);
    HE_CHECK_INT(he_t_lines(path, "\" 204 "), total);

    /* a log turned off discards what the ring holds */
    he_alog_init(&a);
    he_alog_commit(r, he_alog_reserve(r, 4));
    HE_CHECK_INT(he_alog_drain(&a, r), 0);
    HE_CHECK_INT(atomic_load(&r->head), atomic_load(&r->tail));
    HE_CHECK_INT(a.written, 0);
    unlink(path);
    he_alog_ring_free(r);
}

int main(void)
{
    test_ring();
    HE_TEST_MAIN_END();
}
