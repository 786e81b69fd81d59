/* server/net/worker.c (and conn.c, tls_conn.c, send.c through it): what
 * every caller of he__worker_sqe does when it returns NULL, which it does
 * when the submission queue is full and io_uring_submit fails. Each case
 * jams a tiny ring (ring_fixture.h fx_sq_jam), makes the call, unjams it,
 * and checks that nothing was lost for good: the tick, the wake read and
 * accepts are armed again after the next batch, a connection that could
 * not be cancelled is shut down and freed, a new connection that could not
 * arm its recv is gone without a timer left behind.
 *
 * A fake protocol answers each line with "R:<line>\n" (as test_conn.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>

#include "he_test.h"
#include "ring_fixture.h"
#include "server/net/conn.c"

typedef struct fake_conn {
    char line[64];
    unsigned line_len;
} fake_conn_t;

static unsigned fk_requests, fk_sent;

static size_t fake_conn_size(const he_conf_t *conf)
{
    (void)conf;
    return sizeof(fake_conn_t);
}
static void fake_open(he_worker_t *w, he_conn_t *c)
{
    memset(c->proto, 0, sizeof(fake_conn_t));
}
static size_t fake_data(he_worker_t *w, he_conn_t *c, const char *p, size_t n, bool *ready)
{
    fake_conn_t *fc = c->proto;
    const char *nl = memchr(p, '\n', n);
    *ready = false;
    if (!nl) return 0;
    fc->line_len =
        (unsigned)(nl - p) < sizeof(fc->line) ? (unsigned)(nl - p) : sizeof(fc->line) - 1;
    memcpy(fc->line, p, fc->line_len);
    *ready = true;
    return (size_t)(nl - p) + 1;
}
static void fake_request(he_worker_t *w, he_conn_t *c)
{
    fake_conn_t *fc = c->proto;
    fk_requests++;
    memset(&c->body, 0, sizeof(c->body));
    c->hdr_len =
        (uint32_t)snprintf(c->hdr, HE_CONN_HDR_CAP, "R:%.*s\n", (int)fc->line_len, fc->line);
    c->hdr_sent = 0;
    he__send_start(w, c);
}
static void fake_eof(he_worker_t *w, he_conn_t *c)
{
    he__conn_close_if_done(w, c);
}
static void fake_idle(he_worker_t *w, he_conn_t *c, bool hard)
{
    if (hard) he__conn_close(w, c);
}
static void fake_sent(he_worker_t *w, he_conn_t *c)
{
    fk_sent++;
    he__conn_request_done(w, c);
}
static const he_proto_t fake_proto = {
    .name = "fake",
    .conn_size = fake_conn_size,
    .open = fake_open,
    .data = fake_data,
    .request = fake_request,
    .eof = fake_eof,
    .idle = fake_idle,
    .sent = fake_sent,
};

static void setup(void)
{
    fk_requests = fk_sent = 0;
    fx_ring_entries = 4;
    fx_setup(&fake_proto, 4);
}

/* The jam itself: he__worker_sqe has nothing to give. */
static void test_sqe_null_when_jammed(void)
{
    setup();
    fx_sq_jam();
    HE_CHECK(he__worker_sqe(&fx_w) == NULL);
    fx_sq_unjam();
    fx_settle(20); /* the NOPs complete */
    {
        struct io_uring_sqe *sqe = he__worker_sqe(&fx_w);
        HE_CHECK(sqe != NULL);
        if (sqe) io_uring_prep_nop(sqe);
    }
    fx_settle(20);
    fx_teardown();
}

/* A close while a recv is in flight needs a cancel: without one, the
 * multishot recv would wait for a client that may never send again, and
 * the slot would never be freed. The socket is shut down instead. */
static void test_close_without_cancel(void)
{
    int peer;
    he_conn_t *c;
    char b[16];

    setup();
    c = fx_conn(&peer);
    fx_reap(0); /* the recv is in flight */
    HE_CHECK(c->recv_armed);
    HE_CHECK_INT(c->inflight, 1);
    fx_sq_jam();
    he__conn_close(&fx_w, c);
    fx_sq_unjam();
    HE_CHECK(FX_UNTIL(!c->in_use));
    HE_CHECK_INT(fx_w.nconns, 0);
    HE_CHECK_INT(fx_w.nfree, 4);
    /* the client sees the end */
    HE_CHECK_INT(read(peer, b, sizeof(b)), 0);
    close(peer);
    fx_teardown();
}

/* A connection whose first recv finds no SQE is closed at once, and
 * he__conn_new says so: no header timer is left on a freed slot. */
static void test_new_conn_without_recv(void)
{
    int fds[2];
    he_conn_t *c;
    char b[16];

    setup();
    fx_pair(fds);
    fx_sq_jam();
    c = he__conn_new(&fx_w, fds[0], NULL, false);
    fx_sq_unjam();
    HE_CHECK(c == NULL);
    HE_CHECK_INT(fx_w.nconns, 0);
    HE_CHECK(fx_w.timers[HE_TIMER_HEADER][0] == NULL);
    HE_CHECK(fx_w.timers[HE_TIMER_HEADER][1] == NULL);
    fx_settle(20);
    HE_CHECK_INT(read(fds[1], b, sizeof(b)), 0); /* closed */
    close(fds[1]);
    fx_teardown();
}

