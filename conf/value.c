/* conf/value.c: parsers for the scalar forms a config value can take
 * (integers, booleans, durations, sizes, listen addresses, tokens, origin
 * URLs). They are strict on
 * purpose: a typo in a config file should fail the load, not be read as
 * something else (strtoul would take "-1", " 8", "8k" or "0x10"). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conf/internal.h"

int he__conf_parse_uint(const char *s, size_t len, unsigned *out)
{
    unsigned long long v = 0;

    if (len == 0) return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -EINVAL;
    }
    /* Check every digit is a digit first, so "99999999999x" is -EINVAL (a
     * typo), not -ERANGE. */
    for (size_t i = 0; i < len; i++) {
        v = v * 10 + (unsigned)(s[i] - '0');
        if (v > UINT_MAX) return -ERANGE;
    }
    *out = (unsigned)v;
    return 0;
}

int he__conf_parse_bool(const char *s, bool *out)
{
    static const struct {
        const char *name;
        bool value;
    } words[] = {{"true", true},   {"yes", true}, {"on", true},
                 {"false", false}, {"no", false}, {"off", false}};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strcasecmp(s, words[i].name) == 0) {
            *out = words[i].value;
            return 0;
        }
    }
    return -EINVAL;
}

void he__conf_fmt_ms(unsigned ms, char *buf, size_t len)
{
    if (ms == 0)
        snprintf(buf, len, "0s");
    else if (ms % 86400000 == 0)
        snprintf(buf, len, "%ud", ms / 86400000);
    else if (ms % 3600000 == 0)
        snprintf(buf, len, "%uh", ms / 3600000);
    else if (ms % 60000 == 0)
        snprintf(buf, len, "%um", ms / 60000);
    else if (ms % 1000 == 0)
        snprintf(buf, len, "%us", ms / 1000);
    else
        snprintf(buf, len, "%ums", ms);
}

int he_conf_parse_duration_ms(const char *s, unsigned *ms)
{
    static const struct {
        const char *suffix;
        unsigned long long mult;
    } units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    size_t ndigits = 0;
    unsigned n;
    int rc;

    if (s == NULL) return -EINVAL;
    while (s[ndigits] >= '0' && s[ndigits] <= '9')
        ndigits++;
    if (ndigits == 0) return -EINVAL;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(s + ndigits, units[i].suffix) != 0) continue;
        rc = he__conf_parse_uint(s, ndigits, &n);
        if (rc < 0) return rc;
        if ((unsigned long long)n * units[i].mult > UINT_MAX) return -ERANGE;
        *ms = (unsigned)(n * units[i].mult);
        return 0;
    }
    return -EINVAL;
}

/* Port: 1 to 5 digits, 1..65535. */
static int he_conf_parse_port(const char *s, unsigned *port)
{
    size_t len = strlen(s);

    if (len == 0 || len > 5) return -EINVAL;
    if (he__conf_parse_uint(s, len, port) < 0) return -EINVAL;
    return *port >= 1 && *port <= 65535 ? 0 : -EINVAL;
}

int he_conf_parse_listen(const char *s, he_conf_listen_t *l)
{
    char host[INET6_ADDRSTRLEN];
    char ntop[INET6_ADDRSTRLEN];
    const char *port_s;
    size_t hostlen;
    unsigned port;
    int v6 = 0;

    if (l == NULL) return -EINVAL;
    /* Zero all of it, padding included: configs are compared with memcmp. */
    memset(l, 0, sizeof(*l));
    if (s == NULL || s[0] == '\0' || strlen(s) >= sizeof(l->text)) return -EINVAL;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':') return -EINVAL;
        hostlen = (size_t)(close - (s + 1));
        if (hostlen == 0 || hostlen >= sizeof(host)) return -EINVAL;
        memcpy(host, s + 1, hostlen);
        host[hostlen] = '\0';
        port_s = close + 2;
        v6 = 1;
    } else {
        const char *colon = strrchr(s, ':');
        if (colon == NULL) {
            /* "8080": all addresses */
            host[0] = '\0';
            port_s = s;
        } else {
            hostlen = (size_t)(colon - s);
            if (hostlen >= sizeof(host)) return -EINVAL;
            memcpy(host, s, hostlen);
            host[hostlen] = '\0';
            /* A bare IPv6 address is ambiguous with its port: require [ ]. */
            if (strchr(host, ':') != NULL) return -EINVAL;
            port_s = colon + 1;
        }
    }
    if (he_conf_parse_port(port_s, &port) < 0) return -EINVAL;

    if (v6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&l->addr;
        /* inet_pton takes literals only, so no name is ever resolved here. */
        if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1) goto bad;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        l->addrlen = sizeof(*a6);
        inet_ntop(AF_INET6, &a6->sin6_addr, ntop, sizeof(ntop));
        snprintf(l->text, sizeof(l->text), "[%s]:%u", ntop, port);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&l->addr;
        if (host[0] == '\0')
            a4->sin_addr.s_addr = htonl(INADDR_ANY);
        else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
            goto bad;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        l->addrlen = sizeof(*a4);
        inet_ntop(AF_INET, &a4->sin_addr, ntop, sizeof(ntop));
        snprintf(l->text, sizeof(l->text), "%s:%u", ntop, port);
    }
    return 0;

bad:
    memset(l, 0, sizeof(*l));
    return -EINVAL;
}

int he__conf_parse_size(const char *s, size_t len, uint64_t *out)
{
    static const char units[] = "kmgt";
    const char *u;
    unsigned shift = 0;
    uint64_t v = 0;

    if (len > 0 && s[len - 1] != '\0' &&
        (u = strchr(units, s[len - 1] | 0x20)) != NULL) { /* | 0x20: either case */
        shift = 10 * (unsigned)(u - units + 1);
        len--;
    }
    if (len == 0) return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -ERANGE;
        v = v * 10 + d;
    }
    if (v > (UINT64_MAX >> shift)) return -ERANGE;
    *out = v << shift;
    return 0;
}

