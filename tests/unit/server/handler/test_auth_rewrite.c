/* auth_rewrite.c: every URI a playlist names carries the token, with the
 * URI's own parameters kept, '?' and '&' right, a token of its own dropped,
 * absolute URIs to other hosts and non-HTTP schemes left alone; the bytes
 * between URIs unchanged. */
#include <stdlib.h>
#include <string.h>

#include "he_test.h"
#include "server/handler/auth.h"

static const char *const drop[] = {"__token__", NULL};
static const char *const hosts[] = {"cdn.example.com"};

static char *rewrite(const char *in, const char *text)
{
    he_auth_rewrite_t rw = {.text = text, .text_len = strlen(text), .drop = drop, .hosts = hosts,
                            .nhosts = 1};
    char *out = NULL;
    size_t cap = 0;
    ssize_t n = he_auth_rewrite(in, strlen(in), &rw, &out, &cap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    memcpy(s, out, (size_t)n);
    s[n] = 0;
    free(out);
    return s;
}

static void test_master(void)
{
    const char *in =
        "#EXTM3U\n"
        "#EXT-X-SESSION-DATA:DATA-ID=\"com.x\",URI=\"data.json\"\n"
        "#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"https://keys.example.com/k\"\n"
        "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"audio/en.m3u8?lang=en\"\n"
        "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1000,URI=\"iframe.m3u8\"\n"
        "#EXT-X-STREAM-INF:BANDWIDTH=400000,CODECS=\"avc1.64001f,mp4a.40.2\"\n"
        "288p/index.m3u8\r\n"
        "#EXT-X-STREAM-INF:BANDWIDTH=800000\n"
        "  https://cdn.example.com/360p/index.m3u8?__token__=old&x=1#f  \n"
        "#EXT-X-STREAM-INF:BANDWIDTH=900000\n"
        "//other.example.com/576p.m3u8\n";
    const char *want =
        "#EXTM3U\n"
        "#EXT-X-SESSION-DATA:DATA-ID=\"com.x\",URI=\"data.json?__token__=T\"\n"
        "#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"https://keys.example.com/k\"\n"
        "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"audio/en.m3u8?lang=en&__token__=T\"\n"
        "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1000,URI=\"iframe.m3u8?__token__=T\"\n"
        "#EXT-X-STREAM-INF:BANDWIDTH=400000,CODECS=\"avc1.64001f,mp4a.40.2\"\n"
        "288p/index.m3u8?__token__=T\r\n"
        "#EXT-X-STREAM-INF:BANDWIDTH=800000\n"
        "  https://cdn.example.com/360p/index.m3u8?x=1&__token__=T#f  \n"
        "#EXT-X-STREAM-INF:BANDWIDTH=900000\n"
        "//other.example.com/576p.m3u8\n";
    char *got = rewrite(in, "__token__=T");
    HE_CHECK(got != NULL);
    if (got) HE_CHECK_STR(got, want);
    free(got);
}

static void test_media_ll(void)
{
    const char *in = "#EXTM3U\n"
                     "#EXT-X-TARGETDURATION:4\n"
                     "#EXT-X-PART-INF:PART-TARGET=1.0\n"
                     "#EXT-X-MAP:URI=\"init.mp4\"\n"
                     "#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\",IV=0x1\n"
                     "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://license\",KEYFORMAT=\"com.apple\"\n"
                     "#EXT-X-KEY:METHOD=AES-128,URI=\"data:text/plain;base64,AAAA\"\n"
                     "#EXTINF:4.0,\n"
                     "seg1.m4s?\n"
                     "#EXT-X-PART:DURATION=1.0,URI=\"seg2.0.m4s\",INDEPENDENT=YES\n"
                     "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg2.1.m4s\"\n"
                     "#EXT-X-RENDITION-REPORT:URI=\"../720p/index.m3u8\",LAST-MSN=2\n"
                     "#EXT-X-DATERANGE:ID=\"x\",X-URI=\"not-a-uri\"\n"
                     "# a comment with URI=\"no\"\n";
    const char *want = "#EXTM3U\n"
                       "#EXT-X-TARGETDURATION:4\n"
                       "#EXT-X-PART-INF:PART-TARGET=1.0\n"
                       "#EXT-X-MAP:URI=\"init.mp4?a=b&c=d\"\n"
                       "#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin?a=b&c=d\",IV=0x1\n"
                       "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://license\",KEYFORMAT=\"com.apple\"\n"
                       "#EXT-X-KEY:METHOD=AES-128,URI=\"data:text/plain;base64,AAAA\"\n"
                       "#EXTINF:4.0,\n"
                       "seg1.m4s?a=b&c=d\n"
                       "#EXT-X-PART:DURATION=1.0,URI=\"seg2.0.m4s?a=b&c=d\",INDEPENDENT=YES\n"
                       "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg2.1.m4s?a=b&c=d\"\n"
                       "#EXT-X-RENDITION-REPORT:URI=\"../720p/index.m3u8?a=b&c=d\",LAST-MSN=2\n"
                       "#EXT-X-DATERANGE:ID=\"x\",X-URI=\"not-a-uri\"\n"
                       "# a comment with URI=\"no\"\n";
    char *got = rewrite(in, "a=b&c=d");
    HE_CHECK(got != NULL);
    if (got) HE_CHECK_STR(got, want);
    free(got);
}

/* A long media playlist: the output is exactly the input plus the token
 * per URI; a buffer given back is reused when large enough, grown when not. */
static void test_long(void)
{
    size_t icap = 1 << 20, n = 0;
    char *in = malloc(icap);
    n += (size_t)snprintf(in + n, icap - n, "#EXTM3U\n#EXT-X-TARGETDURATION:6\n");
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(in + n, icap - n, "#EXTINF:6.0,\nseg_%05d.ts\n", i);
    he_auth_rewrite_t rw = {.text = "__token__=0123456789", .text_len = 20, .drop = drop};
    char *out = malloc(16);
    size_t cap = 16;
    ssize_t got = he_auth_rewrite(in, n, &rw, &out, &cap);
    HE_CHECK_INT(got, (ssize_t)(n + 1000 * 21));
    HE_CHECK(cap >= (size_t)got);
    HE_CHECK(out && memmem(out, (size_t)got, "seg_00999.ts?__token__=0123456789\n", 34) != NULL);
    char *again = out;
    HE_CHECK_INT(he_auth_rewrite(in, n, &rw, &out, &cap), got);
    HE_CHECK(out == again);
    free(out);
    free(in);
}

static void test_not_a_playlist(void)
{
    he_auth_rewrite_t rw = {.text = "t=1", .text_len = 3};
    char *out = NULL;
    size_t cap = 0;
    HE_CHECK_INT(he_auth_rewrite("<html>", 6, &rw, &out, &cap), -22);
    HE_CHECK_INT(he_auth_rewrite("", 0, &rw, &out, &cap), -22);
    free(out);
}

int main(void)
{
    test_master();
    test_media_ll();
    test_long();
    test_not_a_playlist();
    HE_TEST_MAIN_END();
}
