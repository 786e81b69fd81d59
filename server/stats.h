/* Per-worker statistics. Each worker writes only its own he_stats_t (cache
 * line aligned, no atomics on the hot path); the control thread reads and
 * sums them. A torn read of a 64-bit counter cannot happen on x86-64 and
 * is harmless for monitoring elsewhere. */
#ifndef HE_STATS_H
#define HE_STATS_H

#include <stdint.h>

#include "segment/segment.h"

typedef enum he_stats_method {
    HE_STATS_METHOD_GET = 0,
    HE_STATS_METHOD_HEAD,
    HE_STATS_METHOD_OPTIONS,
    HE_STATS_METHOD_OTHER,
    HE_STATS_METHOD_COUNT
} he_stats_method_t;

typedef enum he_stats_err {
    HE_STATS_ERR_TIMEOUT_HEADER = 0,
    HE_STATS_ERR_TIMEOUT_KEEPALIVE,
    HE_STATS_ERR_TIMEOUT_SEND,
    HE_STATS_ERR_BAD_REQUEST,
    HE_STATS_ERR_RESET,
    HE_STATS_ERR_COUNT
} he_stats_err_t;

typedef struct he_stats {
    uint64_t conn_accepted;
    uint64_t conn_refused;
    uint64_t conn_closed;
    uint64_t requests[HE_STATS_METHOD_COUNT];
    uint64_t status_class[6]; /* index 1..5 = 1xx..5xx */
    uint64_t kind[HE_SEG_KIND_COUNT];
    uint64_t bytes_out;
    uint64_t errors[HE_STATS_ERR_COUNT];
    uint64_t fcache_hits;
    uint64_t fcache_misses;
} __attribute__((aligned(64))) he_stats_t;

#endif
