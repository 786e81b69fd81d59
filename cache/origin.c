/* Origins: base URLs parsed once, names resolved once on the control
 * thread (getaddrinfo blocks; nothing on a worker ring ever resolves), and
 * each worker's he_cache_origins_t with its keep-alive pools (pool.c) and
 * its TLS client context for https origins (the fetch drives OpenSSL over
 * memory BIOs, see fetch.c).
 *
 * Only the first address of a name is used: failover goes to the next
 * configured origin, not to the next address of the same one. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cache/origin.h"
#include "cache/origin_internal.h"

static int he_cache_origin_err(char *err, size_t errlen, const char *url, const char *why)
{
    if (err && errlen) snprintf(err, errlen, "origin \"%s\": %s", url, why);
    return -EINVAL;
}

static bool he_cache_origin_numeric(he_cache_origin_t *o)
{
    struct sockaddr_in *a4 = (struct sockaddr_in *)&o->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&o->addr;
    memset(&o->addr, 0, sizeof(o->addr));
    if (inet_pton(AF_INET, o->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(o->port);
        o->addrlen = sizeof(*a4);
        return true;
    }
    if (inet_pton(AF_INET6, o->host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(o->port);
        o->addrlen = sizeof(*a6);
        return true;
    }
    o->addrlen = 0;
    return false;
}

static int he_cache_origin_parse_url(const char *url, he_cache_origin_t *o, char *err,
                                     size_t errlen);

int he_cache_origin_parse(const char *spec, he_cache_origin_t *o, char *err, size_t errlen)
{
    char url[512];
    const char *what = NULL;
    size_t ul;
    unsigned weight;
    int rc;
    if (he_conf_origin_url_split(spec, strlen(spec), &ul, &weight, &what) < 0 ||
        ul >= sizeof(url)) {
        memset(o, 0, sizeof(*o));
        return he_cache_origin_err(err, errlen, spec, what ? what : "too long");
    }
    memcpy(url, spec, ul);
    url[ul] = 0;
    rc = he_cache_origin_parse_url(url, o, err, errlen);
    if (rc < 0) return rc;
    o->parent.weight = weight;
    o->parent.id = he_cache_select_id(url, ul);
    return 0;
}

static int he_cache_origin_parse_url(const char *url, he_cache_origin_t *o, char *err,
                                     size_t errlen)
{
    const char *p, *hs, *he, *path;
    size_t hl;
    bool v6 = false;
    memset(o, 0, sizeof(*o));
    if (strncasecmp(url, "http://", 7) == 0) {
        p = url + 7;
        o->port = 80;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        p = url + 8;
        o->tls = true;
        o->port = 443;
    } else {
        return he_cache_origin_err(err, errlen, url, "expected http:// or https://");
    }
    if (*p == '[') {
        hs = p + 1;
        he = strchr(hs, ']');
        if (!he) return he_cache_origin_err(err, errlen, url, "unterminated [IPv6] address");
        p = he + 1;
        v6 = true;
    } else {
        hs = p;
        while (*p && *p != ':' && *p != '/' && *p != '?' && *p != '#')
            p++;
        he = p;
    }
    hl = (size_t)(he - hs);
    if (hl == 0 || hl >= sizeof(o->host)) return he_cache_origin_err(err, errlen, url, "bad host");
    memcpy(o->host, hs, hl);
    for (size_t i = 0; i < hl; i++) {
        unsigned char c = (unsigned char)o->host[i];
        if (c <= ' ' || c == '@' || c == '%' || c == '\\' || c >= 0x7f || (!v6 && c == '[') ||
            (v6 && c != ':' && c != '.' &&
             !((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'))))
            return he_cache_origin_err(err, errlen, url, "bad host");
    }
    if (*p == ':') {
        unsigned long port = 0;
        p++;
        if (*p < '0' || *p > '9') return he_cache_origin_err(err, errlen, url, "bad port");
        while (*p >= '0' && *p <= '9') {
            port = port * 10 + (unsigned long)(*p++ - '0');
            if (port > 65535) return he_cache_origin_err(err, errlen, url, "bad port");
        }
        if (port == 0) return he_cache_origin_err(err, errlen, url, "bad port");
        o->port = (uint16_t)port;
    }
    if (*p && *p != '/') return he_cache_origin_err(err, errlen, url, "expected a path or nothing");
    path = p;
    if (strpbrk(path, "?# \t\r\n"))
        return he_cache_origin_err(err, errlen, url, "no query, fragment or space allowed");
    size_t pl = strlen(path);
    while (pl && path[pl - 1] == '/')
        pl--;
    if (pl >= sizeof(o->base)) return he_cache_origin_err(err, errlen, url, "path too long");
    memcpy(o->base, path, pl);
    bool dflt = o->port == (o->tls ? 443 : 80);
    int al = snprintf(o->authority, sizeof(o->authority), "%s%s%s", v6 ? "[" : "", o->host,
                      v6 ? "]" : "");
    if (!dflt) snprintf(o->authority + al, sizeof(o->authority) - (size_t)al, ":%u", o->port);
    o->host_is_ip = he_cache_origin_numeric(o);
    if (v6 && !o->host_is_ip) return he_cache_origin_err(err, errlen, url, "bad IPv6 address");
    return 0;
}

int he_cache_origins_resolve(const he_conf_t *conf, he_cache_origin_t *out, char *err,
                             size_t errlen)
{
    for (unsigned i = 0; i < conf->norigin_urls; i++) {
        he_cache_origin_t *o = &out[i];
        struct addrinfo hints, *res = NULL;
        char port[8];
        int rc = he_cache_origin_parse(conf->origin_urls[i], o, err, errlen);
        if (rc < 0) return rc;
        if (o->host_is_ip) continue;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_ADDRCONFIG;
        snprintf(port, sizeof(port), "%u", (unsigned)o->port);
        rc = getaddrinfo(o->host, port, &hints, &res);
        if (rc != 0 || !res) {
            if (err && errlen)
                snprintf(err, errlen, "origin \"%s\": cannot resolve %s: %s", conf->origin_urls[i],
                         o->host, gai_strerror(rc));
            if (res) freeaddrinfo(res);
            return -EHOSTUNREACH;
        }
        memcpy(&o->addr, res->ai_addr, res->ai_addrlen);
        o->addrlen = res->ai_addrlen;
        freeaddrinfo(res);
    }
    return (int)conf->norigin_urls;
}

int he_cache_origin_path(const he_cache_origin_t *o, const char *target, char *out, size_t cap)
{
    size_t bl = strlen(o->base), tl = strlen(target);
    if (target[0] != '/') return -EINVAL;
    if (bl + tl + 1 > cap) return -ENAMETOOLONG;
    memcpy(out, o->base, bl);
    memcpy(out + bl, target, tl + 1);
    return (int)(bl + tl);
}

/* ---------------------------------------------------------------- per worker */

