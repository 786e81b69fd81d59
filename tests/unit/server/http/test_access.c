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
#include "server/http/http.h"

#define HE_T_MONO_NS 1000000000ll

/* Takes the ring's records as the control thread would (a size-0 skip
 * marker ends the ring), checking each is the request pushed; how many. */
static unsigned he_t_take(he_alog_ring_t *ring, const char *url)
{
    unsigned tail = atomic_load(&ring->tail), head = atomic_load(&ring->head), n = 0;
    while (tail != head) {
        const he_alog_rec_t *rec = (const he_alog_rec_t *)(ring->data + (tail & ring->mask));
        struct in_addr a;
        if (rec->size == 0) {
            tail += ring->size - (tail & ring->mask);
            continue;
        }
        memcpy(&a, rec->addr, 4);
        HE_CHECK_INT(rec->status, 200);
        HE_CHECK_INT(rec->method, 1);
        HE_CHECK(rec->http_major == 1 && rec->http_minor == 1);
        HE_CHECK_INT(rec->bytes_sent, 700);
        HE_CHECK_INT(rec->head_len, 200); /* the access log's body bytes: 500 */
        HE_CHECK_INT(rec->ttfb_us, 10);
        HE_CHECK_INT(rec->duration_us, 20);
        HE_CHECK_INT(rec->family, AF_INET);
        HE_CHECK(a.s_addr == inet_addr("192.0.2.7"));
        HE_CHECK_INT(rec->tls, HE_ALOG_TLS_NONE);
        HE_CHECK(rec->target_len == strlen(url) && memcmp(rec->target, url, rec->target_len) == 0);
        tail += rec->size;
        n++;
    }
    atomic_store(&ring->tail, tail);
    return n;
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
    unsigned kept, pushes = 200;

    HE_CHECK(w && c);
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
    HE_CHECK_INT(he_t_take(w->alog, url), kept);
    /* room again: the next record is kept, the count stays */
    he__http_alog_push(w, c, &r, HE_T_MONO_NS + pushes * 1000, 10, 20);
    HE_CHECK_INT(w->stats.log_dropped, pushes - kept);
    HE_CHECK_INT(he_t_take(w->alog, url), 1);
    he_alog_ring_free(w->alog);
    free(c);
    free(w);
}

int main(void)
{
    test_push_drops_when_full();
    HE_TEST_MAIN_END();
}
