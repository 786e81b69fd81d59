/* server/handler/route.c: the router. he_route_server_init's source order
 * (root-first: file then cache; origin-first: cache then file); the first
 * handler that does not decline answers, a declined request passes to the
 * next, all declined is 404, or 502 when the origin failed;
 * he_route_next continues after an asynchronous decline; methods (405),
 * bad paths (400, 414) and OPTIONS are answered before any handler.
 *
 * Requests come over a socketpair through the real HTTP/1.1 protocol into
 * he_route_request (he_route_server_init registers it), on a worker with
 * a real io_uring (ring_fixture.h); the handlers table is replaced with
 * fake handlers that record their calls and answer, decline or hold. */
#include "he_test.h"
#include "server/handler/route.c"
#include "server/net/ring_fixture.h"

/* ---------------------------------------------------------------- fake handlers */

enum { DECLINE, ANSWER, HOLD };

static struct {
    int mode[2];
    bool fail_origin[2]; /* sets r->origin_failed before declining */
    unsigned calls[2];
    char order[16];
    char path[2][256];
    bool path_ok;          /* len matched the NUL-terminated path */
    unsigned cache_st_in;  /* r->cache_st when the last handler was asked */
    bool origin_failed_in; /* r->origin_failed when the first was asked */
    he_req_t *held;
} fh;

static he_handler_result_t fh_run(int i, he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    size_t o = strlen(fh.order);
    fh.calls[i]++;
    if (o + 1 < sizeof(fh.order)) fh.order[o] = (char)('A' + i);
    snprintf(fh.path[i], sizeof(fh.path[i]), "%s", path);
    fh.path_ok = strlen(path) == len;
    fh.cache_st_in = r->cache_st;
    if (i == 0) fh.origin_failed_in = r->origin_failed;
    if (fh.mode[i] == DECLINE) {
        if (fh.fail_origin[i]) r->origin_failed = true;
        return HE_HANDLER_DECLINED;
    }
    if (fh.mode[i] == HOLD) {
        fh.held = r;
        return HE_HANDLER_DONE;
    }
    {
        static char body[2][300];
        he_http_head_t h;
        he_body_t b;
        int n = snprintf(body[i], sizeof(body[i]), "%c:%s", 'A' + i, path);
        memset(&h, 0, sizeof(h));
        h.status = 200;
        h.ctype = "text/plain";
        h.has_clen = true;
        h.clen = (uint64_t)n;
        he__body_mem(&b, body[i], (size_t)n, NULL, NULL);
        he_http_respond(w, r, &h, &b);
    }
    return HE_HANDLER_DONE;
}

static he_handler_result_t fh_a(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    return fh_run(0, w, r, path, len);
}
static he_handler_result_t fh_b(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    return fh_run(1, w, r, path, len);
}

static void handlers(int a, int b)
{
    memset(&fh, 0, sizeof(fh));
    fh.mode[0] = a;
    fh.mode[1] = b;
}

/* ---------------------------------------------------------------- a client */

static void route_conf(he_conf_t *conf)
{
    conf->max_uri_bytes = 8192; /* so the router, not the parser, meets a long path */
    conf->cors_allow_origin[0] = 0;
}

static he_conn_t *cc;
static int peer = -1;

static void setup(void)
{
    fx_conf_init = route_conf;
    fx_setup(&he_http1_proto, 4);
    HE_CHECK_INT(he_route_server_init(&fx_server), 0);
    he_route_t *rt = fx_server.handlers;
    rt->fn[0] = fh_a;
    rt->fn[1] = fh_b;
    rt->n = 2;
    cc = NULL;
}

static void teardown(void)
{
    fx_teardown();
    he_route_server_free(&fx_server);
    HE_CHECK(fx_server.handlers == NULL);
    if (peer >= 0) close(peer);
    peer = -1;
}

typedef struct resp {
    char buf[16384];
    size_t len;
    int status;
    const char *body; /* after the head */
    size_t body_len;
    bool eof;  /* the server closed the connection after it */
    bool head; /* the answer to HEAD: no body, whatever Content-Length says */
} resp_t;

/* A whole response is in r->buf: its status, else 0. */
static int resp_parse(resp_t *r)
{
    char *end;
    const char *cl;
    size_t want = 0;
    r->buf[r->len < sizeof(r->buf) ? r->len : sizeof(r->buf) - 1] = 0;
    end = strstr(r->buf, "\r\n\r\n");
    if (!end || r->len < 12) return 0;
    cl = strstr(r->buf, "Content-Length: ");
    if (cl && cl < end && !r->head) want = strtoul(cl + 16, NULL, 10);
    r->body = end + 4;
    r->body_len = r->len - (size_t)(r->body - r->buf);
    if (r->body_len < want && !r->eof) return 0;
    r->status = atoi(r->buf + 9);
    return r->status;
}

