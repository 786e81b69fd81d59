/* server/http_util.c: Range, ETag, dates, conditional requests. The .c is
 * included so this test links without the rest of he_server. */
#include "he_test.h"
#include "tests/he_xorshift.h"

#include <errno.h>

#include "server/http/http_util.c"

#define NONE HE_HTTP_RANGE_NONE
#define OK HE_HTTP_RANGE_OK
#define UNSAT HE_HTTP_RANGE_UNSATISFIABLE

typedef struct range_case {
    const char *v;
    uint64_t size;
    he_http_range_result_t r;
    uint64_t first, last;
} range_case_t;

static const range_case_t range_cases[] = {
    /* the three forms */
    {"bytes=0-499", 10000, OK, 0, 499},
    {"bytes=500-999", 10000, OK, 500, 999},
    {"bytes=500-", 10000, OK, 500, 9999},
    {"bytes=-500", 10000, OK, 9500, 9999},
    {"bytes=0-0", 10000, OK, 0, 0},
    {"bytes=9999-9999", 10000, OK, 9999, 9999},
    {"bytes=0-", 1, OK, 0, 0},
    {"bytes=-1", 1, OK, 0, 0},
    /* clamping */
    {"bytes=0-99999", 10000, OK, 0, 9999},
    {"bytes=9000-20000", 10000, OK, 9000, 9999},
    {"bytes=-20000", 10000, OK, 0, 9999},
    {"bytes=-10000", 10000, OK, 0, 9999},
    /* unit case and whitespace */
    {"Bytes=0-1", 100, OK, 0, 1},
    {"BYTES=0-1", 100, OK, 0, 1},
    {"bytes= 0-1", 100, OK, 0, 1},
    {"bytes=0-1 ", 100, OK, 0, 1},
    {"  bytes=0-1\t", 100, OK, 0, 1},
    {"bytes=0-1,", 100, OK, 0, 1},
    {"bytes=,0-1", 100, OK, 0, 1},
    {"bytes= , 0-1 , ", 100, OK, 0, 1},
    {"bytes=007-010", 100, OK, 7, 10},
    /* unsatisfiable */
    {"bytes=10000-", 10000, UNSAT, 0, 0},
    {"bytes=10000-10001", 10000, UNSAT, 0, 0},
    {"bytes=20000-30000", 10000, UNSAT, 0, 0},
    {"bytes=-0", 10000, UNSAT, 0, 0},
    {"bytes=-000", 10000, UNSAT, 0, 0},
    {"bytes=0-", 0, UNSAT, 0, 0},
    {"bytes=0-0", 0, UNSAT, 0, 0},
    {"bytes=5-10", 0, UNSAT, 0, 0},
    {"bytes=-0", 0, UNSAT, 0, 0},
    /* a non-zero suffix of an empty body: nothing to send, 200 */
    {"bytes=-5", 0, NONE, 0, 0},
    /* invalid or unsupported: ignore the header */
    {"bytes=500-499", 10000, NONE, 0, 0},
    {"bytes=20000-10000", 10000, NONE, 0, 0},
    {"bytes=0-1,5-6", 10000, NONE, 0, 0},
    {"bytes=0-1, 5-6", 10000, NONE, 0, 0},
    {"bytes=-1,-2", 10000, NONE, 0, 0},
    {"bytes=0-1,junk", 10000, NONE, 0, 0},
    {"bytes=", 10000, NONE, 0, 0},
    {"bytes= ", 10000, NONE, 0, 0},
    {"bytes=,", 10000, NONE, 0, 0},
    {"bytes=-", 10000, NONE, 0, 0},
    {"bytes=--1", 10000, NONE, 0, 0},
    {"bytes=1--2", 10000, NONE, 0, 0},
    {"bytes=1-2-3", 10000, NONE, 0, 0},
    {"bytes=a-b", 10000, NONE, 0, 0},
    {"bytes=1", 10000, NONE, 0, 0},
    {"bytes=+1-2", 10000, NONE, 0, 0},
    {"bytes=0x10-", 10000, NONE, 0, 0},
    {"bytes=1 -2", 10000, NONE, 0, 0},
    {"bytes=1- 2", 10000, NONE, 0, 0},
    {"bytes =0-1", 10000, NONE, 0, 0},
    {"bytes", 10000, NONE, 0, 0},
    {"byte=0-1", 10000, NONE, 0, 0},
    {"bytesx=0-1", 10000, NONE, 0, 0},
    {"items=0-1", 10000, NONE, 0, 0},
    {"", 10000, NONE, 0, 0},
    {"0-1", 10000, NONE, 0, 0},
    /* huge numbers saturate at 2^64-1 instead of wrapping */
    {"bytes=0-18446744073709551615", 100, OK, 0, 99},
    {"bytes=0-99999999999999999999999999", 100, OK, 0, 99},
    {"bytes=18446744073709551615-", 100, UNSAT, 0, 0},
    {"bytes=18446744073709551616-", 100, UNSAT, 0, 0},
    {"bytes=99999999999999999999999999-", 100, UNSAT, 0, 0},
    {"bytes=-99999999999999999999999999", 100, OK, 0, 99},
    {"bytes=18446744073709551617-18446744073709551616", 100, UNSAT, 0, 0},
    {"bytes=100-18446744073709551616", 100, UNSAT, 0, 0},
    {"bytes=5-18446744073709551616", UINT64_MAX, OK, 5, UINT64_MAX - 1},
};

