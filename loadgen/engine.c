/* loadgen: one thread's io_uring: set-up, the loop that reaps completions
 * and dispatches them by the operation in user_data, the 100 ms tick that
 * enforces timeouts and the end of the run, and the provided-buffer ring. */
#include "loadgen/engine.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define HE_LG_TICK_NS 100000000ull
#define HE_LG_SCRATCH (64u * 1024)
#define HE_LG_NBUFS 256u
#define HE_LG_BUFSZ (64u * 1024)

uint64_t he_lg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct io_uring_sqe *he_lg_sqe(he_lg_thread_t *th)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&th->ring);
    while (!sqe) {
        io_uring_submit(&th->ring);
        sqe = io_uring_get_sqe(&th->ring);
    }
    return sqe;
}

bool he_lg_take_request(he_lg_thread_t *th)
{
    he_lg_run_t *run = th->run;
    if (th->stopping) return false;
    if (__atomic_load_n(&run->stop, __ATOMIC_RELAXED)) {
        th->stopping = true;
        return false;
    }
    if (run->cfg->max_requests) {
        uint64_t n = __atomic_fetch_add(&run->issued, 1, __ATOMIC_RELAXED);
        if (n >= run->cfg->max_requests) {
            th->stopping = true;
            return false;
        }
    }
    return true;
}

void he_lg_buf_recycle(he_lg_thread_t *th, unsigned bid)
{
    io_uring_buf_ring_add(th->br, th->bufs + (size_t)bid * th->bufsz, th->bufsz,
                          (unsigned short)bid, io_uring_buf_ring_mask(th->nbufs), 0);
    io_uring_buf_ring_advance(th->br, 1);
}

void he_lg_on_result(he_lg_conn_t *c, const he_lg_result_t *r)
{
    he_lg_thread_t *th = c->th;
    if (r->status) he_lg_audience_count_request(th);
    th->run->ops->on_result(&th->viewers[c->slot], r);
}

void he_lg_timer_arm(he_lg_viewer_t *v, uint64_t at_ns)
{
    he_lg_thread_t *th = v->conn->th;
    /* a viewer whose session ends (--churn) wakes to leave */
    if (v->leave_ns && at_ns > v->leave_ns) at_ns = v->leave_ns;
    v->timer_gen++;
    v->timer_armed = true;
    v->ts.tv_sec = (long long)(at_ns / 1000000000ull);
    v->ts.tv_nsec = (long long)(at_ns % 1000000000ull);
    struct io_uring_sqe *sqe = he_lg_sqe(th);
    io_uring_prep_timeout(sqe, &v->ts, 0, IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_TIMER, v->timer_gen, v->conn->slot));
}

static void he_lg_tick_arm(he_lg_thread_t *th)
{
    th->tick_ts.tv_sec = 0;
    th->tick_ts.tv_nsec = HE_LG_TICK_NS;
    struct io_uring_sqe *sqe = he_lg_sqe(th);
    io_uring_prep_timeout(sqe, &th->tick_ts, 0, 0);
    io_uring_sqe_set_data64(sqe, he_lg_ud(HE_LG_OP_TICK, 0, 0));
}

static void he_lg_tick(he_lg_thread_t *th)
{
    he_lg_run_t *run = th->run;
    if (!th->stopping &&
        ((run->end_ns && th->now >= run->end_ns) || __atomic_load_n(&run->stop, __ATOMIC_RELAXED)))
        th->stopping = true;
    if (th->stopping && !th->stop_deadline) {
        /* in-flight requests get a grace period to finish and be counted */
        uint64_t grace = (uint64_t)(th->cfg->timeout_s * 1e9);
        if (grace > 2000000000ull) grace = 2000000000ull;
        th->stop_deadline = th->now + grace;
    }
    uint64_t timeout_ns = (uint64_t)(th->cfg->timeout_s * 1e9);
    for (unsigned i = 0; i < th->n; i++) {
        he_lg_conn_check_timeout(&th->conns[i], th->now, timeout_ns);
        /* a viewer idle on its pacing timer is done once the run ends */
        if (th->stopping && th->viewers[i].timer_armed) {
            th->viewers[i].timer_armed = false;
            th->viewers[i].timer_gen++;
            he_lg_audience_finish(&th->viewers[i]);
        }
    }
    he_lg_tick_arm(th);
}

static void he_lg_dispatch(he_lg_thread_t *th, struct io_uring_cqe *cqe)
{
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    unsigned op = (unsigned)(ud & 0xff);
    uint32_t gen = (uint32_t)((ud >> 8) & 0xffffff);
    uint32_t slot = (uint32_t)(ud >> 32);
    switch (op) {
    case HE_LG_OP_TICK:
        he_lg_tick(th);
        break;
    case HE_LG_OP_CANCEL:
        break;
    case HE_LG_OP_TIMER: {
        he_lg_viewer_t *v = &th->viewers[slot];
        if (gen != (v->timer_gen & 0xffffff) || !v->timer_armed) break;
        v->timer_armed = false;
        if (th->stopping)
            he_lg_audience_finish(v);
        else if (!he_lg_audience_on_timer(v))
            th->run->ops->on_timer(v);
        break;
    }
    default:
        if (slot < th->n) he_lg_conn_on_cqe(&th->conns[slot], op, gen, cqe->res, cqe->flags);
        break;
    }
}

