/* he_seg_url_normalize: the table is the contract. Every traversal
 * spelling we know of must fail, every legitimate path must come out
 * exactly as the file system will see it. Also he_seg_uri_resolve. */
#include "he_test.h"

#include <errno.h>

#include "segment/segment.h"

typedef struct url_case {
    const char *in;
    int rc;          /* expected length, or a negative errno */
    const char *out; /* expected result when rc >= 0 */
} url_case_t;

#define OK(in, out)                                                                                \
    {                                                                                              \
        in, (int)sizeof(out) - 1, out                                                              \
    }
#define BAD(in)                                                                                    \
    {                                                                                              \
        in, -EINVAL, NULL                                                                          \
    }

static const url_case_t url_cases[] = {
    /* plain paths */
    OK("/", ""),
    OK("/a.m3u8", "a.m3u8"),
    OK("/live/ch1/index.m3u8", "live/ch1/index.m3u8"),
    OK("/vod/movie/seg_00001.ts", "vod/movie/seg_00001.ts"),
    OK("/a/b/", "a/b/"),
    OK("/a", "a"),
    /* query and fragment are dropped */
    OK("/a.ts?x=1", "a.ts"),
    OK("/a.ts?x=../../etc/passwd", "a.ts"),
    OK("/a.ts?%zz", "a.ts"),
    OK("/a.ts#frag", "a.ts"),
    OK("/a.ts?q#f", "a.ts"),
    OK("/?x", ""),
    OK("/dir/?x=1", "dir/"),
    /* collapsing */
    OK("//a", "a"),
    OK("/a//b", "a/b"),
    OK("/a///b////c", "a/b/c"),
    OK("/a//", "a/"),
    OK("//", ""),
    OK("/./a", "a"),
    OK("/a/./b", "a/b"),
    OK("/a/././b", "a/b"),
    OK("/a/.", "a"),
    OK("/.", ""),
    OK("/./", ""),
    OK("/a/./", "a/"),
    OK("/a/.//b/", "a/b/"),
    OK("/%2e/a", "a"),
    OK("/a/%2E", "a"),
    /* names that only look like dot segments */
    OK("/...", "..."),
    OK("/a/.../b", "a/.../b"),
    OK("/..a", "..a"),
    OK("/a..", "a.."),
    OK("/.hidden", ".hidden"),
    OK("/a/..b/c", "a/..b/c"),
    OK("/a/b..c", "a/b..c"),
    OK("/%2e%2e%2e", "..."),
    OK("/..%2e", "..."),
    /* percent-decoding */
    OK("/my%20movie/seg%201.ts", "my movie/seg 1.ts"),
    OK("/%41%62c", "Abc"),
    OK("/a%2Db", "a-b"),
    OK("/100%25.ts", "100%.ts"),
    OK("/%252e%252e/x", "%2e%2e/x"),
    OK("/a%3fb", "a?b"),
    OK("/a%23b", "a#b"),
    OK("/%e6%97%a5%e6%9c%ac.ts", "\xe6\x97\xa5\xe6\x9c\xac.ts"),
    OK("/\xe6\x97\xa5\xe6\x9c\xac/seg.ts", "\xe6\x97\xa5\xe6\x9c\xac/seg.ts"),
    OK("/caf\xc3\xa9.m3u8", "caf\xc3\xa9.m3u8"),
    OK("/a b", "a b"),
    OK("/a;b=c", "a;b=c"),
    OK("/%ff", "\xff"),
    /* overlong UTF-8 for '.' and '/' is just bytes to Linux, not a separator */
    OK("/%c0%ae%c0%ae/x", "\xc0\xae\xc0\xae/x"),
    OK("/a%c0%afb", "a\xc0\xaf"
                    "b"),
    /* traversal, every spelling */
    BAD("/.."),
    BAD("/../"),
    BAD("/../etc/passwd"),
    BAD("/a/../../etc/passwd"),
    BAD("/a/.."),
    BAD("/a/../b"),
    BAD("/a/b/../../.."),
    BAD("//../a"),
    BAD("/./../a"),
    BAD("/%2e%2e/etc/passwd"),
    BAD("/%2E%2E/etc/passwd"),
    BAD("/%2e%2E/x"),
    BAD("/.%2e/x"),
    BAD("/%2e./x"),
    BAD("/%2E./x"),
    BAD("/.%2E"),
    BAD("/a/%2e%2e"),
    BAD("/a/%2e%2e?x"),
    BAD("/a/..?x"),
    BAD("/a/..#x"),
    BAD("/a/..//b"),
    /* encoded separators and backslashes */
    BAD("/a%2fb"),
    BAD("/a%2Fb"),
    BAD("/%2f"),
    BAD("/..%2fetc"),
    BAD("/%2e%2e%2fetc%2fpasswd"),
    BAD("/a\\b"),
    BAD("/..\\..\\etc"),
    BAD("/a%5cb"),
    BAD("/a%5Cb"),
    BAD("/..%5c..%5cetc"),
    /* NUL and control bytes, raw and encoded */
    BAD("/a%00.ts"),
    BAD("/a%00"),
    BAD("/a%0a"),
    BAD("/a%0d%0aSet-Cookie:x"),
    BAD("/a%1f"),
    BAD("/a%7f"),
    BAD("/a\tb"),
    BAD("/a\rb"),
    BAD("/a\nb"),
    BAD("/a\x7f"),
    BAD("/a\x01"),
    BAD("/a?x\ny"),
    /* malformed escapes */
    BAD("/%"),
    BAD("/a%"),
    BAD("/%4"),
    BAD("/a%4?x"),
    BAD("/%zz"),
    BAD("/%g0"),
    BAD("/%0g"),
    BAD("/% 2e"),
    /* not origin-form */
    BAD(""),
    BAD("a/b"),
    BAD("http://example.com/a.ts"),
    BAD("HTTP://example.com/"),
    BAD("*"),
    BAD("?x"),
    BAD(".."),
    BAD("\\a"),
};

