/* server/control_cpus.c: where the control thread runs (control_cpus).
 *
 * The control thread formats and writes the access log: 105-190 ns and
 * about 400 bytes through the caches per request. On a worker's CPU that
 * time is the worker's (a preemption whenever the control thread wakes,
 * shared caches), so the control thread goes to CPUs no worker is pinned
 * to when there are any ("auto"), or where the operator says. Threads
 * inherit their creator's CPUs, so worker generations started later by
 * this thread get the process's own set back explicitly
 * (he_server_start). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "server/control/control.h"
#include "server/base/log.h"

/* "0-3,8" for a set; "" when empty. */
void he__control_cpus_text(const cpu_set_t *set, char *out, size_t cap)
{
    size_t off = 0;
    out[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && off < cap; c++) {
        int e = c;
        if (!CPU_ISSET(c, set)) continue;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        if (e > c)
            off += (size_t)snprintf(out + off, cap - off, "%s%d-%d", off ? "," : "", c, e);
        else
            off += (size_t)snprintf(out + off, cap - off, "%s%d", off ? "," : "", c);
        c = e;
    }
}

/* The set control_cpus asks for, given the CPUs the process may use and
 * the workers now serving (NULL: none yet). */
void he__control_cpus_pick(const he_conf_t *conf, const cpu_set_t *allowed,
                           const he_server_t *serving, cpu_set_t *out)
{
    CPU_ZERO(out);
    if (conf->ncontrol_cpus) {
        for (unsigned i = 0; i < conf->ncontrol_cpus; i++)
            CPU_SET(conf->control_cpus[i], out);
        return;
    }
    CPU_OR(out, out, allowed);
    for (unsigned i = 0; serving && i < he_server_nworkers(serving); i++) {
        he_server_worker_view_t v;
        he_server_worker_view(serving, i, &v);
        if (v.cpu >= 0) CPU_CLR(v.cpu, out);
    }
    if (CPU_COUNT(out) == 0) CPU_OR(out, out, allowed); /* workers take them all */
}

/* Whether a control thread on set shares no CPU with a worker (never, when
 * workers are not pinned: they may run anywhere). */
bool he__control_cpus_apart(const cpu_set_t *set, const he_server_t *serving)
{
    for (unsigned i = 0; serving && i < he_server_nworkers(serving); i++) {
        he_server_worker_view_t v;
        he_server_worker_view(serving, i, &v);
        if (v.cpu < 0 || CPU_ISSET(v.cpu, set)) return false;
    }
    return true;
}

void he__control_pin(he_control_t *ctl)
{
    he_gen_t *g = he__control_serving(ctl);
    const he_server_t *s = g ? g->server : NULL;
    cpu_set_t allowed, want, before, now, missing;
    char text[sizeof(ctl->cpus_text)];
    bool first = ctl->cpus_text[0] == 0, moved = false;
    int rc = 0;

    he_server_cpus_allowed(&allowed);
    he__control_cpus_pick(ctl->conf, &allowed, s, &want);
    if (pthread_getaffinity_np(pthread_self(), sizeof(now), &now) != 0) now = allowed;
    before = now;
    if (!CPU_EQUAL(&want, &now)) {
        rc = pthread_setaffinity_np(pthread_self(), sizeof(want), &want);
        /* It succeeds when any CPU of want is usable and keeps only those
         * (not the ones that do not exist, are offline or are outside the
         * process's set): read back what the thread got. */
        if (rc == 0 && pthread_getaffinity_np(pthread_self(), sizeof(now), &now) != 0) now = want;
        moved = rc == 0 && !CPU_EQUAL(&before, &now);
    }
    he__control_cpus_text(&now, ctl->cpus_text, sizeof(ctl->cpus_text));
    if (rc != 0) { /* no CPU of want is usable (offline, or outside taskset or the cgroup) */
        he__control_cpus_text(&want, text, sizeof(text));
        he_log_warn("control_cpus: cannot run the control thread on CPUs %s: %s (it stays on %s)",
                    text, strerror(rc), ctl->cpus_text);
    } else if (!CPU_EQUAL(&want, &now)) {
        CPU_XOR(&missing, &want, &now);
        CPU_AND(&missing, &missing, &want);
        he__control_cpus_text(&missing, text, sizeof(text));
        he_log_warn("control_cpus: CPUs %s do not exist, are offline or are outside the process's "
                    "set: the control thread runs on %s only",
                    text, ctl->cpus_text);
    }
    ctl->cpus_apart = he__control_cpus_apart(&now, s);
    if (first || moved)
        he_log_info("control thread on CPUs %s%s", ctl->cpus_text,
                    ctl->cpus_apart ? ""
                                    : " (shared with workers: its access log work lands on them)");
}
