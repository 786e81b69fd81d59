/* Records sealed by hlsedge (tls.seal_records).
 *
 * SSL_write copies each record's plaintext into OpenSSL's write buffer,
 * encrypts it there and hands it to the write BIO, which copies it again
 * into the buffer it leaves from (tls_out.c): two copies of every byte
 * besides the encryption and the kernel's. kTLS avoids both by taking the
 * keys; OpenSSL 3.0 offers them to its write BIO once the handshake has
 * made them (BIO_set_ktls, tls.h), and from then on writes plaintext from
 * the caller's buffer. Where the kernel has no kTLS the filter takes them
 * instead and encrypts each record out of place: from the file's mapping
 * or the RAM tier straight into the write buffer.
 *
 * The record layer here is the kernel's (net/tls/tls_sw.c) in user space,
 * AES-GCM only, the crypto OpenSSL's EVP:
 * - TLS 1.3 (RFC 8446 5.2, 5.3): an outer application_data header, the
 *   content then its type inside the AEAD, the header as additional data,
 *   the nonce the 12-byte IV XOR the record's sequence number.
 * - TLS 1.2 (RFC 5246 6.2.3.3, RFC 5288 3): the real type in the header,
 *   an 8-byte explicit nonce after it (the salt's continuation, counted up
 *   per record, as OpenSSL and the kernel do), and additional data of the
 *   sequence number, type, version and plaintext length.
 * A nonce is never used twice under one key: the sequence number and the
 * explicit nonce move on with every record sealed, and nothing seals for a
 * connection but its own filter. */
#include <errno.h>
#include <linux/tls.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/net/tls.h"

struct he_tls_seal {
    EVP_CIPHER_CTX *ctx;
    unsigned char iv[12]; /* 1.3: the write IV; 1.2: salt then explicit nonce */
    uint64_t seq;         /* the next record's sequence number */
    uint16_t version;     /* TLS1_2_VERSION or TLS1_3_VERSION */
    bool spent;           /* a KeyUpdate went: the keys are OpenSSL's secret now */
};

static EVP_CIPHER *he_tls_seal_aes128, *he_tls_seal_aes256;
static pthread_once_t he_tls_seal_once = PTHREAD_ONCE_INIT;

static void he_tls_seal_fetch(void)
{
    /* fetched once: an implicit fetch per connection takes the provider
     * store's lock */
    he_tls_seal_aes128 = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    he_tls_seal_aes256 = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
}

static uint64_t he_tls_seal_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void he_tls_seal_put64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

he_tls_seal_t *he__tls_seal_new(const void *crypto_info)
{
    const struct tls_crypto_info *info = crypto_info;
    const unsigned char *iv, *key, *salt, *rec_seq;
    const EVP_CIPHER *cipher;
    he_tls_seal_t *s;

    pthread_once(&he_tls_seal_once, he_tls_seal_fetch);
    if (!info || (info->version != TLS_1_2_VERSION && info->version != TLS_1_3_VERSION))
        return NULL;
    if (info->cipher_type == TLS_CIPHER_AES_GCM_128) {
        const struct tls12_crypto_info_aes_gcm_128 *g = crypto_info;
        iv = g->iv, key = g->key, salt = g->salt, rec_seq = g->rec_seq;
        cipher = he_tls_seal_aes128;
    } else if (info->cipher_type == TLS_CIPHER_AES_GCM_256) {
        const struct tls12_crypto_info_aes_gcm_256 *g = crypto_info;
        iv = g->iv, key = g->key, salt = g->salt, rec_seq = g->rec_seq;
        cipher = he_tls_seal_aes256;
    } else {
        return NULL; /* ChaCha20-Poly1305 and the rest stay OpenSSL's */
    }
    if (!cipher || !(s = calloc(1, sizeof(*s)))) return NULL;
    s->version = info->version;
    memcpy(s->iv, salt, 4);
    memcpy(s->iv + 4, iv, 8);
    s->seq = he_tls_seal_be64(rec_seq);
    s->ctx = EVP_CIPHER_CTX_new();
    if (!s->ctx || EVP_EncryptInit_ex(s->ctx, cipher, NULL, key, NULL) != 1) {
        ERR_clear_error();
        he__tls_seal_free(s);
        return NULL;
    }
    return s;
}

