#include <time.h>

#include "server/base/clock.h"

__thread uint64_t he__batch_ns;

uint64_t he__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
