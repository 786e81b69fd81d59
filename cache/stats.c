/* Names for the cache's counters (for /stats and /metrics) and the
 * mapping from errno to a disk error cause. */
#include <errno.h>

#include "cache/stats.h"

const char *he_cache_oerr_name(he_cache_oerr_t e)
{
    static const char *const names[HE_CACHE_OERR_COUNT] = {
        "connect",  "timeout_connect", "timeout_read", "timeout_total", "io",
        "protocol", "truncated",       "status_5xx",   "tls",
    };
    return (unsigned)e < HE_CACHE_OERR_COUNT ? names[e] : "unknown";
}

const char *he_cache_derr_name(he_cache_derr_t e)
{
    static const char *const names[HE_CACHE_DERR_COUNT] = {"nospc", "io", "corrupt", "perm",
                                                           "other"};
    return (unsigned)e < HE_CACHE_DERR_COUNT ? names[e] : "unknown";
}

he_cache_derr_t he_cache_derr_of(int neg_errno)
{
    switch (-neg_errno) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return HE_CACHE_DERR_NOSPC;
    case EIO:
        return HE_CACHE_DERR_IO;
    case EACCES:
    case EPERM:
    case EROFS:
        return HE_CACHE_DERR_PERM;
    case EBADMSG:
    case EILSEQ:
        return HE_CACHE_DERR_CORRUPT;
    default:
        return HE_CACHE_DERR_OTHER;
    }
}