void he__tls_seal_free(he_tls_seal_t *s)
{
    if (!s) return;
    EVP_CIPHER_CTX_free(s->ctx); /* cleanses the key schedule */
    OPENSSL_cleanse(s, sizeof(*s));
    free(s);
}

int he__tls_seal_record(he_tls_seal_t *s, uint8_t type, const void *in, size_t len,
                        unsigned char *out)
{
    bool tls13 = s->version == TLS_1_3_VERSION;
    size_t body = tls13 ? len + 1 + 16 : 8 + len + 16;
    unsigned char nonce[12], aad[13], *ct;
    int n;

    if (s->spent || len > HE_TLS_SEAL_MAX_PLAIN) return -EPROTO;
    memcpy(nonce, s->iv, 12);
    out[0] = tls13 ? 23 : type; /* TLS 1.3 hides the type inside */
    out[1] = 3;
    out[2] = 3;
    out[3] = (unsigned char)(body >> 8);
    out[4] = (unsigned char)body;
    if (tls13) {
        for (int i = 0; i < 8; i++)
            nonce[4 + i] ^= (unsigned char)(s->seq >> (56 - 8 * i));
        ct = out + 5;
    } else {
        memcpy(out + 5, nonce + 4, 8); /* the explicit nonce, in the clear */
        he_tls_seal_put64(aad, s->seq);
        aad[8] = type;
        aad[9] = 3;
        aad[10] = 3;
        aad[11] = (unsigned char)(len >> 8);
        aad[12] = (unsigned char)len;
        ct = out + 13;
    }
    if (EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, nonce) != 1 ||
        EVP_EncryptUpdate(s->ctx, NULL, &n, tls13 ? out : aad, tls13 ? 5 : 13) != 1 ||
        (len && EVP_EncryptUpdate(s->ctx, ct, &n, in, (int)len) != 1) ||
        (tls13 && EVP_EncryptUpdate(s->ctx, ct + len, &n, &type, 1) != 1) ||
        EVP_EncryptFinal_ex(s->ctx, ct + len + tls13, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG, 16, ct + len + tls13) != 1) {
        ERR_clear_error();
        s->spent = true; /* what went wrong once is not tried again */
        return -EPROTO;
    }
    s->seq++;
    if (!tls13) { /* the explicit nonce counts up, as a big-endian integer */
        for (int i = 11; i >= 4 && ++s->iv[i] == 0; i--)
            ;
    }
    /* KeyUpdate (handshake type 24): sealed under the old keys, as it must
     * be; OpenSSL 3.0 then derives new ones and never hands them over (its
     * kTLS has the same gap) */
    if (tls13 && type == 22 && len && ((const unsigned char *)in)[0] == 24) s->spent = true;
    return (int)(5 + body);
}

/* ---------------------------------------------------------------- probe */

static int he_tls_probe_pump(SSL *srv, SSL *cli)
{
    int sdone = 0, cdone = 0;
    for (int i = 0; i < 200 && !(sdone && cdone); i++) {
        int r;
        if (!sdone) {
            r = SSL_do_handshake(srv);
            if (r == 1)
                sdone = 1;
            else if (SSL_get_error(srv, r) != SSL_ERROR_WANT_READ &&
                     SSL_get_error(srv, r) != SSL_ERROR_WANT_WRITE)
                return -EPROTO;
        }
        if (!cdone) {
            r = SSL_do_handshake(cli);
            if (r == 1)
                cdone = 1;
            else if (SSL_get_error(cli, r) != SSL_ERROR_WANT_READ &&
                     SSL_get_error(cli, r) != SSL_ERROR_WANT_WRITE)
                return -EPROTO;
        }
    }
    return sdone && cdone ? 0 : -ETIMEDOUT;
}

