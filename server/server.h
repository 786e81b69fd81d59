/* server: the public lifecycle of one generation of workers, and what the
 * control thread may know of it. server.c builds a generation from the
 * layers: net/ (workers, listeners, TLS), http/ (the protocol) and
 * handler/ (the router, the file handler, the edge cache). */
#ifndef HE_SERVER_H
#define HE_SERVER_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "conf/conf.h"
#include "server/base/features.h"
#include "server/base/stats.h"
#include "server/net/net.h"

/* server.c */
int he_server_init(he_server_t *s, he_conf_t *conf, char *err, size_t errlen);
/* The CPUs the process may run on, as they were before the control thread
 * pinned itself (its first call is in the first he_server_init). */
void he_server_cpus_allowed(cpu_set_t *set);
int he_server_start(he_server_t *s, char *err, size_t errlen);
void he_server_drain(he_server_t *s);
/* Drains a generation replaced by a reload: connections stay open until
 * their next response (sent with Connection: close) or the drain timeout.
 * Call after its listeners stopped accepting. */
void he_server_retire(he_server_t *s);
/* Publishes a new configuration that needs no new sockets or threads. */
void he_server_publish_conf(he_server_t *s, he_conf_t *conf);
/* True once every worker thread has returned (he_server_wait won't block). */
bool he_server_exited(const he_server_t *s);
void he_server_wait(he_server_t *s);
void he_server_free(he_server_t *s);

#endif
