/* Kernel feature probe. Each feature is tried for real on a scratch ring or
 * socket rather than inferred from the kernel version, so backports and
 * seccomp filters are seen as they are. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "server/net/net.h"

/* features.disable forces fallbacks, so tests cover every path; NUMA has
 * no name of its own there and goes with "all". */
static const he_conf_t *he_probe_conf;

static bool he_probe_disabled(const char *name)
{
    if (!he_probe_conf) return false;
    if (strcmp(name, "numa") == 0)
        return (he_probe_conf->features_disabled & HE_CONF_FEATURES_ALL) == HE_CONF_FEATURES_ALL;
    return he_conf_feature_disabled(he_probe_conf, name);
}

static void he_probe_ring(he_features_t *f)
{
    struct io_uring ring;
    struct io_uring_params p;
    struct io_uring_probe *pr;

    memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(8, &ring, &p) == 0) {
        f->single_issuer = f->defer_taskrun = true;
        io_uring_queue_exit(&ring);
    } else {
        memset(&p, 0, sizeof(p));
        p.flags = IORING_SETUP_SINGLE_ISSUER;
        if (io_uring_queue_init_params(8, &ring, &p) == 0) {
            f->single_issuer = true;
            io_uring_queue_exit(&ring);
        }
    }
    memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_COOP_TASKRUN;
    if (io_uring_queue_init_params(8, &ring, &p) == 0) {
        f->coop_taskrun = true;
        io_uring_queue_exit(&ring);
    }

    memset(&p, 0, sizeof(p));
    if (io_uring_queue_init_params(8, &ring, &p) != 0) return;
    f->min_timeout = (p.features & HE_IORING_FEAT_MIN_TIMEOUT) != 0;
    pr = io_uring_get_probe_ring(&ring);
    if (pr) {
        f->send_zc = io_uring_opcode_supported(pr, IORING_OP_SEND_ZC);
        f->fixed_files = io_uring_opcode_supported(pr, IORING_OP_FILES_UPDATE) &&
                         io_uring_register_files_sparse(&ring, 4) == 0;
        io_uring_free_probe(pr);
    }

    /* A buffer ring of one entry tells whether PBUF_RING registration works. */
    {
        void *mem = NULL;
        if (posix_memalign(&mem, 4096, 4096) == 0) {
            struct io_uring_buf_reg reg = {
                .ring_addr = (uintptr_t)mem, .ring_entries = 1, .bgid = 0};
            if (io_uring_register_buf_ring(&ring, &reg, 0) == 0) {
                f->buf_ring = true;
                io_uring_unregister_buf_ring(&ring, 0);
            }
            free(mem);
        }
    }

    /* Multishot accept and recv: submit each on a scratch socket; a kernel
     * without the flag answers -EINVAL at once. Multishot recv also needs a
     * buffer ring, so it is only tried where that works. */
    {
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 1) == 0) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            struct io_uring_cqe *cqe;
            struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
            io_uring_prep_multishot_accept(sqe, ls, NULL, NULL, 0);
            sqe->user_data = 1;
            io_uring_submit(&ring);
            if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == -ETIME) {
                f->multishot_accept = true; /* still armed: accepted the flag */
            } else if (cqe) {
                f->multishot_accept = cqe->res != -EINVAL;
                io_uring_cqe_seen(&ring, cqe);
            }
        }
        if (ls >= 0) close(ls);
    }
    f->recv_multishot = f->buf_ring && f->multishot_accept;

    /* REPORT_USAGE: a kernel without it rejects the flag at prep
     * (-EINVAL); one with it gets as far as the socket, which for AF_UNIX
     * cannot do zero-copy (-EOPNOTSUPP). Either way nothing is sent. */
    if (f->send_zc) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0) {
            static const char byte = 0;
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            struct io_uring_cqe *cqe = NULL;
            struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
            io_uring_prep_send_zc(sqe, sv[0], &byte, 1, MSG_NOSIGNAL, 0);
            sqe->ioprio |= HE_SEND_ZC_REPORT_USAGE;
            sqe->user_data = 2;
            io_uring_submit(&ring);
            bool more = true;
            /* only ours (the accept probe's may still arrive); done after the
             * result, or after its notification if one follows (F_MORE) */
            while (more && io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == 0 && cqe) {
                if (cqe->user_data == 2) {
                    if (cqe->flags & IORING_CQE_F_NOTIF) {
                        more = false;
                    } else {
                        f->zc_report_usage = cqe->res != -EINVAL;
                        more = cqe->flags & IORING_CQE_F_MORE;
                    }
                }
                io_uring_cqe_seen(&ring, cqe);
            }
            close(sv[0]);
            close(sv[1]);
        }
    }
    io_uring_queue_exit(&ring);
}

