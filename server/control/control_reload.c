/* SIGHUP: reloading the configuration file.
 *
 * A file that fails to load changes nothing. Keys that only the data path
 * reads (timeouts, CORS, Cache-Control, limits that size nothing) are
 * published to the running workers; the control thread's own keys (log
 * files, log level, admin.listen) it applies itself. Keys that need new
 * sockets or threads start a new generation of workers beside the old one
 * and retire the old one:
 *
 *   1. the new generation binds its listeners into the same SO_REUSEPORT
 *      groups and starts accepting;
 *   2. the group's steering program is pointed at the new sockets, so new
 *      SYNs reach only them; the old workers keep accepting for
 *      HE_CONTROL_GRACE_MS so that handshakes already begun on their
 *      sockets are accepted and served;
 *   3. the old listeners are shut down (shutdown(2) on a listening socket
 *      takes it out of the group at once). With net.ipv4.tcp_migrate_req=1,
 *      which this file sets when it can, anything still queued on them
 *      moves to a new socket instead of being reset;
 *   4. the old workers drain softly: every connection answers one more
 *      request with Connection: close, bounded by timeouts.drain.
 * See docs/operations.md. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/control/control.h"
#include "server/base/log.h"
#include "server/control/metrics.h"

/* ---------------------------------------------------------------- what changed */

/* Whether going from a to b needs a new generation of workers; why lists
 * the keys that need it. Live keys are listed here; every other key needs
 * new workers, so a key added to conf/ later is safe by default. */
