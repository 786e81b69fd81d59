/* Server lifecycle: workers and their CPUs, listening sockets, start,
 * drain and join. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "server/base/alog_ring.h"
#include "server/base/log.h"
#include "server/handler/handler.h"
#include "server/net/tls.h"
#include "server/server.h"

/* The process's CPUs as they were at the first call, which comes before
 * the control thread pins itself (control_cpus): later generations of
 * workers are sized and placed by the process's set, not by the control
 * thread's. Called from the control thread only. */
void he_server_cpus_allowed(cpu_set_t *set)
{
    static cpu_set_t allowed;
    static bool known;

    if (!known) {
        if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) {
            CPU_ZERO(&allowed);
            CPU_SET(0, &allowed);
        }
        known = true;
    }
    *set = allowed;
}

/* CPUs this process may run on, in order; worker i gets the i-th. */
static void he_server_pick_cpus(const he_conf_t *conf, int *cpus, unsigned n)
{
    cpu_set_t set;
    unsigned k = 0;

    if (conf->ncpus) {
        for (unsigned i = 0; i < n; i++)
            cpus[i] = conf->cpus[i % conf->ncpus];
        return;
    }
    he_server_cpus_allowed(&set);
    for (int cpu = 0; cpu < CPU_SETSIZE && k < n; cpu++)
        if (CPU_ISSET(cpu, &set)) cpus[k++] = cpu;
    /* More workers than CPUs: wrap around rather than refuse. */
    for (unsigned i = k; i < n; i++)
        cpus[i] = k ? cpus[i % k] : -1;
}

int he_server_init(he_server_t *s, he_conf_t *conf, char *err, size_t errlen)
{
    int *cpus;
    unsigned n = conf->workers;
    int rc;

    memset(s, 0, sizeof(*s));
    s->conf = conf;
    s->root_fd = -1;
    he_features_probe(&s->features, conf);

    if (n == 0) {
        cpu_set_t set;
        he_server_cpus_allowed(&set);
        n = (unsigned)CPU_COUNT(&set);
        if (conf->ncpus && conf->ncpus < n) n = conf->ncpus;
    }
    s->nworkers = n;

    s->root_fd = open(conf->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (s->root_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "root %s: %s", conf->root, strerror(errno));
        return rc;
    }
    s->workers = calloc(n, sizeof(*s->workers));
    cpus = calloc(n, sizeof(int));
    if (!s->workers || !cpus) {
        free(cpus);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    he_server_pick_cpus(conf, cpus, n);
    rc = 0;
    for (unsigned i = 0; i < n; i++) {
        he_worker_t *w = &s->workers[i];
        w->server = s;
        w->id = i;
        w->cpu = conf->pin ? cpus[i] : -1;
        w->conf = conf;
        atomic_store(&w->conf_next, conf);
        atomic_store(&w->conf_ack, conf->generation);
        w->fixed_files = s->features.fixed_files;
        /* Blocking, as the worker's ring reads it: a write would block only
         * at a count of 2^64 - 2. */
        w->wake_fd = eventfd(0, EFD_CLOEXEC);
        w->alog = he_alog_ring_new(HE_ALOG_RING_BYTES);
        if (w->wake_fd < 0 || !w->alog) {
            snprintf(err, errlen, "worker %u: %s", i,
                     w->wake_fd < 0 ? strerror(errno) : "out of memory");
            rc = -ENOMEM;
        }
    }
    free(cpus);
    if (rc < 0) return rc;
    /* origin names resolve here (getaddrinfo), before anything binds */
    rc = he__cache_server_init(s, err, errlen);
    if (rc < 0) return rc;
    /* the protocol, the router and the handlers' worker hooks */
    if ((rc = he_route_server_init(s)) < 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    /* TLS first: a bad certificate fails start-up before anything binds. */
    rc = he__tls_server_init(s, err, errlen);
    if (rc < 0) return rc;
    return he__listeners_open(s, err, errlen);
}

/* Signals the control thread handles; workers block them. */
static const int he_server_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};

int he_server_start(he_server_t *s, char *err, size_t errlen)
{
    sigset_t block, saved;
    pthread_attr_t attr;
    cpu_set_t allowed;

    /* Workers inherit a mask without the control thread's signals, so a
     * signal never interrupts a worker's io_uring_enter and is always
     * handled on the control thread. */
    sigemptyset(&block);
    for (size_t j = 0; j < sizeof(he_server_signals) / sizeof(he_server_signals[0]); j++)
        sigaddset(&block, he_server_signals[j]);
    for (unsigned i = 0; i < s->nworkers; i++) {
        he_worker_t *w = &s->workers[i];
        int rc;
        if (s->alog_notify) he_alog_ring_set_notify(w->alog, s->alog_notify);
        /* The process's CPUs, not the control thread's (control_cpus); a
         * pinned worker then moves to its own (he__worker_main). */
        he_server_cpus_allowed(&allowed);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof(allowed), &allowed);
        pthread_sigmask(SIG_BLOCK, &block, &saved);
        rc = pthread_create(&w->thread, &attr, he__worker_main, w);
        if (rc == EINVAL) /* the process's CPUs changed since (cpuset): inherit */
            rc = pthread_create(&w->thread, NULL, he__worker_main, w);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            snprintf(err, errlen, "worker %u: pthread_create: %s", i, strerror(rc));
            return -rc;
        }
        while (atomic_load(&w->ready) == 0)
            usleep(1000);
        if (atomic_load(&w->ready) < 0) {
            snprintf(err, errlen, "worker %u failed to start: %s", i, strerror(-w->startup_err));
            pthread_join(w->thread, NULL);
            w->thread = 0;
            return w->startup_err;
        }
        char waits[192];
        he_server_describe_waits(s, w->conf, waits, sizeof(waits));
        he_log_info("worker %u: cpu %d, NUMA node %d, %u connection slots, recv %s, files %s, "
                    "waits %s",
                    i, w->cpu, w->node, w->conn_cap,
                    s->features.recv_multishot && w->br ? "multishot+buffer ring"
                    : w->br                             ? "single-shot+buffer ring"
                                                        : "single-shot",
                    w->fixed_files ? "registered" : "plain", waits);
    }
    return 0;
}

