/* Fuzz target for cache/key.c, the parser of request-targets into cache
 * keys. The first byte picks a configuration (no key_params; lang and bw;
 * lang and two _HLS_ names), the rest is the target. Checked: only the
 * documented errors; a key is NUL-terminated, its length, hash and path
 * split agree, and it holds no raw control byte or space; "/" + a key is a
 * target with the same key; the LL-HLS directives (rfc8216bis 6.2.5) are
 * keyed only on playlists, come after the configured names, in the order
 * _HLS_msn, _HLS_part, _HLS_skip, and no other _HLS_ name is keyed. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache/key.h"
#include "segment/segment.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static int directive_rank(const char *name, size_t len)
{
    static const char *const dirs[] = {"_HLS_msn", "_HLS_part", "_HLS_skip"};
    for (int i = 0; i < 3; i++)
        if (strlen(dirs[i]) == len && memcmp(dirs[i], name, len) == 0) return i;
    return -1;
}

/* The parameters of a key: configured names first (any order the config
 * gives), then directives in rank order, nothing else _HLS_. */
static void check_params(const he_cache_key_t *k)
{
    const char *p = k->s + k->path_len, *end = k->s + k->len;
    bool playlist = he_seg_type_from_path(k->s, k->path_len) == HE_SEG_TYPE_M3U8;
    int last_rank = -1;
    if (p == end) return;
    if (*p != '?') abort();
    p++;
    while (p <= end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        size_t nl;
        int rank;
        if (!eq) abort(); /* every keyed parameter is written name=value */
        nl = (size_t)(eq - p);
        rank = directive_rank(p, nl);
        if (nl >= 5 && memcmp(p, "_HLS_", 5) == 0) {
            if (rank < 0 || !playlist) abort();
            if (rank < last_rank) abort();
            last_rank = rank;
        } else if (last_rank >= 0) {
            abort(); /* a configured name after a directive */
        }
        p = pe + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static he_conf_t conf;
    static bool ready;
    static he_cache_key_t k, k2;
    static char t[HE_CACHE_KEY_MAX + 2];
    int rc;

    if (!ready) {
        he_conf_defaults(&conf);
        ready = true;
    }
    if (n < 1) return 0;
    memset(conf.cache_key_params, 0, sizeof(conf.cache_key_params));
    switch (d[0] % 3) {
    case 0:
        conf.ncache_key_params = 0;
        break;
    case 1:
        strcpy(conf.cache_key_params[0], "lang");
        strcpy(conf.cache_key_params[1], "bw");
        conf.ncache_key_params = 2;
        break;
    default:
        strcpy(conf.cache_key_params[0], "lang");
        strcpy(conf.cache_key_params[1], "_HLS_msn");
        strcpy(conf.cache_key_params[2], "_HLS_report");
        conf.ncache_key_params = 3;
        break;
    }
    rc = he_cache_key_make(&conf, (const char *)d + 1, n - 1, &k);
    if (rc != 0 && rc != -EINVAL && rc != -ENAMETOOLONG) abort();
    if (rc != 0) return 0;

    if (k.len >= sizeof(k.s) || k.s[k.len] != '\0' || strlen(k.s) != k.len) abort();
    if (k.hash != he_cache_hash(k.s, k.len)) abort();
    if (k.path_len != strcspn(k.s, "?")) abort();
    for (size_t i = k.path_len; i < k.len; i++)
        if ((unsigned char)k.s[i] <= ' ' || k.s[i] == 0x7f) abort();
    check_params(&k);

    /* "/" + the key names the same key (what purge and the SSD index use) */
    t[0] = '/';
    memcpy(t + 1, k.s, k.len + 1);
    rc = he_cache_key_make(&conf, t, k.len + 1, &k2);
    if (rc != 0 || k2.len != k.len || memcmp(k2.s, k.s, k.len) != 0) abort();
    return 0;
}
