/* A worker for unit tests of the data path: a real io_uring (so conn.c and
 * send.c make their real ring calls), connection slots as he_worker_setup
 * lays them out, no listeners, no buffer ring, no fixed files, and
 * socketpair()s for connections. Completions are reaped here and handed to
 * worker.c's own dispatch (the file is included for it), so what runs is
 * what the worker loop runs.
 *
 * Exits 77 (skip) when the kernel has no io_uring for us. */
#ifndef HE_TEST_RING_FIXTURE_H
#define HE_TEST_RING_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf/conf.h"
#include "server/net/worker.c"

static he_server_t fx_server;
static he_conf_t fx_conf;
static he_worker_t fx_w;
/* completions dispatched, by enum he_op */
static unsigned fx_ops[16];
/* called on the defaults before the slots are sized (NULL: defaults) */
static void (*fx_conf_init)(he_conf_t *conf);
/* submission queue size (0: 256); a tiny one is easy to fill */
static unsigned fx_ring_entries;

static void fx_setup(const he_proto_t *proto, uint32_t cap)
{
    he_worker_t *w = &fx_w;
    he_server_t *s = &fx_server;
    int rc;

    memset(w, 0, sizeof(*w));
    memset(s, 0, sizeof(*s));
    memset(fx_ops, 0, sizeof(fx_ops));
    he_conf_defaults(&fx_conf);
    if (fx_conf_init) fx_conf_init(&fx_conf);
    rc = io_uring_queue_init(fx_ring_entries ? fx_ring_entries : 256, &w->ring, 0);
    if (rc < 0) {
        fprintf(stderr, "io_uring_queue_init: %s: skipped\n", strerror(-rc));
        exit(77);
    }
    w->ring_ok = true;
    s->conf = &fx_conf;
    s->proto = proto;
    s->nworkers = 1;
    s->root_fd = -1;
    w->server = s;
    w->conf = &fx_conf;
    w->proto = proto;
    w->cpu = w->node = -1;
    w->wake_fd = -1;
    w->stats_off = true;
    w->now_ms = 1000000;
    memcpy(w->date, "Thu, 01 Jan 2026 00:00:00 GMT", 30);
    w->date_sec = 1767225600;

    w->conn_cap = cap;
    w->proto_size = (proto->conn_size(&fx_conf) + 15) & ~(size_t)15;
    w->conns = calloc(cap, sizeof(he_conn_t));
    w->free_slots = calloc(cap, sizeof(uint32_t));
    w->hdr_slab = calloc(cap, HE_CONN_HDR_CAP);
    w->proto_slab = aligned_alloc(16, w->proto_size * cap);
    if (!w->conns || !w->free_slots || !w->hdr_slab || !w->proto_slab) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memset(w->proto_slab, 0, w->proto_size * cap);
    for (uint32_t i = 0; i < cap; i++) {
        w->conns[i].slot = i;
        w->conns[i].hdr = w->hdr_slab + (size_t)i * HE_CONN_HDR_CAP;
        w->conns[i].proto = w->proto_slab + (size_t)i * w->proto_size;
        w->free_slots[i] = cap - 1 - i;
    }
    w->nfree = cap;
}

/* Submits what is queued, waits up to wait_ms for a completion (0: none),
 * and dispatches every completion there is as the worker loop does.
 * Returns how many it dispatched. */
static unsigned fx_reap(unsigned wait_ms)
{
    he_worker_t *w = &fx_w;
    struct io_uring_cqe *cqe;
    unsigned head, count = 0;

    io_uring_submit(&w->ring);
    if (wait_ms) {
        struct __kernel_timespec ts = {.tv_sec = wait_ms / 1000,
                                       .tv_nsec = (long long)(wait_ms % 1000) * 1000000};
        if (io_uring_wait_cqe_timeout(&w->ring, &cqe, &ts) < 0) return 0;
    }
    he__batch_ns = he__now_ns();
    io_uring_for_each_cqe(&w->ring, head, cqe)
    {
        fx_ops[he__ud_op(cqe->user_data) & 15]++;
        he_worker_dispatch(w, cqe);
        count++;
    }
    io_uring_cq_advance(&w->ring, count);
    return count;
}

