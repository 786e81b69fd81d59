/* segment/httpresp.c: the shared response parser's own contract: field
 * lines reach the callback trimmed, long ones as "over", interim ones not
 * at all; the heads' byte limit counts interim heads; body events are
 * spans of the input (no copy); a struct copied between calls goes on;
 * skipping counts down a Content-Length body and a chunk. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "he_test.h"
#include "segment/httpresp.h"

static char seen[4096];
static int nfields, nover;

static int field(void *ctx, const char *name, size_t nl, const char *v, size_t vl, bool over)
{
    size_t l = strlen(seen);
    (void)ctx;
    nfields++;
    if (over) {
        nover++;
        snprintf(seen + l, sizeof(seen) - l, "[%.*s:OVER]", (int)nl, name);
    } else {
        snprintf(seen + l, sizeof(seen) - l, "[%.*s:%.*s]", (int)nl, name, (int)vl, v);
    }
    return strncmp(name, "X-Fail", nl) == 0 && nl == 6 ? -ENOTSUP : 0;
}

/* Feeds s in pieces of step bytes; returns the last event or error and
 * the body bytes in body. */
static int run(const char *s, size_t len, size_t step, he_httpresp_t *p, char *value, char *body,
               size_t *blen)
{
    size_t off = 0;
    int ev = HE_HTTPRESP_MORE;
    *blen = 0;
    seen[0] = '\0';
    nfields = nover = 0;
    he_httpresp_init(p, false, field, NULL, value);
    while (ev != HE_HTTPRESP_DONE) {
        size_t n = len - off < step ? len - off : step, used;
        const char *b;
        size_t bl;
        ev = he_httpresp_feed(p, s + off, n, &used, &b, &bl);
        if (ev < 0) return ev;
        if (ev == HE_HTTPRESP_BODY) {
            /* a span of the input, never a copy */
            HE_CHECK(b >= s + off && b + bl <= s + off + used);
            memcpy(body + *blen, b, bl);
            *blen += bl;
        }
        off += used;
        if (ev == HE_HTTPRESP_MORE && off == len) return he_httpresp_eof(p);
    }
    return ev;
}

/* Appends n bytes c to s. */
static void pad(char *s, char c, size_t n)
{
    size_t l = strlen(s);
    memset(s + l, c, n);
    s[l + n] = '\0';
}

