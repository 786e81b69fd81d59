/* server/base/buf.c: growing and fixed buffers, cutting and failure that
 * stays, decimal and printf appends, JSON strings and UTF-8 lengths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "he_test.h"
#include "server/base/buf.h"

static void test_growing(void)
{
    he_buf_t b = {0};
    char big[10000];

    HE_CHECK(he_buf_ok(&b));
    he_buf_lit(&b, "a=");
    he_buf_u64(&b, 0);
    he_buf_str(&b, ",b=");
    he_buf_u64(&b, 18446744073709551615ull);
    he_buf_printf(&b, ",c=%d%s", -5, "!");
    HE_CHECK_STR(b.p, "a=0,b=18446744073709551615,c=-5!");
    HE_CHECK_INT(b.len, strlen(b.p));
    /* past the first allocation, by put and by a long printf */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    he_buf_str(&b, big);
    he_buf_printf(&b, "%s|", big);
    HE_CHECK_INT(b.len, 32 + 2 * (sizeof(big) - 1) + 1);
    HE_CHECK(b.p[b.len - 1] == '|' && b.p[b.len] == 0);
    HE_CHECK(he_buf_ok(&b));
    he_buf_clear(&b);
    HE_CHECK_INT(b.len, 0);
    HE_CHECK_STR(b.p, "");
    he_buf_free(&b);
    HE_CHECK(b.p == NULL && b.len == 0 && b.cap == 0);
}

static void test_fixed(void)
{
    char mem[16];
    he_buf_t b;

    he_buf_fixed(&b, mem, sizeof(mem));
    HE_CHECK_STR(mem, "");
    he_buf_lit(&b, "0123456789");
    he_buf_u64(&b, 12345);
    HE_CHECK(he_buf_ok(&b));
    HE_CHECK_STR(mem, "012345678912345"); /* 15 bytes and the NUL: full */
    /* what does not fit is cut and fails the buffer; later appends drop */
    he_buf_lit(&b, "z");
    HE_CHECK(!he_buf_ok(&b));
    HE_CHECK_INT(b.len, 15);
    he_buf_clear(&b);
    HE_CHECK(he_buf_ok(&b));
    he_buf_lit(&b, "abcdefghij");
    he_buf_lit(&b, "klmnopqrstuvwxyz");
    HE_CHECK(!he_buf_ok(&b));
    HE_CHECK_STR(mem, "abcdefghijklmno");
    he_buf_clear(&b);
    he_buf_printf(&b, "%s-%d", "abcdefghij", 123456);
    HE_CHECK(!he_buf_ok(&b));
    HE_CHECK_STR(mem, "abcdefghij-1234");
    HE_CHECK_INT(b.len, 15);
    he_buf_printf(&b, "x");
    HE_CHECK_STR(mem, "abcdefghij-1234");
    he_buf_clear(&b);
    he_buf_printf(&b, "%d", 42);
    HE_CHECK(he_buf_ok(&b));
    HE_CHECK_STR(mem, "42");
    /* free on a fixed buffer only empties it */
    he_buf_free(&b);
    HE_CHECK(b.p == mem && b.fixed && b.len == 0);
    /* no memory at all: failed from the start */
    he_buf_fixed(&b, mem, 0);
    he_buf_lit(&b, "a");
    HE_CHECK(!he_buf_ok(&b));
}

static void test_json(void)
{
    he_buf_t b = {0};
    char mem[8];

    he_buf_json_str(&b, "a\"b\\c\n\x01\x7f\xc3\xa9\xff");
    HE_CHECK_STR(b.p, "\"a\\\"b\\\\c\\u000a\\u0001\\u007f\xc3\xa9\\ufffd\"");
    he_buf_free(&b);
    he_buf_json_str(&b, "");
    HE_CHECK_STR(b.p, "\"\"");
    he_buf_free(&b);
    /* into a small fixed buffer: cut, still a string */
    he_buf_fixed(&b, mem, sizeof(mem));
    he_buf_json_str(&b, "abcdefghijkl");
    HE_CHECK(!he_buf_ok(&b));
    HE_CHECK_INT(strlen(mem), 7);
}

static void test_utf8(void)
{
    HE_CHECK_INT(he__utf8_len((const unsigned char *)"a"), 1);
    HE_CHECK_INT(he__utf8_len((const unsigned char *)"\xc3\xa9"), 2);
    HE_CHECK_INT(he__utf8_len((const unsigned char *)"\xf0\x9f\x98\x80"), 4);
    HE_CHECK_INT(he__utf8_len((const unsigned char *)"\xc0\x80"), 0);
    HE_CHECK_INT(he__utf8_len((const unsigned char *)"\xed\xa0\x80"), 0);
    HE_CHECK_INT(he__utf8_len((const unsigned char *)"\xe2\x82"), 0);
}

int main(void)
{
    test_growing();
    test_fixed();
    test_json();
    test_utf8();
    HE_TEST_MAIN_END();
}