static void test_range(void)
{
    size_t n = sizeof(range_cases) / sizeof(range_cases[0]);
    HE_CHECK(n >= 30);
    for (size_t i = 0; i < n; i++) {
        const range_case_t *c = &range_cases[i];
        uint64_t first = 77, last = 77;
        he_http_range_result_t r = he_http_range_parse(c->v, strlen(c->v), c->size, &first, &last);
        if (r != c->r || first != c->first || last != c->last)
            fprintf(stderr, "range case %zu: \"%s\" size %llu -> %d %llu-%llu\n", i, c->v,
                    (unsigned long long)c->size, (int)r, (unsigned long long)first,
                    (unsigned long long)last);
        HE_CHECK_INT(r, c->r);
        HE_CHECK(first == c->first);
        HE_CHECK(last == c->last);
    }
    /* the length bounds the value */
    uint64_t f, l;
    HE_CHECK_INT(he_http_range_parse("bytes=0-99,5-6", 10, 1000, &f, &l), OK);
    HE_CHECK(f == 0 && l == 99);
    HE_CHECK_INT(he_http_range_parse(NULL, 0, 1000, &f, &l), NONE);
}

static void test_etag(void)
{
    char buf[HE_HTTP_ETAG_MAX];
    HE_CHECK_INT(he_http_etag(buf, sizeof(buf), 0x5f5e1000, 0x1a2b), 15);
    HE_CHECK_STR(buf, "\"5f5e1000-1a2b\"");
    HE_CHECK_INT(he_http_etag(buf, sizeof(buf), 0, 0), 5);
    HE_CHECK_STR(buf, "\"0-0\"");
    /* nginx writes the same for the same file */
    HE_CHECK_INT(he_http_etag(buf, sizeof(buf), 1700000000, 1048576), 17);
    HE_CHECK_STR(buf, "\"6553f100-100000\"");
    /* the longest: both fields 16 hex digits, well under the max */
    size_t n = he_http_etag(buf, sizeof(buf), (time_t)-1, UINT64_MAX);
    HE_CHECK_INT(n, 35);
    HE_CHECK(n < HE_HTTP_ETAG_MAX);
    HE_CHECK_STR(buf, "\"ffffffffffffffff-ffffffffffffffff\"");
    /* truncation keeps a NUL and reports what was written */
    HE_CHECK_INT(he_http_etag(buf, 4, 0x5f5e1000, 0x1a2b), 3);
    HE_CHECK_STR(buf, "\"5f");
    HE_CHECK_INT(he_http_etag(buf, 1, 1, 1), 0);
    HE_CHECK_STR(buf, "");
    HE_CHECK_INT(he_http_etag(buf, 0, 1, 1), 0);
}

