/* cache/httpc.c: responses split at every byte boundary parse the same;
 * Content-Length, chunked and until-close bodies; 1xx skipped; no body for
 * 204/304/HEAD; malformed heads rejected; Set-Cookie and Vary read for
 * what they forbid; requests built safely. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cache/origin.h"
#include "he_test.h"

/* Feeds s in pieces of at most step bytes; collects the body. Returns the
 * last event or error; *eof_rc is the result of eof() if not DONE. */
static int run(const char *s, size_t len, size_t step, bool head, he_cache_httpc_t *p, char *body,
               size_t *blen, bool call_eof)
{
    size_t off = 0;
    int ev = HE_CACHE_HTTPC_MORE;
    he_cache_httpc_init(p, head);
    *blen = 0;
    while (off < len) {
        size_t n = len - off < step ? len - off : step, used;
        const char *b;
        size_t bl;
        size_t pos = 0;
        while (pos < n || ev == HE_CACHE_HTTPC_HEADERS) {
            ev = he_cache_httpc_parse(p, s + off + pos, n - pos, &used, &b, &bl);
            if (ev < 0) return ev;
            if (ev == HE_CACHE_HTTPC_BODY) {
                memcpy(body + *blen, b, bl);
                *blen += bl;
            }
            pos += used;
            if (ev == HE_CACHE_HTTPC_DONE) return ev;
            if (ev == HE_CACHE_HTTPC_MORE) break;
        }
        off += n;
    }
    if (ev != HE_CACHE_HTTPC_DONE) {
        size_t used;
        const char *b;
        size_t bl;
        ev = he_cache_httpc_parse(p, "", 0, &used, &b, &bl);
        if (ev != HE_CACHE_HTTPC_DONE && call_eof) ev = he_cache_httpc_eof(p);
    }
    return ev;
}

static void check_all_splits(const char *s, bool head, int want, const char *want_body, int status)
{
    he_cache_httpc_t p;
    char body[4096];
    size_t blen;
    for (size_t step = 1; step <= strlen(s); step++) {
        int ev = run(s, strlen(s), step, head, &p, body, &blen, true);
        if (ev != want) fprintf(stderr, "step %zu of: %s\n", step, s);
        HE_CHECK_INT(ev, want);
        if (ev == HE_CACHE_HTTPC_DONE) {
            HE_CHECK_INT(p.resp.status, status);
            HE_CHECK_INT(blen, strlen(want_body));
            HE_CHECK(memcmp(body, want_body, blen) == 0);
        }
        if (ev != want) break;
    }
}

/* Appends n bytes c to the string s. */
static void pad(char *s, char c, size_t n)
{
    size_t l = strlen(s);
    memset(s + l, c, n);
    s[l + n] = '\0';
}

