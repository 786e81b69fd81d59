/* The admin HTTP/1.1 server: libuv streams, llhttp parsing, a route table.
 * It serves operators and scrapers, a handful of requests per second, so
 * it favours simple over fast: every response is built whole in memory and
 * written with one uv_write. It must stay reachable when clients misbehave:
 * answers queued for a client that does not read hold its parsing, and a
 * full table of connections makes room by closing an idle one. */
#include "server/control/admin.h"

#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/base/log.h"
#include "server/server.h"

#define HE_ADMIN_MAX_ROUTES 32
/* At the cap, a new connection takes the place of an idle one. */
#define HE_ADMIN_MAX_CONNS 128
/* A request must be whole this long after the connection was accepted or
 * after its first byte: bytes trickled in do not keep a slot. */
#define HE_ADMIN_REQUEST_MS 10000
/* Pipelined requests are parsed only while the answers queued for the
 * client stay under these; a client that sends and never reads would
 * otherwise have the server hold every answer (and parse on and on). */
#define HE_ADMIN_QUEUE_BYTES (1u << 20)
#define HE_ADMIN_QUEUE_WRITES 32
#define HE_ADMIN_URL_MAX 4096
#define HE_ADMIN_HEAD_MAX 16384
#define HE_ADMIN_BODY_MAX (1u << 20)

typedef struct he_admin_route {
    char method[16];
    char path[128];
    he_admin_handler_fn fn;
    void *ctx;
    bool state; /* changes state: the token, when one is configured */
} he_admin_route_t;

/* Refusals since start, whatever listener (a reload may move it). Only
 * the control thread writes them; /metrics is served on it too. */
static uint64_t he_admin_refused[HE_ADMIN_REFUSED_COUNT];

static he_admin_route_t he_admin_routes[HE_ADMIN_MAX_ROUTES];
static unsigned he_admin_nroutes;

typedef struct he_admin_conn {
    uv_tcp_t tcp;
    he_admin_t *admin;
    llhttp_t parser;
    char url[HE_ADMIN_URL_MAX + 1];
    size_t url_len;
    char *body;
    size_t body_len, body_cap;
    size_t head_bytes;
    int err_status; /* 400, 413, 414 or 431 found by a callback */
    bool allowed;   /* the peer is in admin.allow (checked at accept) */
    bool in_authz;  /* the header value being read is Authorization's */
    bool authz_cut; /* ... and it was longer than any token */
    char authz[HE_CONF_TOKEN_MAX + 32];
    size_t authz_len;
    char fname[16]; /* the header name being read, enough for Authorization */
    size_t fname_len;
    bool closing;
    bool close_after; /* a response said Connection: close */
    bool in_request;  /* part of a request has arrived */
    bool held;        /* parsing paused until the queued answers drain */
    unsigned nwrites; /* uv_writes not called back yet */
    char *rest;       /* while held: the bytes read but not parsed */
    size_t rest_len;
    uint64_t last_ms;     /* last read or write */
    uint64_t deadline_ms; /* the request under way must be whole by then; 0: none */
    struct he_admin_conn *prev, *next;
} he_admin_conn_t;

struct he_admin {
    uv_tcp_t listener;
    uv_loop_t *loop;
    he_admin_conn_t *conns;
    unsigned nconns;
    bool stopping;
    bool listener_closed;
    const he_conf_t *conf; /* admin.allow, admin_token */
    char text[64];
    char rbuf[65536]; /* reads are parsed before the next one arrives */
};

typedef struct he_admin_write {
    uv_write_t req;
    he_admin_conn_t *conn;
    char *hdr;
    char *body;
    bool free_body;
    bool close;
} he_admin_write_t;

int he_admin_route_add(const char *method, const char *path, he_admin_handler_fn fn, void *ctx)
{
    he_admin_route_t *r;
    for (unsigned i = 0; i < he_admin_nroutes; i++) {
        r = &he_admin_routes[i];
        if (strcmp(r->method, method) == 0 && strcmp(r->path, path) == 0) {
            r->fn = fn; /* a second registration replaces the first */
            r->ctx = ctx;
            return 0;
        }
    }
    if (he_admin_nroutes == HE_ADMIN_MAX_ROUTES) return -ENOSPC;
    if (strlen(method) >= sizeof(r->method) || strlen(path) >= sizeof(r->path)) return -EINVAL;
    r = &he_admin_routes[he_admin_nroutes++];
    snprintf(r->method, sizeof(r->method), "%s", method);
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->fn = fn;
    r->ctx = ctx;
    return 0;
}

