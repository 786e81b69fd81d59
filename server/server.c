/* Server lifecycle: workers and their CPUs, listening sockets, start,
 * drain and join. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/log.h"
#include "server/server.h"

/* CPUs this process may run on, in order; worker i gets the i-th. */
static int he_server_pick_cpus(const he_conf_t *conf, int *cpus, unsigned n, char *err,
                               size_t errlen)
{
    cpu_set_t set;
    unsigned k = 0;

    if (conf->ncpus) {
        for (unsigned i = 0; i < n; i++)
            cpus[i] = conf->cpus[i % conf->ncpus];
        return 0;
    }
    if (sched_getaffinity(0, sizeof(set), &set) < 0) {
        snprintf(err, errlen, "sched_getaffinity: %s", strerror(errno));
        return -errno;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE && k < n; cpu++)
        if (CPU_ISSET(cpu, &set)) cpus[k++] = cpu;
    /* More workers than CPUs: wrap around rather than refuse. */
    for (unsigned i = k; i < n; i++)
        cpus[i] = k ? cpus[i % k] : -1;
    return 0;
}

int he_server_init(he_server_t *s, he_conf_t *conf, char *err, size_t errlen)
{
    int *cpus;
    unsigned n = conf->workers;
    int rc;

    memset(s, 0, sizeof(*s));
    s->conf = conf;
    s->root_fd = -1;
    he_features_probe(&s->features);

    if (n == 0) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
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
    rc = he_server_pick_cpus(conf, cpus, n, err, errlen);
    for (unsigned i = 0; i < n; i++) {
        he_worker_t *w = &s->workers[i];
        w->server = s;
        w->id = i;
        w->cpu = conf->pin ? cpus[i] : -1;
        w->conf = conf;
        w->wake_fd = -1;
        w->fixed_files = s->features.fixed_files;
    }
    free(cpus);
    if (rc < 0) return rc;
    return he__listeners_open(s, err, errlen);
}

int he_server_start(he_server_t *s, char *err, size_t errlen)
{
    for (unsigned i = 0; i < s->nworkers; i++) {
        he_worker_t *w = &s->workers[i];
        int rc = pthread_create(&w->thread, NULL, he__worker_main, w);
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
        he_log_info("worker %u: cpu %d, NUMA node %d, %u connection slots, recv %s, files %s", i,
                    w->cpu, w->node, w->conn_cap,
                    s->features.recv_multishot && w->br ? "multishot+buffer ring"
                    : w->br                             ? "single-shot+buffer ring"
                                                        : "single-shot",
                    w->fixed_files ? "registered" : "plain");
    }
    return 0;
}

void he_server_drain(he_server_t *s)
{
    atomic_store(&s->draining, 1);
    for (unsigned i = 0; i < s->nworkers; i++)
        if (s->workers[i].thread && s->workers[i].wake_fd >= 0) he__worker_wake(&s->workers[i]);
}

void he_server_wait(he_server_t *s)
{
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
    free(s->workers);
    s->workers = NULL;
}
