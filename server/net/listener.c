/* Listening sockets: one per worker per listen address, in one
 * SO_REUSEPORT group. A classic BPF program attached to the group picks the
 * socket of the worker on the CPU that received the packet, so once RX-queue
 * IRQs are pinned (docs/tuning.md) a worker serves exactly one NIC queue and
 * a connection never crosses CPUs. TLS listeners (conf->tls_listen) are
 * opened the same way after the plain ones. */
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/base/log.h"
#include "server/net/net.h"

/* Builds: A = cpu; for each worker k: if A == cpu_k return k; return A % n.
 * The group index is the order in which sockets joined the group, which is
 * worker order because they are bound in that order below. */
static int he_listener_attach_cbpf(he_server_t *s, int fd)
{
    unsigned n = s->nworkers;
    struct sock_filter *code = calloc(2 * n + 4, sizeof(*code));
    struct sock_fprog prog;
    unsigned i = 0;
    int rc;

    if (!code) return -ENOMEM;
    code[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_CPU);
    for (unsigned k = 0; k < n; k++) {
        if (s->workers[k].cpu < 0) continue;
        /* jt skips to the "ret k" right after; jf skips over it */
        code[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                                 (unsigned)s->workers[k].cpu, 0, 1);
        code[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, k);
    }
    code[i++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n);
    code[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
    prog.len = (unsigned short)i;
    prog.filter = code;
    rc = setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog));
    free(code);
    return rc < 0 ? -errno : 0;
}

static int he_listener_socket(const he_conf_listen_t *l, char *err, size_t errlen)
{
    int one = 1;
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = -errno;
        snprintf(err, errlen, "listen %s: socket: %s", l->text, strerror(-e));
        return e;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
        int e = -errno;
        snprintf(err, errlen, "listen %s: SO_REUSEPORT: %s", l->text, strerror(-e));
        close(fd);
        return e;
    }
    if (l->addr.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&l->addr, l->addrlen) < 0) {
        int e = -errno;
        snprintf(err, errlen, "listen %s: bind: %s", l->text, strerror(-e));
        close(fd);
        return e;
    }
    if (listen(fd, 4096) < 0) {
        int e = -errno;
        snprintf(err, errlen, "listen %s: listen: %s", l->text, strerror(-e));
        close(fd);
        return e;
    }
    return fd;
}

const he_conf_listen_t *he__listener_conf(const he_server_t *s, unsigned li, bool *tls)
{
    unsigned nplain = s->nlisten - s->nlisten_tls;
    if (tls) *tls = li >= nplain;
    return li >= nplain ? &s->conf->tls_listen[li - nplain] : &s->conf->listen[li];
}

/* Plain listen addresses first, then the TLS ones; a TLS listener behaves
 * like a plain one (same group, same steering) and differs only in what
 * the worker does with an accepted socket. */
int he__listeners_open(he_server_t *s, char *err, size_t errlen)
{
    const he_conf_t *c = s->conf;
    unsigned n = s->nworkers;

    s->nlisten_tls = s->tls ? c->ntls_listen : 0;
    s->nlisten = c->nlisten + s->nlisten_tls;
    s->listen_fds = malloc(sizeof(int) * s->nlisten * n + 1);
    if (!s->listen_fds) return -ENOMEM;
    for (unsigned i = 0; i < s->nlisten * n; i++)
        s->listen_fds[i] = -1;

    for (unsigned li = 0; li < s->nlisten; li++) {
        const he_conf_listen_t *l = he__listener_conf(s, li, NULL);
        for (unsigned k = 0; k < n; k++) {
            int fd = he_listener_socket(l, err, errlen);
            if (fd < 0) {
                he__listeners_close(s);
                return fd;
            }
            s->listen_fds[li * n + k] = fd;
            if (k == 0 && n > 1 && s->features.reuseport_cbpf) {
                int rc = he_listener_attach_cbpf(s, fd);
                if (rc < 0)
                    he_log_warn("listen %s: CPU steering program not attached (%s); the kernel's "
                                "hash spreads connections instead",
                                l->text, strerror(-rc));
            }
        }
    }
    return 0;
}

void he__listeners_close(he_server_t *s)
{
    if (!s->listen_fds) return;
    for (unsigned i = 0; i < s->nlisten * s->nworkers; i++)
        if (s->listen_fds[i] >= 0) close(s->listen_fds[i]);
    free(s->listen_fds);
    s->listen_fds = NULL;
}
