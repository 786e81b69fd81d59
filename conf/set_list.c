/* conf/set_list.c: setters for keys whose value is a list, given either as
 * a YAML sequence or as one scalar (a list of one). The walk calls a setter
 * once per entry with idx 0, 1, ...; idx 0 and a lone scalar (idx -1) first
 * clear what the defaults put there, so a file's list replaces the default
 * list rather than adding to it. Each list is an array in he_conf_t plus an
 * unsigned count, both named by the key's row, and entries are unique. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/internal.h"

#define HE_CONF_FIELD(c, k) ((char *)(c) + (k)->off)

static unsigned he_conf_count(const he_conf_t *c, const he__conf_key_t *k)
{
    unsigned n;
    memcpy(&n, (const char *)c + k->cnt_off, sizeof(n));
    return n;
}

static void he_conf_set_count(he_conf_t *c, const he__conf_key_t *k, unsigned n)
{
    memcpy((char *)c + k->cnt_off, &n, sizeof(n));
}

/* Starts the list over on its first entry. Returns 1 when v is a lone ""
 * (or YAML null, or an empty sequence) and the key allows no entries:
 * the list is then left empty and there is nothing more to do. */
static int he_conf_list_begin(he_conf_t *c, const he__conf_key_t *k, size_t entry, size_t len,
                              int idx)
{
    if (idx > 0) return 0;
    memset(HE_CONF_FIELD(c, k), 0, entry * k->nmax);
    he_conf_set_count(c, k, 0);
    return idx < 0 && len == 0 && (k->flags & HE__CONF_F_EMPTY_OK);
}

/* -E2BIG with "expected at most 16 addresses" when the list is full. */
static int he_conf_list_room(const he_conf_t *c, const he__conf_key_t *k, char *why, size_t whylen)
{
    if (he_conf_count(c, k) < k->nmax) return 0;
    snprintf(why, whylen, "expected at most %u %s", k->nmax, k->items);
    return -E2BIG;
}

int he__conf_set_listen(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                        char *why, size_t whylen)
{
    he_conf_listen_t *list = (he_conf_listen_t *)HE_CONF_FIELD(c, k);
    he_conf_listen_t l;
    unsigned n;
    int rc;

    if (he_conf_list_begin(c, k, sizeof(*list), len, idx)) return 0;
    if ((rc = he_conf_list_room(c, k, why, whylen)) < 0) return rc;
    if (he_conf_parse_listen(v, &l) < 0) return -EINVAL;
    n = he_conf_count(c, k);
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(list[i].text, l.text) == 0) {
            snprintf(why, whylen, "duplicate address %s", l.text);
            return -EEXIST;
        }
    }
    list[n] = l;
    he_conf_set_count(c, k, n + 1);
    return 0;
}

/* CPU lists keep their own shape: "auto" is a lone scalar meaning no list.
 * The row names the int array (off), its count (cnt_off) and capacity. */
int he__conf_set_cpus(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                      char *why, size_t whylen)
{
    int *list = (int *)HE_CONF_FIELD(c, k);
    char got[64];
    unsigned n, cnt;
    int rc;

    if (idx <= 0) {
        memset(list, 0, sizeof(*list) * k->nmax);
        he_conf_set_count(c, k, 0);
        if (idx < 0 && strcmp(v, "auto") == 0) return 0;
    }
    cnt = he_conf_count(c, k);
    if (cnt >= k->nmax) {
        snprintf(why, whylen, "expected at most %u CPUs", k->nmax);
        return -E2BIG;
    }
    rc = he__conf_parse_uint(v, len, &n);
    if (rc == -EINVAL) return rc;
    if (rc == -ERANGE || n > k->max) {
        he__conf_quote(v, len, got, sizeof(got));
        snprintf(why, whylen, "expected a CPU number in 0..%llu, got %s",
                 (unsigned long long)k->max, got);
        return -ERANGE;
    }
    for (unsigned i = 0; i < cnt; i++) {
        if (list[i] == (int)n) {
            snprintf(why, whylen, "duplicate CPU %u", n);
            return -EEXIST;
        }
    }
    list[cnt] = (int)n;
    he_conf_set_count(c, k, cnt + 1);
    return 0;
}

int he__conf_set_strs(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                      char *why, size_t whylen)
{
    char *list = HE_CONF_FIELD(c, k), got[64];
    const char *what;
    unsigned n;
    int rc;

    if (he_conf_list_begin(c, k, k->size, len, idx)) return 0;
    if ((rc = he_conf_list_room(c, k, why, whylen)) < 0) return rc;
    if (len == 0) return -EINVAL;
    if (len >= k->size) {
        snprintf(why, whylen, "expected at most %zu bytes, got %zu", k->size - 1, len);
        return -ENAMETOOLONG;
    }
    /* a parameter name with '&' in it would put the query's separator into
     * the cache key, where "a&b=1" could be either one parameter or two */
    if ((k->flags & HE__CONF_F_TOKEN) && (!he__conf_is_token(v, len) || memchr(v, '&', len)))
        return -EINVAL;
    if (k->flags & HE__CONF_F_CIDR) {
        he_conf_cidr_t r;
        if (he_conf_cidr_parse(v, len, &r) < 0) {
            he__conf_quote(v, len, got, sizeof(got));
            snprintf(why, whylen,
                     "expected an address, a range like 10.0.0.0/8 (no host bits) or loopback, "
                     "got %s",
                     got);
            return -EINVAL;
        }
    }
    if ((k->flags & HE__CONF_F_URL) && he__conf_check_url(v, len, &what) < 0) {
        he__conf_quote(v, len, got, sizeof(got));
        snprintf(why, whylen, "expected %s, got %s", what, got);
        return -EINVAL;
    }
    n = he_conf_count(c, k);
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(list + i * k->size, v) == 0) {
            he__conf_quote(v, len, got, sizeof(got));
            snprintf(why, whylen, "duplicate %s %s", k->item, got);
            return -EEXIST;
        }
    }
    memcpy(list + n * k->size, v, len);
    he_conf_set_count(c, k, n + 1);
    return 0;
}