int he_admin_route_add_state(const char *method, const char *path, he_admin_handler_fn fn,
                             void *ctx)
{
    int rc = he_admin_route_add(method, path, fn, ctx);
    if (rc < 0) return rc;
    for (unsigned i = 0; i < he_admin_nroutes; i++)
        if (strcmp(he_admin_routes[i].method, method) == 0 &&
            strcmp(he_admin_routes[i].path, path) == 0)
            he_admin_routes[i].state = true;
    return 0;
}

void he_admin_set_conf(he_admin_t *a, const he_conf_t *conf)
{
    if (a) a->conf = conf;
}

void he_admin_refusals(uint64_t out[HE_ADMIN_REFUSED_COUNT])
{
    memcpy(out, he_admin_refused, sizeof(he_admin_refused));
}

void he_admin_resp_text(he_admin_resp_t *resp, int status, const char *text)
{
    resp->status = status;
    resp->type = "text/plain; charset=utf-8";
    resp->body = (char *)text;
    resp->len = strlen(text);
    resp->body_static = true;
}

/* ---------------------------------------------------------------- connections */

static void he_admin_maybe_free(he_admin_t *a)
{
    if (a->stopping && a->listener_closed && a->nconns == 0) free(a);
}

static void he_admin_on_conn_closed(uv_handle_t *h)
{
    he_admin_conn_t *c = h->data;
    he_admin_t *a = c->admin;
    if (c->prev)
        c->prev->next = c->next;
    else
        a->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    a->nconns--;
    free(c->body);
    free(c->rest);
    free(c);
    he_admin_maybe_free(a);
}

static void he_admin_conn_close(he_admin_conn_t *c)
{
    if (c->closing) return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, he_admin_on_conn_closed);
}

static void he_admin_resume(he_admin_conn_t *c);

static void he_admin_on_write(uv_write_t *req, int status)
{
    he_admin_write_t *w = (he_admin_write_t *)req;
    he_admin_conn_t *c = w->conn;
    bool close = status < 0 || w->close;

    free(w->hdr);
    if (w->free_body) free(w->body);
    free(w);
    c->nwrites--;
    c->last_ms = uv_now(c->admin->loop);
    if (close)
        he_admin_conn_close(c);
    else if (c->held && !c->closing && c->nwrites <= HE_ADMIN_QUEUE_WRITES / 2 &&
             c->tcp.write_queue_size <= HE_ADMIN_QUEUE_BYTES / 2)
        he_admin_resume(c);
}

static void he_admin_send(he_admin_conn_t *c, he_admin_resp_t *resp, bool head, bool close,
                          const char *extra)
{
    he_admin_write_t *w = calloc(1, sizeof(*w));
    uv_buf_t bufs[2];
    int n, rc;

    if (!w || !(w->hdr = malloc(512 + strlen(extra)))) {
        free(w);
        if (!resp->body_static) free(resp->body);
        he_admin_conn_close(c);
        return;
    }
    n = snprintf(w->hdr, 512 + strlen(extra),
                 "HTTP/1.1 %d %s\r\nServer: hlsedge\r\nContent-Type: %s\r\n"
                 "Content-Length: %zu\r\nCache-Control: no-store\r\n%sConnection: %s\r\n\r\n",
                 resp->status, he_server_http_reason(resp->status),
                 resp->type ? resp->type : "text/plain; charset=utf-8", resp->len, extra,
                 close ? "close" : "keep-alive");
    w->conn = c;
    w->body = resp->body;
    w->free_body = !resp->body_static;
    w->close = close;
    bufs[0] = uv_buf_init(w->hdr, (unsigned)n);
    bufs[1] = uv_buf_init(resp->body, (unsigned)resp->len);
    rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, head || resp->len == 0 ? 1 : 2,
                  he_admin_on_write);
    if (rc < 0) {
        free(w->hdr);
        if (w->free_body) free(w->body);
        free(w);
        he_admin_conn_close(c);
        return;
    }
    c->nwrites++;
    if (close) c->close_after = true;
}