/* Three records through the filter (one full, one short, one of a byte),
 * read back by the client and compared. */
static int he_tls_probe_data(SSL *srv, SSL *cli)
{
    static const size_t lens[3] = {16384, 1000, 1};
    unsigned char out[16384], in[16384];

    for (int k = 0; k < 3; k++) {
        size_t got = 0;
        for (size_t i = 0; i < lens[k]; i++)
            out[i] = (unsigned char)(i * 7 + (size_t)k);
        if (SSL_write(srv, out, (int)lens[k]) != (int)lens[k]) return -EPROTO;
        for (int i = 0; i < 100 && got < lens[k]; i++) {
            int r = SSL_read(cli, in + got, (int)(sizeof(in) - got));
            if (r > 0)
                got += (size_t)r;
            else if (SSL_get_error(cli, r) != SSL_ERROR_WANT_READ)
                return -EPROTO;
        }
        if (got != lens[k] || memcmp(in, out, got) != 0) return -EPROTO;
    }
    return 0;
}

static int he_tls_probe_one(SSL_CTX *ctx, int version, char *err, size_t errlen)
{
    const char *name = version == TLS1_3_VERSION ? "TLS 1.3" : "TLS 1.2";
    int fds[2] = {-1, -1}, rc = -ENOMEM;
    SSL_CTX *cctx = NULL;
    SSL *srv = NULL, *cli = NULL;
    he_tls_out_t o;
    BIO *f = NULL, *rbio = NULL;

    memset(&o, 0, sizeof(o));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0) {
        rc = -errno;
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return rc;
    }
    if (!(cctx = SSL_CTX_new(TLS_client_method())) || !(srv = SSL_new(ctx)) ||
        !(rbio = BIO_new_socket(fds[0], BIO_NOCLOSE)) || !(f = he__tls_out_new(&o, fds[0]))) {
        BIO_free(rbio);
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    o.seal_ok = true;
    SSL_set_bio(srv, rbio, f); /* the SSL owns both now */
    SSL_set_accept_state(srv);
    /* the handshake and tickets only: the suites are the server's */
    SSL_CTX_set_min_proto_version(cctx, version);
    SSL_CTX_set_max_proto_version(cctx, version);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
    if (!(cli = SSL_new(cctx)) || !SSL_set_fd(cli, fds[1])) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    SSL_set_connect_state(cli);
    if ((rc = he_tls_probe_pump(srv, cli)) < 0) {
        snprintf(err, errlen, "%s handshake over a socketpair failed", name);
        goto out;
    }
    if (!o.seal) {
        rc = -ENOTSUP;
        snprintf(err, errlen, "%s: OpenSSL did not hand the write keys to the BIO", name);
        goto out;
    }
    if ((rc = he_tls_probe_data(srv, cli)) < 0)
        snprintf(err, errlen, "%s: the client could not read the sealed records", name);
out:
    ERR_clear_error();
    SSL_free(cli);
    SSL_free(srv); /* frees the filter and its socket BIO */
    he__tls_out_free(&o);
    SSL_CTX_free(cctx);
    close(fds[0]);
    close(fds[1]);
    return rc;
}

int he__tls_seal_probe(SSL_CTX *ctx, char *err, size_t errlen)
{
    int rc;
    /* the controls are OpenSSL 3.0's internals: another series may differ */
    if ((OpenSSL_version_num() >> 20) != 0x300) {
        snprintf(err, errlen, "OpenSSL %s is not of the 3.0 series",
                 OpenSSL_version(OPENSSL_VERSION_STRING));
        return -ENOTSUP;
    }
    rc = he_tls_probe_one(ctx, TLS1_3_VERSION, err, errlen);
    if (rc == 0) rc = he_tls_probe_one(ctx, TLS1_2_VERSION, err, errlen);
    return rc;
}
