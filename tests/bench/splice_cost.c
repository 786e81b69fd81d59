/* What moving a segment from the page cache to a TCP socket costs the
 * sending thread: sendfile(2) on a non-blocking socket (waiting for room
 * with poll) against IORING_OP_SPLICE file -> pipe -> socket, two linked
 * operations per chunk. A reader thread on another CPU drains loopback.
 * Prints the sender's CPU time per GB: process CPU time (which includes
 * io_uring's io-wq threads) minus the reader thread's. The reader's time
 * before the timed part (its accept) is negligible.
 *
 *   cc -O2 -o /tmp/splice_cost tests/bench/splice_cost.c -luring -lpthread
 *   /tmp/splice_cost demo/library/1080p/seg_00000.ts 200
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int lfd;
static double reader_cpu; /* the reader thread's CPU time, stored as it exits */

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *reader(void *arg)
{
    static char buf[1 << 20];
    int fd;
    struct timespec ts;
    pin(1);
    fd = accept(lfd, NULL, NULL);
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    reader_cpu = ts.tv_sec + ts.tv_nsec / 1e9;
    return NULL;
}

static double cpu_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int connect_pair(pthread_t *th)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int s;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    bind(lfd, (struct sockaddr *)&a, sizeof(a));
    listen(lfd, 1);
    getsockname(lfd, (struct sockaddr *)&a, &l);
    pthread_create(th, NULL, reader, NULL);
    s = socket(AF_INET, SOCK_STREAM, 0);
    connect(s, (struct sockaddr *)&a, sizeof(a));
    fcntl(s, F_SETFL, O_NONBLOCK);
    return s;
}

int main(int argc, char **argv)
{
    int file = open(argv[1], O_RDONLY);
    int reps = argc > 2 ? atoi(argv[2]) : 100;
    struct stat st;
    pthread_t th;
    double p0, bytes;

    if (file < 0 || fstat(file, &st) < 0) {
        perror(argv[1]);
        return 1;
    }
    pin(0);
    bytes = (double)st.st_size * reps;

    /* sendfile */
    {
        int s = connect_pair(&th);
        usleep(100000);
        p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int i = 0; i < reps; i++) {
            off_t off = 0;
            while (off < st.st_size) {
                ssize_t n = sendfile(s, file, &off, st.st_size - off);
                if (n < 0) {
                    struct pollfd pfd = {.fd = s, .events = POLLOUT};
                    poll(&pfd, 1, -1);
                }
            }
        }
        shutdown(s, SHUT_WR);
        pthread_join(th, NULL);
        double send_cpu = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0 - reader_cpu;
        printf("sendfile:        %.3f sender CPU-s per GB\n", send_cpu / (bytes / 1e9));
        close(s);
        close(lfd);
    }

    /* io_uring splice through a pipe */
    {
        struct io_uring ring;
        int p[2], s = connect_pair(&th);
        io_uring_queue_init(8, &ring, 0);
        pipe(p);
        fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
        fcntl(s, F_SETFL, 0); /* the ring waits for room itself */
        usleep(100000);
        p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int i = 0; i < reps; i++) {
            int64_t off = 0;
            while (off < st.st_size) {
                unsigned chunk = st.st_size - off > (1 << 20) ? 1 << 20 : (unsigned)(st.st_size - off);
                struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
                struct io_uring_cqe *cqe;
                int moved = 0, got = 0;
                io_uring_prep_splice(sqe, file, off, p[1], -1, chunk, 0);
                sqe->flags |= IOSQE_IO_LINK;
                sqe = io_uring_get_sqe(&ring);
                io_uring_prep_splice(sqe, p[0], -1, s, -1, chunk, 0);
                io_uring_submit(&ring);
                while (got < 2) {
                    io_uring_wait_cqe(&ring, &cqe);
                    if (got == 0) moved = cqe->res;
                    io_uring_cqe_seen(&ring, cqe);
                    got++;
                }
                if (moved <= 0) {
                    fprintf(stderr, "splice: %d\n", moved);
                    return 1;
                }
                off += moved;
            }
        }
        shutdown(s, SHUT_WR);
        pthread_join(th, NULL);
        double send_cpu = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0 - reader_cpu;
        printf("io_uring splice: %.3f sender CPU-s per GB\n", send_cpu / (bytes / 1e9));
    }
    return 0;
}
