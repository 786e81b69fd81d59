/* A worker: one thread pinned to one CPU, owning one io_uring. This is the
 * only file that submits to and reaps the ring. The loop submits everything
 * queued and waits in one io_uring_enter, then dispatches the batch of
 * completions by the operation encoded in user_data; bodies' turns beyond
 * the batch's slice wait for the next round (worker_turns.c). */
#include <errno.h>
#include <numa.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/net/net.h"
#include "server/net/tls.h"

#define HE_RING_ENTRIES 1024
#define HE_RING_CQ_ENTRIES 16384
/* The provided-buffer ring is first in, first out: a buffer comes back to
 * the kernel after the batch that parsed it and is filled again only
 * after every other one. With 1024 the request bytes of the next recv sat
 * in a line last touched a thousand requests ago (the kernel's copy into
 * it was 3.3 % of a playlist worker's profile; 0.8 % with 128); 64 keep
 * them warm. A batch that needs more ends a multishot recv with ENOBUFS,
 * and the connection re-arms after the batch, its bytes waiting in the
 * socket (docs/performance.md, "Per-request costs"). */
#define HE_BUF_COUNT 64
#define HE_BUF_SIZE 4096
struct io_uring_sqe *he__worker_sqe(he_worker_t *w)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
    if (!sqe) {
        /* SQ full: hand what we have to the kernel and take a fresh slot. */
        io_uring_submit(&w->ring);
        sqe = io_uring_get_sqe(&w->ring);
    }
    return sqe; /* NULL: the submit failed, nothing was freed */
}

void he__worker_sqe_conn(he_worker_t *w, struct io_uring_sqe *sqe, he_conn_t *c, enum he_op op)
{
    if (c->fixed) {
        sqe->fd = (int)c->slot;
        sqe->flags |= IOSQE_FIXED_FILE;
    }
    sqe->user_data = he__ud(op, c->slot, c->gen);
    c->inflight++;
}

/* Worker memory comes from the CPU's NUMA node; untouched pages of these
 * large slabs cost nothing until a connection uses them. */
static void *he_worker_alloc(he_worker_t *w, size_t size)
{
    void *p;
    if (w->node >= 0) {
        p = numa_alloc_onnode(size, w->node);
    } else {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) p = NULL;
    }
    if (p) memset(p, 0, size < 4096 ? size : 0); /* mmap memory is already zero */
    return p;
}

static void he_worker_free_mem(he_worker_t *w, void *p, size_t size)
{
    if (!p) return;
    if (w->node >= 0)
        numa_free(p, size);
    else
        munmap(p, size);
}