/* A response whose send finds no SQE closes the connection, and the close
 * (no SQE for its cancel either) still ends it. */
static void test_send_without_sqe(void)
{
    int peer;
    he_conn_t *c;
    char b[64];
    size_t len = 0;

    setup();
    c = fx_conn(&peer);
    fx_reap(0);
    HE_CHECK_INT(write(peer, "a\n", 2), 2);
    HE_CHECK(FX_UNTIL(fk_sent == 1)); /* a normal answer first */
    HE_CHECK(FX_UNTIL(fx_read(peer, b, sizeof(b), &len) == 0 && len == 4));
    HE_CHECK(memcmp(b, "R:a\n", 4) == 0);
    /* the next request is answered while the queue is jammed */
    fx_sq_jam();
    he_conn_parse(&fx_w, c, "b\n", 2, false);
    fx_sq_unjam();
    HE_CHECK_INT(fk_requests, 2);
    HE_CHECK(FX_UNTIL(!c->in_use));
    HE_CHECK_INT(fx_w.nconns, 0);
    len = 0;
    HE_CHECK_INT(fx_read(peer, b, sizeof(b), &len), 1); /* EOF, nothing half-sent */
    HE_CHECK_INT(len, 0);
    close(peer);
    fx_teardown();
}

/* The tick and the wake read: without them the worker would never run its
 * timers or hear the control thread again. Lost, they are armed after the
 * next batch (he_worker_rearm_lost, called by the loop). */
static void test_tick_and_wake_rearmed(void)
{
    uint64_t one = 1;

    setup();
    fx_w.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    HE_CHECK(fx_w.wake_fd >= 0);
    fx_sq_jam();
    he_worker_arm_tick(&fx_w);
    he_worker_arm_wake(&fx_w);
    HE_CHECK(fx_w.tick_lost);
    HE_CHECK(fx_w.wake_lost);
    fx_sq_unjam();
    fx_settle(20); /* the batch ... */
    he_worker_rearm_lost(&fx_w); /* ... and what the loop does after it */
    HE_CHECK(!fx_w.tick_lost);
    HE_CHECK(!fx_w.wake_lost);
    HE_CHECK(FX_UNTIL(fx_ops[HE_OP_TICK] >= 1)); /* the tick fires and re-arms itself */
    HE_CHECK_INT(write(fx_w.wake_fd, &one, sizeof(one)), 8);
    HE_CHECK(FX_UNTIL(fx_ops[HE_OP_WAKE] >= 1));
    fx_teardown();
    close(fx_w.wake_fd);
}

static int listen_loopback(struct sockaddr_in *sa)
{
    socklen_t len = sizeof(*sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(fd, 8) < 0 ||
        getsockname(fd, (struct sockaddr *)sa, &len) < 0) {
        perror("listen");
        exit(1);
    }
    return fd;
}

/* An accept that finds no SQE waits paused, like one out of descriptors,
 * and the tick arms it; a drain's cancel that finds none is sent after the
 * next batch. */
static void test_accept_rearmed_and_cancelled(void)
{
    struct sockaddr_in sa;
    int lfd, cfd;

    setup();
    lfd = listen_loopback(&sa);
    fx_w.listeners[0].fd = lfd;
    fx_w.nlisteners = 1;
    fx_sq_jam();
    he_worker_arm_accept(&fx_w, 0);
    fx_sq_unjam();
    HE_CHECK(!fx_w.listeners[0].armed);
    HE_CHECK(fx_w.listeners[0].paused);
    fx_settle(20);
    he__worker_accept_resume(&fx_w); /* what the tick does */
    HE_CHECK(fx_w.listeners[0].armed);
    cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    HE_CHECK_INT(connect(cfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    HE_CHECK(FX_UNTIL(fx_w.nconns == 1)); /* accepted and served */
    HE_CHECK_INT(write(cfd, "x\n", 2), 2);
    HE_CHECK(FX_UNTIL(fk_sent == 1));

    /* accepts are re-armed one-shot; a drain must cancel the armed one */
    HE_CHECK(fx_w.listeners[0].armed);
    fx_sq_jam();
    he_worker_start_drain(&fx_w, true);
    fx_sq_unjam();
    HE_CHECK(fx_w.drain_cancel_lost);
    fx_settle(20);
    he_worker_rearm_lost(&fx_w);
    HE_CHECK(!fx_w.drain_cancel_lost);
    HE_CHECK(FX_UNTIL(!fx_w.listeners[0].armed)); /* the accept ended, cancelled */
    close(cfd);
    HE_CHECK(FX_UNTIL(fx_w.nconns == 0));
    fx_teardown();
    close(lfd);
}

int main(void)
{
    test_sqe_null_when_jammed();
    test_close_without_cancel();
    test_new_conn_without_recv();
    test_send_without_sqe();
    test_tick_and_wake_rearmed();
    test_accept_rearmed_and_cancelled();
    HE_TEST_MAIN_END();
}
