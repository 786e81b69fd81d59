/* loadgen: the connections sweep: which client count gives the most
 * throughput while p99 latency stays within the SLA. */
#include "loadgen/lg.h"

#include <errno.h>
#include <stdlib.h>

static int he_lg_sweep_num(const char **p, unsigned *out)
{
    char *end;
    if (**p < '0' || **p > '9') return -EINVAL;
    unsigned long v = strtoul(*p, &end, 10);
    if (v == 0 || v > 10000000) return -EINVAL;
    *out = (unsigned)v;
    *p = end;
    return 0;
}

int he_lg_sweep_parse(const char *s, unsigned *start, unsigned *end, unsigned *step)
{
    const char *p = s;
    if (he_lg_sweep_num(&p, start) < 0 || *p++ != ':') return -EINVAL;
    if (he_lg_sweep_num(&p, end) < 0) return -EINVAL;
    if (*p == 0) {
        *step = *end >= *start ? (*end - *start) : 1;
        if (*step == 0) *step = 1;
    } else {
        if (*p++ != ':' || he_lg_sweep_num(&p, step) < 0 || *p != 0) return -EINVAL;
    }
    if (*end < *start) return -EINVAL;
    if ((*end - *start) / *step > 1000) return -EINVAL; /* too many points */
    return 0;
}

int he_lg_sweep_best(const he_lg_sweep_point_t *pts, size_t n, double sla_ms)
{
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        const he_lg_sweep_point_t *p = &pts[i];
        if (p->errors || p->p99_ms > sla_ms) continue;
        if (best < 0 || p->gbps > pts[best].gbps ||
            (p->gbps == pts[best].gbps && p->rps > pts[best].rps))
            best = (int)i;
    }
    return best;
}
