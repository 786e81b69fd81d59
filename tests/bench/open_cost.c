/* Measures what a file-cache miss costs on a worker: synchronous
 * openat2(RESOLVE_BENEATH) + fstat + close against the same three steps as
 * io_uring operations (OPENAT2, STATX, CLOSE), each submitted and reaped.
 *
 *   cc -O2 -D_GNU_SOURCE -o /tmp/open_cost tests/bench/open_cost.c -luring
 *   taskset -c 0 /tmp/open_cost demo/library 360p/seg_00000.ts 200000
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: open_cost ROOT PATH N\n");
        return 2;
    }
    int root = open(argv[1], O_PATH | O_DIRECTORY);
    const char *path = argv[2];
    long n = atol(argv[3]);
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
    struct stat st;
    struct statx stx;
    struct io_uring ring;
    double t0, sync_us, ring_us;

    if (root < 0) {
        perror(argv[1]);
        return 1;
    }
    t0 = now();
    for (long i = 0; i < n; i++) {
        int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
        if (fd < 0 || fstat(fd, &st) < 0) {
            perror("openat2");
            return 1;
        }
        close(fd);
    }
    sync_us = (now() - t0) / n * 1e6;

    io_uring_queue_init(8, &ring, 0);
    t0 = now();
    for (long i = 0; i < n; i++) {
        struct io_uring_cqe *cqe;
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        int fd;
        io_uring_prep_openat2(sqe, root, path, &how);
        io_uring_submit_and_wait(&ring, 1);
        io_uring_wait_cqe(&ring, &cqe);
        fd = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        if (fd < 0) {
            fprintf(stderr, "OPENAT2: %d\n", fd);
            return 1;
        }
        sqe = io_uring_get_sqe(&ring);
        io_uring_prep_statx(sqe, fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx);
        io_uring_submit_and_wait(&ring, 1);
        io_uring_wait_cqe(&ring, &cqe);
        io_uring_cqe_seen(&ring, cqe);
        sqe = io_uring_get_sqe(&ring);
        io_uring_prep_close(sqe, fd);
        io_uring_submit_and_wait(&ring, 1);
        io_uring_wait_cqe(&ring, &cqe);
        io_uring_cqe_seen(&ring, cqe);
    }
    ring_us = (now() - t0) / n * 1e6;
    printf("sync openat2+fstat+close: %.2f us; io_uring OPENAT2+STATX+CLOSE: %.2f us\n", sync_us,
           ring_us);
    return 0;
}
