/* cache: the cache's counters, per worker, and the causes they are kept
 * by. Plain data: the server includes this everywhere, so it must not
 * bring liburing or the rest of the cache along. */
#ifndef HE_CACHE_STATS_H
#define HE_CACHE_STATS_H

#include <stdint.h>

/* = HE_CONF_MAX_ORIGINS (checked in select.c), without conf.h */
#define HE_CACHE_PARENTS_MAX 8

typedef enum he_cache_tier {
    HE_CACHE_TIER_RAM = 0,
    HE_CACHE_TIER_SSD,
    HE_CACHE_TIER_COUNT
} he_cache_tier_t;

typedef enum he_cache_oerr {
    HE_CACHE_OERR_CONNECT = 0,     /* refused, unreachable */
    HE_CACHE_OERR_TIMEOUT_CONNECT, /* connect deadline passed */
    HE_CACHE_OERR_TIMEOUT_READ,    /* no byte within the read timeout */
    HE_CACHE_OERR_TIMEOUT_TOTAL,   /* the whole fetch took too long */
    HE_CACHE_OERR_IO,              /* reset, broken pipe, other socket errors */
    HE_CACHE_OERR_PROTOCOL,        /* malformed or oversized response */
    HE_CACHE_OERR_TRUNCATED,       /* closed before the end of the body */
    HE_CACHE_OERR_STATUS_5XX,      /* the origin answered 5xx */
    HE_CACHE_OERR_TLS,             /* handshake or certificate failure */
    HE_CACHE_OERR_COUNT
} he_cache_oerr_t;

typedef enum he_cache_derr {
    HE_CACHE_DERR_NOSPC = 0, /* ENOSPC, EDQUOT */
    HE_CACHE_DERR_IO,        /* EIO */
    HE_CACHE_DERR_CORRUPT,   /* bad header, checksum or length */
    HE_CACHE_DERR_PERM,      /* EACCES, EPERM, EROFS */
    HE_CACHE_DERR_OTHER,
    HE_CACHE_DERR_COUNT
} he_cache_derr_t;

/* Per worker; written only by its owner, summed by the control thread. */
typedef struct he_cache_stats {
    uint64_t hits[HE_CACHE_TIER_COUNT];
    uint64_t misses[HE_CACHE_TIER_COUNT];
    uint64_t negative_hits;   /* cached 404s served */
    uint64_t stale_serves;    /* stale-while-revalidate or stale-if-error */
    uint64_t revalidations;   /* conditional requests sent */
    uint64_t revalidated_304; /* answered 304: entry refreshed */
    uint64_t fills;           /* origin fills started */
    uint64_t fills_failed;
    uint64_t bytes_filled;      /* body bytes received from origins */
    uint64_t coalesced_waiters; /* requests that joined an existing fill */
    uint64_t origin_requests;
    uint64_t origin_failovers;
    uint64_t origin_reused; /* requests sent on a pooled connection */
    uint64_t origin_errors[HE_CACHE_OERR_COUNT];
    uint64_t evictions[HE_CACHE_TIER_COUNT];
    uint64_t ram_admitted;   /* published into the RAM tier */
    uint64_t ram_rejected;   /* too large, not cacheable */
    uint64_t ram_ghost_hits; /* S3-FIFO: re-inserted straight into main */
    uint64_t ram_overflow;   /* chunks taken from malloc: arena pinned full */
    uint64_t ram_evict_held; /* eviction passed over an object a reader held */
    uint64_t prefetch_issued;
    uint64_t prefetch_used;
    uint64_t prefetch_wasted;
    uint64_t store_writes; /* objects renamed into place */
    uint64_t store_write_bytes;
    uint64_t disk_errors[HE_CACHE_DERR_COUNT];
    /* RAM-tier zero-copy sends, by what the kernel's notification said:
     * zc_copied ones were copied after all (loopback, or a device without
     * scatter-gather/checksum offload), and cost more than a plain send */
    uint64_t zc_sends;
    uint64_t zc_copied;
    uint64_t ram_vmsplice_bytes; /* RAM-tier bytes vmspliced from the arena's mapping */
    uint64_t promotions; /* SSD hits copied into the RAM tier */
    /* parent selection: per origin.urls index */
    uint64_t parent_requests[HE_CACHE_PARENTS_MAX];
    uint64_t parent_errors[HE_CACHE_PARENTS_MAX];
    uint64_t parent_marked_down; /* failures that marked a parent down */
    uint64_t via_loops;          /* requests refused 508: Via named this box */
} __attribute__((aligned(64))) he_cache_stats_t;

const char *he_cache_oerr_name(he_cache_oerr_t e);
const char *he_cache_derr_name(he_cache_derr_t e);
he_cache_derr_t he_cache_derr_of(int neg_errno);

#endif
