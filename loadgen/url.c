/* loadgen: absolute http(s) URLs from the command line and playlists, and
 * the process-wide table of resolved endpoints (host, port, scheme). */
#include "loadgen/lg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int he_lg_url_parse(const char *s, he_lg_url_t *u)
{
    const char *p;
    memset(u, 0, sizeof(*u));
    if (strncasecmp(s, "http://", 7) == 0) {
        p = s + 7;
        u->port = 80;
    } else if (strncasecmp(s, "https://", 8) == 0) {
        p = s + 8;
        u->tls = true;
        u->port = 443;
    } else {
        return -EINVAL;
    }
    const char *host = p, *host_end;
    if (*p == '[') {
        host = ++p;
        while (*p && *p != ']')
            p++;
        if (*p != ']') return -EINVAL;
        host_end = p++;
    } else {
        while (*p && *p != ':' && *p != '/' && *p != '?' && *p != '#')
            p++;
        host_end = p;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof(u->host)) return -EINVAL;
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)host[i];
        if (c <= ' ' || c == '@' || c >= 0x7f) return -EINVAL; /* no userinfo */
    }
    memcpy(u->host, host, hlen);
    u->host[hlen] = 0;
    if (*p == ':') {
        p++;
        unsigned long port = 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            port = port * 10 + (unsigned long)(*p++ - '0');
            if (++digits > 5) return -EINVAL;
        }
        if (digits == 0 || port == 0 || port > 65535) return -EINVAL;
        u->port = (uint16_t)port;
    }
    if (*p != 0 && *p != '/' && *p != '?' && *p != '#') return -EINVAL;
    const char *t = p;
    size_t tlen = 0;
    while (t[tlen] && t[tlen] != '#') {
        unsigned char c = (unsigned char)t[tlen];
        if (c <= ' ' || c == 0x7f) return -EINVAL; /* would break the request line */
        tlen++;
    }
    size_t off = 0;
    if (tlen == 0 || t[0] == '?') u->target[off++] = '/'; /* "http://h" and "http://h?q" */
    if (off + tlen >= sizeof(u->target)) return -ENAMETOOLONG;
    memcpy(u->target + off, t, tlen);
    u->target_len = off + tlen;
    u->target[u->target_len] = 0;
    return 0;
}

static struct {
    pthread_mutex_t lock;
    he_lg_endpoint_t *eps[HE_LG_MAX_ENDPOINTS];
    int n;
} he_lg_ep_table = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int he_lg_endpoint_resolve(he_lg_endpoint_t *ep)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", ep->port);
    if (getaddrinfo(ep->host, port, &hints, &res) != 0 || !res) return -EHOSTUNREACH;
    memcpy(&ep->addr, res->ai_addr, res->ai_addrlen);
    ep->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int he_lg_endpoint_get(const char *host, uint16_t port, bool tls)
{
    int rc;
    pthread_mutex_lock(&he_lg_ep_table.lock);
    for (int i = 0; i < he_lg_ep_table.n; i++) {
        he_lg_endpoint_t *ep = he_lg_ep_table.eps[i];
        if (ep->port == port && ep->tls == tls && strcasecmp(ep->host, host) == 0) {
            pthread_mutex_unlock(&he_lg_ep_table.lock);
            return i;
        }
    }
    if (he_lg_ep_table.n == HE_LG_MAX_ENDPOINTS) {
        rc = -ENOSPC;
        goto out;
    }
    he_lg_endpoint_t *ep = calloc(1, sizeof(*ep));
    if (!ep) {
        rc = -ENOMEM;
        goto out;
    }
    ep->tls = tls;
    ep->port = port;
    snprintf(ep->host, sizeof(ep->host), "%s", host);
    bool v6 = strchr(host, ':') != NULL;
    bool dflt = port == (tls ? 443 : 80);
    if (dflt)
        snprintf(ep->hosthdr, sizeof(ep->hosthdr), v6 ? "[%s]" : "%s", host);
    else
        snprintf(ep->hosthdr, sizeof(ep->hosthdr), v6 ? "[%s]:%u" : "%s:%u", host, port);
    /* resolving under the lock is fine: it happens once per host, and
     * nearly always at start-up */
    rc = he_lg_endpoint_resolve(ep);
    if (rc < 0) {
        free(ep);
        goto out;
    }
    rc = he_lg_ep_table.n;
    he_lg_ep_table.eps[he_lg_ep_table.n++] = ep;
out:
    pthread_mutex_unlock(&he_lg_ep_table.lock);
    return rc;
}

const he_lg_endpoint_t *he_lg_endpoint_at(int idx)
{
    /* entries are never moved or freed while threads run */
    return he_lg_ep_table.eps[idx];
}

void he_lg_endpoints_reset(void)
{
    pthread_mutex_lock(&he_lg_ep_table.lock);
    for (int i = 0; i < he_lg_ep_table.n; i++)
        free(he_lg_ep_table.eps[i]);
    he_lg_ep_table.n = 0;
    pthread_mutex_unlock(&he_lg_ep_table.lock);
}