static void test_table(void)
{
    char out[256];
    size_t n = sizeof(url_cases) / sizeof(url_cases[0]);
    HE_CHECK(n >= 50);
    for (size_t i = 0; i < n; i++) {
        const url_case_t *c = &url_cases[i];
        memset(out, 'X', sizeof(out));
        int rc = he_seg_url_normalize(c->in, strlen(c->in), out, sizeof(out));
        if (rc != c->rc) fprintf(stderr, "case %zu: \"%s\"\n", i, c->in);
        HE_CHECK_INT(rc, c->rc);
        if (c->rc >= 0 && rc >= 0) {
            HE_CHECK_STR(out, c->out);
            HE_CHECK_INT(strlen(out), rc);
        }
    }
}

/* Raw NUL inside the target: the length, not a terminator, bounds it. */
static void test_raw_nul(void)
{
    char out[64];
    HE_CHECK_INT(he_seg_url_normalize("/a\0b", 4, out, sizeof(out)), -EINVAL);
    HE_CHECK_INT(he_seg_url_normalize("/a\0", 3, out, sizeof(out)), -EINVAL);
    HE_CHECK_INT(he_seg_url_normalize("/a.ts?\0", 7, out, sizeof(out)), -EINVAL);
    /* len is honoured: bytes past it are not read */
    HE_CHECK_INT(he_seg_url_normalize("/ab/../..", 3, out, sizeof(out)), 2);
    HE_CHECK_STR(out, "ab");
    HE_CHECK_INT(he_seg_url_normalize("/a%2", 3, out, sizeof(out)), -EINVAL);
    HE_CHECK_INT(he_seg_url_normalize(NULL, 0, out, sizeof(out)), -EINVAL);
}