void he__conf_fmt_size(uint64_t bytes, char *buf, size_t len)
{
    static const char units[] = "tgmk";

    for (unsigned i = 0; bytes != 0 && i < 4; i++) {
        unsigned shift = 10 * (4 - i);
        if (bytes % ((uint64_t)1 << shift) == 0) {
            snprintf(buf, len, "%llu%c", (unsigned long long)(bytes >> shift), units[i]);
            return;
        }
    }
    snprintf(buf, len, "%llu", (unsigned long long)bytes);
}

int he__conf_is_token(const char *s, size_t len)
{
    if (len == 0) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        int alnum = (ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z');
        if (!alnum && (ch == '\0' || strchr("!#$%&'*+-.^_`|~", ch) == NULL)) return 0;
    }
    return 1;
}

/* A DNS name (letters, digits, '-' and '_' in dot-separated labels of 1..63
 * bytes, no '-' at either end of a label, 253 bytes at most) or an IPv4
 * literal. A name whose last label is all digits must be an IPv4 literal,
 * so "256.1.1.1" and "10.1" are refused rather than looked up. */
static int he_conf_check_host(const char *s, size_t len)
{
    char buf[INET_ADDRSTRLEN];
    struct in_addr a4;
    size_t start = 0;
    int digits = 1;

    if (len == 0 || len > 253) return -EINVAL;
    for (size_t i = 0; i <= len; i++) {
        unsigned char ch = i < len ? (unsigned char)s[i] : '.';
        if (ch == '.') {
            size_t l = i - start;
            if (l == 0 || l > 63 || s[start] == '-' || s[i - 1] == '-') return -EINVAL;
            if (i < len) digits = 1;
            start = i + 1;
            continue;
        }
        if (!((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') || ch == '-' ||
              ch == '_'))
            return -EINVAL;
        if (ch < '0' || ch > '9') digits = 0;
    }
    if (!digits) return 0;
    if (len >= sizeof(buf)) return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(AF_INET, buf, &a4) == 1 ? 0 : -EINVAL;
}

int he_conf_origin_url_split(const char *s, size_t len, size_t *url_len, unsigned *weight,
                             const char **what)
{
    const char *sp = memchr(s, ' ', len);
    const char *w;
    size_t wl;
    unsigned v;

    *url_len = len;
    *weight = 1;
    if (!sp) return 0;
    *url_len = (size_t)(sp - s);
    for (w = sp; w < s + len && *w == ' '; w++)
        ;
    wl = (size_t)(s + len - w);
    if (wl < 7 || memcmp(w, "weight=", 7) != 0) {
        *url_len = len; /* not a weight: the URL's own check says what is wrong */
        return 0;
    }
    if (he__conf_parse_uint(w + 7, wl - 7, &v) < 0 || v < 1 || v > HE_CONF_WEIGHT_MAX) {
        *what = "a URL, optionally followed by \" weight=N\" with N in 1..1000";
        return -EINVAL;
    }
    *weight = v;
    return 0;
}

int he__conf_check_url(const char *s, size_t whole, const char **what)
{
    size_t i, end, len;
    unsigned port, weight;

    if (he_conf_origin_url_split(s, whole, &len, &weight, what) < 0) return -EINVAL;

    if (len >= 7 && memcmp(s, "http://", 7) == 0) {
        i = 7;
    } else if (len >= 8 && memcmp(s, "https://", 8) == 0) {
        i = 8;
    } else {
        *what = "a URL starting with \"http://\" or \"https://\"";
        return -EINVAL;
    }

    if (i < len && s[i] == '[') {
        const char *close = memchr(s + i, ']', len - i);
        char host[INET6_ADDRSTRLEN];
        struct in6_addr a6;
        size_t hl = close ? (size_t)(close - (s + i + 1)) : 0;
        if (hl == 0 || hl >= sizeof(host)) goto bad_host;
        memcpy(host, s + i + 1, hl);
        host[hl] = '\0';
        /* A literal only: no zone ids ("%eth0"), which a URL would escape. */
        if (inet_pton(AF_INET6, host, &a6) != 1) goto bad_host;
        i += hl + 2;
    } else {
        for (end = i; end < len && strchr(":/?#", s[end]) == NULL; end++)
            ;
        if (he_conf_check_host(s + i, end - i) < 0) goto bad_host;
        i = end;
    }

    if (i < len && s[i] == ':') {
        for (end = ++i; end < len && strchr("/?#", s[end]) == NULL; end++)
            ;
        if (end - i == 0 || end - i > 5 || he__conf_parse_uint(s + i, end - i, &port) < 0 ||
            port < 1 || port > 65535) {
            *what = "a port in 1..65535 after the host";
            return -EINVAL;
        }
        i = end;
    }
    /* The path is a prefix that request paths are appended to: a query or
     * fragment would end up in the middle of every request. */
    for (size_t j = i; j < len; j++) {
        if (s[j] == '?' || s[j] == '#') {
            *what = "a base URL without a query or fragment";
            return -EINVAL;
        }
    }
    if (i < len && s[i] != '/') {
        *what = "\":port\" or a path starting with \"/\" after the host";
        return -EINVAL;
    }
    for (; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch >= 0x7f) {
            *what = "a path without spaces, control characters or non-ASCII bytes";
            return -EINVAL;
        }
    }
    return 0;

bad_host:
    *what = "a host name, IPv4 address or [IPv6] address after the scheme";
    return -EINVAL;
}
