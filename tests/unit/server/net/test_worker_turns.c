/* server/net/worker_turns.c: when a body's POLLOUT completion waits for a
 * later turn, in what order the waiting ones run, how much a spent slice
 * still runs, and that a connection closed while its turn waits is freed
 * only when that turn has gone (it is counted in flight until then).
 *
 * The completions are made here rather than by the kernel: a POLLOUT on a
 * socket with room is what each stands for. */
#include "he_test.h"
#include "ring_fixture.h"
#include "server/net/conn.c"
#include "server/net/worker_turns.c"

static size_t idle_conn_size(const he_conf_t *conf)
{
    (void)conf;
    return 16;
}
static void idle_open(he_worker_t *w, he_conn_t *c)
{
    (void)w;
    (void)c;
}
static size_t idle_data(he_worker_t *w, he_conn_t *c, const char *p, size_t n, bool *ready)
{
    (void)w;
    (void)c;
    (void)p;
    *ready = false;
    return n;
}
static void idle_close(he_worker_t *w, he_conn_t *c)
{
    he__conn_close_if_done(w, c);
}
static void idle_timeout(he_worker_t *w, he_conn_t *c, bool hard)
{
    if (hard) he__conn_close(w, c);
}
/* connections that never ask for anything: the turns are the test's */
static const he_proto_t idle_proto = {
    .name = "idle",
    .conn_size = idle_conn_size,
    .open = idle_open,
    .data = idle_data,
    .eof = idle_close,
    .idle = idle_timeout,
};

static he_conn_t *conns[4];
static int peers[4];

static void setup(unsigned slice_us)
{
    fx_ring_entries = 0;
    fx_setup(&idle_proto, 4);
    fx_conf.ring_slice_us = slice_us;
    HE_CHECK_INT(he__turns_init(&fx_w), 0);
    for (int i = 0; i < 4; i++)
        conns[i] = fx_conn(&peers[i]);
    fx_reap(0); /* their recvs are in flight */
}

static void teardown(void)
{
    he__turns_free(&fx_w);
    fx_teardown();
    for (int i = 0; i < 4; i++)
        close(peers[i]);
}

/* A POLLOUT completion for c, counted in flight as a real one would be. */
static struct io_uring_cqe pollout(he_conn_t *c)
{
    struct io_uring_cqe cqe = {.user_data = he__ud(HE_OP_POLLOUT, c->slot, c->gen), .res = POLLOUT};
    c->inflight++;
    return cqe;
}

static void test_in_order_until_spent(void)
{
    uint64_t now;
    struct io_uring_cqe a, b, recv;

    setup(4000);
    now = he__now_ns();
    HE_CHECK(he__turns_until(&fx_w, now) == now + 4000000);
    a = pollout(conns[0]);
    b = pollout(conns[1]);
    /* the slice still running: dispatched in place */
    HE_CHECK(!he__turns_defer(&fx_w, &a, now + 1000000000));
    /* spent: it waits, and so does the next, even in a fresh slice */
    HE_CHECK(he__turns_defer(&fx_w, &a, now));
    HE_CHECK(he__turns_defer(&fx_w, &b, he__now_ns() + 1000000000));
    HE_CHECK_INT(fx_w.turns_len, 2);
    HE_CHECK_INT(fx_w.stats.turns_deferred, 2);
    /* only bodies' turns wait: new input is dispatched */
    recv = (struct io_uring_cqe){.user_data = he__ud(HE_OP_RECV, conns[2]->slot, conns[2]->gen)};
    HE_CHECK(!he__turns_defer(&fx_w, &recv, now));
    /* a spent slice runs one, the first */
    HE_CHECK_INT(conns[0]->inflight, 2);
    he__turns_run(&fx_w, now);
    HE_CHECK_INT(fx_w.turns_len, 1);
    HE_CHECK_INT(conns[0]->inflight, 1);
    HE_CHECK_INT(conns[1]->inflight, 2);
    HE_CHECK_INT(fx_w.stats.slices_spent, 1);
    /* a long one runs the rest, and nothing is left to count */
    he__turns_run(&fx_w, he__now_ns() + 1000000000);
    HE_CHECK_INT(fx_w.turns_len, 0);
    HE_CHECK_INT(conns[1]->inflight, 1);
    HE_CHECK_INT(fx_w.stats.slices_spent, 1);
    teardown();
}

/* ring.slice_us: 0 (or a reload to it): nothing waits, and what waited
 * goes in one run. */
static void test_off(void)
{
    struct io_uring_cqe a, b;
    setup(4000);
    a = pollout(conns[0]);
    HE_CHECK(he__turns_defer(&fx_w, &a, 1));
    fx_conf.ring_slice_us = 0;
    HE_CHECK(he__turns_until(&fx_w, he__now_ns()) == UINT64_MAX);
    b = pollout(conns[1]);
    /* behind the one that waits, to keep the order */
    HE_CHECK(he__turns_defer(&fx_w, &b, he__turns_until(&fx_w, he__now_ns())));
    he__turns_run(&fx_w, he__turns_until(&fx_w, he__now_ns()));
    HE_CHECK_INT(fx_w.turns_len, 0);
    b = pollout(conns[1]);
    HE_CHECK(!he__turns_defer(&fx_w, &b, he__turns_until(&fx_w, he__now_ns())));
    conns[1]->inflight--; /* not dispatched here */
    teardown();
}

/* Round after round, the queue wraps and keeps its order. */
static void test_wraps(void)
{
    setup(4000);
    for (int round = 0; round < 5; round++) {
        struct io_uring_cqe cqe[4];
        for (int i = 0; i < 4; i++) {
            cqe[i] = pollout(conns[(i + round) % 4]);
            HE_CHECK(he__turns_defer(&fx_w, &cqe[i], 1));
        }
        HE_CHECK_INT(fx_w.turns_len, 4);
        for (int i = 0; i < 4; i++) {
            he_conn_t *next = conns[(i + round) % 4];
            HE_CHECK_INT(next->inflight, 2);
            he__turns_run(&fx_w, 1); /* one each */
            HE_CHECK_INT(next->inflight, 1);
        }
        HE_CHECK_INT(fx_w.turns_len, 0);
    }
    teardown();
}

/* A connection closed while its turn waits: its recv is cancelled, but
 * the slot stays taken until the turn has run, then it is freed. */
static void test_closed_while_waiting(void)
{
    struct io_uring_cqe a;
    he_conn_t *c;
    setup(4000);
    c = conns[3];
    a = pollout(c);
    HE_CHECK(he__turns_defer(&fx_w, &a, 1));
    he__conn_close(&fx_w, c);
    fx_settle(20); /* the cancel and the recv's end */
    HE_CHECK(c->in_use);
    HE_CHECK_INT(c->inflight, 1);
    he__turns_run(&fx_w, 1);
    HE_CHECK(!c->in_use);
    HE_CHECK_INT(fx_w.nconns, 3);
    teardown();
}

int main(void)
{
    test_in_order_until_spent();
    test_off();
    test_wraps();
    test_closed_while_waiting();
    HE_TEST_MAIN_END();
}