static void test_length_limits(void)
{
    char in[700], out[700];
    /* "/" + 100 'a' -> 100 bytes; needs cap 101 */
    in[0] = '/';
    memset(in + 1, 'a', 100);
    HE_CHECK_INT(he_seg_url_normalize(in, 101, out, 101), 100);
    HE_CHECK_INT(strlen(out), 100);
    HE_CHECK_INT(he_seg_url_normalize(in, 101, out, 100), -ENAMETOOLONG);
    HE_CHECK_INT(he_seg_url_normalize(in, 101, out, 1), -ENAMETOOLONG);
    HE_CHECK_INT(he_seg_url_normalize(in, 101, out, 0), -ENAMETOOLONG);
    HE_CHECK_INT(he_seg_url_normalize("/", 1, out, 1), 0);
    HE_CHECK_STR(out, "");

    /* the boundary counts the decoded result, not the escaped input */
    HE_CHECK_INT(he_seg_url_normalize("/%41%42%43", 10, out, 4), 3);
    HE_CHECK_STR(out, "ABC");
    HE_CHECK_INT(he_seg_url_normalize("/%41%42%43", 10, out, 3), -ENAMETOOLONG);

    /* separators, dots and the trailing '/' count too */
    HE_CHECK_INT(he_seg_url_normalize("/ab/cd", 6, out, 6), 5);
    HE_CHECK_INT(he_seg_url_normalize("/ab/cd", 6, out, 5), -ENAMETOOLONG);
    HE_CHECK_INT(he_seg_url_normalize("/ab/", 4, out, 4), 3);
    HE_CHECK_STR(out, "ab/");
    HE_CHECK_INT(he_seg_url_normalize("/ab/", 4, out, 3), -ENAMETOOLONG);
    HE_CHECK_INT(he_seg_url_normalize("/a/..b", 6, out, 6), 5);
    HE_CHECK_INT(he_seg_url_normalize("/a/..b", 6, out, 5), -ENAMETOOLONG);
    /* dropped segments cost nothing, even when they would not fit */
    HE_CHECK_INT(he_seg_url_normalize("/ab/./////.", 11, out, 3), 2);
    HE_CHECK_STR(out, "ab");

    /* a long path: 500 bytes of segments, exactly at the boundary */
    size_t n = 0;
    for (int i = 0; i < 50; i++) {
        memcpy(in + n, "/aaaaaaaaa", 10);
        n += 10;
    }
    HE_CHECK_INT(he_seg_url_normalize(in, n, out, 500), 499);
    HE_CHECK_INT(he_seg_url_normalize(in, n, out, 499), -ENAMETOOLONG);
    /* with "//" and "/./" between every segment, still 499 */
    n = 0;
    for (int i = 0; i < 50; i++) {
        memcpy(in + n, "/./aaaaaaaaa/", 13);
        n += 13;
    }
    HE_CHECK_INT(he_seg_url_normalize(in, n - 1, out, 500), 499);
}

typedef struct resolve_case {
    const char *base, *ref, *out;
} resolve_case_t;