void he_server_describe_waits(const he_server_t *s, const he_conf_t *conf, char *buf, size_t len)
{
    unsigned wait_us = he__batch_wait_us(s, conf);
    int n;
    if (wait_us)
        n = snprintf(buf, len, "for up to %u completions or %u us", conf->ring_batch, wait_us);
    else
        n = snprintf(buf, len, "for each completion (%s)",
                     s->features.min_timeout ? "ring.batch_wait_us: 0" : "no min_timeout");
    if (n < 0 || (size_t)n >= len) return;
    if (conf->ring_slice_us)
        snprintf(buf + n, len - (size_t)n, "; bodies' turns yield to new requests every %u us",
                 conf->ring_slice_us);
    else
        snprintf(buf + n, len - (size_t)n, "; each batch runs out (ring.slice_us: 0)");
}

void he_server_drain(he_server_t *s)
{
    if (!s->workers) return;
    atomic_store(&s->draining, 1);
    for (unsigned i = 0; i < s->nworkers; i++)
        if (s->workers[i].thread) he__worker_wake(&s->workers[i]);
}

void he_server_set_drain_timeout(he_server_t *s, unsigned ms)
{
    atomic_store(&s->drain_ms, ms ? ms : 1);
}

void he_server_retire(he_server_t *s)
{
    if (!s->workers) return;
    atomic_store(&s->soft_drain, 1);
    for (unsigned i = 0; i < s->nworkers; i++)
        if (s->workers[i].thread) he__worker_wake(&s->workers[i]);
}

void he_server_publish_conf(he_server_t *s, he_conf_t *conf)
{
    s->conf = conf;
    for (unsigned i = 0; i < s->nworkers; i++) {
        atomic_store_explicit(&s->workers[i].conf_next, conf, memory_order_release);
        if (s->workers[i].thread) he__worker_wake(&s->workers[i]);
    }
}

bool he_server_exited(const he_server_t *s)
{
    if (!s->workers) return true;
    for (unsigned i = 0; i < s->nworkers; i++)
        if (s->workers[i].thread && !atomic_load(&s->workers[i].exited)) return false;
    return true;
}

void he_server_wait(he_server_t *s)
{
    if (!s->workers) return;
    for (unsigned i = 0; i < s->nworkers; i++)
        if (s->workers[i].thread) {
            pthread_join(s->workers[i].thread, NULL);
            s->workers[i].thread = 0;
        }
}

void he_server_free(he_server_t *s)
{
    he__listeners_close(s);
    if (s->root_fd >= 0) close(s->root_fd);
    s->root_fd = -1;
    for (unsigned i = 0; s->workers && i < s->nworkers; i++) {
        if (s->workers[i].wake_fd >= 0) close(s->workers[i].wake_fd);
        he_alog_ring_free(s->workers[i].alog);
    }
    he__tls_server_free(s); /* logs the TLS totals from the workers' counters */
    he__cache_server_free(s); /* the shared tiers go with the last generation */
    he_route_server_free(s);
    free(s->workers);
    s->workers = NULL;
}
