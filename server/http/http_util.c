/* HTTP helpers without connection state (RFC 9110): Range, ETag, dates and
 * conditional requests. They run on every request, so nothing here
 * allocates, takes a lock or looks at the locale. */
#include "server/http/http_util.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static bool he_http_is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static void he_http_trim(const char **s, size_t *n)
{
    while (*n > 0 && he_http_is_ows((*s)[0]))
        (*s)++, (*n)--;
    while (*n > 0 && he_http_is_ows((*s)[*n - 1]))
        (*n)--;
}

/* ---------------------------------------------------------------- Range */

/* Reads 1*DIGIT at *p. Values past 2^64-1 saturate: a first-pos that big
 * is beyond any representation (416), a last-pos that big is clamped to
 * the end anyway, and a suffix that big means the whole body. So huge
 * numbers behave like the large numbers they are instead of wrapping. */
static int he_http_range_num(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
        s++;
    }
    if (s == *p) return -1;
    *p = s;
    *out = v;
    return 0;
}

he_http_range_result_t he_http_range_parse(const char *v, size_t len, uint64_t size,
                                           uint64_t *first, uint64_t *last)
{
    const char *p, *end;
    uint64_t a = 0, b = UINT64_MAX;
    bool suffix = false, have = false;

    *first = *last = 0;
    if (v == NULL) return HE_HTTP_RANGE_NONE;
    he_http_trim(&v, &len);
    /* range-unit names are case-insensitive (RFC 9110 14.1) */
    if (len < 6 || strncasecmp(v, "bytes=", 6) != 0) return HE_HTTP_RANGE_NONE;
    p = v + 6;
    end = v + len;

    /* range-set = 1#range-spec: OWS around commas, empty elements allowed.
     * We serve at most one range; a second makes us ignore the header
     * (200 with the full body is always a valid answer). */
    for (;;) {
        while (p < end && (he_http_is_ows(*p) || *p == ','))
            p++;
        if (p == end) break;
        if (have) return HE_HTTP_RANGE_NONE;
        have = true;
        if (*p == '-') {
            p++;
            suffix = true;
            if (he_http_range_num(&p, end, &b) < 0) return HE_HTTP_RANGE_NONE;
        } else {
            if (he_http_range_num(&p, end, &a) < 0 || p == end || *p != '-')
                return HE_HTTP_RANGE_NONE;
            p++;
            if (p < end && *p >= '0' && *p <= '9') {
                he_http_range_num(&p, end, &b);
                if (b < a) return HE_HTTP_RANGE_NONE; /* invalid, not unsatisfiable */
            }
        }
        while (p < end && he_http_is_ows(*p))
            p++;
        if (p < end && *p != ',') return HE_HTTP_RANGE_NONE;
    }
    if (!have) return HE_HTTP_RANGE_NONE;

    if (suffix) {
        if (b == 0) return HE_HTTP_RANGE_UNSATISFIABLE;
        /* RFC 9110 calls a non-zero suffix of an empty body satisfiable,
         * yet there is no byte to send: answer 200 with the empty body. */
        if (size == 0) return HE_HTTP_RANGE_NONE;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return HE_HTTP_RANGE_OK;
    }
    if (a >= size) return HE_HTTP_RANGE_UNSATISFIABLE;
    *first = a;
    *last = b >= size ? size - 1 : b;
    return HE_HTTP_RANGE_OK;
}

/* ---------------------------------------------------------------- ETag */

static char *he_http_put_hex(char *p, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = hex[v & 15];
        v >>= 4;
    } while (v);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

size_t he_http_etag(char *out, size_t cap, time_t mtime, uint64_t size)
{
    char buf[40], *p = buf;
    size_t n;
    if (cap == 0) return 0;
    /* nginx's format, so caches in front keep their validators when a
     * site moves between servers. A pre-1970 mtime prints as its two's
     * complement; it only has to be stable, not pretty. */
    *p++ = '"';
    p = he_http_put_hex(p, (uint64_t)mtime);
    *p++ = '-';
    p = he_http_put_hex(p, size);
    *p++ = '"';
    n = (size_t)(p - buf);
    if (n >= cap) n = cap - 1;
    memcpy(out, buf, n);
    out[n] = '\0';
    return n;
}

