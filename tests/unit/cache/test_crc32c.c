/* cache/crc32c.c: the check value of CRC32C, a running CRC over pieces
 * equal to the CRC of the whole, and the CPU's instruction (where there
 * is one) agreeing with the table at every length and alignment, around
 * the edges of its three-chain blocks too. */
#include <stdint.h>
#include <string.h>

#include "cache/internal.h"
#include "he_test.h"
#include "tests/he_xorshift.h"

static void test_check_value(void)
{
    /* the catalogue's check value for CRC-32C (iSCSI, RFC 3720) */
    HE_CHECK_INT(he__cache_crc32c(0, "123456789", 9), 0xe3069283u);
    HE_CHECK_INT(he__cache_crc32c_table(0, "123456789", 9), 0xe3069283u);
    HE_CHECK_INT(he__cache_crc32c(0, "", 0), 0);
    /* RFC 3720 B.4: 32 bytes of zeros, and of 0xff */
    static const unsigned char zeros[32],
        ones[32] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    HE_CHECK_INT(he__cache_crc32c(0, zeros, sizeof(zeros)), 0x8a9136aau);
    HE_CHECK_INT(he__cache_crc32c(0, ones, sizeof(ones)), 0x62a8ab43u);
}

static void test_pieces_and_table(void)
{
    static unsigned char buf[70000];
    uint64_t seed = 7;
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)he_xorshift64(&seed);
    for (size_t start = 0; start < 9; start++) {
        for (size_t n = 0; n < 80; n++) {
            HE_CHECK_INT(he__cache_crc32c(0, buf + start, n),
                         he__cache_crc32c_table(0, buf + start, n));
        }
    }
    /* around the three-chain blocks' edges (3 x 4 KiB) */
    static const size_t edges[] = {12287, 12288, 12289, 12295, 24576, 3 * 12288 + 5};
    for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++)
        for (size_t start = 0; start < 9; start++)
            HE_CHECK_INT(he__cache_crc32c(0, buf + start, edges[e]),
                         he__cache_crc32c_table(0, buf + start, edges[e]));
    uint32_t whole = he__cache_crc32c(0, buf, sizeof(buf));
    HE_CHECK_INT(whole, he__cache_crc32c_table(0, buf, sizeof(buf)));
    for (size_t cut = 1; cut < sizeof(buf); cut = cut * 3 + 1) {
        uint32_t c = he__cache_crc32c(0, buf, cut);
        HE_CHECK_INT(he__cache_crc32c(c, buf + cut, sizeof(buf) - cut), whole);
    }
    fprintf(stderr, "test_crc32c: %s\n",
            he__cache_crc32c_hardware() ? "the CPU's crc32 instruction" : "the table only");
}

int main(void)
{
    test_check_value();
    test_pieces_and_table();
    HE_TEST_MAIN_END();
}