/* Length of a directory without its trailing slashes ("/" stays "/"), so
 * that "/a" and "/a/" are seen as the same store. */
static size_t he_conf_dir_len(const char *d, size_t len)
{
    while (len > 1 && d[len - 1] == '/')
        len--;
    return len;
}

/* "DIR:SIZE", split at the last ':' so that DIR may hold colons. The
 * directory goes to the key's char array, the size to the uint64_t array
 * at aux_off; neither is looked at on disk here (the cache opens them). */
int he__conf_set_stores(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                        char *why, size_t whylen)
{
    char *dirs = HE_CONF_FIELD(c, k), dir[64], got[64], lo[24], hi[24];
    uint64_t *sizes = (uint64_t *)((char *)c + k->aux_off), bytes;
    size_t dirlen;
    unsigned n;
    int rc;

    if (idx <= 0) memset(sizes, 0, sizeof(*sizes) * k->nmax);
    if (he_conf_list_begin(c, k, k->size, len, idx)) return 0;
    if ((rc = he_conf_list_room(c, k, why, whylen)) < 0) return rc;
    for (dirlen = len; dirlen > 0 && v[dirlen - 1] != ':'; dirlen--)
        ;
    if (dirlen <= 1) return -EINVAL; /* no ':', or nothing before it */
    dirlen--;
    if (dirlen >= k->size) {
        snprintf(why, whylen, "expected a directory of at most %zu bytes, got %zu", k->size - 1,
                 dirlen);
        return -ENAMETOOLONG;
    }
    rc = he__conf_parse_size(v + dirlen + 1, len - dirlen - 1, &bytes);
    if (rc == 0 && (bytes < k->min || bytes > k->max)) rc = -ERANGE;
    if (rc < 0) {
        he__conf_quote(v, dirlen + 1, dir, sizeof(dir));
        he__conf_quote(v + dirlen + 1, len - dirlen - 1, got, sizeof(got));
        he__conf_fmt_size(k->min, lo, sizeof(lo));
        he__conf_fmt_size(k->max, hi, sizeof(hi));
        snprintf(why, whylen, "expected a size in %s..%s such as \"100g\" after %s, got %s", lo, hi,
                 dir, got);
        return rc;
    }
    n = he_conf_count(c, k);
    for (unsigned i = 0; i < n; i++) {
        const char *d = dirs + i * k->size;
        size_t a = he_conf_dir_len(d, strlen(d)), b = he_conf_dir_len(v, dirlen);
        if (a == b && memcmp(d, v, a) == 0) {
            he__conf_quote(v, dirlen, dir, sizeof(dir));
            snprintf(why, whylen, "duplicate directory %s", dir);
            return -EEXIST;
        }
    }
    memcpy(dirs + n * k->size, v, dirlen);
    sizes[n] = bytes;
    he_conf_set_count(c, k, n + 1);
    return 0;
}

/* A set of the row's names[] as bits of a uint32_t (features.disable).
 * "all" sets every bit; it stands alone, since next to names it would say
 * nothing more and most likely means the list was not what was meant. */
int he__conf_set_flags(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                       char *why, size_t whylen)
{
    uint32_t mask = 0, bit = 0, all;
    unsigned n = 0;
    char got[64];

    while (k->names[n] != NULL)
        n++;
    all = n >= 32 ? UINT32_MAX : ((uint32_t)1 << n) - 1;
    if (idx > 0) memcpy(&mask, HE_CONF_FIELD(c, k), sizeof(mask));
    memcpy(HE_CONF_FIELD(c, k), &mask, sizeof(mask));
    if (idx < 0 && len == 0 && (k->flags & HE__CONF_F_EMPTY_OK)) return 0;
    if (strcmp(v, "all") == 0) {
        bit = all;
    } else {
        for (unsigned i = 0; i < n && bit == 0; i++)
            if (strcmp(v, k->names[i]) == 0) bit = (uint32_t)1 << i;
    }
    if (bit == 0) return -EINVAL;
    /* Fewer than n entries so far cover every bit only if one was "all". */
    if (idx > 0 && (bit == all || (mask == all && (unsigned)idx < n))) {
        snprintf(why, whylen, "expected \"all\" alone, not in a list with other %s", k->items);
        return -EINVAL;
    }
    if (mask & bit) {
        he__conf_quote(v, len, got, sizeof(got));
        snprintf(why, whylen, "duplicate %s %s", k->item, got);
        return -EEXIST;
    }
    mask |= bit;
    memcpy(HE_CONF_FIELD(c, k), &mask, sizeof(mask));
    return 0;
}