int main(void)
{
    static he_httpresp_t p;
    static char value[HE_HTTPRESP_LINE_MAX + 1], body[4096], msg[HE_HTTPRESP_HEAD_MAX + 1024];
    size_t blen;

    /* fields trimmed, interim ones not passed, at every split */
    const char *s = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                    "HTTP/1.1 200 OK\r\nX-A:  one two \t\r\nx-b:\r\nContent-Length: 3\r\n\r\nabc";
    for (size_t step = 1; step <= strlen(s); step++) {
        HE_CHECK_INT(run(s, strlen(s), step, &p, value, body, &blen), HE_HTTPRESP_DONE);
        HE_CHECK_STR(seen, "[X-A:one two][x-b:][Content-Length:3]");
        HE_CHECK(blen == 3 && memcmp(body, "abc", 3) == 0);
        HE_CHECK_INT(p.head.status, 200);
        HE_CHECK_INT(p.head.content_length, 3);
        HE_CHECK(p.head.keepalive && !p.head.until_close && !p.head.no_body);
    }
    /* a line longer than HE_HTTPRESP_LINE_MAX is "over" with no value; a
     * name longer than HE_HTTPRESP_NAME_MAX is "" */
    strcpy(msg, "HTTP/1.1 200 OK\r\nX-Long: ");
    pad(msg, 'v', HE_HTTPRESP_LINE_MAX);
    strcpy(msg + strlen(msg), "\r\nX-");
    pad(msg, 'n', HE_HTTPRESP_NAME_MAX);
    strcat(msg, ": short\r\nContent-Length: 0\r\n\r\n");
    for (size_t step = 1; step <= strlen(msg); step += 97) {
        HE_CHECK_INT(run(msg, strlen(msg), step, &p, value, body, &blen), HE_HTTPRESP_DONE);
        HE_CHECK_STR(seen, "[X-Long:OVER][:short][Content-Length:0]");
        HE_CHECK_INT(nover, 1);
    }
    /* exactly HE_HTTPRESP_LINE_MAX bytes is read whole */
    strcpy(msg, "HTTP/1.1 200 OK\r\nX-Edge: ");
    pad(msg, 'v', HE_HTTPRESP_LINE_MAX - strlen("X-Edge: "));
    strcat(msg, "\r\nContent-Length: 0\r\n\r\n");
    HE_CHECK_INT(run(msg, strlen(msg), 1000, &p, value, body, &blen), HE_HTTPRESP_DONE);
    HE_CHECK_INT(nover, 0);
    /* the callback's error fails the parse */
    s = "HTTP/1.1 200 OK\r\nX-Fail: 1\r\nContent-Length: 0\r\n\r\n";
    HE_CHECK_INT(run(s, strlen(s), 5, &p, value, body, &blen), -ENOTSUP);
    /* the heads' limit counts interim heads too */
    msg[0] = '\0';
    while (strlen(msg) < HE_HTTPRESP_HEAD_MAX - 100)
        strcat(msg, "HTTP/1.1 100 Continue\r\n\r\n");
    strcat(msg, "HTTP/1.1 200 OK\r\nX-Pad: ");
    pad(msg, 'p', 200);
    strcat(msg, "\r\nContent-Length: 0\r\n\r\n");
    HE_CHECK_INT(run(msg, strlen(msg), 4096, &p, value, body, &blen), -E2BIG);
    /* until close; HTTP/1.0 without keep-alive; a coding that is not
     * chunked runs to the close */
    s = "HTTP/1.0 200 OK\r\n\r\nto the end";
    HE_CHECK_INT(run(s, strlen(s), 4, &p, value, body, &blen), HE_HTTPRESP_DONE);
    HE_CHECK(p.head.until_close && !p.head.keepalive && blen == 10);
    s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n5\r\nhello";
    HE_CHECK_INT(run(s, strlen(s), 1000, &p, value, body, &blen), HE_HTTPRESP_DONE);
    HE_CHECK(p.head.until_close && !p.head.chunked && blen == 8);

    /* copied between calls, skipping a chunk and a length in the kernel */
    {
        he_httpresp_t a, c;
        size_t used, bl;
        const char *b;
        he_httpresp_init(&a, false, NULL, NULL, NULL);
        s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        HE_CHECK_INT(he_httpresp_feed(&a, s, strlen(s), &used, &b, &bl), HE_HTTPRESP_HEADERS);
        HE_CHECK_INT(used, strlen(s));
        c = a; /* what loadgen does from head to body */
        HE_CHECK_INT(he_httpresp_skippable(&c), 0);
        HE_CHECK_INT(he_httpresp_feed(&c, "a\r\n0123", 7, &used, &b, &bl), HE_HTTPRESP_BODY);
        HE_CHECK(used == 7 && bl == 4 && memcmp(b, "0123", 4) == 0);
        HE_CHECK_INT(he_httpresp_skippable(&c), 6);
        he_httpresp_skip(&c, 100); /* at most what is skippable */
        HE_CHECK_INT(c.payload, 10);
        HE_CHECK_INT(he_httpresp_skippable(&c), 0);
        HE_CHECK_INT(he_httpresp_feed(&c, "\r\n0\r\n\r\nX", 8, &used, &b, &bl), HE_HTTPRESP_DONE);
        HE_CHECK_INT(used, 7); /* X is the next response's */

        he_httpresp_init(&a, false, NULL, NULL, NULL);
        s = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        HE_CHECK_INT(he_httpresp_feed(&a, s, strlen(s), &used, &b, &bl), HE_HTTPRESP_HEADERS);
        HE_CHECK_INT(he_httpresp_skippable(&a), 100);
        he_httpresp_skip(&a, 99);
        HE_CHECK_INT(he_httpresp_eof(&a), -EPIPE);
        he_httpresp_skip(&a, 1);
        HE_CHECK_INT(he_httpresp_feed(&a, "NEXT", 4, &used, &b, &bl), HE_HTTPRESP_DONE);
        HE_CHECK_INT(used, 0);
    }
    /* a HEAD request's response has no body whatever it says */
    {
        size_t used, bl;
        const char *b;
        he_httpresp_init(&p, true, NULL, NULL, NULL);
        s = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        HE_CHECK_INT(he_httpresp_feed(&p, s, strlen(s), &used, &b, &bl), HE_HTTPRESP_HEADERS);
        HE_CHECK(p.head.no_body && p.head.keepalive);
        HE_CHECK_INT(he_httpresp_feed(&p, "", 0, &used, &b, &bl), HE_HTTPRESP_DONE);
    }
    HE_TEST_MAIN_END();
}