static bool he_reload_needs_workers(const he_conf_t *a, const he_conf_t *b, char *why, size_t len)
{
    he_conf_t *t = malloc(sizeof(*t));
    bool listen = a->nlisten != b->nlisten, tls_listen = a->ntls_listen != b->ntls_listen;
    bool differ;
    size_t off = 0;

    if (!t) return true;
    /* t = b with every live key taken from a: what remains must be equal. */
    memcpy(t, b, sizeof(*t));
    memcpy(t->file, a->file, sizeof(t->file));
    t->generation = a->generation;
    t->max_header_bytes = a->max_header_bytes; /* sizes no buffer */
    if (b->max_uri_bytes <= a->max_uri_bytes) t->max_uri_bytes = a->max_uri_bytes;
    t->header_timeout_ms = a->header_timeout_ms;
    t->keepalive_timeout_ms = a->keepalive_timeout_ms;
    t->send_timeout_ms = a->send_timeout_ms;
    t->drain_timeout_ms = a->drain_timeout_ms;
    t->tls_handshake_timeout_ms = a->tls_handshake_timeout_ms;
    t->tls_first_record = a->tls_first_record; /* read per write */
    t->tls_write_buffer = a->tls_write_buffer; /* read as each large body starts */
    /* the worker's loop reads them from its conf at every wait */
    t->ring_batch = a->ring_batch;
    t->ring_batch_wait_us = a->ring_batch_wait_us;
    t->ring_slice_us = a->ring_slice_us;
    memcpy(t->cors_allow_origin, a->cors_allow_origin, sizeof(t->cors_allow_origin));
    memcpy(t->cors_timing_allow_origin, a->cors_timing_allow_origin,
           sizeof(t->cors_timing_allow_origin));
    memcpy(t->cache_control, a->cache_control, sizeof(t->cache_control));
    t->log_level = a->log_level;
    memcpy(t->error_log, a->error_log, sizeof(t->error_log));
    memcpy(t->access_log, a->access_log, sizeof(t->access_log));
    t->access_log_format = a->access_log_format;
    t->admin_listen = a->admin_listen;
    /* the admin listener reads them per request; PURGE per request too */
    memcpy(t->admin_allow, a->admin_allow, sizeof(t->admin_allow));
    t->nadmin_allow = a->nadmin_allow;
    memcpy(t->admin_token_file, a->admin_token_file, sizeof(t->admin_token_file));
    memcpy(t->admin_token, a->admin_token, sizeof(t->admin_token));
    memcpy(t->control_cpus, a->control_cpus, sizeof(t->control_cpus)); /* he__control_pin */
    t->ncontrol_cpus = a->ncontrol_cpus;
    /* certificates: he_tls_reload swaps them under running workers */
    memcpy(t->tls_certs, a->tls_certs, sizeof(t->tls_certs));
    t->ntls_certs = a->ntls_certs;
    /* auth rules and keys: read per request from the worker's conf, so a
     * key rotated by SIGHUP applies to the next request on every worker */
    memcpy(t->auth, a->auth, sizeof(t->auth));
    t->nauth = a->nauth;
    differ = memcmp(t, a, sizeof(*t)) != 0;
    free(t);
    if (!differ) return false;

    for (unsigned i = 0; !listen && i < a->nlisten; i++)
        listen = strcmp(a->listen[i].text, b->listen[i].text) != 0;
    for (unsigned i = 0; !tls_listen && i < a->ntls_listen; i++)
        tls_listen = strcmp(a->tls_listen[i].text, b->tls_listen[i].text) != 0;
    why[0] = 0;
#define HE_KEY(cond, name)                                                                         \
    do {                                                                                           \
        if ((cond) && off < len)                                                                   \
            off += (size_t)snprintf(why + off, len - off, "%s%s", off ? ", " : "", name);          \
    } while (0)
    HE_KEY(listen, "listen");
    HE_KEY(tls_listen, "tls.listen");
    HE_KEY(a->workers != b->workers, "workers");
    HE_KEY(a->ncpus != b->ncpus || memcmp(a->cpus, b->cpus, sizeof(a->cpus)) != 0, "cpus");
    HE_KEY(a->pin != b->pin, "pin");
    HE_KEY(a->numa != b->numa, "numa");
    HE_KEY(strcmp(a->root, b->root) != 0, "root");
    HE_KEY(a->max_connections != b->max_connections, "limits.max_connections");
    /* the target buffers are sized by uri_bytes; a smaller limit is live */
    HE_KEY(b->max_uri_bytes > a->max_uri_bytes, "limits.uri_bytes (larger)");
    HE_KEY(a->fd_cache_entries != b->fd_cache_entries, "fd_cache.entries");
    /* the open-file cache takes its validity period at creation */
    HE_KEY(a->fd_cache_valid_ms != b->fd_cache_valid_ms, "fd_cache.valid");
    if (off == 0) HE_KEY(true, "tls, cache or origin settings");
#undef HE_KEY
    return true;
}

/* ---------------------------------------------------------------- reuseport groups */

static he_rgroup_t *he_reload_group(he_control_t *ctl, const char *addr, bool create)
{
    he_rgroup_t *g;
    for (unsigned i = 0; i < ctl->ngroups; i++)
        if (strcmp(ctl->groups[i].addr, addr) == 0) return &ctl->groups[i];
    if (!create) return NULL;
    g = realloc(ctl->groups, sizeof(*g) * (ctl->ngroups + 1));
    if (!g) return NULL;
    ctl->groups = g;
    g = &ctl->groups[ctl->ngroups++];
    memset(g, 0, sizeof(*g));
    snprintf(g->addr, sizeof(g->addr), "%s", addr);
    return g;
}

void he__control_groups_add(he_control_t *ctl, he_server_t *s)
{
    unsigned nw = he_server_nworkers(s);
    for (unsigned li = 0; li < he_server_nlisteners(s); li++) {
        he_rgroup_t *g = he_reload_group(ctl, he_server_listener_text(s, li), true);
        if (!g) continue;
        for (unsigned k = 0; k < nw; k++) {
            if (g->n == g->cap) {
                unsigned cap = g->cap ? g->cap * 2 : 16;
                int *n = realloc(g->fds, sizeof(int) * cap);
                if (!n) return;
                g->fds = n;
                g->cap = cap;
            }
            g->fds[g->n++] = he_server_listener_fd(s, li, k);
        }
    }
}

