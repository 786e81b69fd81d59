/* Running the operations an origin fetch asks for (fetch.c): on an
 * io_uring SQE for the worker's ring, or with blocking syscalls for tests
 * and tools, which he_cache_fetch_run_sync uses to drive a whole fetch. */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cache/origin.h"

/* ---------------------------------------------------------------- io */

void he_cache_io_prep(const he_cache_io_t *io, struct io_uring_sqe *sqe)
{
    switch (io->op) {
    case HE_CACHE_IO_SOCKET:
        io_uring_prep_socket(sqe, io->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, 0);
        break;
    case HE_CACHE_IO_CONNECT:
        io_uring_prep_connect(sqe, io->fd, io->addr, io->addrlen);
        break;
    case HE_CACHE_IO_SEND:
        io_uring_prep_send(sqe, io->fd, io->buf, io->len, MSG_NOSIGNAL);
        break;
    case HE_CACHE_IO_RECV:
        io_uring_prep_recv(sqe, io->fd, io->buf, io->len, 0);
        break;
    case HE_CACHE_IO_READV:
        /* a socket has no position: the offset is not used */
        io_uring_prep_readv(sqe, io->fd, io->iov, io->iovcnt, 0);
        break;
    case HE_CACHE_IO_CLOSE:
        io_uring_prep_close(sqe, io->fd);
        break;
    default:
        io_uring_prep_nop(sqe);
        break;
    }
}

/* Waits for ev on fd until the deadline: 0, or -ETIME. */
static int he_cache_io_wait(int fd, short ev, uint64_t deadline_ms, uint64_t now_ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int ms = !deadline_ms ? -1 : deadline_ms > now_ms ? (int)(deadline_ms - now_ms) : 0;
    int rc;
    do
        rc = poll(&p, 1, ms);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) return -errno;
    return rc == 0 ? -ETIME : 0;
}

int he_cache_io_run_sync(const he_cache_io_t *io, uint64_t now_ms)
{
    ssize_t n;
    int rc, err;
    socklen_t el = sizeof(err);
    switch (io->op) {
    case HE_CACHE_IO_SOCKET:
        rc = socket(io->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        return rc < 0 ? -errno : rc;
    case HE_CACHE_IO_CONNECT:
        if (connect(io->fd, io->addr, io->addrlen) == 0) return 0;
        if (errno != EINPROGRESS) return -errno;
        if ((rc = he_cache_io_wait(io->fd, POLLOUT, io->deadline_ms, now_ms)) < 0) return rc;
        if (getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) return -errno;
        return -err;
    case HE_CACHE_IO_SEND:
        for (;;) {
            n = send(io->fd, io->buf, io->len, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n >= 0) return (int)n;
            if (errno != EAGAIN && errno != EINTR) return -errno;
            if ((rc = he_cache_io_wait(io->fd, POLLOUT, io->deadline_ms, now_ms)) < 0) return rc;
        }
    case HE_CACHE_IO_RECV:
        for (;;) {
            n = recv(io->fd, io->buf, io->len, MSG_DONTWAIT);
            if (n >= 0) return (int)n;
            if (errno != EAGAIN && errno != EINTR) return -errno;
            if ((rc = he_cache_io_wait(io->fd, POLLIN, io->deadline_ms, now_ms)) < 0) return rc;
        }
    case HE_CACHE_IO_READV:
        for (;;) {
            n = readv(io->fd, io->iov, (int)io->iovcnt);
            if (n >= 0) return (int)n;
            if (errno != EAGAIN && errno != EINTR) return -errno;
            if ((rc = he_cache_io_wait(io->fd, POLLIN, io->deadline_ms, now_ms)) < 0) return rc;
        }
    case HE_CACHE_IO_CLOSE:
        close(io->fd);
        return 0;
    default:
        return -EINVAL;
    }
}

static uint64_t he_cache_io_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int he_cache_fetch_run_sync(he_cache_fetch_t *f, uint64_t (*clock_ms)(void))
{
    he_cache_io_t io;
    if (!clock_ms) clock_ms = he_cache_io_clock;
    while (he_cache_fetch_next(f, clock_ms(), &io) != HE_CACHE_IO_DONE) {
        int res = he_cache_io_run_sync(&io, clock_ms());
        he_cache_fetch_complete(f, res, clock_ms());
    }
    return he_cache_fetch_result(f, NULL);
}