static void test_date_format(void)
{
    char buf[30];
    HE_CHECK_INT(he_http_date_format(784111777, buf), HE_HTTP_DATE_LEN);
    HE_CHECK_STR(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
    he_http_date_format(0, buf);
    HE_CHECK_STR(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    he_http_date_format(-1, buf);
    HE_CHECK_STR(buf, "Wed, 31 Dec 1969 23:59:59 GMT");
    he_http_date_format(951782400, buf);
    HE_CHECK_STR(buf, "Tue, 29 Feb 2000 00:00:00 GMT");
    he_http_date_format(4107542399, buf);
    HE_CHECK_STR(buf, "Sun, 28 Feb 2100 23:59:59 GMT");
    he_http_date_format(2147483648, buf);
    HE_CHECK_STR(buf, "Tue, 19 Jan 2038 03:14:08 GMT");
    /* clamped to what a four-digit year can say */
    he_http_date_format((time_t)INT64_MAX, buf);
    HE_CHECK_STR(buf, "Fri, 31 Dec 9999 23:59:59 GMT");
    he_http_date_format((time_t)INT64_MIN, buf);
    HE_CHECK_STR(buf, "Mon, 01 Jan 0001 00:00:00 GMT");

    /* agrees with gmtime_r + strftime across the range, 1 s steps apart */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 200000; i++) {
        he_xorshift64(&x);
        time_t t = (time_t)(x % 253402300800ull) - (i & 1 ? 62135596800LL : 0);
        struct tm tm;
        char want[64];
        gmtime_r(&t, &tm);
        strftime(want, sizeof(want), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (tm.tm_year + 1900 < 1000) continue; /* strftime does not pad %Y */
        he_http_date_format(t, buf);
        if (strcmp(buf, want) != 0) {
            HE_CHECK_STR(buf, want);
            break;
        }
        time_t back;
        if (he_http_date_parse(buf, 29, &back) != 0 || back != t) {
            HE_CHECK_INT(back, t);
            break;
        }
    }
}

typedef struct date_case {
    const char *s;
    int rc;
    time_t t;
} date_case_t;

static const date_case_t date_cases[] = {
    {"Sun, 06 Nov 1994 08:49:37 GMT", 0, 784111777},
    {"Sunday, 06-Nov-94 08:49:37 GMT", 0, 784111777},
    {"Sun Nov  6 08:49:37 1994", 0, 784111777},
    {"Sun Nov 06 08:49:37 1994", 0, 784111777},
    {"Thu, 01 Jan 1970 00:00:00 GMT", 0, 0},
    {"Wed, 31 Dec 1969 23:59:59 GMT", 0, -1},
    {"Tue, 29 Feb 2000 00:00:00 GMT", 0, 951782400},
    {"Tuesday, 29-Feb-00 00:00:00 GMT", 0, 951782400},
    {"Thursday, 01-Jan-70 00:00:00 GMT", 0, 0},
    {"Wednesday, 31-Dec-69 00:00:00 GMT", 0, 3155673600},
    {"Thu Jan  1 00:00:00 1970", 0, 0},
    {"Fri Dec 31 23:59:59 9999", 0, 253402300799},
    {"  Sun, 06 Nov 1994 08:49:37 GMT  ", 0, 784111777},
    {"Sun, 06 Nov 1994 23:59:60 GMT", 0, 784166400}, /* leap second */
    /* garbage */
    {"", -EINVAL, 0},
    {"garbage", -EINVAL, 0},
    {"0", -EINVAL, 0},
    {"784111777", -EINVAL, 0},
    {"Sun, 06 Nov 1994 08:49:37", -EINVAL, 0},
    {"Sun, 06 Nov 1994 08:49:37 UTC", -EINVAL, 0},
    {"Sun, 06 Nov 1994 08:49:37 GMT ", 0, 784111777},
    {"Sun, 06 Nov 1994 08:49:37 GMTx", -EINVAL, 0},
    {"Sun, 6 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 06 nov 1994 08:49:37 GMT", -EINVAL, 0},
    {"sun, 06 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 06 Nov 94 08:49:37 GMT", -EINVAL, 0},
    {"Sun,06 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 06 Foo 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 32 Jan 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 00 Jan 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 29 Feb 1900 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 31 Apr 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 06 Nov 1994 24:00:00 GMT", -EINVAL, 0},
    {"Sun, 06 Nov 1994 08:60:00 GMT", -EINVAL, 0},
    {"Sun, 06 Nov 1994 08:49:61 GMT", -EINVAL, 0},
    {"Sun, 06 Nov 0000 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 06 Nov 1994 8:49:37 GMT", -EINVAL, 0},
    {"Sun, 06 Nov 1994 08-49-37 GMT", -EINVAL, 0},
    {"Sunday, 06 Nov 1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun, 06-Nov-94 08:49:37 GMT", -EINVAL, 0},
    {"Sunday, 06-Nov-1994 08:49:37 GMT", -EINVAL, 0},
    {"Sun Nov 6 08:49:37 1994", -EINVAL, 0},
    {"Sun Nov  6 08:49:37 94", -EINVAL, 0},
    {"Sun Nov  6 08:49:37 1994 GMT", -EINVAL, 0},
    {"Sunday Nov  6 08:49:37 1994", -EINVAL, 0},
    {"Sun, 06 Nov 1994 08:49:37 GMT\0junk", 0, 784111777}, /* strlen stops at NUL */
};

static void test_date_parse(void)
{
    for (size_t i = 0; i < sizeof(date_cases) / sizeof(date_cases[0]); i++) {
        const date_case_t *c = &date_cases[i];
        time_t t = 12345;
        int rc = he_http_date_parse(c->s, strlen(c->s), &t);
        if (rc != c->rc || (rc == 0 && t != c->t)) fprintf(stderr, "date case \"%s\"\n", c->s);
        HE_CHECK_INT(rc, c->rc);
        if (c->rc == 0) HE_CHECK_INT(t, c->t);
        if (c->rc != 0) HE_CHECK_INT(t, 12345); /* untouched on error */
    }
    time_t t;
    const char nul[] = "Sun, 06 Nov 1994 08:49:37 GMT\0x";
    HE_CHECK_INT(he_http_date_parse(nul, sizeof(nul) - 1, &t), -EINVAL);
    HE_CHECK_INT(he_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", 20, &t), -EINVAL);
    HE_CHECK_INT(he_http_date_parse(NULL, 0, &t), -EINVAL);
}

/* ---------------------------------------------------------------- conditionals */

#define ETAG "\"5f5e1000-1a2b\""
#define MTIME ((time_t)784111777) /* Sun, 06 Nov 1994 08:49:37 GMT */
#define D_EQUAL "Sun, 06 Nov 1994 08:49:37 GMT"
#define D_OLDER "Sun, 06 Nov 1994 08:49:36 GMT"
#define D_NEWER "Sun, 06 Nov 1994 08:49:38 GMT"

static he_http_cond_result_t cond(const char *inm, const char *ims, const char *im, const char *ius)
{
    he_http_cond_t c = {
        inm, inm ? strlen(inm) : 0, ims, ims ? strlen(ims) : 0,
        im,  im ? strlen(im) : 0,   ius, ius ? strlen(ius) : 0,
    };
    return he_http_cond_eval(&c, ETAG, strlen(ETAG), MTIME);
}

#define PROCEED HE_HTTP_COND_PROCEED
#define NOTMOD HE_HTTP_COND_NOT_MODIFIED
#define FAILED HE_HTTP_COND_PRECONDITION_FAILED

static void test_cond(void)
{
    /* nothing conditional */
    HE_CHECK_INT(cond(NULL, NULL, NULL, NULL), PROCEED);

    /* If-None-Match */
    HE_CHECK_INT(cond(ETAG, NULL, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond("\"other\"", NULL, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond("W/" ETAG, NULL, NULL, NULL), NOTMOD); /* weak comparison */
    HE_CHECK_INT(cond("*", NULL, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond(" * ", NULL, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond("\"a\", " ETAG, NULL, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond("\"a\",W/\"b\" ,\t" ETAG " , \"c\"", NULL, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond("\"a\", \"b\"", NULL, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond("\"a,b\", " ETAG, NULL, NULL, NULL), NOTMOD); /* comma inside quotes */
    HE_CHECK_INT(cond("\"5f5e1000-1a2b\"x", NULL, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond("5f5e1000-1a2b", NULL, NULL, NULL), PROCEED);   /* unquoted */
    HE_CHECK_INT(cond("junk, " ETAG, NULL, NULL, NULL), NOTMOD);      /* bad member skipped */
    HE_CHECK_INT(cond("\"5f5e1000-1a2b", NULL, NULL, NULL), PROCEED); /* unterminated */
    HE_CHECK_INT(cond("w/" ETAG, NULL, NULL, NULL), PROCEED);         /* W/ is case-sensitive */
    HE_CHECK_INT(cond("\"5F5E1000-1A2B\"", NULL, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond("", NULL, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond("*x", NULL, NULL, NULL), PROCEED);

    /* If-Modified-Since */
    HE_CHECK_INT(cond(NULL, D_OLDER, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond(NULL, D_EQUAL, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond(NULL, D_NEWER, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond(NULL, "Sunday, 06-Nov-94 08:49:37 GMT", NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond(NULL, "Sun Nov  6 08:49:37 1994", NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond(NULL, "garbage", NULL, NULL), PROCEED);
    HE_CHECK_INT(cond(NULL, "", NULL, NULL), PROCEED);
    HE_CHECK_INT(cond(NULL, D_EQUAL ", " D_EQUAL, NULL, NULL), PROCEED);

    /* If-None-Match takes precedence: IMS is not even looked at */
    HE_CHECK_INT(cond("\"other\"", D_NEWER, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond("\"other\"", D_EQUAL, NULL, NULL), PROCEED);
    HE_CHECK_INT(cond(ETAG, D_OLDER, NULL, NULL), NOTMOD);
    HE_CHECK_INT(cond(ETAG, "garbage", NULL, NULL), NOTMOD);

    /* If-Match: strong comparison */
    HE_CHECK_INT(cond(NULL, NULL, ETAG, NULL), PROCEED);
    HE_CHECK_INT(cond(NULL, NULL, "*", NULL), PROCEED);
    HE_CHECK_INT(cond(NULL, NULL, "\"a\", " ETAG, NULL), PROCEED);
    HE_CHECK_INT(cond(NULL, NULL, "\"other\"", NULL), FAILED);
    HE_CHECK_INT(cond(NULL, NULL, "W/" ETAG, NULL), FAILED);
    HE_CHECK_INT(cond(NULL, NULL, "", NULL), FAILED);
    HE_CHECK_INT(cond(NULL, NULL, "junk", NULL), FAILED);

    /* If-Unmodified-Since */
    HE_CHECK_INT(cond(NULL, NULL, NULL, D_OLDER), FAILED);
    HE_CHECK_INT(cond(NULL, NULL, NULL, D_EQUAL), PROCEED);
    HE_CHECK_INT(cond(NULL, NULL, NULL, D_NEWER), PROCEED);
    HE_CHECK_INT(cond(NULL, NULL, NULL, "garbage"), PROCEED);

    /* If-Match wins over If-Unmodified-Since */
    HE_CHECK_INT(cond(NULL, NULL, ETAG, D_OLDER), PROCEED);
    HE_CHECK_INT(cond(NULL, NULL, "\"other\"", D_NEWER), FAILED);

    /* 412 checks come before 304 checks */
    HE_CHECK_INT(cond(ETAG, NULL, "\"other\"", NULL), FAILED);
    HE_CHECK_INT(cond(ETAG, D_NEWER, NULL, D_OLDER), FAILED);
    HE_CHECK_INT(cond(ETAG, NULL, ETAG, NULL), NOTMOD);
    HE_CHECK_INT(cond(NULL, D_NEWER, NULL, D_NEWER), NOTMOD);
    HE_CHECK_INT(cond("\"other\"", NULL, "*", D_OLDER), PROCEED);

    /* a representation without an ETag matches only "*" */
    he_http_cond_t c = {ETAG, strlen(ETAG), NULL, 0, NULL, 0, NULL, 0};
    HE_CHECK_INT(he_http_cond_eval(&c, NULL, 0, MTIME), PROCEED);
    c.if_none_match = "*";
    c.if_none_match_len = 1;
    HE_CHECK_INT(he_http_cond_eval(&c, NULL, 0, MTIME), NOTMOD);
    he_http_cond_t m = {NULL, 0, NULL, 0, ETAG, strlen(ETAG), NULL, 0};
    HE_CHECK_INT(he_http_cond_eval(&m, NULL, 0, MTIME), FAILED);
    /* a weak current ETag: INM still matches, If-Match cannot */
    HE_CHECK_INT(cond(NULL, NULL, NULL, NULL), PROCEED);
    he_http_cond_t w = {ETAG, strlen(ETAG), NULL, 0, NULL, 0, NULL, 0};
    HE_CHECK_INT(he_http_cond_eval(&w, "W/" ETAG, strlen("W/" ETAG), MTIME), NOTMOD);
    he_http_cond_t wm = {NULL, 0, NULL, 0, ETAG, strlen(ETAG), NULL, 0};
    HE_CHECK_INT(he_http_cond_eval(&wm, "W/" ETAG, strlen("W/" ETAG), MTIME), FAILED);
}

static bool if_range(const char *v)
{
    return he_http_if_range_ok(v, v ? strlen(v) : 0, ETAG, strlen(ETAG), MTIME);
}

static void test_if_range(void)
{
    HE_CHECK(if_range(NULL));
    HE_CHECK(if_range(ETAG));
    HE_CHECK(if_range(" " ETAG " "));
    HE_CHECK(!if_range("\"other\""));
    HE_CHECK(!if_range("W/" ETAG)); /* weak never matches */
    HE_CHECK(if_range(D_EQUAL));
    HE_CHECK(if_range("Sunday, 06-Nov-94 08:49:37 GMT"));
    HE_CHECK(!if_range(D_OLDER)); /* exact match only */
    HE_CHECK(!if_range(D_NEWER));
    HE_CHECK(!if_range("Wed, 21 Oct 2015 07:28:00 GMT")); /* starts with 'W' */
    HE_CHECK(!if_range("garbage"));
    HE_CHECK(!if_range(""));
    HE_CHECK(!if_range(ETAG ", \"x\""));
    HE_CHECK(!if_range("*"));
    HE_CHECK(
        he_http_if_range_ok("Wed, 21 Oct 2015 07:28:00 GMT", 29, ETAG, strlen(ETAG), 1445412480));
    /* a weak current ETag cannot satisfy If-Range */
    HE_CHECK(
        !he_http_if_range_ok("W/" ETAG, strlen("W/" ETAG), "W/" ETAG, strlen("W/" ETAG), MTIME));
    HE_CHECK(!he_http_if_range_ok(ETAG, strlen(ETAG), NULL, 0, MTIME));
}

static void test_reason(void)
{
    /* every status the data path, the cache and the admin listener emit */
    HE_CHECK(strcmp(he_http_reason(200), "OK") == 0);
    HE_CHECK(strcmp(he_http_reason(206), "Partial Content") == 0);
    HE_CHECK(strcmp(he_http_reason(304), "Not Modified") == 0);
    HE_CHECK(strcmp(he_http_reason(404), "Not Found") == 0);
    HE_CHECK(strcmp(he_http_reason(413), "Content Too Large") == 0);
    HE_CHECK(strcmp(he_http_reason(416), "Range Not Satisfiable") == 0);
    HE_CHECK(strcmp(he_http_reason(431), "Request Header Fields Too Large") == 0);
    HE_CHECK(strcmp(he_http_reason(503), "Service Unavailable") == 0);
    /* an origin's unlisted code: named by its class */
    HE_CHECK(strcmp(he_http_reason(299), "OK") == 0);
    HE_CHECK(strcmp(he_http_reason(399), "Redirect") == 0);
    HE_CHECK(strcmp(he_http_reason(418), "Client Error") == 0);
    HE_CHECK(strcmp(he_http_reason(599), "Server Error") == 0);
}

int main(void)
{
    test_reason();
    test_range();
    test_etag();
    test_date_format();
    test_date_parse();
    test_cond();
    test_if_range();
    HE_TEST_MAIN_END();
}
