/* conf/value.c: parsers for the scalar forms a config value can take
 * (integers, booleans, durations, listen addresses). They are strict on
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
    } units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
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
