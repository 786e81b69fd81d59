/* loadgen/httpc.c: response heads and bodies (length, chunked, until close). */
#include "he_test.h"
#include "loadgen/httpc.c"

static char sunk[4096];
static size_t nsunk;

static void sink(void *ctx, const char *p, size_t n)
{
    (void)ctx;
    if (nsunk + n <= sizeof(sunk)) memcpy(sunk + nsunk, p, n);
    nsunk += n;
}

static int head(const char *s, he_lg_http_head_t *h)
{
    return he_lg_http_parse_head(s, strlen(s), h);
}

static void test_head(void)
{
    he_lg_http_head_t h;
    const char *r =
        "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nContent-Type: video/mp2t\r\n\r\nBODY";
    HE_CHECK_INT(head(r, &h), 0);
    HE_CHECK_INT(h.status, 200);
    HE_CHECK_INT(h.minor, 1);
    HE_CHECK_INT(h.content_length, 1234);
    HE_CHECK(!h.chunked);
    HE_CHECK(h.keep_alive);
    HE_CHECK_INT(h.head_len, strlen(r) - 4);

    /* every prefix of a head is incomplete, never an error */
    for (size_t n = 0; n < strlen(r) - 4; n++)
        HE_CHECK_INT(he_lg_http_parse_head(r, n, &h), HE_LG_AGAIN);

    HE_CHECK_INT(
        head("HTTP/1.1 206 Partial Content\r\ncontent-length:  10 \r\nConnection: close\r\n\r\n",
             &h),
        0);
    HE_CHECK_INT(h.status, 206);
    HE_CHECK_INT(h.content_length, 10);
    HE_CHECK(!h.keep_alive);

    /* HTTP/1.0: close unless keep-alive */
    HE_CHECK_INT(head("HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n", &h), 0);
    HE_CHECK(!h.keep_alive);
    HE_CHECK_INT(head("HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: Keep-Alive\r\n\r\n", &h),
                 0);
    HE_CHECK(h.keep_alive);

    /* chunked wins over a length; keep-alive stays */
    HE_CHECK_INT(
        head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
             &h),
        0);
    HE_CHECK(h.chunked);
    HE_CHECK_INT(h.content_length, -1);
    HE_CHECK(h.keep_alive);
    /* no length, not chunked: until close */
    HE_CHECK_INT(head("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", &h), 0);
    HE_CHECK_INT(h.content_length, -1);
    HE_CHECK(!h.keep_alive);
    /* 304 and 204 have no body and keep the connection */
    HE_CHECK_INT(head("HTTP/1.1 304 Not Modified\r\n\r\n", &h), 0);
    HE_CHECK(h.keep_alive);
    /* no reason phrase */
    HE_CHECK_INT(head("HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", &h), 0);
    HE_CHECK_INT(h.status, 404);
    HE_CHECK_INT(h.content_length, 0);
    /* interim responses are skipped: the head is the final one's */
    r = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    HE_CHECK_INT(head(r, &h), 0);
    HE_CHECK_INT(h.status, 200);
    HE_CHECK_INT(h.head_len, strlen(r) - 2);

    const char *bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTX/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
        /* the same length twice: RFC 9110 8.6 lets a recipient refuse it,
         * and llhttp does */
        "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n",
        /* a bare LF after a field value (RFC 9112 2.2 allows taking it;
         * llhttp does not) */
        "HTTP/1.1 404\nContent-Length: 0\n\n",
        "HTTP/1.1 200 OK\r\nX-A: b\r\n folded\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        "HTTP/2.0 200 OK\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = head(bad[i], &h);
        if (rc != -EINVAL) fprintf(stderr, "accepted bad head %zu\n", i);
        HE_CHECK_INT(rc, -EINVAL);
    }
}