/* ---------------------------------------------------------------- dates */

static const char he_http_days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char he_http_months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
/* 0001-01-01 and 9999-12-31T23:59:59: what a 4DIGIT year can say. */
#define HE_HTTP_TIME_MIN (-62135596800LL)
#define HE_HTTP_TIME_MAX 253402300799LL

/* Days since 1970-01-01 of a proleptic Gregorian date and back (Howard
 * Hinnant's algorithms). Pure arithmetic: glibc's gmtime_r takes the
 * timezone lock on every call, which we do not want per response. */
static long long he_http_days_from_civil(long long y, unsigned m, unsigned d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long long)doe - 719468;
}

static void he_http_civil_from_days(long long z, long long *y, unsigned *m, unsigned *d)
{
    z += 719468;
    long long era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (long long)yoe + era * 400 + (*m <= 2);
}

static char *he_http_put2(char *p, unsigned v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
    return p + 2;
}

size_t he_http_date_format(time_t t, char out[30])
{
    long long s = (long long)t, days, y;
    unsigned m, d, secs;
    char *p = out;

    if (s < HE_HTTP_TIME_MIN) s = HE_HTTP_TIME_MIN;
    if (s > HE_HTTP_TIME_MAX) s = HE_HTTP_TIME_MAX;
    days = s >= 0 ? s / 86400 : (s - 86399) / 86400;
    secs = (unsigned)(s - days * 86400);
    he_http_civil_from_days(days, &y, &m, &d);

    memcpy(p, he_http_days[((days % 7) + 11) % 7], 3); /* 1970-01-01 was a Thursday */
    p += 3;
    *p++ = ',';
    *p++ = ' ';
    p = he_http_put2(p, d);
    *p++ = ' ';
    memcpy(p, he_http_months[m - 1], 3);
    p += 3;
    *p++ = ' ';
    p = he_http_put2(p, (unsigned)(y / 100));
    p = he_http_put2(p, (unsigned)(y % 100));
    *p++ = ' ';
    p = he_http_put2(p, secs / 3600);
    *p++ = ':';
    p = he_http_put2(p, secs / 60 % 60);
    *p++ = ':';
    p = he_http_put2(p, secs % 60);
    memcpy(p, " GMT", 4);
    p += 4;
    *p = '\0';
    return (size_t)(p - out);
}

/* A cursor over the date text; every reader fails on a short input. */
typedef struct he_http_scan {
    const char *p, *end;
} he_http_scan_t;

static bool he_http_lit(he_http_scan_t *s, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0) return false;
    s->p += n;
    return true;
}

static bool he_http_digits(he_http_scan_t *s, int n, unsigned *out)
{
    unsigned v = 0;
    if (s->end - s->p < n) return false;
    for (int i = 0; i < n; i++) {
        unsigned d = (unsigned)(s->p[i] - '0');
        if (d > 9) return false;
        v = v * 10 + d;
    }
    s->p += n;
    *out = v;
    return true;
}

static bool he_http_month(he_http_scan_t *s, unsigned *m)
{
    for (unsigned i = 0; i < 12; i++)
        if (he_http_lit(s, he_http_months[i])) {
            *m = i + 1;
            return true;
        }
    return false;
}

/* time-of-day = hour ":" minute ":" second */
static bool he_http_tod(he_http_scan_t *s, unsigned *h, unsigned *mi, unsigned *se)
{
    return he_http_digits(s, 2, h) && he_http_lit(s, ":") && he_http_digits(s, 2, mi) &&
           he_http_lit(s, ":") && he_http_digits(s, 2, se);
}

