/* server/http/http1.c: what the parser hands the responder, fed whole and a
 * byte at a time: Upgrade and CONNECT, Host, absolute-form, list headers
 * over several lines, values cut to their buffers, the method of a request
 * cut short. */
#include "he_test.h"

#include "conf/conf.h"
#include "server/http/http.h"

static he_conf_t conf;
static he_worker_t w;
static he_conn_t c;
/* the protocol's per-connection state, as the worker's slab gives it */
static _Alignas(16) char state[sizeof(he_http1_conn_t) + 1025];
#define REQ (he_http_req(&c))

static void reset(void)
{
    he_conf_defaults(&conf);
    conf.max_uri_bytes = 1024;
    conf.max_header_bytes = 8192;
    w.conf = &conf;
    w.proto_size = sizeof(state);
    memset(&c, 0, sizeof(c));
    c.proto = state;
    he__http1_init(&c);
}

/* Parses s in chunks of step bytes (0: whole) until a request is ready or
 * an error; returns the error status (0 when ready) or -1 when the input
 * ran out first. *used: bytes of s consumed. */
static int parse(const char *s, size_t step, size_t *used)
{
    size_t len = strlen(s), off = 0;
    while (off < len) {
        size_t n = step && len - off > step ? step : len - off;
        bool ready;
        int err;
        size_t u = he__http1_parse(&w, &c, s + off, n, &ready, &err);
        if (err) return err;
        off += u;
        if (ready) {
            if (used) *used = off;
            return 0;
        }
    }
    if (used) *used = off;
    return -1;
}

static void target(const char *s, size_t step, int want_err, const char *want_url)
{
    reset();
    HE_CHECK_INT(parse(s, step, NULL), want_err);
    if (!want_err) {
        HE_CHECK_INT(REQ->url_len, strlen(want_url));
        HE_CHECK(memcmp(REQ->url, want_url, REQ->url_len) == 0);
    }
}

static void test_upgrade_and_connect(size_t step)
{
    const char *two = "GET /a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
                      "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t used;
    reset();
    HE_CHECK_INT(parse(two, step, &used), 0);
    HE_CHECK(REQ->keepalive);
    HE_CHECK(REQ->url_len == 2 && memcmp(REQ->url, "/a", 2) == 0);
    he__http1_next(&c);
    HE_CHECK_INT(parse(two + used, step, NULL), 0);
    HE_CHECK(REQ->url_len == 2 && memcmp(REQ->url, "/b", 2) == 0);

    reset();
    HE_CHECK_INT(
        parse("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
              "GET /c HTTP/1.1\r\nHost: x\r\n\r\n",
              step, &used),
        0);
    he__http1_next(&c);
    HE_CHECK_INT(parse("GET /c HTTP/1.1\r\nHost: x\r\n\r\n", step, NULL), 0);
    HE_CHECK(REQ->url_len == 2 && memcmp(REQ->url, "/c", 2) == 0);

    /* CONNECT: a request like any other, the connection not kept */
    reset();
    HE_CHECK_INT(parse("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", step, NULL), 0);
    HE_CHECK_INT(REQ->method, HTTP_CONNECT);
    HE_CHECK(!REQ->keepalive);
}

static void test_host(size_t step)
{
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.1\r\n\r\n", step, NULL), 400);
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.1\r\nHost: a\r\nHOST: a\r\n\r\n", step, NULL), 400);
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", step, NULL), 400);
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.0\r\n\r\n", step, NULL), 0);
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n", step, NULL), 0);
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.1\r\nX-Host: a\r\nHost: a\r\nHosts: b\r\n\r\n", step, NULL),
                 0);
}

static void test_absolute_form(size_t step)
{
    static const struct {
        const char *in, *out; /* out NULL: 400 */
    } cases[] = {
        {"http://h/a.m3u8", "/a.m3u8"},
        {"HTTP://h:8080/a.m3u8?x=1", "/a.m3u8?x=1"},
        {"https://h/a/b.ts", "/a/b.ts"},
        {"hTtPs://[::1]:1/a", "/a"},
        {"http://h", "/"},
        {"http://h?q", "/?q"},
        {"http://h/", "/"},
        {"/already/origin", "/already/origin"},
        {"*", "*"},
        {"http://", NULL},
        {"http:///a", NULL},
        {"http://?a", NULL},
        {"http://u@h/a", NULL},
        {"http://u:p@h/a", NULL},
    };
    char req[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: h\r\n\r\n",
                 cases[i].in[0] == '*' ? "OPTIONS" : "GET", cases[i].in);
        target(req, step, cases[i].out ? 0 : 400, cases[i].out);
    }
    /* "ftp://" is no form of ours: left for the responder to refuse */
    target("GET ftp://h/a HTTP/1.1\r\nHost: h\r\n\r\n", step, 0, "ftp://h/a");
}