/* Submission queue entries queued and not yet submitted, and the newest. */
static inline unsigned fx_queued(void)
{
    return fx_w.ring.sq.sqe_tail - fx_w.ring.sq.sqe_head;
}
static inline const struct io_uring_sqe *fx_last_sqe(void)
{
    const struct io_uring_sq *sq = &fx_w.ring.sq;
    return &sq->sqes[(sq->sqe_tail - 1) & sq->ring_mask];
}

/* The state he__worker_sqe fails in: the submission queue full of NOPs
 * and io_uring_submit failing (as it does with -EBUSY when completions
 * back up, here -EBADF: the enter descriptor is hidden). fx_sq_unjam
 * undoes it; the NOPs then complete as HE_OP_NONE. */
static int fx_saved_enter_fd = -1;
static inline void fx_sq_jam(void)
{
    struct io_uring_sqe *sqe;
    while ((sqe = io_uring_get_sqe(&fx_w.ring)) != NULL) {
        io_uring_prep_nop(sqe);
        sqe->user_data = 0; /* HE_OP_NONE */
    }
    fx_saved_enter_fd = fx_w.ring.enter_ring_fd;
    fx_w.ring.enter_ring_fd = -1;
}
static inline void fx_sq_unjam(void)
{
    fx_w.ring.enter_ring_fd = fx_saved_enter_fd;
}

/* Dispatches completions until nothing more arrives within wait_ms. */
static inline void fx_settle(unsigned wait_ms)
{
    for (int i = 0; i < 10000 && fx_reap(wait_ms); i++)
        ;
}

/* Reaps until cond holds, for at most about 5 s; the value of cond. */
#define FX_UNTIL(cond)                                                                             \
    ({                                                                                             \
        for (int fx__i = 0; fx__i < 200 && !(cond); fx__i++)                                       \
            fx_reap(25);                                                                           \
        (cond);                                                                                    \
    })

/* A connected pair, both ends non-blocking as accepted sockets are; fds[0]
 * goes to the server, fds[1] is the client. */
static void fx_pair(int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0) {
        perror("socketpair");
        exit(1);
    }
}

/* A connection on a new pair; *peer is the client end. */
static inline he_conn_t *fx_conn(int *peer)
{
    int fds[2];
    he_conn_t *c;
    fx_pair(fds);
    c = he__conn_new(&fx_w, fds[0], NULL, false);
    if (!c) {
        fprintf(stderr, "no connection slot\n");
        exit(1);
    }
    *peer = fds[1];
    return c;
}

/* Everything the client end can read now (non-blocking), appended to
 * buf[*len, cap); returns 1 when the server end is closed (EOF), else 0. */
static inline int fx_read(int fd, char *buf, size_t cap, size_t *len)
{
    for (;;) {
        ssize_t n;
        if (*len == cap) return 0; /* full: the caller's to look at */
        n = read(fd, buf + *len, cap - *len);
        if (n > 0) {
            *len += (size_t)n;
            continue;
        }
        if (n == 0) return 1;
        return 0; /* EAGAIN */
    }
}

/* Closes what is still open and the ring. */
static void fx_teardown(void)
{
    he_worker_t *w = &fx_w;
    for (uint32_t i = 0; i < w->conn_cap; i++)
        if (w->conns[i].in_use) he__conn_close(w, &w->conns[i]);
    fx_settle(50);
    io_uring_queue_exit(&w->ring);
    free(w->conns);
    free(w->free_slots);
    free(w->hdr_slab);
    free(w->proto_slab);
    w->conns = NULL;
}

#endif
