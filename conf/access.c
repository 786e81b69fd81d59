/* Who may use the admin listener and purge: admin.allow's address ranges
 * and admin.token_file's bearer token.
 *
 * Ranges: "10.0.0.0/8", "2001:db8::/32", a bare address (all its bits),
 * or "loopback" (127.0.0.0/8 and ::1). An IPv6
 * peer that is an IPv4-mapped address (::ffff:a.b.c.d, a dual-stack
 * listener's IPv4 client) is matched against the IPv4 ranges. Parsed when
 * the configuration loads (to report a bad one at file:line:col) and again
 * when matched: only the admin listener asks, a few times a second. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf/internal.h"

int he_conf_cidr_parse(const char *s, size_t len, he_conf_cidr_t *out)
{
    char buf[64], *slash, *end;
    unsigned max;
    long bits;

    memset(out, 0, sizeof(*out));
    if (len == 0 || len >= sizeof(buf)) return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (strcmp(buf, "loopback") == 0) {
        out->loopback = true;
        return 0;
    }
    slash = strchr(buf, '/');
    if (slash) *slash = 0;
    if (inet_pton(AF_INET, buf, out->addr) == 1) {
        out->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        max = 128;
    } else {
        return -EINVAL;
    }
    out->bits = max;
    if (slash) {
        if (!slash[1] || slash[1] < '0' || slash[1] > '9') return -EINVAL;
        bits = strtol(slash + 1, &end, 10);
        if (*end || bits < 0 || bits > (long)max) return -EINVAL;
        out->bits = (unsigned)bits;
    }
    /* host bits set ("10.0.0.1/8") are most likely a typo for a host */
    for (unsigned i = out->bits; i < max; i++)
        if (out->addr[i / 8] & (0x80u >> (i % 8))) return -EINVAL;
    return 0;
}

static bool he_conf_cidr_has(const he_conf_cidr_t *r, int family, const uint8_t *a)
{
    if (r->family != family) return false;
    for (unsigned i = 0; i < r->bits; i++) {
        unsigned m = 0x80u >> (i % 8);
        if ((r->addr[i / 8] & m) != (a[i / 8] & m)) return false;
    }
    return true;
}

bool he_conf_addr_allowed(const he_conf_t *c, const struct sockaddr *sa)
{
    static const uint8_t v6_loop[16] = {[15] = 1};
    uint8_t a[16];
    int family;

    if (!sa) return false;
    if (sa->sa_family == AF_INET) {
        family = AF_INET;
        memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6)) {
            family = AF_INET;
            memcpy(a, v6->s6_addr + 12, 4);
        } else {
            family = AF_INET6;
            memcpy(a, v6->s6_addr, 16);
        }
    } else {
        return false; /* a Unix socket is not an address we can check */
    }
    for (unsigned i = 0; i < c->nadmin_allow; i++) {
        he_conf_cidr_t r;
        if (he_conf_cidr_parse(c->admin_allow[i], strlen(c->admin_allow[i]), &r) < 0) continue;
        if (r.loopback) {
            if ((family == AF_INET && a[0] == 127) ||
                (family == AF_INET6 && memcmp(a, v6_loop, 16) == 0))
                return true;
            continue;
        }
        if (he_conf_cidr_has(&r, family, a)) return true;
    }
    return false;
}

bool he_conf_bearer_ok(const he_conf_t *c, const char *authz, size_t len)
{
    size_t tlen = strlen(c->admin_token);
    if (!tlen || len < 7 || strncasecmp(authz, "Bearer ", 7) != 0) return false;
    authz += 7;
    len -= 7;
    while (len && (*authz == ' ' || *authz == '\t'))
        authz++, len--;
    while (len && (authz[len - 1] == ' ' || authz[len - 1] == '\t'))
        len--;
    /* the length is no secret (16..255 is the rule); the bytes are */
    return len == tlen && CRYPTO_memcmp(authz, c->admin_token, tlen) == 0;
}