/* The kernel's reuseport_detach_sock: the last socket takes the place of
 * the one leaving. */
static void he_reload_group_remove(he_control_t *ctl, const char *addr, int fd)
{
    he_rgroup_t *g = he_reload_group(ctl, addr, false);
    for (unsigned i = 0; g && i < g->n; i++) {
        if (g->fds[i] == fd) {
            g->fds[i] = g->fds[--g->n];
            return;
        }
    }
}

/* Points the group of listen address li at the sockets of s: the worker
 * on the receiving CPU when it has one, else a spread by CPU number, like
 * listener.c's program but returning each socket's index in the group. */
static void he_reload_steer(he_control_t *ctl, he_server_t *s, unsigned li)
{
    const char *addr = he_server_listener_text(s, li);
    he_rgroup_t *g = he_reload_group(ctl, addr, false);
    unsigned n = he_server_nworkers(s), i = 0, *pos;
    struct sock_filter *code;
    struct sock_fprog prog;
    int fd = he_server_listener_fd(s, li, 0);

    if (!he_server_features(s)->reuseport_cbpf || !g) return;
    if (g->n == n && n == 1) {
        /* alone in the group: no program needed */
        setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &i, sizeof(i));
        return;
    }
    if (4 * n + 4 > BPF_MAXINSNS) return;
    pos = calloc(n, sizeof(*pos));
    code = calloc(4 * n + 4, sizeof(*code));
    if (!pos || !code) goto out;
    for (unsigned k = 0; k < n; k++) {
        int want = he_server_listener_fd(s, li, k);
        pos[k] = UINT32_MAX;
        for (unsigned j = 0; j < g->n; j++)
            if (g->fds[j] == want) pos[k] = j;
        if (pos[k] == UINT32_MAX) goto out; /* not in the model: leave the kernel's choice */
    }
    code[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_CPU);
    for (unsigned k = 0; k < n; k++) {
        he_server_worker_view_t v;
        he_server_worker_view(s, k, &v);
        if (v.cpu < 0) continue;
        code[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)v.cpu, 0, 1);
        code[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, pos[k]);
    }
    code[i++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n);
    for (unsigned k = 0; k + 1 < n; k++) {
        code[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 1);
        code[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, pos[k]);
    }
    code[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, pos[n - 1]);
    prog.len = (unsigned short)i;
    prog.filter = code;
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) < 0)
        he_log_warn("reload: listen %s: steering program not attached (%s)", addr, strerror(errno));
out:
    free(pos);
    free(code);
}

/* net.ipv4.tcp_migrate_req=1 lets the kernel move connections queued on a
 * listener that closes to another socket of its group. It is per network
 * namespace; set it once, when a hand-over first needs it. */
static void he_reload_enable_migrate(he_control_t *ctl)
{
    static const char path[] = "/proc/sys/net/ipv4/tcp_migrate_req";
    char v = 0;
    int fd;

    if (ctl->migrate_checked) return;
    ctl->migrate_checked = true;
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &v, 1) != 1) {
        he_log_warn("reload: %s unavailable: connections queued on the old listeners at the "
                    "switch may be reset",
                    path);
    } else if (v != '1') {
        if (lseek(fd, 0, SEEK_SET) == 0 && write(fd, "1\n", 2) == 2)
            he_log_info("reload: set net.ipv4.tcp_migrate_req=1 so connections queued on retired "
                        "listeners move to the new ones");
        else
            he_log_warn("reload: cannot set net.ipv4.tcp_migrate_req=1 (%s): connections queued "
                        "on the old listeners at the switch may be reset",
                        strerror(errno));
    }
    if (fd >= 0) close(fd);
}

/* ---------------------------------------------------------------- generations */