static void test_lists_and_cuts(size_t step)
{
    char req[2048], many[400];
    size_t m = 0;

    reset();
    HE_CHECK_INT(
        parse("GET / HTTP/1.1\r\nHost: h\r\nIf-Match: \"a\"\r\nX: 1\r\nif-match: \"b\", \"c\"\r\n"
              "If-None-Match: \"d\"\r\nIf-None-Match: W/\"e\"\r\n\r\n",
              step, NULL),
        0);
    HE_CHECK_STR(REQ->im, "\"a\",\"b\", \"c\"");
    HE_CHECK_INT(REQ->im_len, strlen(REQ->im));
    HE_CHECK_STR(REQ->inm, "\"d\",W/\"e\"");
    /* an empty line adds nothing */
    reset();
    HE_CHECK_INT(
        parse("GET / HTTP/1.1\r\nHost: h\r\nIf-Match:\r\nIf-Match: \"a\"\r\n\r\n", step, NULL), 0);
    HE_CHECK_STR(REQ->im, "\"a\"");
    /* single-valued fields on two lines: a value that will not parse */
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\nRange: bytes=2-3\r\n\r\n",
                       step, NULL),
                 0);
    HE_CHECK_STR(REQ->range, "bytes=0-1,bytes=2-3");

    /* cut to the buffer: absent (a cut Range or If-Range drops the range) */
    while (m < 300)
        m += (size_t)snprintf(many + m, sizeof(many) - m, "\"%08zu\", ", m);
    snprintf(req, sizeof(req),
             "GET / HTTP/1.1\r\nHost: h\r\nIf-Match: %s\"x\"\r\nIf-None-Match: %s\"x\"\r\n"
             "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT%*sx\r\n"
             "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT%*sx\r\n"
             "Range: bytes=0-1\r\nIf-Range: \"x\"%*sx\r\n\r\n",
             many, many, 20, "", 20, "", 200, "");
    reset();
    HE_CHECK_INT(parse(req, step, NULL), 0);
    HE_CHECK_INT(REQ->im_len, 0);
    HE_CHECK_INT(REQ->inm_len, 0);
    HE_CHECK_INT(REQ->ius_len, 0);
    HE_CHECK_INT(REQ->ims_len, 0);
    HE_CHECK_INT(REQ->range_len, 0);
    HE_CHECK_INT(REQ->if_range_len, 0);
    /* a second line that does not fit cuts the first's list */
    snprintf(req, sizeof(req),
             "GET / HTTP/1.1\r\nHost: h\r\nIf-Match: %s\"x\"\r\nIf-Match: \"y\"\r\n\r\n", many);
    reset();
    HE_CHECK_INT(parse(req, step, NULL), 0);
    HE_CHECK_INT(REQ->im_len, 0);
    /* what fits stays, and the next request starts clean */
    reset();
    HE_CHECK_INT(parse("GET / HTTP/1.1\r\nHost: h\r\nIf-Match: \"x\"\r\nRange: bytes=0-1\r\n\r\n",
                       step, NULL),
                 0);
    HE_CHECK_STR(REQ->im, "\"x\"");
    HE_CHECK_STR(REQ->range, "bytes=0-1");
    he__http1_next(&c);
    HE_CHECK_INT(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", step, NULL), 0);
    HE_CHECK_INT(REQ->im_len + REQ->range_len + REQ->hdr_cut, 0);
}

static void test_method_of_a_cut_request(size_t step)
{
    char req[1200];
    snprintf(req, sizeof(req), "HEAD /%01100d HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    reset();
    HE_CHECK_INT(parse(req, step, NULL), 414);
    HE_CHECK_INT(REQ->method, HTTP_HEAD);
    reset();
    HE_CHECK_INT(parse("HEAD / HTTP/1.1\r\nBad Header: 1\r\n\r\n", step, NULL), 400);
    HE_CHECK_INT(REQ->method, HTTP_HEAD);
    reset();
    HE_CHECK_INT(parse("HEAD / HTTP/1.1\r\n\r\n", step, NULL), 400);
    HE_CHECK_INT(REQ->method, HTTP_HEAD);
}

/* Line ends, NUL and obs-fold are checked across any split of the head
 * (tests/integration/test_smuggling.py has the whole table). */
static void test_framing(size_t step)
{
    static const struct {
        const char *req;
        int err;
    } cases[] = {
        {"GET / HTTP/1.1\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\n\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nX:\r\n\tb\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
        /* the same inside runs of eight plain bytes and more, which the
         * scan skips a word at a time: a bare CR or LF after the run, an
         * obs-fold after a long line, a space in a long field name */
        {"GET /0123456789abcdef HTTP/1.1\r\nHost: a\r\nX-Long: 0123456789\r012345\r\n\r\n", 400},
        {"GET /0123456789abcdef HTTP/1.1\r\nHost: a\r\nX-Long: 0123456789abcdefghij\n\r\n", 400},
        {"GET /0123456789abcdefghij\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789abcdef\r\n 0123456789abcdef\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nX-Long-Name x: 1\r\n\r\n", 400},
        {"GET /0123456789abcdefghijklmnop HTTP/1.1\r\nHost: a\r\n"
         "User-Agent: Mozilla/5.0 (X11; Linux x86_64) hlsedge-test/1.0\r\n\r\n",
         0},
        /* well framed: a value with spaces and tabs inside, CRLFs before
         * the request line, a chunked body read to its end */
        {"\r\nGET / HTTP/1.1\r\nHost: a\r\nX: a \t b\r\n\r\n", 0},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3\r\na\nb\r\n0\r\n\r\n",
         0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got;
        reset();
        got = parse(cases[i].req, step, NULL);
        if (got != cases[i].err) fprintf(stderr, "framing case %zu, step %zu\n", i, step);
        HE_CHECK_INT(got, cases[i].err);
    }
    /* the next pipelined request's head is checked from its start again */
    {
        const char *two = "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\nHost: a\r\n\r\n";
        size_t used = 0;
        reset();
        HE_CHECK_INT(parse(two, step, &used), 0);
        he__http1_next(&c);
        HE_CHECK_INT(parse(two + used, step, NULL), 400);
    }
}

int main(void)
{
    static const size_t steps[] = {0, 1, 7};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        test_upgrade_and_connect(steps[i]);
        test_host(steps[i]);
        test_absolute_form(steps[i]);
        test_lists_and_cuts(steps[i]);
        test_method_of_a_cut_request(steps[i]);
        test_framing(steps[i]);
    }
    HE_TEST_MAIN_END();
}
