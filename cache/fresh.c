/* Freshness: how long a stored response may be served without asking the
 * origin, and how long after that it may still be served stale.
 *
 *   not stored  no-store, private, Set-Cookie (one viewer's, as nginx
 *               and Varnish decide by default), Vary: * (never matches;
 *               a Vary on fields is stored: no viewer's header reaches
 *               the origin, so it answers every viewer alike),
 *               a status other than 200/203/404, or a 404 when negative
 *               caching is off or the origin gives it no lifetime
 *   404         cache.negative_ttl, or less when the origin says so
 *               (no-cache, max-age, s-maxage, Expires); never served stale
 *   lifetime    cache.ttl.<kind> if set (the operator overrides the
 *               origin), else s-maxage, max-age, Expires - Date, 10% of
 *               Date - Last-Modified (at most a day), else 0; origin
 *               lifetimes are reduced by Age. no-cache forces 0.
 *   live media  at most cache.live_fraction of the target duration (the
 *               playlist is parsed with the one parser in segment/), and
 *               stale-while-revalidate may not carry it past one target
 *               duration: a live playlist is never frozen
 *   stale       stale-while-revalidate / stale-if-error from the origin's
 *               directives, else from the config; must-revalidate,
 *               proxy-revalidate and no-cache forbid both. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cache/fresh.h"
#include "cache/origin.h"

#define HE__CACHE_HEURISTIC_MAX_MS (24ll * 3600 * 1000)
#define HE__CACHE_LIVE_FRACTION_DEFAULT 50

int he_cache_http_date_parse(const char *s, size_t n, int64_t *ms)
{
    static const char *const fmts[] = {
        "%a, %d %b %Y %H:%M:%S GMT", /* IMF-fixdate */
        "%A, %d-%b-%y %H:%M:%S GMT", /* RFC 850 */
        "%a %b %e %H:%M:%S %Y",      /* asctime */
    };
    char buf[64];
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof(buf)) return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        struct tm tm;
        const char *end;
        memset(&tm, 0, sizeof(tm));
        end = strptime(buf, fmts[i], &tm);
        if (end && *end == '\0') {
            time_t t = timegm(&tm);
            if (t == (time_t)-1) return -EINVAL;
            *ms = (int64_t)t * 1000;
            return 0;
        }
    }
    return -EINVAL;
}

static int64_t he_cache_cc_seconds(const char *v, size_t n)
{
    int64_t x = 0;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n == 0) return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        if (x < 100000000000ll) x = x * 10 + (v[i] - '0'); /* saturate: ~3000 years */
    }
    return x;
}

/* A directive given twice keeps the smaller value (RFC 9111 4.2.1 lets a
 * cache use the first or treat the response as stale; the smaller is
 * never fresher than either). */
static void he_cache_cc_set(bool *set, int64_t *dst, int64_t v)
{
    if (!*set || v < *dst) *dst = v;
    *set = true;
}

void he_cache_cc_parse(he_cache_cc_t *cc, const char *s, size_t n)
{
    const char *end = s + n;
    while (s < end) {
        const char *name, *val = NULL;
        size_t nlen, vlen = 0;
        int64_t x;
        while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
            s++;
        if (s == end) break;
        name = s;
        while (s < end && *s != '=' && *s != ',' && *s != ' ' && *s != '\t')
            s++;
        nlen = (size_t)(s - name);
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        if (s < end && *s == '=') {
            s++;
            while (s < end && (*s == ' ' || *s == '\t'))
                s++;
            val = s;
            if (s < end && *s == '"') {
                s++;
                while (s < end && *s != '"')
                    s++;
                if (s < end) s++;
            } else {
                while (s < end && *s != ',' && *s != ' ' && *s != '\t')
                    s++;
            }
            vlen = (size_t)(s - val);
        }
        while (s < end && *s != ',')
            s++;
        x = val ? he_cache_cc_seconds(val, vlen) : -1;
#define HE_CC_IS(lit) (nlen == sizeof(lit) - 1 && strncasecmp(name, lit, nlen) == 0)
        if (HE_CC_IS("no-store"))
            cc->no_store = true;
        else if (HE_CC_IS("no-cache"))
            cc->no_cache = true;
        else if (HE_CC_IS("private"))
            cc->private_ = true;
        else if (HE_CC_IS("must-revalidate") || HE_CC_IS("proxy-revalidate"))
            cc->must_revalidate = true;
        else if (HE_CC_IS("max-age")) /* malformed: stale (RFC 9111 4.2.1) */
            he_cache_cc_set(&cc->max_age_set, &cc->max_age, x < 0 ? 0 : x);
        else if (HE_CC_IS("s-maxage"))
            he_cache_cc_set(&cc->s_maxage_set, &cc->s_maxage, x < 0 ? 0 : x);
        else if (HE_CC_IS("stale-while-revalidate") && x >= 0)
            he_cache_cc_set(&cc->swr_set, &cc->swr, x);
        else if (HE_CC_IS("stale-if-error") && x >= 0)
            he_cache_cc_set(&cc->sie_set, &cc->sie, x);
#undef HE_CC_IS
    }
}

static uint32_t he_cache_clamp_ms(int64_t ms)
{
    if (ms < 0) return 0;
    if (ms > UINT32_MAX) return UINT32_MAX;
    return (uint32_t)ms;
}

/* The lifetime the origin gave explicitly (s-maxage, max-age, Expires -
 * Date), less Age: true and *ms, or false when it gave none. */
