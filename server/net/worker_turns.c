/* Bodies' turns and new input (ring.slice_us).
 *
 * A body under way sends a chunk and asks for POLLOUT, which completes at
 * once on a socket with room: with many bodies under way a batch is one
 * chunk of each, and a request that arrives meanwhile is seen only when
 * the loop next enters the kernel (DEFER_TASKRUN posts completions there).
 * At a thousand viewers' start that batch is every body's 1 MiB turn, and
 * the viewers' p99 time to first byte was 3.5x nginx's
 * (docs/performance.md, "Turns in slices").
 *
 * So a batch runs in the order the kernel posted it until its slice is
 * spent; the POLLOUT completions left then wait in a queue, first in
 * first out, still counted in flight (the connection is not freed under
 * them), and the loop enters the kernel without waiting, takes the new
 * input first, then the queue for another slice. A POLLOUT that comes
 * while the queue holds any goes behind them, so every body keeps its
 * place in the round. Plain TCP and kTLS only: userspace TLS bodies run
 * in the batch as before. */
#include <errno.h>
#include <stdlib.h>

#include "server/net/net.h"
#include "server/net/tls.h"

struct he_worker_turn {
    uint64_t user_data;
    int32_t res;
};

int he__turns_init(he_worker_t *w)
{
    /* one POLLOUT in flight per connection at most (send.c) */
    w->turns = calloc(w->conn_cap, sizeof(*w->turns));
    w->turns_head = w->turns_len = 0;
    return w->turns ? 0 : -ENOMEM;
}

void he__turns_free(he_worker_t *w)
{
    free(w->turns);
    w->turns = NULL;
    w->turns_len = 0;
}

uint64_t he__turns_until(const he_worker_t *w, uint64_t start_ns)
{
    unsigned us = w->conf->ring_slice_us;
    return us ? start_ns + (uint64_t)us * 1000 : UINT64_MAX;
}

bool he__turns_defer(he_worker_t *w, const struct io_uring_cqe *cqe, uint64_t until)
{
    struct he_worker_turn *t;
    he_conn_t *c;
    if (he__ud_op(cqe->user_data) != HE_OP_POLLOUT || !w->turns) return false;
    if (!w->turns_len && (until == UINT64_MAX || he__now_ns() < until)) return false;
    /* A userspace TLS body keeps its place in the batch: its turns cost
     * 3-6 % of bytes per CPU-second in slices, and its viewers' first
     * byte beat the peers' without them (docs/performance.md) */
    if ((c = he__worker_conn(w, cqe->user_data)) && he__tls_userspace(c)) return false;
    t = &w->turns[(w->turns_head + w->turns_len++) % w->conn_cap];
    t->user_data = cqe->user_data;
    t->res = cqe->res;
    w->stats.turns_deferred++;
    return true;
}

void he__turns_run(he_worker_t *w, uint64_t until)
{
    bool first = true; /* one at least: a stream of new input cannot stall the bodies */
    while (w->turns_len && (first || he__now_ns() < until)) {
        struct he_worker_turn t = w->turns[w->turns_head];
        he_conn_t *c;
        first = false;
        w->turns_head = (w->turns_head + 1) % w->conn_cap;
        w->turns_len--;
        if ((c = he__worker_conn(w, t.user_data))) {
            he__send_on_pollout(w, c, t.res);
            he__conn_op_done(w, c);
        }
    }
    if (w->turns_len) w->stats.slices_spent++; /* the loop takes new input before the rest */
}