void he__control_fold_gen(he_control_t *ctl, he_gen_t *g)
{
    for (unsigned k = 0; k < he_server_nworkers(g->server) && k < ctl->nids; k++) {
        he_server_worker_view_t v;
        he_server_worker_view(g->server, k, &v);
        he_metrics_stats_add(&ctl->base[k], v.stats);
        ctl->base_cpu_s[k] += g->cpu_s[k];
    }
}

/* Steps 1-2 of the hand-over: s is running; old keeps accepting a while. */
static void he_reload_hand_over(he_control_t *ctl, he_gen_t *old, he_server_t *s)
{
    he__control_groups_add(ctl, s);
    he_reload_enable_migrate(ctl);
    for (unsigned li = 0; li < he_server_nlisteners(s); li++)
        he_reload_steer(ctl, s, li);
    he_server_set_retiring(old->server);
    old->state = HE_GEN_GRACE;
    old->grace_until_ms = uv_now(&ctl->loop) + HE_CONTROL_GRACE_MS;
}

/* Steps 3-4: shut the old listeners in a fixed order (so the model of the
 * groups stays exact), re-steer, and drain the old workers. */
static void he_reload_end_grace(he_control_t *ctl, he_gen_t *old)
{
    he_server_t *s = old->server, *cur = he__control_serving(ctl)->server;
    for (unsigned li = 0; li < he_server_nlisteners(s); li++) {
        const char *addr = he_server_listener_text(s, li);
        for (unsigned k = 0; k < he_server_nworkers(s); k++) {
            int fd = he_server_listener_fd(s, li, k);
            if (fd < 0) continue;
            if (shutdown(fd, SHUT_RDWR) < 0)
                he_log_warn("reload: shutdown of listener %s: %s", addr, strerror(errno));
            he_reload_group_remove(ctl, addr, fd);
        }
    }
    for (unsigned li = 0; li < he_server_nlisteners(cur); li++)
        he_reload_steer(ctl, cur, li);
    he_server_set_drain_timeout(s, ctl->conf->drain_timeout_ms); /* the new one */
    he_server_retire(s);
    old->state = HE_GEN_DRAINING;
}

/* Whether a worker may still use c. A worker switches to what it loads
 * from conf_next and only then stores that generation in conf_ack: until
 * it has, it may hold any configuration published after the one it
 * acknowledged (conf_next may have moved on since it loaded it). So only
 * configurations older than every live worker's acknowledgement are free;
 * generations only grow. */
static bool he_reload_conf_in_use(he_control_t *ctl, const he_conf_t *c)
{
    if (c == ctl->conf) return true;
    for (unsigned i = 0; i < ctl->ngens; i++) {
        he_server_t *s = ctl->gens[i].server;
        if (he_server_conf(s) == c) return true;
        for (unsigned k = 0; k < he_server_nworkers(s); k++) {
            he_server_worker_view_t v;
            he_server_worker_view(s, k, &v);
            if (v.running && !v.exited && v.conf_ack <= c->generation) return true;
        }
    }
    return false;
}

void he__control_reload_tick(he_control_t *ctl)
{
    uint64_t now = uv_now(&ctl->loop);
    bool ended = false;

    for (unsigned i = 0; i + 1 < ctl->ngens; i++) {
        he_gen_t *g = &ctl->gens[i];
        if (g->state == HE_GEN_GRACE && now >= g->grace_until_ms) {
            he_reload_end_grace(ctl, g);
            ended = true;
        }
    }
    /* Free the generations that finished draining (their access log
     * records were drained just before this). */
    for (unsigned i = 0; i + 1 < ctl->ngens;) {
        he_gen_t *g = &ctl->gens[i];
        if (g->state != HE_GEN_DRAINING || !he_server_exited(g->server)) {
            i++;
            continue;
        }
        for (unsigned k = 0; k < he_server_nworkers(g->server); k++)
            he_alog_drain(&ctl->alog, he_server_alog_ring(g->server, k));
        he_alog_flush(&ctl->alog);
        he__control_fold_gen(ctl, g);
        he_server_wait(g->server);
        he_log_info("reload: previous worker generation (configuration %u) finished draining",
                    he_server_conf(g->server)->generation);
        he_server_delete(g->server);
        free(g->cpu_s);
        memmove(g, g + 1, sizeof(*g) * (ctl->ngens - i - 1));
        ctl->ngens--;
    }
    for (unsigned i = 0; i < ctl->nconfs;) {
        if (he_reload_conf_in_use(ctl, ctl->confs[i])) {
            i++;
            continue;
        }
        free(ctl->confs[i]);
        ctl->confs[i] = ctl->confs[--ctl->nconfs];
    }
    if (ended && ctl->reload_pending && !ctl->draining) {
        ctl->reload_pending = false;
        he__control_reload(ctl);
    }
}