static int he_cache_origins_tls(he_cache_origins_t *o, const char *ca_file, char *err,
                                size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    unsigned long e;
    if (!ctx) goto fail;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1
                : SSL_CTX_set_default_verify_paths(ctx) != 1)
        goto fail;
    o->ssl_ctx = ctx;
    return 0;
fail:
    e = ERR_get_error();
    if (err && errlen)
        snprintf(err, errlen, "origin TLS context%s%s: %s", ca_file ? " with CA file " : "",
                 ca_file ? ca_file : "", e ? ERR_reason_error_string(e) : "failed");
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return -EINVAL;
}

int he_cache_origins_new(he_cache_origins_t **out, const he_cache_origins_opts_t *opts, char *err,
                         size_t errlen)
{
    he_cache_origins_t *o;
    bool tls = false;
    *out = NULL;
    if (opts->norigins > HE_CONF_MAX_ORIGINS) return -EINVAL;
    o = calloc(1, sizeof(*o));
    if (!o) return -ENOMEM;
    o->n = opts->norigins;
    o->pool_max = opts->conf ? opts->conf->origin_pool : 0;
    o->select = opts->conf ? opts->conf->origin_select : HE_CONF_SELECT_ORDERED;
    if (opts->via) snprintf(o->via, sizeof(o->via), "%s", opts->via);
    o->health = opts->health;
    if (!o->health) {
        o->health = he_cache_health_new(o->n, opts->conf ? opts->conf->origin_down_time_ms : 0);
        o->own_health = true;
        if (!o->health) {
            free(o);
            return -ENOMEM;
        }
    }
    for (unsigned i = 0; i < o->n; i++) {
        o->org[i] = opts->origins[i];
        tls |= o->org[i].tls;
        if (!o->org[i].addrlen) {
            if (err && errlen) snprintf(err, errlen, "origin %s: not resolved", o->org[i].host);
            he_cache_origins_free(o);
            return -EINVAL;
        }
        if (o->pool_max) {
            o->pool[i].conns = calloc(o->pool_max, sizeof(he_cache_conn_t));
            if (!o->pool[i].conns) {
                he_cache_origins_free(o);
                return -ENOMEM;
            }
        }
    }
    if (tls) {
        int rc = he_cache_origins_tls(o, opts->tls_ca_file, err, errlen);
        if (rc < 0) {
            he_cache_origins_free(o);
            return rc;
        }
    }
    *out = o;
    return 0;
}

void he_cache_origins_free(he_cache_origins_t *o)
{
    if (!o) return;
    he_cache_pool_expire(o, UINT64_MAX, 0);
    for (unsigned i = 0; i < o->n; i++)
        free(o->pool[i].conns);
    SSL_CTX_free(o->ssl_ctx);
    if (o->own_health) he_cache_health_free(o->health);
    free(o);
}

he_cache_health_t *he_cache_origins_health(const he_cache_origins_t *o)
{
    return o->health;
}

unsigned he_cache_origins_count(const he_cache_origins_t *o)
{
    return o ? o->n : 0;
}

const he_cache_origin_t *he_cache_origins_get(const he_cache_origins_t *o, unsigned i)
{
    return i < o->n ? &o->org[i] : NULL;
}