/* Finds the route and answers; close: after this response. */
static void he_admin_dispatch(he_admin_conn_t *c, bool close)
{
    const char *method = llhttp_method_name((llhttp_method_t)llhttp_get_method(&c->parser));
    bool head = strcmp(method, "HEAD") == 0;
    he_admin_resp_t resp;
    he_admin_req_t req;
    char allow[128] = "", extra[160] = "";
    char *q;

    c->url[c->url_len] = 0;
    q = strchr(c->url, '?');
    if (q) *q++ = 0;
    memset(&req, 0, sizeof(req));
    req.method = head ? "GET" : method;
    req.path = c->url;
    req.query = q ? q : "";
    req.body = c->body ? c->body : "";
    req.body_len = c->body_len;
    memset(&resp, 0, sizeof(resp));

    if (!c->allowed) { /* outside admin.allow: nothing is answered but this */
        he_admin_refused[HE_ADMIN_REFUSED_ADDRESS]++;
        he_admin_resp_text(&resp, 403, "forbidden: not in admin.allow\n");
        he_admin_send(c, &resp, head, true, "");
        return;
    }
    for (unsigned i = 0; i < he_admin_nroutes; i++) {
        he_admin_route_t *r = &he_admin_routes[i];
        if (strcmp(r->path, req.path) != 0) continue;
        if (strcmp(r->method, req.method) == 0) {
            const he_conf_t *conf = c->admin->conf;
            if (r->state && conf && conf->admin_token[0] &&
                (c->authz_cut || !he_conf_bearer_ok(conf, c->authz, c->authz_len))) {
                he_admin_refused[HE_ADMIN_REFUSED_TOKEN]++;
                he_admin_resp_text(&resp, 401, "unauthorized: a bearer token is required\n");
                he_admin_send(c, &resp, head, close, "WWW-Authenticate: Bearer\r\n");
                return;
            }
            r->fn(r->ctx, &req, &resp);
            if (!resp.status) resp.status = 200;
            he_admin_send(c, &resp, head, close, "");
            return;
        }
        if (strlen(allow) + strlen(r->method) + 8 < sizeof(allow)) {
            if (allow[0]) strcat(allow, ", ");
            strcat(allow, r->method);
            if (strcmp(r->method, "GET") == 0) strcat(allow, ", HEAD");
        }
    }
    if (allow[0]) {
        snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
        he_admin_resp_text(&resp, 405, "method not allowed\n");
    } else {
        he_admin_resp_text(&resp, 404, "not found\n");
    }
    he_admin_send(c, &resp, head, close, extra);
}

#define HE_ADMIN_CONN(p) ((he_admin_conn_t *)(p)->data)

static int he_admin_on_message_begin(llhttp_t *p)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    c->url_len = 0;
    c->body_len = 0;
    c->head_bytes = 0;
    c->err_status = 0;
    c->in_authz = c->authz_cut = false;
    c->authz_len = c->fname_len = 0;
    c->in_request = true;
    if (!c->deadline_ms) c->deadline_ms = uv_now(c->admin->loop) + HE_ADMIN_REQUEST_MS;
    return 0;
}

static int he_admin_on_url(llhttp_t *p, const char *at, size_t n)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    if (c->url_len + n > HE_ADMIN_URL_MAX) {
        c->err_status = 414;
        return HPE_USER;
    }
    memcpy(c->url + c->url_len, at, n);
    c->url_len += n;
    return 0;
}

static int he_admin_on_header(llhttp_t *p, const char *at, size_t n)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    c->head_bytes += n + 4;
    if (c->head_bytes > HE_ADMIN_HEAD_MAX) {
        c->err_status = 431;
        return HPE_USER;
    }
    return 0;
}

/* The field name, which may come in pieces (a request split across
 * reads), is only compared once whole. */
static int he_admin_on_header_field(llhttp_t *p, const char *at, size_t n)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    if (c->fname_len + n <= sizeof(c->fname)) memcpy(c->fname + c->fname_len, at, n);
    c->fname_len += n;
    return he_admin_on_header(p, at, n);
}

static int he_admin_on_header_field_complete(llhttp_t *p)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    c->in_authz = c->fname_len == 13 && strncasecmp(c->fname, "authorization", 13) == 0;
    c->fname_len = 0;
    return 0;
}

static int he_admin_on_header_value(llhttp_t *p, const char *at, size_t n)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    if (c->in_authz) {
        if (c->authz_len + n >= sizeof(c->authz)) {
            c->authz_cut = true;
        } else {
            memcpy(c->authz + c->authz_len, at, n);
            c->authz_len += n;
        }
    }
    return he_admin_on_header(p, at, n);
}

static int he_admin_on_headers_complete(llhttp_t *p)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    if (llhttp_get_method(p) == HTTP_CONNECT) {
        c->err_status = 400; /* a tunnel: answered once, then closed */
        return -1;
    }
    /* No protocol switch here: an Upgrade request is answered as a plain
     * one (llhttp reads this flag after the callback). */
    p->upgrade = 0;
    return 0;
}