/* Waits (bounded) for the response to what was sent. */
static void wait_resp(resp_t *r)
{
    for (int i = 0; i < 400; i++) {
        r->eof |= fx_read(peer, r->buf, sizeof(r->buf) - 1, &r->len);
        if (resp_parse(r) && (cc->in_use ? !cc->busy : r->eof)) break;
        fx_reap(5);
    }
    fx_reap(0);
    r->eof |= fx_read(peer, r->buf, sizeof(r->buf) - 1, &r->len);
    if (!cc->in_use && !r->eof) {
        for (int i = 0; i < 20 && !r->eof; i++)
            r->eof = fx_read(peer, r->buf, sizeof(r->buf) - 1, &r->len);
    }
    resp_parse(r);
}

/* Sends a request on the open connection (a new one when there is none). */
static void send_req(const char *req)
{
    size_t len = strlen(req), off = 0;
    /* closed, or half-closed behind its last response (lingering) */
    if (!cc || !cc->in_use || cc->lingering) {
        if (peer >= 0) close(peer);
        cc = fx_conn(&peer);
    }
    while (off < len) {
        ssize_t k = write(peer, req + off, len - off);
        if (k > 0) off += (size_t)k;
        fx_reap(1);
    }
}

static void ask(const char *req, resp_t *r)
{
    memset(r, 0, sizeof(*r));
    r->head = strncmp(req, "HEAD ", 5) == 0;
    send_req(req);
    wait_resp(r);
}

static he_req_t *req_of(void)
{
    return he_http_req(cc);
}

/* ---------------------------------------------------------------- source order */

static void test_source_order(void)
{
    he_conf_t conf;
    he_server_t s;
    he_route_t *rt;
    int cache;

    he_conf_defaults(&conf);
    memset(&s, 0, sizeof(s));
    s.conf = &conf;
    HE_CHECK_INT(he_route_server_init(&s), 0); /* no edge cache: root only */
    rt = s.handlers;
    /* the signed-URL check comes first, with or without rules (a reload
     * may add them live) */
    HE_CHECK_INT(rt->n, 2);
    HE_CHECK(rt->fn[0] == he_auth_handle && rt->fn[1] == he_file_handle);
    HE_CHECK(s.proto == &he_http1_proto);
    HE_CHECK_INT(s.nhooks, 3);
    HE_CHECK(s.hooks[HE_HOOK_HTTP] == &he_http_worker_hooks);
    HE_CHECK(s.hooks[HE_HOOK_FILE] == &he_file_worker_hooks);
    HE_CHECK(s.hooks[2] == &he_llhls_worker_hooks);
    he_route_server_free(&s);
    HE_CHECK(s.handlers == NULL);

    memset(&s, 0, sizeof(s));
    s.conf = &conf;
    s.cache = &cache; /* only tested for NULL here */
    conf.origin_first = false;
    HE_CHECK_INT(he_route_server_init(&s), 0); /* root-first */
    rt = s.handlers;
    HE_CHECK_INT(rt->n, 3);
    HE_CHECK(rt->fn[0] == he_auth_handle && rt->fn[1] == he_file_handle &&
             rt->fn[2] == he_cache_handle);
    HE_CHECK_INT(s.nhooks, 4);
    HE_CHECK(s.hooks[HE_HOOK_CACHE] == &he_cache_worker_hooks);
    HE_CHECK(s.hooks[HE_HOOK_LLHLS] == &he_llhls_worker_hooks);
    he_route_server_free(&s);

    memset(&s, 0, sizeof(s));
    s.conf = &conf;
    s.cache = &cache;
    conf.origin_first = true;
    HE_CHECK_INT(he_route_server_init(&s), 0); /* origin-first */
    rt = s.handlers;
    HE_CHECK_INT(rt->n, 3);
    HE_CHECK(rt->fn[0] == he_auth_handle && rt->fn[1] == he_cache_handle &&
             rt->fn[2] == he_file_handle);
    HE_CHECK(s.hooks[HE_HOOK_FILE] == &he_file_worker_hooks);
    HE_CHECK(s.hooks[HE_HOOK_CACHE] == &he_cache_worker_hooks);
    he_route_server_free(&s);
}

/* ---------------------------------------------------------------- done and declined */

