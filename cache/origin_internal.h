/* cache: what origin.c, pool.c and fetch.c share (he__cache_). */
#ifndef HE_CACHE_ORIGIN_INTERNAL_H
#define HE_CACHE_ORIGIN_INTERNAL_H

#include <openssl/ssl.h>

#include "cache/origin.h"

typedef struct he__cache_pool {
    he_cache_conn_t *conns; /* idle, oldest first */
    unsigned n;
} he__cache_pool_t;

struct he_cache_origins {
    he_cache_origin_t org[HE_CONF_MAX_ORIGINS];
    unsigned n;
    unsigned pool_max;
    he__cache_pool_t pool[HE_CONF_MAX_ORIGINS];
    SSL_CTX *ssl_ctx; /* only when an origin is https */
    unsigned select;  /* origin.select */
    he_cache_health_t *health;
    bool own_health; /* made for this one (no shared table was given) */
    char via[128];   /* "1.1 hlsedge-<host>", or "" */
};

#endif
