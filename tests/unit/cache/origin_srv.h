/* A scripted HTTP/1.1 origin for the cache's unit tests: one thread on
 * loopback, plain or TLS, serving connections one after another. What it
 * answers is set per server (srv->mode) and every request is counted and
 * kept, so tests can check the bytes the fetch sent. */
#ifndef HE_TEST_ORIGIN_SRV_H
#define HE_TEST_ORIGIN_SRV_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum srv_mode {
    SRV_OK = 0,       /* resp_head + body, keep-alive unless close */
    SRV_CHUNKED,      /* body in chunks of 1000 */
    SRV_CUT,          /* head with the full length, half the body, close */
    SRV_503,          /* 503 with a small body */
    SRV_SILENT,       /* read the request, never answer */
    SRV_DROP_SECOND,  /* answer the first request of a connection, close on the second */
    SRV_304_IF_MATCH, /* 304 when If-None-Match matches etag, else 200 */
};

typedef struct srv {
    int lfd;
    uint16_t port;
    pthread_t th;
    atomic_int stop;
    atomic_int requests, conns;
    int mode;
    bool close; /* Connection: close after each response */
    const char *body;
    size_t body_len;
    const char *etag;
    const char *extra; /* extra header lines, "X: y\r\n" */
    int pause_ms;      /* SRV_OK, SRV_CUT: a pause after the head and 1000 body bytes */
    SSL_CTX *tls;
    char last_req[4096];
    pthread_mutex_t lock;
} srv_t;

typedef struct srv_conn {
    int fd;
    SSL *ssl;
} srv_conn_t;

static ssize_t srv_read(srv_conn_t *c, char *b, size_t n)
{
    if (c->ssl) {
        int r = SSL_read(c->ssl, b, (int)n);
        return r > 0 ? r : 0;
    }
    return recv(c->fd, b, n, 0);
}

static int srv_write(srv_conn_t *c, const void *b, size_t n)
{
    if (c->ssl) return SSL_write(c->ssl, b, (int)n) == (int)n ? 0 : -1;
    const char *p = b;
    while (n) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one request head. Its length, 0 at EOF. */
static size_t srv_read_req(srv_t *s, srv_conn_t *c, char *buf, size_t cap)
{
    size_t have = 0;
    while (have + 1 < cap) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (!(c->ssl && SSL_pending(c->ssl)) && poll(&p, 1, 100) == 0) {
            if (atomic_load(&s->stop)) return 0;
            continue;
        }
        ssize_t n = srv_read(c, buf + have, cap - 1 - have);
        if (n <= 0) return 0;
        have += (size_t)n;
        buf[have] = '\0';
        if (strstr(buf, "\r\n\r\n")) return have;
    }
    return 0;
}

