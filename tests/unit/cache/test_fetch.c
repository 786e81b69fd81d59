/* cache/fetch.c: a request-target of any length the server accepts
 * (limits.uri_bytes, up to 1 MiB) goes to the origin whole and unchanged:
 * 2 KiB and more (the cache key's limit once cut such targets short), more
 * than the fetch's 16 KiB send buffer, and 1 MiB; over plain connections
 * and over TLS (with validators, so the request head is longer still). A
 * one-connection origin on loopback keeps the request it read. Every wait
 * is bounded. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cache/origin.h"
#include "cache/stats.h"
#include "he_test.h"

#define REQ_MAX (4u << 20)

static he_conf_t conf;
static he_cache_stats_t st;

typedef struct peer {
    int lfd;
    uint16_t port;
    SSL_CTX *tls;
    pthread_t th;
    char *req; /* the request head it read, NUL-terminated */
    size_t len;
} peer_t;

static ssize_t peer_read(int fd, SSL *ssl, char *b, size_t n)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (ssl) {
        int r = SSL_read(ssl, b, (int)(n > (1u << 30) ? (1u << 30) : n));
        return r > 0 ? r : -1;
    }
    if (poll(&p, 1, 10000) != 1) return -1;
    return recv(fd, b, n, 0);
}

/* One connection: the head up to its blank line, a short answer, close. */
static void *peer_main(void *arg)
{
    static const char resp[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    peer_t *p = arg;
    struct pollfd pl = {.fd = p->lfd, .events = POLLIN};
    SSL *ssl = NULL;
    int fd;
    if (poll(&pl, 1, 10000) != 1 || (fd = accept(p->lfd, NULL, NULL)) < 0) return NULL;
    if (p->tls) {
        ssl = SSL_new(p->tls);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) goto out;
    }
    while (p->len + 1 < REQ_MAX) {
        ssize_t n = peer_read(fd, ssl, p->req + p->len, REQ_MAX - 1 - p->len);
        if (n <= 0) break;
        p->len += (size_t)n;
        p->req[p->len] = 0;
        if (p->len >= 4 && memcmp(p->req + p->len - 4, "\r\n\r\n", 4) == 0) {
            if (ssl)
                SSL_write(ssl, resp, (int)sizeof(resp) - 1);
            else if (send(fd, resp, sizeof(resp) - 1, MSG_NOSIGNAL) < 0)
                break;
            break;
        }
    }
out:
    if (ssl) {
        SSL_shutdown(ssl);
        SSL_free(ssl);
    }
    close(fd);
    return NULL;
}

static void peer_start(peer_t *p, SSL_CTX *tls)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    memset(p, 0, sizeof(*p));
    p->tls = tls;
    p->req = malloc(REQ_MAX);
    p->req[0] = 0;
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(p->lfd, 4) < 0) abort();
    getsockname(p->lfd, (struct sockaddr *)&a, &al);
    p->port = ntohs(a.sin_port);
    pthread_create(&p->th, NULL, peer_main, p);
}

static void peer_stop(peer_t *p)
{
    pthread_join(p->th, NULL);
    close(p->lfd);
}

static int sink_headers(void *ctx, const he_cache_http_resp_t *r)
{
    *(int *)ctx = r->status;
    return 0;
}

static int sink_body(void *ctx, const char *p, size_t n)
{
    (void)ctx;
    return n == 2 && memcmp(p, "ok", 2) == 0 ? 0 : -EPROTO;
}

/* "/t?q=xxx...": len bytes, with escapes a decoding would change */
static char *target_of(size_t len)
{
    char *t = malloc(len + 1);
    static const char head[] = "/my%2520file.ts?token=";
    memcpy(t, head, sizeof(head) - 1);
    for (size_t i = sizeof(head) - 1; i < len; i++)
        t[i] = "abcdefghijklmnopqrstuvwxyz0123456789%20&=_-"[i % 43];
    t[len] = 0;
    return t;
}

