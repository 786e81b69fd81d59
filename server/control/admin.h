/* admin: the small HTTP/1.1 server on the admin listener (admin.listen),
 * run by the control thread's libuv loop. Requests are parsed with llhttp
 * and dispatched through a table of routes; a handler fills a response
 * synchronously. Other modules add routes (the cache adds POST /purge)
 * with he_admin_route_add before the control thread starts. */
#ifndef HE_ADMIN_H
#define HE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "conf/conf.h"

typedef struct he_admin he_admin_t;

typedef struct he_admin_req {
    const char *method; /* "GET", "POST", ... (HEAD is answered by GET routes) */
    const char *path;   /* NUL-terminated, without the query */
    const char *query;  /* after '?', NUL-terminated; "" when none */
    const char *body;   /* request body, body_len bytes (at most 1 MiB) */
    size_t body_len;
} he_admin_req_t;

typedef struct he_admin_resp {
    int status;
    const char *type; /* Content-Type */
    char *body;       /* malloc'd (freed after the write) unless body_static */
    size_t len;
    bool body_static;
} he_admin_resp_t;

typedef void (*he_admin_handler_fn)(void *ctx, const he_admin_req_t *req, he_admin_resp_t *resp);

/* Registers method + exact path. 0, or -ENOSPC when the table is full. */
int he_admin_route_add(const char *method, const char *path, he_admin_handler_fn fn, void *ctx);
/* The same for a route that changes state (POST /purge): with
 * admin.token_file set it needs "Authorization: Bearer <token>" (401). */
int he_admin_route_add_state(const char *method, const char *path, he_admin_handler_fn fn,
                             void *ctx);
/* The configuration whose admin.allow and token the listener applies;
 * kept by the caller (set again on every reload). */
void he_admin_set_conf(he_admin_t *a, const he_conf_t *conf);

/* Requests refused, since start: by address (admin.allow, 403) and by
 * token (401). */
enum { HE_ADMIN_REFUSED_ADDRESS = 0, HE_ADMIN_REFUSED_TOKEN, HE_ADMIN_REFUSED_COUNT };
void he_admin_refusals(uint64_t out[HE_ADMIN_REFUSED_COUNT]);
/* Sets a response body from a literal. */
void he_admin_resp_text(he_admin_resp_t *resp, int status, const char *text);

/* Binds addr and starts serving on loop. 0 or -errno (err says why). */
int he_admin_start(he_admin_t **out, uv_loop_t *loop, const he_conf_listen_t *addr, char *err,
                   size_t errlen);
/* Closes the listener and every connection; memory goes in close callbacks. */
void he_admin_stop(he_admin_t *a);
/* Closes connections idle for longer than idle_ms and those whose request
 * is not whole 10 s after it began (called from a timer). */
void he_admin_sweep(he_admin_t *a, uint64_t now_ms, uint64_t idle_ms);

#endif
