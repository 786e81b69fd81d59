/* cache: cache keys (key.c). */
#ifndef HE_CACHE_KEY_H
#define HE_CACHE_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

#define HE_CACHE_KEY_MAX 2048

typedef struct he_cache_key {
    uint64_t hash;
    uint32_t len;             /* of s, without the NUL */
    uint32_t path_len;        /* the key path (he_cache_key_path): s[0..path_len) */
    char s[HE_CACHE_KEY_MAX]; /* "path" or "path?a=1&b=2", NUL-terminated */
} he_cache_key_t;

/* The path part of a key: the normalized path (he_seg_url_normalize) with
 * its '%', '?' and '#' escaped again ("/x.ts%3Fa" -> "x.ts%3Fa"), so the
 * first '?' of a key starts its parameters and "/" + the key path is a
 * target for the same path. Length, or he_seg_url_normalize's errors. */
int he_cache_key_path(const char *target, size_t len, char *out, size_t cap);
/* Builds the key of a request-target ("/a/b.ts?token=x&lang=en"): the key
 * path plus only the query parameters named in conf->cache_key_params, in
 * the order the config names them (a parameter given twice keeps its
 * values in request order). On a playlist (.m3u8) path the LL-HLS
 * delivery directives _HLS_msn, _HLS_part and _HLS_skip follow, always, in
 * that (UTF-8) order; any other _HLS_ parameter is never in a key.
 * Names and values are in RFC 3986 normal form: escapes of unreserved
 * bytes decoded, other escapes upper-case, reserved bytes ('+', '/', ...)
 * as sent, other bytes escaped. 0, or -EINVAL (bad target or escape),
 * -ENAMETOOLONG. */
int he_cache_key_make(const he_conf_t *conf, const char *target, size_t len, he_cache_key_t *key);
/* Same from a key string already built (e.g. read back from disk). */
int he_cache_key_set(he_cache_key_t *key, const char *s, size_t len);
/* 64-bit hash used everywhere in the cache (keys, ghosts, file names). */
uint64_t he_cache_hash(const void *p, size_t n);

/* The splitmix64 finalizer: spreads every input bit over the output. The
 * last step of he_cache_hash, and how parent selection mixes a key's hash
 * with a parent's (select.c). */
static inline uint64_t he_cache_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

#endif