static void test_first_done_ends(void)
{
    resp_t r;
    setup();
    handlers(ANSWER, ANSWER);
    ask("GET /live/./a//b.ts?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 200);
    HE_CHECK_STR(fh.order, "A");
    HE_CHECK_STR(fh.path[0], "live/a/b.ts"); /* normalized, relative to root */
    HE_CHECK(fh.path_ok);
    HE_CHECK(r.body_len == 13 && memcmp(r.body, "A:live/a/b.ts", 13) == 0);
    HE_CHECK(!r.eof && cc->in_use); /* kept alive */
    HE_CHECK_INT(fx_w.stats.requests[HE_STATS_METHOD_GET], 1);

    /* HEAD: the same handler, the head alone */
    handlers(ANSWER, ANSWER);
    ask("HEAD /x.m3u8 HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 200);
    HE_CHECK_STR(fh.order, "A");
    HE_CHECK_INT(r.body_len, 0);
    HE_CHECK_INT(fx_w.stats.requests[HE_STATS_METHOD_HEAD], 1);
    teardown();
}

static void test_declined_falls_through(void)
{
    resp_t r;
    setup();
    handlers(DECLINE, ANSWER);
    ask("GET /seg/1.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 200);
    HE_CHECK_STR(fh.order, "AB");
    HE_CHECK_STR(fh.path[1], "seg/1.ts");
    HE_CHECK(r.body_len == 10 && memcmp(r.body, "B:seg/1.ts", 10) == 0);

    /* all declined: 404 */
    handlers(DECLINE, DECLINE);
    ask("GET /seg/2.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 404);
    HE_CHECK_STR(fh.order, "AB");
    HE_CHECK_INT(req_of()->status, 404);
    HE_CHECK(cc->in_use && !r.eof); /* a 404 keeps the connection */
    HE_CHECK(r.body_len > 0 && strstr(r.body, "404") != NULL);

    /* the origin failed and nothing else has it: 502 */
    handlers(DECLINE, DECLINE);
    fh.fail_origin[0] = true;
    ask("GET /seg/3.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 502);
    HE_CHECK_STR(fh.order, "AB");
    /* ... unless the next one has it */
    handlers(DECLINE, ANSWER);
    fh.fail_origin[0] = true;
    ask("GET /seg/3.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 200);
    /* each request starts afresh: the last one's failure is forgotten */
    handlers(DECLINE, DECLINE);
    ask("GET /seg/4.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK(!fh.origin_failed_in);
    HE_CHECK_INT(r.status, 404);

    /* HEAD of what nobody has: a 404 head, no body */
    handlers(DECLINE, DECLINE);
    ask("HEAD /none HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 404);
    HE_CHECK_INT(r.body_len, 0);
    teardown();
}

/* A handler answers DONE, then declines once the answer it waited for did
 * not come: he_route_next asks the ones after it, not it again. */
static void test_route_next(void)
{
    resp_t r;
    he_req_t *q;
    setup();
    handlers(HOLD, ANSWER);
    memset(&r, 0, sizeof(r));
    send_req("GET /a/b.m3u8 HTTP/1.1\r\nHost: h\r\n\r\n");
    HE_CHECK(FX_UNTIL(fh.held != NULL));
    q = fh.held;
    fx_settle(5);
    HE_CHECK(cc->busy);
    HE_CHECK_INT(fx_read(peer, r.buf, sizeof(r.buf), &r.len), 0);
    HE_CHECK_INT(r.len, 0); /* nothing yet */
    q->cache_st = 3;        /* what the first source said */
    he_route_next(&fx_w, q);
    wait_resp(&r);
    HE_CHECK_INT(r.status, 200);
    HE_CHECK_STR(fh.order, "AB");
    HE_CHECK_INT(fh.calls[0], 1);
    HE_CHECK_STR(fh.path[1], "a/b.m3u8");
    HE_CHECK_INT(fh.cache_st_in, 0); /* the next source says its own */
    HE_CHECK(r.body_len == 10 && memcmp(r.body, "B:a/b.m3u8", 10) == 0);
    HE_CHECK(!cc->busy);

    /* the next declines too, after the origin failed: 502 */
    handlers(HOLD, DECLINE);
    memset(&r, 0, sizeof(r));
    send_req("GET /a/c.ts HTTP/1.1\r\nHost: h\r\n\r\n");
    HE_CHECK(FX_UNTIL(fh.held != NULL));
    fh.held->origin_failed = true;
    he_route_next(&fx_w, fh.held);
    wait_resp(&r);
    HE_CHECK_INT(r.status, 502);
    HE_CHECK_STR(fh.order, "AB");

    /* the last source declining later: no one is left, 404 */
    handlers(DECLINE, HOLD);
    memset(&r, 0, sizeof(r));
    send_req("GET /a/d.ts HTTP/1.1\r\nHost: h\r\n\r\n");
    HE_CHECK(FX_UNTIL(fh.held != NULL));
    he_route_next(&fx_w, fh.held);
    wait_resp(&r);
    HE_CHECK_INT(r.status, 404);
    HE_CHECK_STR(fh.order, "AB");
    HE_CHECK_INT(fh.calls[1], 1);
    teardown();
}

/* ---------------------------------------------------------------- refused before any handler */

static void test_refused(void)
{
    static char longreq[5000 + 64];
    resp_t r;
    setup();

    handlers(ANSWER, ANSWER);
    ask("DELETE /a.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 405);
    HE_CHECK(strstr(r.buf, "\r\nAllow: GET, HEAD, OPTIONS\r\n") != NULL);
    HE_CHECK_STR(fh.order, "");
    HE_CHECK(cc->in_use);                               /* a 405 keeps the connection */
    ask("PURGE /a.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r); /* no edge cache: a method like any */
    HE_CHECK_INT(r.status, 405);
    HE_CHECK_STR(fh.order, "");
    HE_CHECK_INT(fx_w.stats.requests[HE_STATS_METHOD_OTHER], 2);

    /* a path that leaves root: 400, and the connection closes */
    ask("GET /a/../../etc/passwd HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 400);
    HE_CHECK_STR(fh.order, "");
    HE_CHECK(r.eof);
    HE_CHECK(strstr(r.buf, "Connection: close\r\n") != NULL);
    HE_CHECK_INT(fx_w.stats.errors[HE_STATS_ERR_BAD_REQUEST], 1);
    ask("GET /a%2fb.ts HTTP/1.1\r\nHost: h\r\n\r\n", &r); /* an encoded separator */
    HE_CHECK_INT(r.status, 400);
    HE_CHECK_STR(fh.order, "");
    HE_CHECK_INT(fx_w.stats.errors[HE_STATS_ERR_BAD_REQUEST], 2);

    /* a path longer than the file system takes: 414, not counted as bad */
    {
        size_t n = (size_t)snprintf(longreq, sizeof(longreq), "GET /");
        memset(longreq + n, 'a', 4500);
        n += 4500;
        snprintf(longreq + n, sizeof(longreq) - n, " HTTP/1.1\r\nHost: h\r\n\r\n");
    }
    ask(longreq, &r);
    HE_CHECK_INT(r.status, 414);
    HE_CHECK_STR(fh.order, "");
    HE_CHECK(r.eof);
    HE_CHECK_INT(fx_w.stats.errors[HE_STATS_ERR_BAD_REQUEST], 2);
    teardown();
}

/* OPTIONS is the router's own: never a handler's. */
static void test_options(void)
{
    resp_t r;
    setup();
    handlers(ANSWER, ANSWER);
    ask("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 204);
    HE_CHECK(strstr(r.buf, "\r\nAllow: GET, HEAD, OPTIONS\r\n") != NULL);
    HE_CHECK(strstr(r.buf, "Content-Length") == NULL); /* never on a 204 */
    HE_CHECK(strstr(r.buf, "Access-Control-Allow-Methods") == NULL);
    HE_CHECK_INT(r.body_len, 0);
    HE_CHECK_STR(fh.order, "");
    HE_CHECK(cc->in_use);

    ask("OPTIONS /live/a.m3u8 HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 204);
    HE_CHECK_STR(fh.order, "");
    HE_CHECK_INT(fx_w.stats.requests[HE_STATS_METHOD_OPTIONS], 2);

    /* with CORS, the preflight's answers */
    snprintf(fx_conf.cors_allow_origin, sizeof(fx_conf.cors_allow_origin), "*");
    ask("OPTIONS /live/a.m3u8 HTTP/1.1\r\nHost: h\r\nOrigin: https://p\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 204);
    HE_CHECK(strstr(r.buf, "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n") != NULL);
    HE_CHECK(strstr(r.buf, "Access-Control-Allow-Origin: *\r\n") != NULL);
    HE_CHECK_STR(fh.order, "");

    /* its path is still checked */
    ask("OPTIONS /../x HTTP/1.1\r\nHost: h\r\n\r\n", &r);
    HE_CHECK_INT(r.status, 400);
    HE_CHECK_STR(fh.order, "");
    teardown();
}

int main(void)
{
    test_source_order();
    test_first_done_ends();
    test_declined_falls_through();
    test_route_next();
    test_refused();
    test_options();
    HE_TEST_MAIN_END();
}