static bool he_probe_openat2(void)
{
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY, .resolve = RESOLVE_BENEATH};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));
    if (fd < 0) return false;
    close(fd);
    return true;
}

static bool he_probe_cbpf(void)
{
    struct sock_filter code[] = {{BPF_RET | BPF_K, 0, 0, 0}};
    struct sock_fprog prog = {.len = 1, .filter = code};
    int one = 1, ok;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return false;
    setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    ok = setsockopt(s, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) == 0;
    close(s);
    return ok;
}

/* A small /proc file's text, NUL-terminated in buf: its length, or -1
 * when it cannot be read or is empty. */
static ssize_t he_probe_read(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    if (fd < 0) return -1;
    n = read(fd, buf, cap - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n > 0 ? n : -1;
}

static bool he_probe_ktls(void)
{
    char buf[256];
    if (he_probe_read("/proc/sys/net/ipv4/tcp_available_ulp", buf, sizeof(buf)) < 0) return false;
    for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
        if (strcmp(t, "tls") == 0) return true;
    return false;
}

/* The first number in a /proc file, or dflt. */
static unsigned long he_probe_proc_number(const char *path, unsigned long dflt)
{
    char buf[64];
    return he_probe_read(path, buf, sizeof(buf)) < 0 ? dflt : strtoul(buf, NULL, 10);
}

/* CAP_SYS_RESOURCE or CAP_SYS_ADMIN in the effective set: the kernel then
 * lets this user's pipes past fs.pipe-user-pages-soft (fs/pipe.c). */
static bool he_probe_pipe_privileged(void)
{
    char buf[2048], *p;
    if (he_probe_read("/proc/self/status", buf, sizeof(buf)) < 0 || !(p = strstr(buf, "\nCapEff:")))
        return false;
    unsigned long long caps = strtoull(p + 8, NULL, 16);
    return (caps >> 24 & 1) || (caps >> 21 & 1); /* CAP_SYS_RESOURCE, CAP_SYS_ADMIN */
}

void he_features_probe(he_features_t *f, const he_conf_t *conf)
{
    he_probe_conf = conf; /* start-up and reloads run on the control thread */
    memset(f, 0, sizeof(*f));
    he_probe_ring(f);
    f->openat2_beneath = he_probe_openat2();
    f->reuseport_cbpf = he_probe_cbpf();
    f->ktls = he_probe_ktls();
    f->numa_nodes = numa_available() < 0 ? 0 : numa_max_node() + 1;
    f->pipe_max_bytes = (unsigned)he_probe_proc_number("/proc/sys/fs/pipe-max-size", 1u << 20);
    f->pipe_budget_pages = he_probe_pipe_privileged()
                               ? 0
                               : he_probe_proc_number("/proc/sys/fs/pipe-user-pages-soft", 16384);

#define HE_PROBE_OFF(name)                                                                         \
    if (he_probe_disabled(#name)) f->name = false
    HE_PROBE_OFF(single_issuer);
    HE_PROBE_OFF(defer_taskrun);
    HE_PROBE_OFF(coop_taskrun);
    HE_PROBE_OFF(multishot_accept);
    HE_PROBE_OFF(recv_multishot);
    HE_PROBE_OFF(buf_ring);
    HE_PROBE_OFF(fixed_files);
    HE_PROBE_OFF(send_zc);
    HE_PROBE_OFF(zc_report_usage);
    HE_PROBE_OFF(openat2_beneath);
    HE_PROBE_OFF(reuseport_cbpf);
    HE_PROBE_OFF(ktls);
    HE_PROBE_OFF(min_timeout);
#undef HE_PROBE_OFF
    if (he_probe_disabled("numa")) f->numa_nodes = 0;
    if (!f->single_issuer) f->defer_taskrun = false;
    if (!f->buf_ring) f->recv_multishot = false;
    if (!f->send_zc) f->zc_report_usage = false;
}