int he_http_date_parse(const char *str, size_t len, time_t *out)
{
    static const char *const long_days[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                             "Thursday", "Friday", "Saturday"};
    static const unsigned char mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    he_http_scan_t s;
    unsigned d = 0, m = 0, y = 0, h = 0, mi = 0, se = 0;
    int wd = -1;
    bool ok;

    if (str == NULL) return -EINVAL;
    he_http_trim(&str, &len);
    s.p = str;
    s.end = str + len;

    for (int i = 0; i < 7 && wd < 0; i++)
        if (he_http_lit(&s, long_days[i]))
            wd = i;
        else if (he_http_lit(&s, he_http_days[i]))
            wd = i + 7;
    if (wd < 0) return -EINVAL;

    if (wd >= 7 && he_http_lit(&s, ", ")) {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        ok = he_http_digits(&s, 2, &d) && he_http_lit(&s, " ") && he_http_month(&s, &m) &&
             he_http_lit(&s, " ") && he_http_digits(&s, 4, &y) && he_http_lit(&s, " ") &&
             he_http_tod(&s, &h, &mi, &se) && he_http_lit(&s, " GMT");
    } else if (wd < 7 && he_http_lit(&s, ", ")) {
        /* rfc850-date: Sunday, 06-Nov-94 08:49:37 GMT. RFC 9110 wants a
         * two-digit year read relative to "now"; a fixed pivot at 70 gives
         * the same answer until 2070 and keeps this a pure function. */
        ok = he_http_digits(&s, 2, &d) && he_http_lit(&s, "-") && he_http_month(&s, &m) &&
             he_http_lit(&s, "-") && he_http_digits(&s, 2, &y) && he_http_lit(&s, " ") &&
             he_http_tod(&s, &h, &mi, &se) && he_http_lit(&s, " GMT");
        y += y < 70 ? 2000 : 1900;
    } else if (wd >= 7 && he_http_lit(&s, " ")) {
        /* asctime-date: Sun Nov  6 08:49:37 1994 */
        ok = he_http_month(&s, &m) && he_http_lit(&s, " ");
        if (ok && s.p < s.end && *s.p == ' ') {
            s.p++;
            ok = he_http_digits(&s, 1, &d);
        } else {
            ok = ok && he_http_digits(&s, 2, &d);
        }
        ok = ok && he_http_lit(&s, " ") && he_http_tod(&s, &h, &mi, &se) && he_http_lit(&s, " ") &&
             he_http_digits(&s, 4, &y);
    } else {
        return -EINVAL;
    }
    if (!ok || s.p != s.end) return -EINVAL;

    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d < 1 || d > mdays[m - 1] || (m == 2 && d == 29 && !leap)) return -EINVAL;
    if (y == 0 || h > 23 || mi > 59 || se > 60) return -EINVAL; /* 60: leap second */

    *out = (time_t)(he_http_days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + se);
    return 0;
}

/* ---------------------------------------------------------------- validators */

/* One entity-tag of an If-Match / If-None-Match list. */
typedef struct he_http_etag_ref {
    const char *opaque; /* including the quotes */
    size_t len;
    bool weak;
} he_http_etag_ref_t;

/* entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE. Returns false if v is not
 * exactly one entity-tag. */
static bool he_http_etag_split(const char *v, size_t n, he_http_etag_ref_t *t)
{
    he_http_trim(&v, &n);
    t->weak = n >= 2 && v[0] == 'W' && v[1] == '/';
    if (t->weak) v += 2, n -= 2;
    if (n < 2 || v[0] != '"' || v[n - 1] != '"' || memchr(v + 1, '"', n - 2) != NULL) return false;
    t->opaque = v;
    t->len = n;
    return true;
}

typedef enum { HE_HTTP_MATCH_NONE = 0, HE_HTTP_MATCH_YES, HE_HTTP_MATCH_STAR } he_http_match_t;

/* Walks a "*" / #entity-tag list and compares each member with the
 * representation's tag. A malformed member matches nothing but does not
 * spoil the rest of the list; a comma inside quotes is part of the tag. */