static const resolve_case_t resolve_cases[] = {
    {"/a/b.m3u8", "seg1.ts", "/a/seg1.ts"},
    {"/a/b.m3u8", "./seg1.ts", "/a/seg1.ts"},
    {"/a/b.m3u8", "../x/y.ts", "/x/y.ts"},
    {"/a/b.m3u8", "../../../x.ts", "/x.ts"},
    {"/a/b.m3u8", "/abs.ts", "/abs.ts"},
    {"/a/b.m3u8", "/abs/../c.ts", "/c.ts"},
    {"/a/b.m3u8", "v1/index.m3u8", "/a/v1/index.m3u8"},
    {"/a/b.m3u8", "seg.ts?t=1", "/a/seg.ts?t=1"},
    {"/a/b.m3u8?token=9", "seg.ts", "/a/seg.ts"},
    {"/a/b.m3u8?token=9", "", "/a/b.m3u8?token=9"},
    {"/a/b.m3u8", "?x=1", "/a/b.m3u8?x=1"},
    {"/a/b.m3u8", "#f", "/a/b.m3u8#f"},
    {"/a/b.m3u8", "..", "/"},
    {"/a/b.m3u8", ".", "/a/"},
    {"/a/b/", "c.ts", "/a/b/c.ts"},
    {"/b.m3u8", "c.ts", "/c.ts"},
    {"/a/./b/../c.m3u8", "d.ts", "/a/d.ts"},
    {"/a/b.m3u8", "http://h/p", "http://h/p"},
    {"/a/b.m3u8", "https://cdn.example/x/../y.ts", "https://cdn.example/y.ts"},
    {"/a/b.m3u8", "//cdn/x.ts", "//cdn/x.ts"},
    {"http://host:8080/a/b.m3u8", "seg1.ts", "http://host:8080/a/seg1.ts"},
    {"http://host:8080/a/b.m3u8", "../x/y.ts", "http://host:8080/x/y.ts"},
    {"http://host:8080/a/b.m3u8", "/abs.ts", "http://host:8080/abs.ts"},
    {"http://host:8080/a/b.m3u8", "//other/z.ts", "http://other/z.ts"},
    {"http://host:8080/a/b.m3u8", "http://h/p", "http://h/p"},
    {"http://host", "seg.ts", "http://host/seg.ts"},
    {"http://host", "", "http://host"},
    {"http://host:8080/a/b.m3u8?x=1", "c.ts", "http://host:8080/a/c.ts"},
    /* RFC 3986 5.4.1 normal examples */
    {"http://a/b/c/d;p?q", "g", "http://a/b/c/g"},
    {"http://a/b/c/d;p?q", "./g", "http://a/b/c/g"},
    {"http://a/b/c/d;p?q", "g/", "http://a/b/c/g/"},
    {"http://a/b/c/d;p?q", "/g", "http://a/g"},
    {"http://a/b/c/d;p?q", "//g", "http://g"},
    {"http://a/b/c/d;p?q", "?y", "http://a/b/c/d;p?y"},
    {"http://a/b/c/d;p?q", "g?y", "http://a/b/c/g?y"},
    {"http://a/b/c/d;p?q", "#s", "http://a/b/c/d;p?q#s"},
    {"http://a/b/c/d;p?q", "g#s", "http://a/b/c/g#s"},
    {"http://a/b/c/d;p?q", ";x", "http://a/b/c/;x"},
    {"http://a/b/c/d;p?q", "", "http://a/b/c/d;p?q"},
    {"http://a/b/c/d;p?q", ".", "http://a/b/c/"},
    {"http://a/b/c/d;p?q", "./", "http://a/b/c/"},
    {"http://a/b/c/d;p?q", "..", "http://a/b/"},
    {"http://a/b/c/d;p?q", "../", "http://a/b/"},
    {"http://a/b/c/d;p?q", "../g", "http://a/b/g"},
    {"http://a/b/c/d;p?q", "../..", "http://a/"},
    {"http://a/b/c/d;p?q", "../../g", "http://a/g"},
    /* RFC 3986 5.4.2 abnormal examples */
    {"http://a/b/c/d;p?q", "../../../g", "http://a/g"},
    {"http://a/b/c/d;p?q", "/./g", "http://a/g"},
    {"http://a/b/c/d;p?q", "/../g", "http://a/g"},
    {"http://a/b/c/d;p?q", "g.", "http://a/b/c/g."},
    {"http://a/b/c/d;p?q", ".g", "http://a/b/c/.g"},
    {"http://a/b/c/d;p?q", "g..", "http://a/b/c/g.."},
    {"http://a/b/c/d;p?q", "..g", "http://a/b/c/..g"},
    {"http://a/b/c/d;p?q", "./../g", "http://a/b/g"},
    {"http://a/b/c/d;p?q", "./g/.", "http://a/b/c/g/"},
    {"http://a/b/c/d;p?q", "g/./h", "http://a/b/c/g/h"},
    {"http://a/b/c/d;p?q", "g/../h", "http://a/b/c/h"},
    {"http://a/b/c/d;p?q", "g;x=1/./y", "http://a/b/c/g;x=1/y"},
    {"http://a/b/c/d;p?q", "g;x=1/../y", "http://a/b/c/y"},
    {"http://a/b/c/d;p?q", "g?y/./x", "http://a/b/c/g?y/./x"},
    {"http://a/b/c/d;p?q", "g#s/../x", "http://a/b/c/g#s/../x"},
    {"http://a/b/c/d;p?q", "http:g", "http:g"},
};

static void test_resolve(void)
{
    char out[256];
    for (size_t i = 0; i < sizeof(resolve_cases) / sizeof(resolve_cases[0]); i++) {
        const resolve_case_t *c = &resolve_cases[i];
        int rc = he_seg_uri_resolve(c->base, c->ref, out, sizeof(out));
        if (rc < 0 || strcmp(out, c->out) != 0)
            fprintf(stderr, "resolve case %zu: \"%s\" + \"%s\"\n", i, c->base, c->ref);
        HE_CHECK_INT(rc, strlen(c->out));
        HE_CHECK_STR(out, c->out);
    }

    /* exact capacity boundary: "/a/seg1.ts" is 10 bytes */
    HE_CHECK_INT(he_seg_uri_resolve("/a/b.m3u8", "seg1.ts", out, 11), 10);
    HE_CHECK_INT(he_seg_uri_resolve("/a/b.m3u8", "seg1.ts", out, 10), -ENAMETOOLONG);
    HE_CHECK_STR(out, "");
    HE_CHECK_INT(he_seg_uri_resolve("/a/b.m3u8", "seg1.ts", out, 0), -ENAMETOOLONG);
    HE_CHECK_INT(he_seg_uri_resolve("http://h/a.m3u8", "x.ts?abc", out, 18), 17);
    HE_CHECK_INT(he_seg_uri_resolve("http://h/a.m3u8", "x.ts?abc", out, 17), -ENAMETOOLONG);
    HE_CHECK_INT(he_seg_uri_resolve(NULL, "x", out, sizeof(out)), -EINVAL);
}

int main(void)
{
    test_table();
    test_raw_nul();
    test_length_limits();
    test_resolve();
    HE_TEST_MAIN_END();
}