static void srv_serve(srv_t *s, srv_conn_t *c)
{
    char req[4096], head[1024];
    int nreq = 0;
    for (;;) {
        size_t n = srv_read_req(s, c, req, sizeof(req));
        if (!n) return;
        nreq++;
        atomic_fetch_add(&s->requests, 1);
        pthread_mutex_lock(&s->lock);
        memcpy(s->last_req, req, n + 1);
        pthread_mutex_unlock(&s->lock);
        bool head_req = strncmp(req, "HEAD ", 5) == 0;
        const char *conn = s->close ? "Connection: close\r\n" : "";
        const char *extra = s->extra ? s->extra : "";
        int hl;
        switch (s->mode) {
        case SRV_SILENT:
            while (srv_read_req(s, c, req, sizeof(req)))
                ;
            return;
        case SRV_DROP_SECOND:
            if (nreq > 1) return;
            /* fall through */
        case SRV_OK:
        case SRV_CUT:
            hl = snprintf(head, sizeof(head),
                          "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nContent-Type: video/mp2t\r\n"
                          "Cache-Control: max-age=60\r\n%s%s%s%s%s\r\n",
                          s->body_len, s->etag ? "ETag: " : "", s->etag ? s->etag : "",
                          s->etag ? "\r\n" : "", conn, extra);
            if (s->pause_ms && !head_req && s->body_len > 1000 && hl + 1000 <= (int)sizeof(req)) {
                /* the head and 1000 body bytes in one write, so the fetch
                 * has seen the head when the rest comes, in later reads:
                 * a body received in place */
                memcpy(req, head, (size_t)hl);
                memcpy(req + hl, s->body, 1000);
                if (srv_write(c, req, (size_t)hl + 1000) < 0) return;
                usleep((useconds_t)s->pause_ms * 1000);
                if (s->mode == SRV_CUT) {
                    srv_write(c, s->body + 1000, s->body_len / 2 - 1000);
                    return;
                }
                if (srv_write(c, s->body + 1000, s->body_len - 1000) < 0) return;
                break;
            }
            if (srv_write(c, head, (size_t)hl) < 0) return;
            if (head_req) break;
            if (s->mode == SRV_CUT) {
                srv_write(c, s->body, s->body_len / 2);
                return;
            }
            if (srv_write(c, s->body, s->body_len) < 0) return;
            break;
        case SRV_CHUNKED:
            hl = snprintf(head, sizeof(head),
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n%s%s\r\n", conn, extra);
            if (srv_write(c, head, (size_t)hl) < 0) return;
            for (size_t off = 0; off < s->body_len; off += 1000) {
                size_t k = s->body_len - off < 1000 ? s->body_len - off : 1000;
                hl = snprintf(head, sizeof(head), "%zx\r\n", k);
                srv_write(c, head, (size_t)hl);
                srv_write(c, s->body + off, k);
                srv_write(c, "\r\n", 2);
            }
            srv_write(c, "0\r\n\r\n", 5);
            break;
        case SRV_503:
            hl = snprintf(head, sizeof(head),
                          "HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n%s\r\nbusy", conn);
            if (srv_write(c, head, (size_t)hl) < 0) return;
            break;
        case SRV_304_IF_MATCH: {
            char want[160];
            snprintf(want, sizeof(want), "If-None-Match: %s\r\n", s->etag);
            if (strstr(req, want)) {
                hl = snprintf(head, sizeof(head),
                              "HTTP/1.1 304 Not Modified\r\nETag: %s\r\n"
                              "Cache-Control: max-age=30\r\n%s\r\n",
                              s->etag, conn);
                if (srv_write(c, head, (size_t)hl) < 0) return;
            } else {
                hl = snprintf(head, sizeof(head),
                              "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nETag: %s\r\n%s\r\n",
                              s->body_len, s->etag, conn);
                if (srv_write(c, head, (size_t)hl) < 0) return;
                if (srv_write(c, s->body, s->body_len) < 0) return;
            }
            break;
        }
        }
        if (s->close) return;
    }
}

static void *srv_main(void *arg)
{
    srv_t *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = s->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        srv_conn_t c = {.fd = accept(s->lfd, NULL, NULL)};
        if (c.fd < 0) continue;
        atomic_fetch_add(&s->conns, 1);
        if (s->tls) {
            c.ssl = SSL_new(s->tls);
            SSL_set_fd(c.ssl, c.fd);
            if (SSL_accept(c.ssl) == 1) srv_serve(s, &c);
            SSL_shutdown(c.ssl);
            SSL_free(c.ssl);
        } else {
            srv_serve(s, &c);
        }
        close(c.fd);
    }
    return NULL;
}

static srv_t *srv_start(int mode, const char *body, size_t body_len, SSL_CTX *tls)
{
    srv_t *s = calloc(1, sizeof(*s));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int one = 1;
    s->mode = mode;
    s->body = body;
    s->body_len = body_len;
    s->tls = tls;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 64) < 0) abort();
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    pthread_create(&s->th, NULL, srv_main, s);
    return s;
}

static void srv_stop(srv_t *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    close(s->lfd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* A loopback port with nothing listening: connect is refused. */
static uint16_t srv_refused_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd);
    return ntohs(a.sin_port);
}

#endif
