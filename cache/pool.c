/* Keep-alive connections per worker per origin. A small LIFO stack per
 * origin: the most recently used connection is the one least likely to
 * have been closed by the origin's idle timer. Only the owning worker
 * touches it, so there is no lock.
 *
 * A pooled connection is not watched while idle (no recv is armed on it),
 * so the origin may have closed it meanwhile. _get checks with a
 * non-blocking MSG_PEEK (one cheap syscall that never waits): EOF, an
 * error or unexpected plaintext bytes drop it. The race that is left (the
 * origin closes just as we send) is handled by the fetch, which retries
 * once on a fresh connection. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cache/origin.h"
#include "cache/origin_internal.h"

void he_cache_conn_close(he_cache_conn_t *c)
{
    if (c->tls) SSL_free(c->tls);
    c->tls = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

static bool he_cache_pool_alive(const he_cache_conn_t *c)
{
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    /* TLS: a session ticket or key update may be waiting; plain HTTP: a
     * byte nobody asked for means the stream is out of step */
    return n > 0 && c->tls;
}

bool he_cache_pool_get(he_cache_origins_t *o, unsigned i, uint64_t now_ms, he_cache_conn_t *c)
{
    he__cache_pool_t *p;
    (void)now_ms;
    if (!o || i >= o->n) return false;
    p = &o->pool[i];
    while (p->n) {
        *c = p->conns[--p->n];
        if (he_cache_pool_alive(c)) return true;
        he_cache_conn_close(c);
    }
    return false;
}

void he_cache_pool_put(he_cache_origins_t *o, unsigned i, he_cache_conn_t *c, uint64_t now_ms)
{
    he__cache_pool_t *p = o && i < o->n ? &o->pool[i] : NULL;
    if (!p || p->n >= o->pool_max) {
        he_cache_conn_close(c);
        return;
    }
    c->idle_since_ms = now_ms;
    p->conns[p->n++] = *c;
    c->fd = -1;
    c->tls = NULL;
}

void he_cache_pool_expire(he_cache_origins_t *o, uint64_t now_ms, uint64_t idle_ms)
{
    for (unsigned i = 0; o && i < o->n; i++) {
        he__cache_pool_t *p = &o->pool[i];
        unsigned keep = 0;
        for (unsigned j = 0; j < p->n; j++) {
            he_cache_conn_t *c = &p->conns[j];
            if (now_ms - c->idle_since_ms > idle_ms || now_ms < c->idle_since_ms)
                he_cache_conn_close(c);
            else
                p->conns[keep++] = *c;
        }
        p->n = keep;
    }
}

unsigned he_cache_pool_idle(const he_cache_origins_t *o, unsigned i)
{
    return o && i < o->n ? o->pool[i].n : 0;
}
