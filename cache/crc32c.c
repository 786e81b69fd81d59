/* CRC32C (Castagnoli), the checksum of SSD-tier files: computed once per
 * object written and once per object verified, never per hit. With
 * SSE4.2 (every x86-64 since 2008) by the CPU's crc32 instruction, 8 bytes
 * at a time, some 5x the table's speed: at cold misses into the SSD tier
 * the table-driven loop was a fifth of the worker's time
 * (docs/performance.md, "Cold misses"). Elsewhere table-driven, slicing
 * by 8 (~1-2 GB/s). */
#include <stdint.h>
#include <string.h>

#include "cache/internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t he_cache_crc_tab[8][256];
static pthread_once_t he_cache_crc_once = PTHREAD_ONCE_INIT;
static bool he_cache_crc_hw;

static void he_cache_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        he_cache_crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            he_cache_crc_tab[t][i] = (he_cache_crc_tab[t - 1][i] >> 8) ^
                                     he_cache_crc_tab[0][he_cache_crc_tab[t - 1][i] & 0xff];
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