static int he_admin_on_body(llhttp_t *p, const char *at, size_t n)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    if (c->body_len + n > HE_ADMIN_BODY_MAX) {
        c->err_status = 413;
        return HPE_USER;
    }
    if (c->body_len + n + 1 > c->body_cap) {
        size_t cap = c->body_cap ? c->body_cap : 4096;
        char *nb;
        while (cap < c->body_len + n + 1)
            cap *= 2;
        nb = realloc(c->body, cap);
        if (!nb) {
            c->err_status = 413;
            return HPE_USER;
        }
        c->body = nb;
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, at, n);
    c->body_len += n;
    c->body[c->body_len] = 0;
    return 0;
}

static int he_admin_on_message_complete(llhttp_t *p)
{
    he_admin_conn_t *c = HE_ADMIN_CONN(p);
    bool close = !llhttp_should_keep_alive(p) || c->admin->stopping;
    c->in_request = false;
    c->deadline_ms = 0;
    he_admin_dispatch(c, close);
    /* Stop at a response that closes: whatever follows is not answered. */
    if (close || c->closing) return HPE_PAUSED;
    if (c->nwrites >= HE_ADMIN_QUEUE_WRITES || c->tcp.write_queue_size >= HE_ADMIN_QUEUE_BYTES) {
        c->held = true; /* he_admin_on_write resumes */
        return HPE_PAUSED;
    }
    return 0;
}

static const llhttp_settings_t *he_admin_settings(void)
{
    static llhttp_settings_t s;
    static bool init;
    if (!init) {
        llhttp_settings_init(&s);
        s.on_message_begin = he_admin_on_message_begin;
        s.on_url = he_admin_on_url;
        s.on_header_field = he_admin_on_header_field;
        s.on_header_field_complete = he_admin_on_header_field_complete;
        s.on_header_value = he_admin_on_header_value;
        s.on_headers_complete = he_admin_on_headers_complete;
        s.on_body = he_admin_on_body;
        s.on_message_complete = he_admin_on_message_complete;
        init = true;
    }
    return &s;
}

static void he_admin_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    he_admin_conn_t *c = h->data;
    *buf = uv_buf_init(c->admin->rbuf, sizeof(c->admin->rbuf));
}

/* Parses n bytes of data, answering each whole request, until they are
 * used up, a response closes, an error is answered, or the queued answers
 * hold parsing (the rest is kept for he_admin_resume). */
static void he_admin_parse(he_admin_conn_t *c, const char *data, size_t n)
{
    llhttp_errno_t e = llhttp_execute(&c->parser, data, n);
    he_admin_resp_t resp;
    int status;

    if (e == HPE_OK || c->closing) return;
    if (e == HPE_PAUSED && c->held) {
        const char *pos = llhttp_get_error_pos(&c->parser);
        size_t left = (size_t)(data + n - pos);
        uv_read_stop((uv_stream_t *)&c->tcp);
        if (left && !(c->rest = malloc(left))) {
            he_admin_conn_close(c);
            return;
        }
        if (left) memcpy(c->rest, pos, left);
        c->rest_len = left;
        return;
    }
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (e == HPE_PAUSED) return; /* answered with Connection: close */
    status = c->err_status ? c->err_status : 400;
    he_admin_resp_text(&resp, status, status == 400 ? "bad request\n" : "request too large\n");
    he_admin_send(c, &resp, false, true, "");
}

static void he_admin_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* The queued answers drained: parse what was held back, then read on. */
static void he_admin_resume(he_admin_conn_t *c)
{
    char *rest = c->rest;
    size_t n = c->rest_len;

    c->held = false;
    c->rest = NULL;
    c->rest_len = 0;
    llhttp_resume(&c->parser);
    if (n) he_admin_parse(c, rest, n);
    free(rest);
    if (!c->held && !c->closing && !c->close_after &&
        uv_read_start((uv_stream_t *)&c->tcp, he_admin_alloc, he_admin_on_read) < 0)
        he_admin_conn_close(c);
}

static void he_admin_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    he_admin_conn_t *c = s->data;

    if (nread < 0) {
        he_admin_conn_close(c);
        return;
    }
    if (nread == 0 || c->closing || c->close_after || c->held) return;
    c->last_ms = uv_now(c->admin->loop);
    he_admin_parse(c, buf->base, (size_t)nread);
}

