/* CRC32C (Castagnoli), the checksum of SSD-tier files: computed once per
 * object written and once per object verified, never per hit. With
 * SSE4.2 (every x86-64 since 2008) by the CPU's crc32 instruction, 8 bytes
 * at a time: at cold misses into the SSD tier the table-driven loop was a
 * fifth of the worker's time (docs/performance.md, "Cold misses won").
 * One instruction waits for the one before (3 cycles), so long inputs go
 * as three chains over three thirds of a block, joined at the block's
 * end: a CRC register r followed by HE_CACHE_CRC_BLOCK more bytes is
 * shift(r) ^ (the CRC of those bytes from 0), and shift, r times
 * x^(8 * HE_CACHE_CRC_BLOCK) mod P, is linear in r's bits: four tables of
 * 256 made at start-up from the one-bit step by repeated squaring (the
 * method of zlib's crc32_combine). Elsewhere table-driven, slicing by 8
 * (~1-2 GB/s). */
#include <stdint.h>
#include <string.h>

#include "cache/internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define HE_CACHE_CRC_POLY 0x82f63b78u /* reflected */
#define HE_CACHE_CRC_BLOCK 4096u      /* bytes per chain per block */

static uint32_t he_cache_crc_tab[8][256];
static uint32_t he_cache_crc_shift_tab[4][256]; /* r -> r after HE_CACHE_CRC_BLOCK zeros */
static pthread_once_t he_cache_crc_once = PTHREAD_ONCE_INIT;
static bool he_cache_crc_hw;

/* The GF(2) 32x32 matrix m (column i: the image of bit i) times v */
static uint32_t he_cache_gf2_times(const uint32_t *m, uint32_t v)
{
    uint32_t r = 0;
    for (int i = 0; v; i++, v >>= 1)
        if (v & 1) r ^= m[i];
    return r;
}

static void he_cache_crc_shift_init(void)
{
    uint32_t a[32], b[32];
    /* one zero bit: r -> (r >> 1) ^ (r & 1 ? POLY : 0) */
    a[0] = HE_CACHE_CRC_POLY;
    for (int i = 1; i < 32; i++)
        a[i] = 1u << (i - 1);
    /* squared: 2, 4, ... 8 * HE_CACHE_CRC_BLOCK zero bits */
    for (uint32_t bits = 1; bits < 8 * HE_CACHE_CRC_BLOCK; bits *= 2) {
        for (int i = 0; i < 32; i++)
            b[i] = he_cache_gf2_times(a, a[i]);
        memcpy(a, b, sizeof(a));
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++)
            he_cache_crc_shift_tab[k][v] = he_cache_gf2_times(a, v << (8 * k));
}

static inline uint32_t he_cache_crc_shift(uint32_t r)
{
    return he_cache_crc_shift_tab[0][r & 0xff] ^ he_cache_crc_shift_tab[1][(r >> 8) & 0xff] ^
           he_cache_crc_shift_tab[2][(r >> 16) & 0xff] ^ he_cache_crc_shift_tab[3][r >> 24];
}

static void he_cache_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ HE_CACHE_CRC_POLY : c >> 1;
        he_cache_crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            he_cache_crc_tab[t][i] = (he_cache_crc_tab[t - 1][i] >> 8) ^
                                     he_cache_crc_tab[0][he_cache_crc_tab[t - 1][i] & 0xff];
    he_cache_crc_shift_init();
#if defined(__x86_64__)
    he_cache_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* crc is the running value, not inverted */
static uint32_t he_cache_crc_table(uint32_t crc, const unsigned char *s, size_t n)
{
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        v ^= crc; /* little-endian hosts (x86-64, arm64) */
        crc = he_cache_crc_tab[7][v & 0xff] ^ he_cache_crc_tab[6][(v >> 8) & 0xff] ^
              he_cache_crc_tab[5][(v >> 16) & 0xff] ^ he_cache_crc_tab[4][(v >> 24) & 0xff] ^
              he_cache_crc_tab[3][(v >> 32) & 0xff] ^ he_cache_crc_tab[2][(v >> 40) & 0xff] ^
              he_cache_crc_tab[1][(v >> 48) & 0xff] ^ he_cache_crc_tab[0][v >> 56];
        s += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ he_cache_crc_tab[0][(crc ^ *s++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
he_cache_crc_sse42(uint32_t crc, const unsigned char *s, size_t n)
{
    uint64_t c = crc;
    while (n >= 3 * HE_CACHE_CRC_BLOCK) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < HE_CACHE_CRC_BLOCK; i += 8) {
            uint64_t v0, v1, v2;
            memcpy(&v0, s + i, 8);
            memcpy(&v1, s + HE_CACHE_CRC_BLOCK + i, 8);
            memcpy(&v2, s + 2 * HE_CACHE_CRC_BLOCK + i, 8);
            c = _mm_crc32_u64(c, v0);
            c1 = _mm_crc32_u64(c1, v1);
            c2 = _mm_crc32_u64(c2, v2);
        }
        c = he_cache_crc_shift((uint32_t)c) ^ (uint32_t)c1;
        c = he_cache_crc_shift((uint32_t)c) ^ (uint32_t)c2;
        s += 3 * HE_CACHE_CRC_BLOCK;
        n -= 3 * HE_CACHE_CRC_BLOCK;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        c = _mm_crc32_u64(c, v);
        s += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--)
        crc = _mm_crc32_u8(crc, *s++);
    return crc;
}
#endif

uint32_t he__cache_crc32c(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&he_cache_crc_once, he_cache_crc_init);
#if defined(__x86_64__)
    if (he_cache_crc_hw) return ~he_cache_crc_sse42(~crc, p, n);
#endif
    return ~he_cache_crc_table(~crc, p, n);
}

uint32_t he__cache_crc32c_table(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&he_cache_crc_once, he_cache_crc_init);
    return ~he_cache_crc_table(~crc, p, n);
}

bool he__cache_crc32c_hardware(void)
{
    pthread_once(&he_cache_crc_once, he_cache_crc_init);
    return he_cache_crc_hw;
}
