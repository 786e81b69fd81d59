/* server/control_reload.c: which configurations a reload may free. A
 * worker loads conf_next and only then acknowledges it, so between the two
 * it uses a configuration newer than its acknowledgement; one published
 * after that must not be taken for unused either. The reload itself runs
 * in tests/integration/test_reload.py. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "he_test.h"
#include "server/net/net.h" /* the test builds a generation by hand */
#include "server/control/control_reload.c"

static void test_conf_in_use(void)
{
    he_control_t *ctl = calloc(1, sizeof(*ctl));
    he_conf_t *c[5];
    he_worker_t w[2];
    he_server_t srv;

    for (unsigned i = 1; i <= 4; i++) {
        c[i] = calloc(1, sizeof(*c[i]));
        c[i]->generation = i;
    }
    memset(w, 0, sizeof(w));
    memset(&srv, 0, sizeof(srv));
    srv.workers = w;
    srv.nworkers = 2;
    for (unsigned k = 0; k < 2; k++) {
        w[k].server = &srv;
        w[k].thread = pthread_self(); /* running */
    }
    ctl->gens[0].server = &srv;
    ctl->ngens = 1;

    /* Worker 0 serves 3. Worker 1 acknowledged 1, then loaded 2 from
     * conf_next; before it stored its acknowledgement, 3 and then 4 were
     * published (the server's and the control thread's current one). */
    atomic_store(&w[0].conf_ack, 3);
    atomic_store(&w[1].conf_ack, 1);
    srv.conf = c[4];
    ctl->conf = c[4];
    HE_CHECK(he_reload_conf_in_use(ctl, c[4]));
    HE_CHECK(he_reload_conf_in_use(ctl, c[1])); /* acknowledged */
    HE_CHECK(he_reload_conf_in_use(ctl, c[2])); /* loaded, not acknowledged */
    HE_CHECK(he_reload_conf_in_use(ctl, c[3])); /* published after: may be loaded */

    /* worker 1 acknowledges 3: 1 and 2 are nobody's now, 3 still worker 0's */
    atomic_store(&w[1].conf_ack, 3);
    HE_CHECK(!he_reload_conf_in_use(ctl, c[1]));
    HE_CHECK(!he_reload_conf_in_use(ctl, c[2]));
    HE_CHECK(he_reload_conf_in_use(ctl, c[3]));

    /* both on 4: 3 is free; an exited worker holds nothing */
    atomic_store(&w[0].conf_ack, 4);
    atomic_store(&w[1].conf_ack, 4);
    HE_CHECK(!he_reload_conf_in_use(ctl, c[3]));
    atomic_store(&w[1].conf_ack, 2);
    atomic_store(&w[1].exited, 1);
    HE_CHECK(!he_reload_conf_in_use(ctl, c[2]));
    HE_CHECK(!he_reload_conf_in_use(ctl, c[3]));
    HE_CHECK(he_reload_conf_in_use(ctl, c[4]));

    for (unsigned i = 1; i <= 4; i++)
        free(c[i]);
    free(ctl);
}

int main(void)
{
    test_conf_in_use();
    HE_TEST_MAIN_END();
}