/* ---------------------------------------------------------------- reload */

/* Whether path can be opened for appending (checked before anything
 * changes, so that a bad log path rejects the whole reload). */
static int he_reload_check_file(const char *path)
{
    int fd;
    if (!path[0]) return 0;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    close(fd);
    return 0;
}

static unsigned he_reload_port(const he_conf_listen_t *l)
{
    if (l->addr.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&l->addr)->sin_port);
    if (l->addr.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&l->addr)->sin6_port);
    return 0;
}

/* Binds the admin listener again where it was, after it let its port go
 * for a move that then failed. */
static void he_reload_admin_back(he_control_t *ctl)
{
    char err[256];
    if (he_admin_start(&ctl->admin, &ctl->loop, &ctl->admin_addr, err, sizeof(err)) < 0)
        he_log_error("reload: %s: no admin listener until a reload binds one", err);
    else
        he_admin_set_conf(ctl->admin, ctl->conf);
}

static void he_reload_fail(he_control_t *ctl, const char *what)
{
    ctl->reloads_failed++;
    he_log_error("reload failed, configuration generation %u keeps serving: %s",
                 ctl->conf->generation, what);
}

void he__control_reload(he_control_t *ctl)
{
    char err[PATH_MAX + HE_CONF_ERR_MAX], keys[256];
    he_conf_t *old = ctl->conf, *n;
    he_server_t *s = NULL;
    he_admin_t *admin = NULL;
    bool admin_changed, needs, alog_changed, admin_moved = false;
    int rc;

    if (ctl->draining) {
        he_log_warn("SIGHUP ignored: draining");
        return;
    }
    if (!old->file[0]) {
        he_log_warn("SIGHUP ignored: running on built-in defaults, no file to reload");
        return;
    }
    for (unsigned i = 0; i < ctl->ngens; i++) {
        if (ctl->gens[i].state == HE_GEN_GRACE) {
            he_log_info("SIGHUP: a listener hand-over is under way; reloading after it");
            ctl->reload_pending = true;
            return;
        }
    }
    he_log_info("SIGHUP: reloading %s", old->file);
    n = malloc(sizeof(*n));
    if (!n) {
        he_reload_fail(ctl, "out of memory");
        return;
    }
    rc = he_conf_load(n, old->file, err, sizeof(err));
    if (rc < 0) {
        he_reload_fail(ctl, err);
        free(n);
        return;
    }
    n->generation = old->generation + 1;
    needs = he_reload_needs_workers(old, n, keys, sizeof(keys));
    admin_changed = strcmp(ctl->admin_addr.text, n->admin_listen.text) != 0;
    alog_changed = strcmp(old->access_log, n->access_log) != 0 ||
                   old->access_log_format != n->access_log_format;

    /* Everything that can fail comes first; nothing has changed yet. */
    if (needs && ctl->ngens == HE_CONTROL_MAX_GENS) {
        he_reload_fail(ctl, "too many worker generations still draining");
        free(n);
        return;
    }
    if (strcmp(old->error_log, n->error_log) != 0 &&
        (rc = he_reload_check_file(n->error_log)) < 0) {
        snprintf(err, sizeof(err), "log.file %s: %s", n->error_log, strerror(-rc));
        goto fail;
    }
    if (alog_changed && (rc = he_reload_check_file(n->access_log)) < 0) {
        snprintf(err, sizeof(err), "log.access %s: %s", n->access_log, strerror(-rc));
        goto fail;
    }
    if (admin_changed && n->admin_listen.addr.ss_family) {
        rc = he_admin_start(&admin, &ctl->loop, &n->admin_listen, err, sizeof(err));
        if (rc == UV_EADDRINUSE && ctl->admin &&
            he_reload_port(&ctl->admin_addr) == he_reload_port(&n->admin_listen)) {
            /* A wildcard and a specific address on one port cannot both be
             * bound: the old listener lets the port go (its fd closes at
             * once) and is bound again if the move fails, here or later. */
            he_admin_stop(ctl->admin);
            ctl->admin = NULL;
            rc = he_admin_start(&admin, &ctl->loop, &n->admin_listen, err, sizeof(err));
            if (rc < 0)
                he_reload_admin_back(ctl);
            else
                admin_moved = true;
        }
        if (rc < 0) goto fail;
    }
    if (needs) {
        he_log_info("reload: %s changed: starting a new generation of workers", keys);
        rc = he_server_new(&s, n, err, sizeof(err));
        if (rc < 0) goto fail;
        he_server_set_alog_notify(s, &ctl->alog_async);
        he_server_set_alog_enabled(s, ctl->alog.fd >= 0);
        rc = he_server_start(s, err, sizeof(err));
        if (rc == 0) rc = he__control_add_gen(ctl, s);
        if (rc < 0) {
            he_server_drain(s);
            he_server_wait(s);
            he_server_delete(s);
            s = NULL;
            goto fail;
        }
    }

    /* Certificates may change on disk under the same names: the running
     * workers take them for new handshakes. Last, as it cannot be undone. */
    if (!needs && he_server_tls_reload(he__control_serving(ctl)->server, n, err, sizeof(err)) < 0)
        goto fail;

    /* Commit. */
    he__control_keep_conf(ctl, n);
    ctl->conf = n;
    he_log_level = n->log_level;
    if (strcmp(old->error_log, n->error_log) != 0 && (rc = he_log_open(n->error_log)) < 0)
        he_log_error("reload: log.file %s: %s", n->error_log, strerror(-rc));
    if (alog_changed) {
        he__control_drain_logs(ctl);
        if ((rc = he_alog_open(&ctl->alog, n->access_log, n->access_log_format)) < 0)
            he_log_error("reload: log.access %s: %s", n->access_log, strerror(-rc));
        he__control_set_alog_enabled(ctl);
    }
    if (admin_changed) {
        he_admin_stop(ctl->admin);
        ctl->admin = admin;
        ctl->admin_addr = n->admin_listen;
    }
    he_admin_set_conf(ctl->admin, n); /* admin.allow and the token are live */
    if (needs) {
        he_reload_hand_over(ctl, &ctl->gens[ctl->ngens - 2], s);
    } else {
        he_server_publish_conf(he__control_serving(ctl)->server, n);
    }
    he__control_pin(ctl); /* control_cpus, or the new workers' CPUs */
    ctl->reloads_ok++;
    he_log_info("reload: configuration generation %u applied (%s)", n->generation,
                needs ? "new workers; the previous ones drain" : "live, same workers");
    /* new workers log it as they start; running ones take ring.* live */
    if (!needs && (old->ring_batch != n->ring_batch ||
                   old->ring_batch_wait_us != n->ring_batch_wait_us ||
                   old->ring_slice_us != n->ring_slice_us)) {
        char waits[192];
        he_server_describe_waits(he__control_serving(ctl)->server, n, waits, sizeof(waits));
        he_log_info("reload: workers now wait %s", waits);
    }
    return;

fail:
    he_admin_stop(admin);
    if (admin_moved) he_reload_admin_back(ctl);
    he_reload_fail(ctl, err);
    free(n);
}
