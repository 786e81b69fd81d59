/* The router: every parsed request comes here (he_http_handler_fn). It
 * counts the request, refuses what no handler serves (methods, bad
 * paths), answers OPTIONS and PURGE, and asks the handlers in source
 * order: root-first, the library under root and then the edge cache;
 * origin-first (origin.sources: origin-first), the other way round;
 * before both, the signed-URL check (auth.c), which only declines or refuses. The first that
 * does not decline answers; when all decline, 404, or 502 when the edge
 * cache declined because the origin failed (origin-first, nothing in
 * root either). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "server/base/log.h"
#include "server/handler/handler.h"

#define HE_ROUTE_MAX 3

/* Per generation: the handlers in source order. */
typedef struct he_route {
    he_handler_fn fn[HE_ROUTE_MAX];
    unsigned n;
} he_route_t;

static he_route_t *he_route_of(const he_worker_t *w)
{
    return w->server->handlers;
}

int he_route_server_init(he_server_t *s)
{
    he_route_t *rt = calloc(1, sizeof(*rt));
    if (!rt) return -ENOMEM;
    s->proto = &he_http1_proto;
    /* always there: http2.tls and http2.h2c are read per connection, so a
     * live reload turns them on and off */
    s->proto_h2 = &he_http2_proto;
    s->hooks[s->nhooks++] = &he_http_worker_hooks;
    s->hooks[s->nhooks++] = &he_file_worker_hooks;
    /* always first, even with no rule yet: a reload may add rules live */
    rt->fn[rt->n++] = he_auth_handle;
    if (s->cache) {
        s->hooks[s->nhooks++] = &he_cache_worker_hooks;
        if (s->conf->origin_first) {
            rt->fn[rt->n++] = he_cache_handle;
            rt->fn[rt->n++] = he_file_handle;
        } else {
            rt->fn[rt->n++] = he_file_handle;
            rt->fn[rt->n++] = he_cache_handle;
        }
    } else {
        rt->fn[rt->n++] = he_file_handle;
    }
    /* last: its index in hook_data (HE_HOOK_LLHLS) is past the others' */
    s->hooks[s->nhooks++] = &he_llhls_worker_hooks;
    s->handlers = rt;
    he_http_set_handler(he_route_request);
    return 0;
}

void he_route_server_free(he_server_t *s)
{
    free(s->handlers);
    s->handlers = NULL;
}

static void he_route_options(he_worker_t *w, he_req_t *r)
{
    he_http_head_t h;
    memset(&h, 0, sizeof(h));
    h.status = 204;
    h.no_ctype = true; /* and no Content-Length: a 204 must not carry one (RFC 9110 8.6) */
    h.extra = w->conf->cors_allow_origin[0]
                  ? "Allow: GET, HEAD, OPTIONS\r\n"
                    "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
                    "Access-Control-Allow-Headers: Range, If-None-Match, If-Modified-Since, "
                    "Origin, Accept\r\n"
                    "Access-Control-Max-Age: 86400\r\n"
                  : "Allow: GET, HEAD, OPTIONS\r\n";
    he_http_respond(w, r, &h, NULL);
}

/* Asks the handlers from r->route_next on. */
static void he_route_run(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    const he_route_t *rt = he_route_of(w);
    while (r->route_next < rt->n) {
        he_handler_fn fn = rt->fn[r->route_next++];
        if (fn(w, r, path, len) == HE_HANDLER_DONE) return;
    }
    he_http_respond_error(w, r, r->origin_failed ? 502 : 404);
}

void he_route_next(he_worker_t *w, he_req_t *r)
{
    char path[PATH_MAX];
    int len = he_seg_url_normalize(r->url, r->url_len, path, sizeof(path));
    r->cache_st = 0; /* the next source says how it answered */
    if (len < 0) {   /* it normalized before the first handler: cannot fail now */
        he_http_respond_error(w, r, 400);
        return;
    }
    he_route_run(w, r, path, (size_t)len);
}

void he_route_request(he_worker_t *w, he_req_t *r)
{
    he_conn_t *c = r->conn;
    char path[PATH_MAX];
    int len;

    switch (r->method) {
    case HTTP_GET:
        w->stats.requests[HE_STATS_METHOD_GET]++;
        break;
    case HTTP_HEAD:
        w->stats.requests[HE_STATS_METHOD_HEAD]++;
        break;
    case HTTP_OPTIONS:
        w->stats.requests[HE_STATS_METHOD_OPTIONS]++;
        break;
    default:
        w->stats.requests[HE_STATS_METHOD_OTHER]++;
        break;
    }
    r->status = 0;
    r->kind = HE_SEG_KIND_OTHER;
    r->cache_st = 0;
    r->route_next = 0;
    r->origin_failed = false;
    if (r->has_body) c->close_after = true;
    /* timeouts.keepalive 0: say so in this response, not by closing
     * under the client at the next tick */
    if (!r->keepalive || !w->conf->keepalive_timeout_ms) c->close_after = true;
    /* a request that already went through this box: a loop of parents */
    if (r->via_len && he__via_loop(r->via, r->via_len)) {
        w->stats.cache.via_loops++;
        he_http_respond_error(w, r, 508);
        return;
    }
    if (r->method == HTTP_PURGE && w->server->cache) {
        he_cache_handle_purge(w, r);
        return;
    }
    if (r->method != HTTP_GET && r->method != HTTP_HEAD && r->method != HTTP_OPTIONS) {
        he_http_respond_error(w, r, 405);
        return;
    }
    if (r->method == HTTP_OPTIONS && r->url_len == 1 && r->url[0] == '*') {
        he_route_options(w, r);
        return;
    }
    len = he_seg_url_normalize(r->url, r->url_len, path, sizeof(path));
    if (len < 0) {
        if (len != -ENAMETOOLONG) w->stats.errors[HE_STATS_ERR_BAD_REQUEST]++;
        he_http_respond_error(w, r, len == -ENAMETOOLONG ? 414 : 400);
        return;
    }
    if (r->method == HTTP_OPTIONS) {
        he_route_options(w, r);
        return;
    }
    he_route_run(w, r, path, (size_t)len);
}