static he_http_match_t he_http_list_match(const char *v, size_t n, const he_http_etag_ref_t *cur,
                                          bool strong)
{
    const char *p = v, *end = v + n;
    while (p < end) {
        while (p < end && (he_http_is_ows(*p) || *p == ','))
            p++;
        if (p == end) break;
        if (*p == '*') {
            const char *q = p + 1;
            while (q < end && he_http_is_ows(*q))
                q++;
            if (q == end || *q == ',') return HE_HTTP_MATCH_STAR;
        }
        const char *start = p;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/') p += 2;
        if (p < end && *p == '"') {
            const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
            if (q != NULL) {
                he_http_etag_ref_t t;
                const char *tag_end = q + 1;
                p = tag_end;
                while (p < end && he_http_is_ows(*p))
                    p++;
                if (p == end || *p == ',') {
                    if (he_http_etag_split(start, (size_t)(tag_end - start), &t) &&
                        t.len == cur->len && memcmp(t.opaque, cur->opaque, t.len) == 0 &&
                        (!strong || (!t.weak && !cur->weak)))
                        return HE_HTTP_MATCH_YES;
                    continue;
                }
            }
        }
        /* malformed member: skip to the next comma */
        while (p < end && *p != ',')
            p++;
    }
    return HE_HTTP_MATCH_NONE;
}

/* HTTP-date in a header; false when absent or unparsable (then ignored). */
static bool he_http_cond_date(const char *v, size_t n, time_t *t)
{
    return v != NULL && he_http_date_parse(v, n, t) == 0;
}

he_http_cond_result_t he_http_cond_eval(const he_http_cond_t *c, const char *etag, size_t etag_len,
                                        time_t mtime)
{
    he_http_etag_ref_t cur = {NULL, 0, false};
    bool have_tag = etag != NULL && he_http_etag_split(etag, etag_len, &cur);
    time_t t;

    /* 1. If-Match: strong comparison; "*" holds since we have the file */
    if (c->if_match != NULL) {
        he_http_match_t r = he_http_list_match(c->if_match, c->if_match_len, &cur, true);
        if (r == HE_HTTP_MATCH_NONE || (r == HE_HTTP_MATCH_YES && !have_tag))
            return HE_HTTP_COND_PRECONDITION_FAILED;
    } else if (he_http_cond_date(c->if_unmodified_since, c->if_unmodified_since_len, &t)) {
        /* 2. If-Unmodified-Since, only without If-Match */
        if (mtime > t) return HE_HTTP_COND_PRECONDITION_FAILED;
    }

    /* 3. If-None-Match: weak comparison. We only serve GET and HEAD, for
     * which a match means 304. */
    if (c->if_none_match != NULL) {
        he_http_match_t r = he_http_list_match(c->if_none_match, c->if_none_match_len, &cur, false);
        if (r == HE_HTTP_MATCH_STAR || (r == HE_HTTP_MATCH_YES && have_tag))
            return HE_HTTP_COND_NOT_MODIFIED;
    } else if (he_http_cond_date(c->if_modified_since, c->if_modified_since_len, &t)) {
        /* 4. If-Modified-Since, only without If-None-Match */
        if (mtime <= t) return HE_HTTP_COND_NOT_MODIFIED;
    }
    return HE_HTTP_COND_PROCEED;
}

bool he_http_if_range_ok(const char *v, size_t len, const char *etag, size_t etag_len, time_t mtime)
{
    he_http_etag_ref_t want, cur;
    time_t t;

    if (v == NULL) return true; /* no If-Range: the Range stands */
    he_http_trim(&v, &len);
    /* If-Range = entity-tag / HTTP-date; a tag must match strongly, a
     * weak one never does (RFC 9110 13.1.5). */
    if (len > 0 && (v[0] == '"' || (len > 1 && v[0] == 'W' && v[1] == '/'))) {
        if (!he_http_etag_split(v, len, &want) || want.weak) return false;
        if (etag == NULL || !he_http_etag_split(etag, etag_len, &cur) || cur.weak) return false;
        return want.len == cur.len && memcmp(want.opaque, cur.opaque, cur.len) == 0;
    }
    return he_http_date_parse(v, len, &t) == 0 && t == mtime;
}

const char *he_http_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 202:
        return "Accepted";
    case 203:
        return "Non-Authoritative Information";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 410:
        return "Gone";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 416:
        return "Range Not Satisfiable";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 508:
        return "Loop Detected";
    default:
        return status < 300   ? "OK"
               : status < 400 ? "Redirect"
               : status < 500 ? "Client Error"
                              : "Server Error";
    }
}