static void test_length_body(void)
{
    he_lg_http_head_t h;
    he_lg_body_t b;
    HE_CHECK_INT(head("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", &h), 0);
    he_lg_body_init(&b, &h);
    HE_CHECK_INT(b.mode, HE_LG_BODY_LENGTH);
    nsunk = 0;
    HE_CHECK_INT(he_lg_body_feed(&b, "0123", 4, sink, NULL), 4);
    HE_CHECK_INT(he_lg_body_skippable(&b), 6);
    he_lg_body_skip(&b, 2);
    HE_CHECK(!b.done);
    /* extra bytes past the end are not consumed */
    HE_CHECK_INT(he_lg_body_feed(&b, "6789XX", 6, sink, NULL), 4);
    HE_CHECK(b.done);
    HE_CHECK_INT(b.payload, 10);
    HE_CHECK_INT(nsunk, 8);
    HE_CHECK(memcmp(sunk, "01236789", 8) == 0);
    HE_CHECK_INT(he_lg_body_eof(&b), 0);

    /* truncated by the server */
    he_lg_body_init(&b, &h);
    he_lg_body_skip(&b, 9);
    HE_CHECK_INT(he_lg_body_eof(&b), -EPIPE);
    /* zero length is done at once */
    HE_CHECK_INT(head("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &h), 0);
    he_lg_body_init(&b, &h);
    HE_CHECK(b.done);
    HE_CHECK_INT(he_lg_body_skippable(&b), 0);
    /* until close */
    HE_CHECK_INT(head("HTTP/1.0 200 OK\r\n\r\n", &h), 0);
    he_lg_body_init(&b, &h);
    HE_CHECK_INT(b.mode, HE_LG_BODY_EOF);
    HE_CHECK(he_lg_body_skippable(&b) == UINT64_MAX);
    he_lg_body_skip(&b, 100);
    HE_CHECK_INT(he_lg_body_feed(&b, "abc", 3, NULL, NULL), 3);
    HE_CHECK_INT(b.payload, 103);
    HE_CHECK_INT(he_lg_body_eof(&b), 0);
    HE_CHECK(b.done);
}

static void test_chunked(void)
{
    he_lg_http_head_t h;
    he_lg_body_t b;
    HE_CHECK_INT(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &h), 0);
    const char *wire = "5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n";
    /* whole, then byte by byte: the same payload */
    for (int mode = 0; mode < 2; mode++) {
        he_lg_body_init(&b, &h);
        nsunk = 0;
        size_t n = strlen(wire), used = 0;
        if (mode == 0) {
            used = (size_t)he_lg_body_feed(&b, wire, n, sink, NULL);
        } else {
            for (size_t i = 0; i < n; i++)
                used += (size_t)he_lg_body_feed(&b, wire + i, 1, sink, NULL);
        }
        HE_CHECK_INT(used, n);
        HE_CHECK(b.done);
        HE_CHECK_INT(b.payload, 15);
        HE_CHECK_INT(nsunk, 15);
        HE_CHECK(memcmp(sunk, "hello0123456789", 15) == 0);
    }
    /* skipping chunk data in the kernel, framing parsed here */
    he_lg_body_init(&b, &h);
    HE_CHECK_INT(he_lg_body_skippable(&b), 0);
    HE_CHECK_INT(he_lg_body_feed(&b, "10\r\n", 4, NULL, NULL), 4);
    HE_CHECK_INT(he_lg_body_skippable(&b), 16);
    he_lg_body_skip(&b, 16);
    HE_CHECK_INT(he_lg_body_skippable(&b), 0);
    HE_CHECK_INT(he_lg_body_feed(&b, "\r\n0\r\n\r\nNEXT", 11, NULL, NULL), 7);
    HE_CHECK(b.done);
    HE_CHECK_INT(b.payload, 16);
    /* the CRLF after skipped chunk data is still checked */
    he_lg_body_init(&b, &h);
    HE_CHECK_INT(he_lg_body_feed(&b, "5\r\n", 3, NULL, NULL), 3);
    he_lg_body_skip(&b, 5);
    HE_CHECK(he_lg_body_feed(&b, "XX0\r\n\r\n", 8, NULL, NULL) < 0);
    he_lg_body_init(&b, &h);
    HE_CHECK_INT(he_lg_body_feed(&b, "5\r\n", 3, NULL, NULL), 3);
    he_lg_body_skip(&b, 5);
    HE_CHECK_INT(he_lg_body_feed(&b, "\r", 1, NULL, NULL), 1);
    HE_CHECK(he_lg_body_feed(&b, "X0\r\n\r\n", 7, NULL, NULL) < 0);
    /* truncated chunked body */
    he_lg_body_init(&b, &h);
    he_lg_body_feed(&b, "5\r\nab", 5, NULL, NULL);
    HE_CHECK_INT(he_lg_body_eof(&b), -EPIPE);

    /* the last line of the trailer section may end in a bare LF (llhttp
     * takes it; RFC 9112 2.2 allows that) */
    he_lg_body_init(&b, &h);
    HE_CHECK_INT(he_lg_body_feed(&b, "0\r\n\n", 4, NULL, NULL), 4);
    HE_CHECK(b.done);
    const char *bad[] = {"x\r\n",
                         "\r\n",
                         "5\r\nhelloXX",
                         "5\nhello\r\n",
                         "5\r\nhello\r\n0\r\nT\n",
                         "ffffffffffffffffff\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        he_lg_body_init(&b, &h);
        ssize_t rc = he_lg_body_feed(&b, bad[i], strlen(bad[i]), NULL, NULL);
        if (rc >= 0) fprintf(stderr, "accepted bad chunked %zu\n", i);
        HE_CHECK(rc < 0);
    }
}

int main(void)
{
    test_head();
    test_length_body();
    test_chunked();
    HE_TEST_MAIN_END();
}
