/* What the access-log tests share: one known request as a record. */
#ifndef HE_TEST_ALOG_H
#define HE_TEST_ALOG_H

#include <arpa/inet.h>
#include <string.h>

#include "server/base/alog_ring.h"

#ifndef HE_T_MONO_NS
#define HE_T_MONO_NS 1000000000ll
#endif

/* Fills rec (with room for target) with a known request. */
static inline void he_t_fill(he_alog_rec_t *r, const char *target)
{
    memset(r, 0, sizeof(*r));
    r->end_ns = HE_T_MONO_NS;
    r->bytes_sent = 1234;
    r->head_len = 234;
    r->duration_us = 1500;
    r->ttfb_us = 250;
    r->status = 200;
    r->worker = 3;
    r->family = AF_INET;
    inet_pton(AF_INET, "192.0.2.7", r->addr);
    r->method = 1; /* HTTP_GET */
    r->http_major = 1;
    r->http_minor = 1;
    r->cache = HE_ALOG_CACHE_NONE;
    r->target_len = (uint16_t)strlen(target);
    memcpy(r->target, target, r->target_len);
}

#endif
