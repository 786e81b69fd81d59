/* server/control_cpus.c: the set control_cpus picks (auto against pinned,
 * unpinned and all-CPU workers; an explicit list), whether it keeps the
 * control thread apart from the workers, and the "0-3,8" text. The
 * affinity calls themselves run in tests/integration/test_control_cpus.py. */
#include <stdlib.h>
#include <string.h>

#include "he_test.h"
#include "server/net/net.h" /* the test builds a generation by hand */
#include "server/control/control.h"

static cpu_set_t he_t_set(const char *list)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    for (char *p = (char *)list; *p;) {
        long a = strtol(p, &p, 10), b = a;
        if (*p == '-') b = strtol(p + 1, &p, 10);
        for (long c = a; c <= b; c++)
            CPU_SET((int)c, &s);
        if (*p == ',') p++;
    }
    return s;
}

static const char *he_t_text(const cpu_set_t *s)
{
    static char buf[256];
    he__control_cpus_text(s, buf, sizeof(buf));
    return buf;
}

static void test_text(void)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    HE_CHECK_STR(he_t_text(&s), "");
    s = he_t_set("5");
    HE_CHECK_STR(he_t_text(&s), "5");
    s = he_t_set("0-3,8,10-11,255");
    HE_CHECK_STR(he_t_text(&s), "0-3,8,10-11,255");
    s = he_t_set("0,2,4");
    HE_CHECK_STR(he_t_text(&s), "0,2,4");
    {
        char small[4];
        s = he_t_set("0-3,8,10-11");
        he__control_cpus_text(&s, small, sizeof(small)); /* cut, still a string */
        HE_CHECK(strlen(small) < sizeof(small));
    }
}

static void test_pick(void)
{
    he_conf_t *conf = calloc(1, sizeof(*conf));
    he_worker_t w[3];
    he_server_t srv;
    cpu_set_t allowed = he_t_set("0-7"), out;

    memset(w, 0, sizeof(w));
    memset(&srv, 0, sizeof(srv));
    srv.workers = w;
    srv.nworkers = 3;
    w[0].cpu = 1;
    w[1].cpu = 2;
    w[2].cpu = 3;

    /* auto: the allowed CPUs no worker is pinned to */
    he__control_cpus_pick(conf, &allowed, &srv, &out);
    HE_CHECK_STR(he_t_text(&out), "0,4-7");
    HE_CHECK(he__control_cpus_apart(&out, &srv));
    /* before any worker exists: all of them */
    he__control_cpus_pick(conf, &allowed, NULL, &out);
    HE_CHECK_STR(he_t_text(&out), "0-7");
    /* workers on every CPU: shared, all of them */
    allowed = he_t_set("1-3");
    he__control_cpus_pick(conf, &allowed, &srv, &out);
    HE_CHECK_STR(he_t_text(&out), "1-3");
    HE_CHECK(!he__control_cpus_apart(&out, &srv));
    /* an unpinned worker may run anywhere: never apart */
    allowed = he_t_set("0-7");
    w[1].cpu = -1;
    he__control_cpus_pick(conf, &allowed, &srv, &out);
    HE_CHECK_STR(he_t_text(&out), "0,2,4-7");
    HE_CHECK(!he__control_cpus_apart(&out, &srv));
    w[1].cpu = 2;
    /* a list: as given, whatever the workers */
    conf->control_cpus[0] = 6;
    conf->control_cpus[1] = 2;
    conf->ncontrol_cpus = 2;
    he__control_cpus_pick(conf, &allowed, &srv, &out);
    HE_CHECK_STR(he_t_text(&out), "2,6");
    HE_CHECK(!he__control_cpus_apart(&out, &srv));
    conf->ncontrol_cpus = 1;
    he__control_cpus_pick(conf, &allowed, &srv, &out);
    HE_CHECK_STR(he_t_text(&out), "6");
    HE_CHECK(he__control_cpus_apart(&out, &srv));
    free(conf);
}

int main(void)
{
    test_text();
    test_pick();
    HE_TEST_MAIN_END();
}