int main(void)
{
    he_cache_httpc_t p;
    char body[4096], req[512];
    size_t blen;

    check_all_splits("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: video/mp2t\r\n"
                     "ETag: \"e1\"\r\nCache-Control: max-age=10\r\nCache-control: public\r\n"
                     "Age: 3\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\n\r\nhello",
                     false, HE_CACHE_HTTPC_DONE, "hello", 200);
    run("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type:  video/mp2t \r\nETag: \"e1\"\r\n"
        "Cache-Control: max-age=10\r\nCache-control: public\r\nAge: 3\r\n"
        "Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\nExpires: 0\r\n\r\nhello",
        200, 1000, false, &p, body, &blen, true);
    HE_CHECK_STR(p.resp.content_type, "video/mp2t");
    HE_CHECK_STR(p.resp.etag, "\"e1\"");
    HE_CHECK(p.resp.cc.max_age_set && p.resp.cc.max_age == 10 && !p.resp.cc.private_);
    HE_CHECK_STR(p.resp.expires, "0");
    HE_CHECK_STR(p.resp.last_modified, "Tue, 14 Nov 2023 22:13:20 GMT");
    HE_CHECK_INT(p.resp.age_s, 3);
    HE_CHECK_INT(p.resp.content_length, 5);
    HE_CHECK(p.resp.keepalive);

    /* chunked, with extensions, trailers and bare LFs */
    check_all_splits("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                     "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n",
                     false, HE_CACHE_HTTPC_DONE, "hello, world", 200);
    /* chunk framing is CRLF (RFC 9112 7.1); a bare LF there or after a
     * field value is refused (2.2 lets a recipient take it, llhttp does
     * not, and loadgen never did for chunks) */
    check_all_splits("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\nA\n0123456789\n0\n\n", false,
                     -EPROTO, "", 200);
    /* Transfer-Encoding overrides Content-Length (RFC 9112 6.3 item 3) */
    check_all_splits("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n0\r\n\r\n",
                     false, HE_CACHE_HTTPC_DONE, "hello", 200);
    /* an interim response's fields are not the final one's; a 1xx has no
     * content even with a Content-Length (RFC 9110 15.2) */
    check_all_splits("HTTP/1.1 103 Early Hints\r\nContent-Length: 4\r\nETag: \"early\"\r\n\r\n"
                     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                     false, HE_CACHE_HTTPC_DONE, "ok", 200);
    run("HTTP/1.1 103 Early Hints\r\nETag: \"early\"\r\n\r\nHTTP/1.1 200 OK\r\n"
        "Content-Length: 2\r\n\r\nok",
        83, 3, false, &p, body, &blen, true);
    HE_CHECK_STR(p.resp.etag, "");
    HE_CHECK_INT(p.resp.content_length, 2);
    /* the rules llhttp leaves to its user, at every split: obs-fold
     * (RFC 9112 5.2), a name that is no token (RFC 9110 5.1), leading
     * empty lines, versions and statuses llhttp takes */
    check_all_splits("HTTP/1.1 200 OK\r\nX-A: b\r\n folded\r\nContent-Length: 1\r\n\r\nZ", false,
                     -EPROTO, "", 200);
    check_all_splits("HTTP/1.1 200 OK\r\nX-A: b\r\n\tfolded\r\nContent-Length: 1\r\n\r\nZ", false,
                     -EPROTO, "", 200);
    /* chunk data ends in CRLF (RFC 9112 7.1), not any two bytes */
    check_all_splits("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
                     false, -EPROTO, "", 200);
    check_all_splits("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\rX0\r\n\r\n",
                     false, -EPROTO, "", 200);
    check_all_splits("HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 1\r\n\r\nZ", false, -EPROTO,
                     "", 200);
    check_all_splits("\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nZ", false, -EPROTO, "", 200);
    check_all_splits("HTTP/2.0 200 OK\r\nContent-Length: 1\r\n\r\nZ", false, -EPROTO, "", 200);
    check_all_splits("HTTP/1.1 099\r\nContent-Length: 1\r\n\r\nZ", false, -EPROTO, "", 200);
    check_all_splits("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nZ", false,
                     -EPROTO, "", 200);
    /* until close (HTTP/1.0, no length) */
    check_all_splits("HTTP/1.0 200 OK\r\n\r\nsome bytes", false, HE_CACHE_HTTPC_DONE, "some bytes",
                     200);
    run("HTTP/1.0 200 OK\r\n\r\nx", 20, 100, false, &p, body, &blen, false);
    HE_CHECK(!p.resp.keepalive);
    /* interim responses are skipped */
    check_all_splits("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
                     "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno",
                     false, HE_CACHE_HTTPC_DONE, "no", 404);
    /* no body */
    check_all_splits("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 99\r\n\r\n",
                     false, HE_CACHE_HTTPC_DONE, "", 304);
    check_all_splits("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", true, HE_CACHE_HTTPC_DONE, "",
                     200);
    check_all_splits("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", false,
                     HE_CACHE_HTTPC_DONE, "", 200);
    HE_CHECK(!p.resp.keepalive);

    /* truncated: EOF before the end is an error */
    HE_CHECK_INT(run("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 41, 100, false, &p, body,
                     &blen, true),
                 -EPIPE);
    HE_CHECK_INT(run("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 51, 100, false,
                     &p, body, &blen, true),
                 -EPIPE);
    HE_CHECK_INT(run("HTTP/1.1 200 OK\r\nContent-", 25, 100, false, &p, body, &blen, true), -EPIPE);

    /* malformed */
    static const char *const bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 2x0 OK\r\n\r\n",
        "HTTP/1.1 099 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n",
        "HTTP/1.1 101 Switching\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int ev = run(bad[i], strlen(bad[i]), 1000, false, &p, body, &blen, false);
        if (ev != -EPROTO) fprintf(stderr, "bad[%zu] gave %d\n", i, ev);
        HE_CHECK_INT(ev, -EPROTO);
    }
    /* a head larger than the limit */
    {
        static char big[HE_CACHE_HTTPC_HEAD_MAX + 200];
        strcpy(big, "HTTP/1.1 200 OK\r\n");
        while (strlen(big) < HE_CACHE_HTTPC_HEAD_MAX + 50)
            strcat(big, "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        strcat(big, "\r\n");
        HE_CHECK_INT(run(big, strlen(big), 1000, false, &p, body, &blen, false), -E2BIG);
    }
    /* a long header we do not read is skipped; one we read must fit the
     * line buffer whole, or the response is malformed */
    {
        static char longh[3000];
        static const char *const skipped[] = {"X-Long: ", "Set-Cookie: a=", "Vary: x"};
        for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++) {
            strcpy(longh, "HTTP/1.1 200 OK\r\n");
            strcat(longh, skipped[i]);
            pad(longh, 'a', 2000);
            strcat(longh, "\r\nContent-Length: 1\r\n\r\nZ");
            HE_CHECK_INT(run(longh, strlen(longh), 7, false, &p, body, &blen, true),
                         HE_CACHE_HTTPC_DONE);
            HE_CHECK(blen == 1 && body[0] == 'Z');
            /* but a cut Set-Cookie or Vary still forbids storing */
            HE_CHECK_INT(p.resp.set_cookie, i == 1);
            HE_CHECK_INT(p.resp.vary, i == 2);
        }
        /* a name longer than the buffer is nobody's */
        strcpy(longh, "HTTP/1.1 200 OK\r\nX");
        pad(longh, 'n', 1500);
        strcat(longh, ": v\r\nContent-Length: 1\r\n\r\nZ");
        HE_CHECK_INT(run(longh, strlen(longh), 1000, false, &p, body, &blen, true),
                     HE_CACHE_HTTPC_DONE);
        static const char *const read[] = {"Transfer-Encoding:",
                                           "Content-Length: 1",
                                           "cache-control: max-age=1,",
                                           "ETag: \"",
                                           "Expires: ",
                                           "Connection: close",
                                           "Content-Type: video/mp2t;",
                                           "Content-Encoding: gzip,"};
        for (size_t i = 0; i < sizeof(read) / sizeof(read[0]); i++) {
            strcpy(longh, "HTTP/1.1 200 OK\r\n");
            strcat(longh, read[i]);
            pad(longh, ' ', 1100);
            strcat(longh, "x\r\nContent-Length: 1\r\n\r\nZ");
            for (size_t step = 1; step <= 2000; step += 999)
                HE_CHECK_INT(run(longh, strlen(longh), step, false, &p, body, &blen, true),
                             -EPROTO);
        }
        /* the reviewer's cases: Transfer-Encoding padded past the buffer
         * (its chunk framing would be read as the body), Cache-Control
         * over 1100 bytes ending in private */
        strcpy(longh, "HTTP/1.1 200 OK\r\nTransfer-Encoding:");
        pad(longh, ' ', 1100);
        strcat(longh, "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
        HE_CHECK_INT(run(longh, strlen(longh), 1000, false, &p, body, &blen, true), -EPROTO);
        strcpy(longh, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60");
        while (strlen(longh) < 1150)
            strcat(longh, ", x-pad=1");
        strcat(longh, ", private\r\nContent-Length: 1\r\n\r\nZ");
        HE_CHECK_INT(run(longh, strlen(longh), 1000, false, &p, body, &blen, true), -EPROTO);
    }
    /* Cache-Control over several lines: every line's directives count,
     * however long the first (it was one string cut at 255 bytes) */
    {
        static char cc[2000];
        strcpy(cc, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60");
        while (strlen(cc) < 300)
            strcat(cc, ", x-ext=1");
        strcat(cc, "\r\nCache-Control: private\r\nCache-Control: s-maxage=9, max-age=30\r\n"
                   "Content-Length: 1\r\n\r\nZ");
        HE_CHECK_INT(run(cc, strlen(cc), 1000, false, &p, body, &blen, true), HE_CACHE_HTTPC_DONE);
        HE_CHECK(p.resp.cc.private_);
        HE_CHECK(p.resp.cc.max_age_set && p.resp.cc.max_age == 30); /* the smaller */
        HE_CHECK(p.resp.cc.s_maxage_set && p.resp.cc.s_maxage == 9);
        HE_CHECK(!p.resp.cc.no_store && !p.resp.cc.no_cache);
    }
    /* values that do not fit their field are dropped, not cut: a cut ETag
     * could match another version's; an over-long Expires is invalid */
    {
        static char v[1000];
        strcpy(v, "HTTP/1.1 200 OK\r\nETag: \"");
        pad(v, 'e', 200);
        strcat(v, "\"\r\nContent-Type: video/mp2t; x=");
        pad(v, 't', 200);
        strcat(v, "\r\nExpires: Tue, 14 Nov 2023 22:13:20 GMT");
        pad(v, ' ', 20);
        strcat(v, "junk\r\nLast-Modified: Tue, 14 Nov 2023 22:13:20 GMT and more and more\r\n"
                  "Content-Length: 1\r\n\r\nZ");
        HE_CHECK_INT(run(v, strlen(v), 1000, false, &p, body, &blen, true), HE_CACHE_HTTPC_DONE);
        HE_CHECK_STR(p.resp.etag, "");
        HE_CHECK_STR(p.resp.content_type, "");
        HE_CHECK_STR(p.resp.last_modified, "");
        HE_CHECK_STR(p.resp.expires, "0");
    }
    /* Set-Cookie and Vary are read for what they forbid: storing */
    {
        static const struct {
            const char *lines;
            bool cookie, vary;
        } cases[] = {
            {"", false, false},
            {"Set-Cookie: sid=1; Path=/\r\n", true, false},
            {"set-cookie:\r\n", true, false},
            {"Vary: Accept-Encoding\r\n", false, false},
            {"Vary: accept-encoding , ACCEPT-ENCODING\r\nVary:\r\n", false, false},
            {"Vary: *\r\n", false, true},
            {"Vary: Accept-Encoding, Origin\r\n", false, false},
            {"Vary: Accept-Encoding\r\nvary: User-Agent\r\n", false, false},
            {"Vary: Accept-Encodings\r\n", false, false},
            {"Vary: Origin, *\r\n", false, true},
            {"Vary: Origin\r\nVary:  * \r\n", false, true},
            {"Vary: **\r\n", false, false},
            {"Vary: Cookie\r\nSet-Cookie: a=b\r\n", true, false},
        };
        static char msg[512];
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\n%sContent-Length: 1\r\n\r\nZ",
                     cases[i].lines);
            for (size_t step = 1; step <= strlen(msg); step += 5) {
                HE_CHECK_INT(run(msg, strlen(msg), step, false, &p, body, &blen, true),
                             HE_CACHE_HTTPC_DONE);
                HE_CHECK_INT(p.resp.set_cookie, cases[i].cookie);
                HE_CHECK_INT(p.resp.vary, cases[i].vary);
            }
        }
    }
    /* Content-Encoding is kept exactly (lines joined), identity is none;
     * one we could not send back as it came is refused */
    run("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\nZ", 200, 1000, false,
        &p, body, &blen, true);
    HE_CHECK_STR(p.resp.content_encoding, "gzip");
    run("HTTP/1.1 200 OK\r\nContent-Encoding:  gzip \r\ncontent-encoding: br\r\n"
        "Content-Length: 1\r\n\r\nZ",
        200, 1000, false, &p, body, &blen, true);
    HE_CHECK_STR(p.resp.content_encoding, "gzip, br");
    run("HTTP/1.1 200 OK\r\nContent-Encoding: Identity\r\nContent-Encoding:\r\n"
        "Content-Length: 1\r\n\r\nZ",
        200, 1000, false, &p, body, &blen, true);
    HE_CHECK_STR(p.resp.content_encoding, "");
    {
        static const char *const bad_ce[] = {
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip;q=1\r\nContent-Length: 1\r\n\r\nZ",
            "HTTP/1.1 200 OK\r\nContent-Encoding: \"gzip\"\r\nContent-Length: 1\r\n\r\nZ",
            "HTTP/1.1 200 OK\r\nContent-Encoding: x-a-very-long-coding-name-1234567\r\n"
            "Content-Length: 1\r\n\r\nZ",
            "HTTP/1.1 200 OK\r\nContent-Encoding: x-coding-number-one\r\n"
            "Content-Encoding: x-coding-number-two\r\nContent-Length: 1\r\n\r\nZ",
        };
        for (size_t i = 0; i < sizeof(bad_ce) / sizeof(bad_ce[0]); i++)
            HE_CHECK_INT(run(bad_ce[i], strlen(bad_ce[i]), 1000, false, &p, body, &blen, true),
                         -EPROTO);
    }

    /* pipelined bytes after the response are not consumed */
    {
        const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nAHTTP/1.1";
        size_t used, bl, off = 0;
        const char *b;
        int ev;
        he_cache_httpc_init(&p, false);
        do {
            ev = he_cache_httpc_parse(&p, s + off, strlen(s) - off, &used, &b, &bl);
            off += used;
        } while (ev != HE_CACHE_HTTPC_DONE && ev >= 0);
        HE_CHECK_INT(off, strlen(s) - 8);
    }

    /* requests */
    int n = he_cache_httpc_request(req, sizeof(req), "origin.example:8080", "/a/b.ts?x=1", "\"e\"",
                                   "Tue, 14 Nov 2023 22:13:20 GMT");
    HE_CHECK(n > 0);
    HE_CHECK_STR(
        req, "GET /a/b.ts?x=1 HTTP/1.1\r\nHost: origin.example:8080\r\n"
             "User-Agent: hlsedge\r\nAccept-Encoding: identity\r\n"
             "If-None-Match: \"e\"\r\nIf-Modified-Since: Tue, 14 Nov 2023 22:13:20 GMT\r\n\r\n");
    n = he_cache_httpc_request(req, sizeof(req), "h", "/x", NULL, "");
    HE_CHECK_STR(
        req,
        "GET /x HTTP/1.1\r\nHost: h\r\nUser-Agent: hlsedge\r\nAccept-Encoding: identity\r\n\r\n");
    HE_CHECK_INT(he_cache_httpc_request(req, sizeof(req), "h", "/x\r\nEvil: 1", NULL, NULL),
                 -EINVAL);
    HE_CHECK_INT(he_cache_httpc_request(req, 10, "h", "/x", NULL, NULL), -ENOSPC);
    HE_TEST_MAIN_END();
}