/* The connection that newest (first in the list) replaces at the cap: the
 * idle one (no request under way, no answer queued) least recently used,
 * else the one whose request is due first; NULL when all are answering. */
static he_admin_conn_t *he_admin_victim(he_admin_conn_t *newest)
{
    he_admin_conn_t *idle = NULL, *due = NULL;
    for (he_admin_conn_t *c = newest->next; c; c = c->next) {
        if (c->closing || c->nwrites || c->held) continue;
        if (!c->in_request) {
            if (!idle || c->last_ms <= idle->last_ms) idle = c; /* ties: the older */
        } else if (!due || c->deadline_ms <= due->deadline_ms) {
            due = c;
        }
    }
    return idle ? idle : due;
}

/* Before he_admin_set_conf: the defaults (admin.allow: loopback). */
static const he_conf_t *he_admin_default_conf(void)
{
    static he_conf_t *d;
    if (!d && (d = malloc(sizeof(*d)))) he_conf_defaults(d);
    return d;
}

static void he_admin_on_connection(uv_stream_t *server, int status)
{
    he_admin_t *a = server->data;
    he_admin_conn_t *c;
    unsigned open = 0;

    if (status < 0) return;
    c = calloc(1, sizeof(*c));
    if (!c) return;
    c->admin = a;
    uv_tcp_init(a->loop, &c->tcp);
    c->tcp.data = c;
    c->next = a->conns;
    if (a->conns) a->conns->prev = c;
    a->conns = c;
    a->nconns++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 || a->stopping) {
        he_admin_conn_close(c);
        return;
    }
    for (he_admin_conn_t *o = c->next; o; o = o->next)
        open += !o->closing;
    if (open >= HE_ADMIN_MAX_CONNS) {
        he_admin_conn_t *v = he_admin_victim(c);
        if (!v) {
            he_admin_conn_close(c);
            return;
        }
        he_admin_conn_close(v);
    }
    uv_tcp_nodelay(&c->tcp, 1);
    {
        struct sockaddr_storage peer;
        int plen = sizeof(peer);
        const he_conf_t *conf = a->conf ? a->conf : he_admin_default_conf();
        c->allowed = conf && uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&peer, &plen) == 0 &&
                     he_conf_addr_allowed(conf, (struct sockaddr *)&peer);
    }
    llhttp_init(&c->parser, HTTP_REQUEST, he_admin_settings());
    c->parser.data = c;
    c->last_ms = uv_now(a->loop);
    c->deadline_ms = c->last_ms + HE_ADMIN_REQUEST_MS; /* the first request */
    if (uv_read_start((uv_stream_t *)&c->tcp, he_admin_alloc, he_admin_on_read) < 0)
        he_admin_conn_close(c);
}

/* ---------------------------------------------------------------- listener */

int he_admin_start(he_admin_t **out, uv_loop_t *loop, const he_conf_listen_t *addr, char *err,
                   size_t errlen)
{
    he_admin_t *a = calloc(1, sizeof(*a));
    int rc;

    *out = NULL;
    if (!a) {
        snprintf(err, errlen, "admin: out of memory");
        return -ENOMEM;
    }
    a->loop = loop;
    snprintf(a->text, sizeof(a->text), "%s", addr->text);
    uv_tcp_init(loop, &a->listener);
    a->listener.data = a;
    rc = uv_tcp_bind(&a->listener, (const struct sockaddr *)&addr->addr, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&a->listener, 128, he_admin_on_connection);
    if (rc < 0) {
        snprintf(err, errlen, "admin listen %s: %s", addr->text, uv_strerror(rc));
        he_admin_stop(a);
        return rc;
    }
    *out = a;
    return 0;
}

static void he_admin_on_listener_closed(uv_handle_t *h)
{
    he_admin_t *a = h->data;
    a->listener_closed = true;
    he_admin_maybe_free(a);
}

void he_admin_stop(he_admin_t *a)
{
    if (!a || a->stopping) return;
    a->stopping = true;
    for (he_admin_conn_t *c = a->conns; c; c = c->next)
        he_admin_conn_close(c);
    uv_close((uv_handle_t *)&a->listener, he_admin_on_listener_closed);
}

void he_admin_sweep(he_admin_t *a, uint64_t now_ms, uint64_t idle_ms)
{
    if (!a) return;
    for (he_admin_conn_t *c = a->conns; c; c = c->next) {
        if (c->closing) continue;
        if ((c->deadline_ms && now_ms >= c->deadline_ms) || now_ms - c->last_ms > idle_ms)
            he_admin_conn_close(c);
    }
}