static bool he_cache_origin_lifetime(const he_cache_http_resp_t *r, int64_t date_ms, int64_t *ms)
{
    int64_t t;
    *ms = 0;
    if (r->cc.s_maxage_set)
        *ms = r->cc.s_maxage * 1000;
    else if (r->cc.max_age_set)
        *ms = r->cc.max_age * 1000;
    else if (!r->expires[0])
        return false;
    /* an invalid Expires ("0", "-1") means already expired */
    else if (he_cache_http_date_parse(r->expires, strlen(r->expires), &t) == 0)
        *ms = t - date_ms;
    if (r->age_s > 0) *ms -= r->age_s * 1000;
    return true;
}

bool he_cache_fresh_compute(const he_conf_t *conf, he_seg_kind_t kind,
                            const he_cache_http_resp_t *r, const char *body, size_t body_len,
                            int64_t wall_ms, he_cache_fresh_t *out)
{
    const he_cache_cc_t cc = r->cc;
    int64_t lifetime = 0, date_ms = wall_ms, t;
    bool explicit_ = false;

    memset(out, 0, sizeof(*out));
    /* when the response was generated: Age (a shield's copy) is already
     * that old, and the Age we send on (respond_cache.c) counts from here */
    out->stored_ms = wall_ms;
    if (r->age_s > 0) /* a silly Age makes it as old as 1970, no older */
        out->stored_ms = r->age_s < wall_ms / 1000 ? wall_ms - r->age_s * 1000 : 1;
    if (cc.no_store || cc.private_ || r->set_cookie || r->vary) return false;
    if (r->date[0] && he_cache_http_date_parse(r->date, strlen(r->date), &t) == 0) date_ms = t;
    if (r->status == 404) {
        /* the origin may shorten the negative TTL, never lengthen it: a
         * live segment not produced yet comes as 404 no-cache or max-age=1
         * and must not stay missing for the whole TTL */
        lifetime = conf->cache_negative_ttl_ms;
        if (cc.no_cache)
            lifetime = 0;
        else if (he_cache_origin_lifetime(r, date_ms, &t) && t < lifetime)
            lifetime = t;
        if (lifetime <= 0) return false;
        out->expires_ms = wall_ms + lifetime;
        return true;
    }
    if (r->status != 200 && r->status != 203) return false;

    if ((unsigned)kind < HE_SEG_KIND_COUNT && conf->cache_ttl_ms[kind]) {
        lifetime = conf->cache_ttl_ms[kind];
        explicit_ = true;
    } else if (he_cache_origin_lifetime(r, date_ms, &lifetime)) {
        explicit_ = true;
    } else if (r->last_modified[0] &&
               he_cache_http_date_parse(r->last_modified, strlen(r->last_modified), &t) == 0 &&
               t < date_ms) {
        lifetime = (date_ms - t) / 10;
        if (lifetime > HE__CACHE_HEURISTIC_MAX_MS) lifetime = HE__CACHE_HEURISTIC_MAX_MS;
        if (r->age_s > 0) lifetime -= r->age_s * 1000;
    }
    if (cc.no_cache) lifetime = 0;
    if (lifetime < 0) lifetime = 0;

    out->swr_ms =
        cc.swr_set ? he_cache_clamp_ms(cc.swr * 1000) : conf->cache_stale_while_revalidate_ms;
    out->sie_ms = cc.sie_set ? he_cache_clamp_ms(cc.sie * 1000) : conf->cache_stale_if_error_ms;
    if (cc.must_revalidate || cc.no_cache) out->swr_ms = out->sie_ms = 0;

    if (kind == HE_SEG_KIND_MEDIA && body) {
        he_seg_playlist_t pl;
        char err[128];
        if (he_seg_playlist_parse(body, body_len, &pl, err, sizeof(err)) == 0) {
            if (!pl.is_master && he_seg_playlist_is_live(&pl) && pl.target_duration > 0) {
                unsigned pct = conf->cache_live_fraction_pct ? conf->cache_live_fraction_pct
                                                             : HE__CACHE_LIVE_FRACTION_DEFAULT;
                int64_t td = (int64_t)(pl.target_duration * 1000.0);
                int64_t cap = td * pct / 100;
                if (!explicit_ || lifetime > cap) lifetime = cap;
                if (cc.no_cache) lifetime = 0;
                if (lifetime + out->swr_ms > td) out->swr_ms = he_cache_clamp_ms(td - lifetime);
            }
            he_seg_playlist_free(&pl);
        }
    }
    out->expires_ms = wall_ms + lifetime;
    return true;
}

he_cache_freshness_t he_cache_fresh_state(const he_cache_fresh_t *f, int64_t wall_ms)
{
    if (wall_ms < f->expires_ms) return HE_CACHE_FRESH;
    if (wall_ms < f->expires_ms + (int64_t)f->swr_ms) return HE_CACHE_STALE_REVALIDATE;
    if (wall_ms < f->expires_ms + (int64_t)f->sie_ms) return HE_CACHE_STALE_IF_ERROR;
    return HE_CACHE_EXPIRED;
}

const char *he_cache_freshness_name(he_cache_freshness_t s)
{
    switch (s) {
    case HE_CACHE_FRESH:
        return "fresh";
    case HE_CACHE_STALE_REVALIDATE:
        return "stale-revalidate";
    case HE_CACHE_STALE_IF_ERROR:
        return "stale-if-error";
    default:
        return "expired";
    }
}
