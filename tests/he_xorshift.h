/* xorshift64 (Marsaglia, 13/7/17): the repeatable pseudo-random numbers of
 * the unit tests, fuzz driver and benchmarks. Each caller keeps its own
 * state (any value but 0), so each sequence stays what it was. */
#ifndef HE_XORSHIFT_H
#define HE_XORSHIFT_H

#include <stdint.h>

static inline uint64_t he_xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

#endif