static void he_worker_arm_accept(he_worker_t *w, unsigned li)
{
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    if (!sqe) { /* SQ full: as if out of descriptors, re-armed at the tick */
        w->listeners[li].armed = false;
        w->listeners[li].paused = true;
        w->accept_paused = true;
        return;
    }
    if (w->server->features.multishot_accept)
        io_uring_prep_multishot_accept(sqe, w->listeners[li].fd, NULL, NULL,
                                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    else
        io_uring_prep_accept(sqe, w->listeners[li].fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    sqe->user_data = he__ud(HE_OP_ACCEPT, li, 0);
    w->listeners[li].armed = true;
    w->listeners[li].cancel_sent = false;
}

static void he_worker_arm_tick(he_worker_t *w)
{
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    w->tick_lost = !sqe; /* the loop arms it after the next batch */
    if (!sqe) return;
    w->tick_ts.tv_sec = 0;
    w->tick_ts.tv_nsec = HE_TICK_MS * 1000000ll;
    io_uring_prep_timeout(sqe, &w->tick_ts, 0, 0);
    sqe->user_data = he__ud(HE_OP_TICK, 0, 0);
}

static void he_worker_arm_wake(he_worker_t *w)
{
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    w->wake_lost = !sqe;
    if (!sqe) return;
    io_uring_prep_read(sqe, w->wake_fd, &w->wake_val, sizeof(w->wake_val), 0);
    sqe->user_data = he__ud(HE_OP_WAKE, 0, 0);
}

static int he_worker_setup_bufs(he_worker_t *w)
{
    struct io_uring_buf_reg reg;
    size_t ring_size = HE_BUF_COUNT * sizeof(struct io_uring_buf);
    int rc;

    w->nbufs = HE_BUF_COUNT;
    w->buf_size = HE_BUF_SIZE;
    w->br = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w->br == MAP_FAILED) {
        w->br = NULL;
        return -ENOMEM;
    }
    w->bufs = he_worker_alloc(w, (size_t)w->nbufs * w->buf_size);
    if (!w->bufs) return -ENOMEM;
    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (uintptr_t)w->br;
    reg.ring_entries = w->nbufs;
    reg.bgid = 0;
    rc = io_uring_register_buf_ring(&w->ring, &reg, 0);
    if (rc < 0) {
        munmap(w->br, ring_size);
        w->br = NULL;
        return rc;
    }
    io_uring_buf_ring_init(w->br);
    for (unsigned i = 0; i < w->nbufs; i++)
        io_uring_buf_ring_add(w->br, w->bufs + (size_t)i * w->buf_size, w->buf_size,
                              (unsigned short)i, io_uring_buf_ring_mask(w->nbufs), (int)i);
    io_uring_buf_ring_advance(w->br, (int)w->nbufs);
    return 0;
}

static void he_worker_recycle_buf(he_worker_t *w, unsigned bid)
{
    io_uring_buf_ring_add(w->br, w->bufs + (size_t)bid * w->buf_size, w->buf_size,
                          (unsigned short)bid, io_uring_buf_ring_mask(w->nbufs),
                          (int)w->buf_pending);
    w->buf_pending++;
}

static int he_worker_setup(he_worker_t *w)
{
    he_server_t *s = w->server;
    const he_features_t *f = &s->features;
    struct io_uring_params p;
    size_t n;
    int rc;

    atomic_store(&w->tid, (int)gettid());
    {
        char name[16]; /* "he-worker-N": what top and perf show per thread */
        snprintf(name, sizeof(name), "he-worker-%u", w->id);
        pthread_setname_np(pthread_self(), name);
    }
    w->stats_off = !s->conf->stats_latency;
    if (w->cpu >= 0 && s->conf->pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        if (rc != 0)
            he_log_warn("worker %u: cannot pin to CPU %d: %s", w->id, w->cpu, strerror(rc));
    }
    w->node = -1;
    if (f->numa_nodes > 0 && s->conf->numa && w->cpu >= 0) {
        w->node = numa_node_of_cpu(w->cpu);
        if (w->node >= 0) numa_set_localalloc();
    }

    memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = HE_RING_CQ_ENTRIES;
    if (f->single_issuer) p.flags |= IORING_SETUP_SINGLE_ISSUER;
    if (f->defer_taskrun)
        p.flags |= IORING_SETUP_DEFER_TASKRUN;
    else if (f->coop_taskrun)
        p.flags |= IORING_SETUP_COOP_TASKRUN;
    rc = io_uring_queue_init_params(HE_RING_ENTRIES, &w->ring, &p);
    if (rc < 0) {
        he_log_error("worker %u: io_uring_queue_init: %s", w->id, strerror(-rc));
        return rc;
    }
    w->ring_ok = true;

    w->conn_cap = (s->conf->max_connections + s->nworkers - 1) / s->nworkers;
    if (w->conn_cap > 0xffffff) w->conn_cap = 0xffffff;
    w->proto = s->proto;
    /* 16-byte aligned, for whatever the protocol keeps there */
    w->proto_size = w->proto->conn_size(s->conf);
    if (s->proto_h2 && s->proto_h2->conn_size(s->conf) > w->proto_size)
        w->proto_size = s->proto_h2->conn_size(s->conf); /* a connection may switch to it */
    w->proto_size = (w->proto_size + 15) & ~(size_t)15;
    w->conns = he_worker_alloc(w, sizeof(he_conn_t) * w->conn_cap);
    w->free_slots = he_worker_alloc(w, sizeof(uint32_t) * w->conn_cap);
    w->hdr_slab = he_worker_alloc(w, (size_t)HE_CONN_HDR_CAP * w->conn_cap);
    w->proto_slab = he_worker_alloc(w, w->proto_size * w->conn_cap);
    if (!w->conns || !w->free_slots || !w->hdr_slab || !w->proto_slab) {
        he_log_error("worker %u: cannot allocate %u connection slots", w->id, w->conn_cap);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < w->conn_cap; i++) {
        w->conns[i].slot = i;
        w->conns[i].hdr = w->hdr_slab + (size_t)i * HE_CONN_HDR_CAP;
        w->conns[i].proto = w->proto_slab + (size_t)i * w->proto_size;
        w->free_slots[i] = w->conn_cap - 1 - i;
    }
    w->nfree = w->conn_cap;
    if (he__turns_init(w) < 0) {
        he_log_error("worker %u: cannot allocate %u turn slots", w->id, w->conn_cap);
        return -ENOMEM;
    }

    if (w->fixed_files) {
        rc = io_uring_register_files_sparse(&w->ring, w->conn_cap);
        if (rc < 0) {
            he_log_warn("worker %u: registered files unavailable (%s)", w->id, strerror(-rc));
            w->fixed_files = false;
        }
    }
    if (f->buf_ring && (rc = he_worker_setup_bufs(w)) < 0) {
        he_log_warn("worker %u: provided buffer ring unavailable (%s)", w->id, strerror(-rc));
        w->br = NULL;
    }

    /* wake_fd is the server's (he_server_init): the control thread may
     * write to it at any time, so it lives until after the join. */
    if (w->wake_fd < 0) return -ENOMEM;
    w->now_ms = he__now_ns() / 1000000;
    for (unsigned i = 0; i < s->nhooks; i++) /* the open-file cache, the edge cache ... */
        if (s->hooks[i]->setup && (rc = s->hooks[i]->setup(w)) < 0) return rc;

    n = s->nlisten; /* plain, then TLS */
    for (unsigned li = 0; li < n; li++) {
        w->listeners[li].fd = s->listen_fds[li * s->nworkers + w->id];
        w->listeners[li].index = li;
        he__listener_conf(s, li, &w->listeners[li].tls);
        he_worker_arm_accept(w, li);
    }
    w->nlisteners = (unsigned)n;
    w->now_ms = he__now_ns() / 1000000;
    he_worker_arm_tick(w);
    he_worker_arm_wake(w);
    return 0;
}

static void he_worker_refuse(he_worker_t *w, int fd)
{
    static const char resp[] = "HTTP/1.1 503 Service Unavailable\r\nServer: hlsedge\r\n"
                               "Content-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";
    /* Rare, and the socket buffer of a new connection is empty: a direct
     * non-blocking send is cheaper than a ring round trip. */
    if (send(fd, resp, sizeof(resp) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    }
    close(fd);
    w->stats.conn_refused++;
}

/* Out of descriptors (process or system) or kernel memory: accept fails
 * without taking the connection off the queue. */
static bool he_worker_accept_starved(int res)
{
    return res == -EMFILE || res == -ENFILE || res == -ENOBUFS || res == -ENOMEM;
}

static void he_worker_on_accept(he_worker_t *w, struct io_uring_cqe *cqe)
{
    unsigned li = he__ud_slot(cqe->user_data);
    /* A retiring generation's listeners are shut down by the control
     * thread; the accept then fails with -EINVAL, which is the end of it. */
    bool retiring = atomic_load_explicit(&w->server->retiring, memory_order_relaxed);
    if (cqe->res >= 0) {
        if ((w->draining || w->nfree == 0) && w->listeners[li].tls) {
            close(cqe->res); /* no plain-text 503 for a TLS client */
            w->stats.conn_refused++;
        } else if (w->draining || w->nfree == 0) {
            he_worker_refuse(w, cqe->res);
        } else {
            struct sockaddr_storage peer;
            socklen_t plen = sizeof(peer);
            he_conn_t *c;
            if (getpeername(cqe->res, (struct sockaddr *)&peer, &plen) < 0) plen = 0;
            c = he__conn_new(w, cqe->res, plen ? &peer : NULL, w->listeners[li].tls);
            w->stats.conn_accepted++;
            /* Accepted just before the listener was shut: serve one
             * response, announced as the last. */
            if (c && w->soft_drain) c->close_after = true;
        }
    } else if (cqe->res != -ECANCELED && cqe->res != -EAGAIN && !retiring) {
        static __thread uint64_t last_warn_ms;
        if (w->now_ms - last_warn_ms > 1000) {
            he_log_warn("worker %u: accept on %s: %s", w->id,
                        he__listener_conf(w->server, li, NULL)->text, strerror(-cqe->res));
            last_warn_ms = w->now_ms;
        }
    }
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        w->listeners[li].armed = false;
        if (w->draining || w->soft_drain || retiring || cqe->res == -ECANCELED) return;
        if (he_worker_accept_starved(cqe->res)) {
            /* The connection stays queued and an accept armed now fails
             * again at once: a busy loop. Wait for a tick or a close. */
            w->listeners[li].paused = true;
            w->accept_paused = true;
        } else {
            he_worker_arm_accept(w, li);
        }
    }
}

void he__worker_accept_resume(he_worker_t *w)
{
    bool retiring;
    if (!w->accept_paused) return; /* the common case: every connection close */
    retiring = atomic_load_explicit(&w->server->retiring, memory_order_relaxed);
    w->accept_paused = false;
    for (unsigned li = 0; li < w->nlisteners; li++) {
        if (!w->listeners[li].paused) continue;
        w->listeners[li].paused = false;
        if (!w->draining && !w->soft_drain && !retiring && !w->listeners[li].armed)
            he_worker_arm_accept(w, li);
    }
}

he_conn_t *he__worker_conn(he_worker_t *w, uint64_t ud)
{
    uint32_t slot = he__ud_slot(ud);
    he_conn_t *c;
    if (slot >= w->conn_cap) return NULL;
    c = &w->conns[slot];
    if (!c->in_use || c->gen != he__ud_gen(ud)) return NULL;
    return c;
}

static void he_worker_on_recv(he_worker_t *w, he_conn_t *c, struct io_uring_cqe *cqe)
{
    int res = cqe->res;
    bool more = cqe->flags & IORING_CQE_F_MORE;
    bool rearm = false;

    if (res > 0) {
        const char *data = c->rbuf;
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        if (cqe->flags & IORING_CQE_F_BUFFER) data = w->bufs + (size_t)bid * w->buf_size;
        if (c->closing) {
            /* nothing more is read: the close cancelled this recv */
        } else if (c->tls) { /* ciphertext, for OpenSSL */
            he__tls_on_input(w, c, data, (size_t)res);
        } else {
            he__conn_on_data(w, c, data, (size_t)res);
        }
        if (cqe->flags & IORING_CQE_F_BUFFER) he_worker_recycle_buf(w, bid);
        rearm = true;
    } else if (res == 0) {
        /* A client may half-close after sending its requests: they are
         * answered first. */
        if (c->tls)
            he__tls_on_eof(w, c);
        else
            he__conn_peer_eof(w, c);
    } else if (res == -ENOBUFS) {
        rearm = true; /* buffers come back at the end of this batch */
    } else if (res == -EBADF && c->fixed) {
        c->fixed = false; /* the table update failed: fall back to the fd */
        rearm = true;
    } else if (res != -ECANCELED) {
        if (res == -ECONNRESET) w->stats.errors[HE_STATS_ERR_RESET]++;
        he__conn_close(w, c);
    }
    if (!more) {
        /* paused for full input (-ECANCELED): he__conn_arm_recv re-arms
         * only if the response finished and made room meanwhile */
        if (c->recv_cancel) rearm = true;
        c->recv_armed = false;
        c->recv_cancel = false;
        if (rearm && !c->closing) he__conn_arm_recv(w, c);
        he__conn_op_done(w, c);
    }
}

static void he_worker_on_tick(he_worker_t *w)
{
    w->now_ms = he__now_ns() / 1000000;
    he__conn_timers_expire(w);
    he__worker_accept_resume(w);
    for (unsigned i = 0; i < w->server->nhooks; i++)
        if (w->server->hooks[i]->tick) w->server->hooks[i]->tick(w);
    if ((w->draining || w->soft_drain) && w->now_ms >= w->drain_deadline_ms && w->nconns) {
        he_log_warn("worker %u: drain timeout, closing %u connections", w->id, w->nconns);
        for (uint32_t i = 0; i < w->conn_cap; i++)
            if (w->conns[i].in_use) he__conn_close(w, &w->conns[i]);
    }
    he_worker_arm_tick(w);
}

/* A drain stops accepting; what finds no SQE is cancelled after the next
 * batch (drain_cancel_lost), accepts meanwhile are refused with a 503. */
static void he_worker_cancel_accepts(he_worker_t *w)
{
    w->drain_cancel_lost = false;
    for (unsigned li = 0; li < w->nlisteners; li++) {
        struct io_uring_sqe *sqe;
        if (!w->listeners[li].armed || w->listeners[li].cancel_sent) continue;
        if (!(sqe = he__worker_sqe(w))) {
            w->drain_cancel_lost = true;
            return;
        }
        io_uring_prep_cancel64(sqe, he__ud(HE_OP_ACCEPT, li, 0), 0);
        sqe->user_data = he__ud(HE_OP_CANCEL, 0, 0);
        w->listeners[li].cancel_sent = true;
    }
}

/* hard: shutdown. Idle keep-alive connections close now, busy ones after
 * their response (he__conn_request_done checks draining).
 * soft: this generation was replaced by a reload. Closing an idle
 * keep-alive connection races with a request the client may be sending,
 * so instead every connection answers one more request, announcing
 * Connection: close, then closes. A response already under way when the
 * drain began did not announce it; the protocol's sent() marks that
 * connection after it. The drain timeout bounds both. */
static void he_worker_start_drain(he_worker_t *w, bool hard)
{
    unsigned ms = atomic_load(&w->server->drain_ms);
    uint64_t deadline = w->now_ms + (ms ? ms : w->conf->drain_timeout_ms);
    if (w->draining || (!hard && w->soft_drain)) return;
    if (!w->soft_drain) {
        w->drain_deadline_ms = deadline;
        he_worker_cancel_accepts(w);
    } else if (deadline < w->drain_deadline_ms) {
        /* SIGTERM during a reload's soft drain: the timeout in force now
         * (a reload may have shortened it) */
        w->drain_deadline_ms = deadline;
    }
    if (hard)
        w->draining = true;
    else
        w->soft_drain = true;
    for (uint32_t i = 0; i < w->conn_cap; i++) {
        he_conn_t *c = &w->conns[i];
        /* a lingering one is done already: its tail goes out, or the
         * drain timeout ends it */
        if (c->in_use && !c->busy && !c->closing && !c->lingering) c->protocol->idle(w, c, hard);
    }
}

/* Messages from the control thread: a new configuration, a drain. Runs
 * between completions, so nothing holds a pointer into the old config. */
static void he_worker_on_wake(he_worker_t *w, struct io_uring_cqe *cqe)
{
    const he_conf_t *next = atomic_load_explicit(&w->conf_next, memory_order_acquire);
    if (next && next != w->conf) {
        w->conf = next;
        he__conn_timers_reconf(w); /* timeouts are live keys */
        atomic_store_explicit(&w->conf_ack, next->generation, memory_order_release);
    }
    if (atomic_load(&w->server->draining))
        he_worker_start_drain(w, true);
    else if (atomic_load(&w->server->soft_drain))
        he_worker_start_drain(w, false);
    if (cqe->res >= 0 || cqe->res == -EINTR) he_worker_arm_wake(w);
}

uint64_t he__worker_hook_ud(const he_worker_t *w, const he_worker_hooks_t *h, uint32_t tag)
{
    for (unsigned i = 0; i < w->server->nhooks; i++)
        if (w->server->hooks[i] == h) return he__ud(HE_OP_HOOK, i, tag);
    return he__ud(HE_OP_NONE, 0, 0); /* not registered: the completion is dropped */
}

static void he_worker_dispatch(he_worker_t *w, struct io_uring_cqe *cqe)
{
    he_conn_t *c;
    switch (he__ud_op(cqe->user_data)) {
    case HE_OP_ACCEPT:
        he_worker_on_accept(w, cqe);
        return;
    case HE_OP_TICK:
        he_worker_on_tick(w);
        return;
    case HE_OP_WAKE:
        he_worker_on_wake(w, cqe);
        return;
    case HE_OP_JOB: /* the layers above: origin fetches, SSD writes ... */
        for (unsigned i = 0; i < w->server->nhooks; i++)
            if (w->server->hooks[i]->job) {
                w->server->hooks[i]->job(w, cqe);
                break;
            }
        return;
    case HE_OP_HOOK: { /* a hook's own operation (handler/llhls_hold.c: inotify) */
        unsigned i = he__ud_slot(cqe->user_data);
        if (i < w->server->nhooks && w->server->hooks[i]->op) w->server->hooks[i]->op(w, cqe);
        return;
    }
    case HE_OP_CANCEL:
    case HE_OP_NONE:
        return;
    default:
        break;
    }
    c = he__worker_conn(w, cqe->user_data);
    if (!c) {
        /* A completion for a freed incarnation: the slot is reused only at
         * inflight 0, so this is a bug, not a race. Recycle its buffer. */
        if (cqe->flags & IORING_CQE_F_BUFFER)
            he_worker_recycle_buf(w, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
        he_log_error("worker %u: stale completion op %d slot %u", w->id, he__ud_op(cqe->user_data),
                     he__ud_slot(cqe->user_data));
        return;
    }
    switch (he__ud_op(cqe->user_data)) {
    case HE_OP_RECV:
        he_worker_on_recv(w, c, cqe);
        break;
    case HE_OP_SEND: /* send, send_zc result or its notification */
        he__send_on_cqe(w, c, cqe);
        he__conn_op_done(w, c);
        break;
    case HE_OP_POLLOUT:
        he__send_on_pollout(w, c, cqe->res);
        he__conn_op_done(w, c);
        break;
    case HE_OP_TLS_POLL:
        if (!c->closing) he__tls_on_poll(w, c, cqe->res);
        he__conn_op_done(w, c);
        break;
    case HE_OP_FILES_UPDATE:
        if (cqe->res < 0) c->fixed = false;
        he__conn_op_done(w, c);
        break;
    default:
        break;
    }
}

/* io_uring_queue_exit does not wait for a read in io-wq: memory a hook's
 * read still targets (an SSD promotion into the RAM arena) could be reused
 * by a new generation's worker. So hooks cancel and reap such operations
 * first, for a bounded time (the tick wakes the loop); past it cleanup
 * leaks what is still in flight. */
#define HE_STOP_WAIT_MS 2000

static bool he_worker_may_stop(he_worker_t *w)
{
    unsigned n = 0;
    for (unsigned i = 0; i < w->server->nhooks; i++)
        if (w->server->hooks[i]->quiesce) n += w->server->hooks[i]->quiesce(w);
    if (n == 0) return true;
    if (!w->stop_deadline_ms) w->stop_deadline_ms = w->now_ms + HE_STOP_WAIT_MS;
    if (w->now_ms < w->stop_deadline_ms) return false;
    he_log_warn("worker %u: %u reads still in flight; stopping anyway", w->id, n);
    return true;
}

/* What found the SQ full and could not be armed: the tick and the wake
 * read, without which the worker would never wake again, and a drain's
 * cancels. (Listeners wait paused for the tick; connections close.) */
static void he_worker_rearm_lost(he_worker_t *w)
{
    if (w->tick_lost) he_worker_arm_tick(w);
    if (w->wake_lost) he_worker_arm_wake(w);
    if (w->drain_cancel_lost) he_worker_cancel_accepts(w);
}

unsigned he__batch_wait_us(const he_server_t *s, const he_conf_t *conf)
{
    return s->features.min_timeout ? conf->ring_batch_wait_us : 0;
}

/* Submits what is queued and sleeps until completions are ready.
 *
 * Woken at the first completion, a busy worker takes a batch of a few
 * completions per sleep and pays a wake-up for each: on a playlist load,
 * about 6-7% of its CPU went to going to sleep and waking
 * (finish_task_switch and the scheduler's locks, docs/performance.md).
 * With the kernel's min timeout (6.12) it waits for ring.batch
 * completions or ring.batch_wait_us, whichever comes first, and then
 * wakes for what is ready; with none ready it sleeps until the first, as
 * before. So no completion waits longer than ring.batch_wait_us. It never
 * waits for more completions than it has connections: a lone viewer's
 * request is answered at once. The enter is ours rather than liburing's
 * because liburing 2.3 cannot pass min_wait_usec; the queue is handed
 * over as io_uring_submit does (no SQPOLL here). */
static int he_worker_enter(he_worker_t *w)
{
    struct io_uring_sq *sq = &w->ring.sq;
    struct __kernel_timespec forever = {.tv_sec = 1}; /* the min timeout wants an outer one */
    struct io_uring_getevents_arg arg;
    unsigned tail = sq->sqe_tail, want = w->conf->ring_batch,
             wait_us = he__batch_wait_us(w->server, w->conf);
    int rc;

    if (!wait_us || want < 2 || w->nconns < 2) return io_uring_submit_and_wait(&w->ring, 1);
    if (want > w->nconns) want = w->nconns;
    if (sq->sqe_head != tail) {
        sq->sqe_head = tail;
        io_uring_smp_store_release(sq->ktail, tail);
    }
    memset(&arg, 0, sizeof(arg));
    arg.sigmask_sz = _NSIG / 8;
    arg.pad = wait_us; /* min_wait_usec */
    arg.ts = (uint64_t)(uintptr_t)&forever;
    rc = (int)syscall(__NR_io_uring_enter, w->ring.ring_fd, tail - *sq->khead, want,
                      IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg, sizeof(arg));
    if (rc >= 0) return rc;
    return errno == ETIME ? 0 : -errno; /* a second with nothing: the loop goes round */
}

static void he_worker_loop(he_worker_t *w)
{
    while (!w->stop) {
        struct io_uring_cqe *cqe;
        unsigned head, count = 0;
        uint64_t until;
        int rc;

        if (w->buf_pending) {
            io_uring_buf_ring_advance(w->br, (int)w->buf_pending);
            w->buf_pending = 0;
        }
        /* with turns waiting, the new input that is there, without sleeping */
        rc = w->turns_len ? io_uring_submit_and_get_events(&w->ring) : he_worker_enter(w);
        he__batch_ns = he__now_ns();
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            he_log_error("worker %u: io_uring_enter: %s", w->id, strerror(-rc));
            break;
        }
        until = he__turns_until(w, he__batch_ns);
        io_uring_for_each_cqe(&w->ring, head, cqe)
        {
            if (!he__turns_defer(w, cqe, until)) he_worker_dispatch(w, cqe);
            count++;
        }
        io_uring_cq_advance(&w->ring, count);
        he__turns_run(w, until);
        he_worker_rearm_lost(w);
        if ((w->draining || w->soft_drain) && w->nconns == 0 && he_worker_may_stop(w))
            w->stop = true;
    }
}

static void he_worker_cleanup(he_worker_t *w)
{
    he_server_t *s = w->server;
    size_t cap = w->conn_cap;
    if (w->ring_ok) io_uring_queue_exit(&w->ring);
    w->ring_ok = false;
    w->exiting = true; /* nothing is in flight any more */
    for (size_t i = 0; w->conns && i < cap; i++) {
        he_conn_t *c = &w->conns[i];
        if (!c->in_use) continue;
        he__send_dispose(w, c);
        for (unsigned k = 0; k < s->nhooks; k++)
            if (s->hooks[k]->conn_dispose) s->hooks[k]->conn_dispose(w, c);
    }
    for (unsigned k = s->nhooks; k-- > 0;)
        if (s->hooks[k]->cleanup) s->hooks[k]->cleanup(w);
    he__send_worker_cleanup(w);
    for (size_t i = 0; w->conns && i < cap; i++) {
        he_conn_t *c = &w->conns[i];
        if (c->in_use) {
            if (c->tls) he__tls_conn_free(w, c);
            close(c->fd);
            free(c->in);
            free(c->rbuf);
        }
    }
    he_worker_free_mem(w, w->conns, sizeof(he_conn_t) * cap);
    he_worker_free_mem(w, w->free_slots, sizeof(uint32_t) * cap);
    he_worker_free_mem(w, w->hdr_slab, (size_t)HE_CONN_HDR_CAP * cap);
    he_worker_free_mem(w, w->proto_slab, w->proto_size * cap);
    he__turns_free(w);
    he_worker_free_mem(w, w->bufs, (size_t)w->nbufs * w->buf_size);
    if (w->br) munmap(w->br, HE_BUF_COUNT * sizeof(struct io_uring_buf));
    w->conns = NULL;
}

void *he__worker_main(void *arg)
{
    he_worker_t *w = arg;
    int rc = he_worker_setup(w);
    w->startup_err = rc;
    atomic_store(&w->ready, rc < 0 ? -1 : 1);
    if (rc == 0) he_worker_loop(w);
    he_worker_cleanup(w);
    atomic_store(&w->exited, 1);
    return NULL;
}

void he__worker_wake(he_worker_t *w)
{
    uint64_t one = 1;
    if (write(w->wake_fd, &one, sizeof(one)) < 0) {
    }
}
