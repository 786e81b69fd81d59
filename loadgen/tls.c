/* loadgen: client TLS with OpenSSL over memory BIOs, so the socket stays on
 * the thread's io_uring: ciphertext is received and sent by the ring, and
 * OpenSSL only transforms bytes between the BIOs and the caller. */
#include "loadgen/engine.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#define HE_LG_TLS_BUF (16 * 1024 + 512) /* one TLS record and change */

struct he_lg_tls {
    SSL *ssl;
    BIO *rbio; /* network -> OpenSSL */
    BIO *wbio; /* OpenSSL -> network */
    char rx[HE_LG_TLS_BUF];
    char tx[HE_LG_TLS_BUF];
};

int he_lg_tls_ctx_new(SSL_CTX **out, bool insecure, bool h2)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) return -ENOMEM;
    if (h2) SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x02h2", 3);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_default_verify_paths(ctx);
    }
    /* resume sessions across reconnects, as a player's TLS stack would */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT);
    *out = ctx;
    return 0;
}

void he_lg_tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

int he_lg_tls_new(he_lg_tls_t **out, SSL_CTX *ctx, const char *sni)
{
    if (!ctx) return -EINVAL;
    he_lg_tls_t *t = calloc(1, sizeof(*t));
    if (!t) return -ENOMEM;
    t->ssl = SSL_new(ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        return -ENOMEM;
    }
    BIO_set_mem_eof_return(t->rbio, -1); /* empty means "wait", not EOF */
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_connect_state(t->ssl);
    if (sni && *sni && !(*sni >= '0' && *sni <= '9') && !strchr(sni, ':')) {
        SSL_set_tlsext_host_name(t->ssl, sni);
        if (SSL_get_verify_mode(t->ssl) & SSL_VERIFY_PEER) SSL_set1_host(t->ssl, sni);
    }
    *out = t;
    return 0;
}

void he_lg_tls_free(he_lg_tls_t *t)
{
    if (!t) return;
    SSL_free(t->ssl); /* frees both BIOs */
    free(t);
}

int he_lg_tls_handshake(he_lg_tls_t *t)
{
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) return 0;
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return HE_LG_AGAIN;
    ERR_clear_error();
    return -EPROTO;
}

int he_lg_tls_feed(he_lg_tls_t *t, const char *p, size_t n)
{
    while (n) {
        int k = BIO_write(t->rbio, p, (int)n);
        if (k <= 0) return -ENOMEM;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

size_t he_lg_tls_take(he_lg_tls_t *t, char *out, size_t cap)
{
    int k = BIO_read(t->wbio, out, (int)cap);
    return k > 0 ? (size_t)k : 0;
}

int he_lg_tls_write(he_lg_tls_t *t, const char *p, size_t n)
{
    /* memory BIOs grow: the whole request is taken at once */
    int k = SSL_write(t->ssl, p, (int)n);
    if (k == (int)n) return 0;
    ERR_clear_error();
    return -EPROTO;
}

int he_lg_tls_read(he_lg_tls_t *t, char *out, size_t cap)
{
    int k = SSL_read(t->ssl, out, (int)(cap > 0x40000000 ? 0x40000000 : cap));
    if (k > 0) return k;
    int e = SSL_get_error(t->ssl, k);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    if (e == SSL_ERROR_ZERO_RETURN) return -EPIPE;
    ERR_clear_error();
    return -EPROTO;
}

char *he_lg_tls_rxbuf(he_lg_tls_t *t, size_t *cap)
{
    *cap = sizeof(t->rx);
    return t->rx;
}

char *he_lg_tls_txbuf(he_lg_tls_t *t, size_t *cap)
{
    *cap = sizeof(t->tx);
    return t->tx;
}

bool he_lg_tls_is_h2(const he_lg_tls_t *t)
{
    const unsigned char *p;
    unsigned n;
    SSL_get0_alpn_selected(t->ssl, &p, &n);
    return n == 2 && p[0] == 'h' && p[1] == '2';
}