static int he_lg_bufring_setup(he_lg_thread_t *th)
{
    th->nbufs = HE_LG_NBUFS;
    th->bufsz = HE_LG_BUFSZ;
    th->br_size = th->nbufs * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, th->br_size, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (mem == MAP_FAILED) return -errno;
    th->br = mem;
    struct io_uring_buf_reg reg = {
        .ring_addr = (uintptr_t)mem, .ring_entries = th->nbufs, .bgid = HE_LG_BUF_GROUP};
    int rc = io_uring_register_buf_ring(&th->ring, &reg, 0);
    if (rc < 0) {
        munmap(mem, th->br_size);
        th->br = NULL;
        return rc;
    }
    th->bufs = malloc((size_t)th->nbufs * th->bufsz);
    if (!th->bufs) return -ENOMEM;
    io_uring_buf_ring_init(th->br);
    for (unsigned i = 0; i < th->nbufs; i++)
        io_uring_buf_ring_add(th->br, th->bufs + (size_t)i * th->bufsz, th->bufsz,
                              (unsigned short)i, io_uring_buf_ring_mask(th->nbufs), (int)i);
    io_uring_buf_ring_advance(th->br, (int)th->nbufs);
    return 0;
}

static int he_lg_ring_setup(he_lg_thread_t *th)
{
    unsigned entries = 64;
    while (entries < th->n * 2 + 64 && entries < 4096)
        entries *= 2;
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    /* each client has at most two I/O operations and a timer in flight */
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    p.cq_entries = th->n * 4 + 256;
    int rc = io_uring_queue_init_params(entries, &th->ring, &p);
    if (rc == -EINVAL) {
        memset(&p, 0, sizeof(p));
        p.flags = IORING_SETUP_CQSIZE;
        p.cq_entries = th->n * 4 + 256;
        rc = io_uring_queue_init_params(entries, &th->ring, &p);
    }
    if (rc < 0) return rc;
    th->ring_ok = true;
    if (th->cfg->verify || th->cfg->no_trunc) {
        rc = he_lg_bufring_setup(th);
        if (rc < 0 && !th->br) rc = 0; /* old kernel: fall back to the head buffer */
    }
    return rc;
}

static void he_lg_thread_cleanup(he_lg_thread_t *th)
{
    const he_lg_client_ops_t *ops = th->run->ops;
    if (th->ring_ok) io_uring_queue_exit(&th->ring); /* cancels what is left */
    th->ring_ok = false;
    for (unsigned i = 0; i < th->n; i++) {
        he_lg_conn_destroy(&th->conns[i]);
        if (ops->free) ops->free(&th->viewers[i]);
    }
    if (th->br) munmap(th->br, th->br_size);
    th->br = NULL;
    free(th->bufs);
    th->bufs = NULL;
    free(th->scratch);
    th->scratch = NULL;
}

static bool he_lg_thread_idle(he_lg_thread_t *th)
{
    for (unsigned i = 0; i < th->n; i++)
        if (he_lg_conn_busy(&th->conns[i]) || th->viewers[i].timer_armed) return false;
    return true;
}

void *he_lg_thread_main(void *arg)
{
    he_lg_thread_t *th = arg;
    if (th->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(th->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    th->scratch_cap = HE_LG_SCRATCH;
    th->scratch = malloc(th->scratch_cap);
    if (!th->scratch || (th->rc = he_lg_ring_setup(th)) < 0) {
        if (!th->rc) th->rc = -ENOMEM;
        he_lg_thread_cleanup(th);
        return NULL;
    }
    th->now = he_lg_now_ns();
    for (unsigned i = 0; i < th->n; i++) {
        he_lg_conn_init(&th->conns[i], th, i);
        he_lg_viewer_t *v = &th->viewers[i];
        memset(v, 0, sizeof(*v));
        v->conn = &th->conns[i];
    }
    /* audience.c: now, staggered, or spread over --ramp */
    for (unsigned i = 0; i < th->n; i++)
        he_lg_audience_start(&th->viewers[i], i);
    he_lg_tick_arm(th);

    for (;;) {
        int rc = io_uring_submit_and_wait(&th->ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            th->rc = rc;
            break;
        }
        th->now = he_lg_now_ns();
        struct io_uring_cqe *cqe;
        unsigned head, count = 0;
        io_uring_for_each_cqe(&th->ring, head, cqe)
        {
            he_lg_dispatch(th, cqe);
            count++;
        }
        io_uring_cq_advance(&th->ring, count);
        if (th->stopping) {
            if (he_lg_thread_idle(th)) break;
            if (th->stop_deadline && th->now >= th->stop_deadline) {
                for (unsigned i = 0; i < th->n; i++)
                    he_lg_conn_abort(&th->conns[i]);
                break;
            }
        }
    }
    for (unsigned i = 0; i < th->n; i++)
        he_lg_audience_finish(&th->viewers[i]);
    he_lg_thread_cleanup(th);
    return NULL;
}