/* Fetches target from the peer; checks the request line it got. */
static void fetch_one(const char *scheme, SSL_CTX *tls, const char *ca, size_t len, bool validators)
{
    char url[128], err[256], *want, *target = target_of(len);
    he_cache_origin_t org;
    he_cache_origins_t *o = NULL;
    he_cache_fetch_req_t req = {.path = target};
    int status = 0, rc;
    he_cache_sink_t k = {.ctx = &status, .headers = sink_headers, .body = sink_body};
    he_cache_fetch_t *f;
    peer_t p;

    if (validators) {
        req.inm = "\"an-etag\"";
        req.ims = "Sun, 06 Nov 1994 08:49:37 GMT";
    }
    peer_start(&p, tls);
    snprintf(url, sizeof(url), "%s://127.0.0.1:%u/base", scheme, p.port);
    HE_CHECK_INT(he_cache_origin_parse(url, &org, err, sizeof(err)), 0);
    he_cache_origins_opts_t oo = {.conf = &conf, .origins = &org, .norigins = 1, .tls_ca_file = ca};
    HE_CHECK_INT(he_cache_origins_new(&o, &oo, err, sizeof(err)), 0);
    f = he_cache_fetch_new(o, &conf, &req, &k, 1, &st);
    HE_CHECK(f != NULL);
    rc = f ? he_cache_fetch_run_sync(f, NULL) : -ENOMEM;
    if (rc != 0) fprintf(stderr, "  %s, %zu-byte target: %s\n", scheme, len, strerror(-rc));
    HE_CHECK_INT(rc, 0);
    HE_CHECK_INT(status, 200);
    he_cache_fetch_free(f);
    he_cache_origins_free(o);
    peer_stop(&p);

    want = malloc(len + 64);
    snprintf(want, len + 64, "GET /base%s HTTP/1.1\r\n", target);
    HE_CHECK(strncmp(p.req, want, strlen(want)) == 0);
    HE_CHECK(strstr(p.req, "\r\nHost: 127.0.0.1:") != NULL);
    if (validators) HE_CHECK(strstr(p.req, "\r\nIf-None-Match: \"an-etag\"\r\n") != NULL);
    free(want);
    free(target);
    free(p.req);
}

static int make_certs(const char *d)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-days 2 -subj /CN=test-ca -keyout ca.key -out ca.crt >/dev/null 2>&1 && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=origin.test "
             "-keyout leaf.key -out leaf.csr >/dev/null 2>&1 && "
             "printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext && "
             "openssl x509 -req -in leaf.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
             "-extfile ext -out leaf.crt >/dev/null 2>&1",
             d);
    return system(cmd);
}

static const size_t lens[] = {100, 2047, 2048, 2200, 20000, 1u << 20};

static void test_plain(void)
{
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        fetch_one("http", NULL, NULL, lens[i], false);
        fetch_one("http", NULL, NULL, lens[i], true);
    }
}

static void test_tls(void)
{
    char dir[] = "/tmp/he_test_fetch.XXXXXX", ca[256], crt[256], key[256], cmd[300];
    SSL_CTX *ctx;
    if (!mkdtemp(dir)) return;
    if (make_certs(dir) != 0) {
        fprintf(stderr, "  openssl CLI failed: https tests skipped\n");
        goto out;
    }
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(crt, sizeof(crt), "%s/leaf.crt", dir);
    snprintf(key, sizeof(key), "%s/leaf.key", dir);
    ctx = SSL_CTX_new(TLS_server_method());
    HE_CHECK(SSL_CTX_use_certificate_chain_file(ctx, crt) == 1 &&
             SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        fetch_one("https", ctx, ca, lens[i], true);
    SSL_CTX_free(ctx);
out:
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
}

int main(void)
{
    he_conf_defaults(&conf);
    conf.origin_connect_timeout_ms = 2000;
    conf.origin_read_timeout_ms = 10000;
    conf.origin_total_timeout_ms = 30000;
    conf.origin_retries = 0;
    alarm(120); /* bounded whatever happens */
    test_plain();
    test_tls();
    HE_TEST_MAIN_END();
}
