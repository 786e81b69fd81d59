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
 * connection but its own filter.
 *
 * A TLS 1.3 KeyUpdate: OpenSSL 3.0 writes the message (sealed here under
 * the old keys, as it must be), then derives its next write secret and
 * never hands the keys over, which breaks its kTLS. It does log the
 * secret (SSL_CTX_set_keylog_callback, SERVER_TRAFFIC_SECRET_N), so the
 * callback gives it to the filter, which derives the key and IV from it
 * (RFC 8446 7.1, 7.3) and starts again at sequence number 0. Until then
 * nothing is sealed; without it the connection cannot send. */
#include <errno.h>
#include <linux/tls.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "server/net/tls.h"

struct he_tls_seal {
    EVP_CIPHER_CTX *ctx;
    unsigned char iv[12]; /* 1.3: the write IV; 1.2: salt then explicit nonce */
    uint64_t seq;         /* the next record's sequence number */
    uint16_t version;     /* TLS1_2_VERSION or TLS1_3_VERSION */
    uint8_t key_len;      /* 16 or 32 */
    bool rekey_wait;      /* a KeyUpdate went: the next keys come by he__tls_seal_rekey */
    bool spent;           /* the cipher failed: nothing more is sealed */
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
    s->key_len = info->cipher_type == TLS_CIPHER_AES_GCM_128 ? 16 : 32;
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

int he__tls_seal_recordv(he_tls_seal_t *s, uint8_t type, const struct iovec *in, int count,
                         unsigned char *out)
{
    bool tls13 = s->version == TLS_1_3_VERSION;
    size_t len = 0, body;
    unsigned char nonce[12], aad[13], *ct, *at;
    int n;

    for (int i = 0; i < count; i++)
        len += in[i].iov_len;
    if (s->spent || s->rekey_wait || len > HE_TLS_SEAL_MAX_PLAIN) return -EPROTO;
    body = tls13 ? len + 1 + 16 : 8 + len + 16;
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
    at = ct;
    if (EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, nonce) != 1 ||
        EVP_EncryptUpdate(s->ctx, NULL, &n, tls13 ? out : aad, tls13 ? 5 : 13) != 1)
        goto failed;
    /* GCM is a stream: the pieces' ciphertext is the whole's */
    for (int i = 0; i < count; i++) {
        if (in[i].iov_len &&
            EVP_EncryptUpdate(s->ctx, at, &n, in[i].iov_base, (int)in[i].iov_len) != 1)
            goto failed;
        at += in[i].iov_len;
    }
    if ((tls13 && EVP_EncryptUpdate(s->ctx, ct + len, &n, &type, 1) != 1) ||
        EVP_EncryptFinal_ex(s->ctx, ct + len + tls13, &n) != 1 ||
        EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG, 16, ct + len + tls13) != 1)
        goto failed;
    s->seq++;
    if (!tls13) { /* the explicit nonce counts up, as a big-endian integer */
        for (int i = 11; i >= 4 && ++s->iv[i] == 0; i--)
            ;
    }
    /* KeyUpdate (handshake type 24): sealed under the old keys; the next
     * record waits for the new ones */
    if (tls13 && type == 22 && len && count && in[0].iov_len &&
        ((const unsigned char *)in[0].iov_base)[0] == 24)
        s->rekey_wait = true;
    return (int)(5 + body);

failed:
    ERR_clear_error();
    s->spent = true; /* what went wrong once is not tried again */
    return -EPROTO;
}

/* HKDF-Expand-Label(secret, label, "", out_len) of RFC 8446 7.1. */
static int he_tls_seal_expand(const char *digest, const unsigned char *secret, size_t secret_len,
                              const char *label, unsigned char *out, size_t out_len)
{
    unsigned char info[2 + 1 + 255 + 1];
    size_t llen = 6 + strlen(label), n = 0;
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY, rc;
    EVP_KDF *kdf;
    EVP_KDF_CTX *kctx;
    OSSL_PARAM params[5];

    info[n++] = (unsigned char)(out_len >> 8);
    info[n++] = (unsigned char)out_len;
    info[n++] = (unsigned char)llen;
    memcpy(info + n, "tls13 ", 6);
    memcpy(info + n + 6, label, llen - 6);
    n += llen;
    info[n++] = 0; /* an empty context */
    params[0] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)digest, 0);
    params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)secret, secret_len);
    params[3] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n);
    params[4] = OSSL_PARAM_construct_end();
    if (!(kdf = EVP_KDF_fetch(NULL, "HKDF", NULL))) return -ENOTSUP;
    kctx = EVP_KDF_CTX_new(kdf);
    EVP_KDF_free(kdf);
    if (!kctx) return -ENOMEM;
    rc = EVP_KDF_derive(kctx, out, out_len, params) == 1 ? 0 : -EPROTO;
    EVP_KDF_CTX_free(kctx);
    return rc;
}

int he__tls_seal_rekey(he_tls_seal_t *s, const unsigned char *secret, size_t len)
{
    /* the suite's hash by its length: SHA-256 for AES-128-GCM, SHA-384 for 256 */
    const char *digest = len == 32 ? "SHA256" : len == 48 ? "SHA384" : NULL;
    unsigned char key[32], iv[12];
    int rc = -EINVAL;

    if (s->version != TLS_1_3_VERSION || !digest) goto fail;
    if ((rc = he_tls_seal_expand(digest, secret, len, "key", key, s->key_len)) < 0 ||
        (rc = he_tls_seal_expand(digest, secret, len, "iv", iv, sizeof(iv))) < 0)
        goto fail;
    if (EVP_EncryptInit_ex(s->ctx, NULL, NULL, key, NULL) != 1) {
        rc = -EPROTO;
        goto fail;
    }
    memcpy(s->iv, iv, sizeof(iv));
    s->seq = 0;
    s->rekey_wait = false;
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(iv, sizeof(iv));
    return 0;
fail:
    ERR_clear_error();
    OPENSSL_cleanse(key, sizeof(key));
    s->spent = true;
    return rc;
}

void he__tls_seal_keylog(const SSL *ssl, const char *line)
{
    static const char label[] = "SERVER_TRAFFIC_SECRET_N ";
    he_tls_out_t *o;
    unsigned char secret[64];
    const char *p;
    size_t n = 0;

    /* every secret of every handshake comes here: the label first */
    if (strncmp(line, label, sizeof(label) - 1) != 0) return;
    o = he__tls_out_of(SSL_get_wbio(ssl));
    if (!o || !o->seal) return;
    p = strchr(line + sizeof(label) - 1, ' '); /* past the client random */
    if (!p) return;
    for (p++; n < sizeof(secret) && OPENSSL_hexchar2int((unsigned char)p[0]) >= 0 &&
              OPENSSL_hexchar2int((unsigned char)p[1]) >= 0;
         p += 2)
        secret[n++] = (unsigned char)(OPENSSL_hexchar2int((unsigned char)p[0]) << 4 |
                                      OPENSSL_hexchar2int((unsigned char)p[1]));
    he__tls_seal_rekey(o->seal, secret, n);
    OPENSSL_cleanse(secret, sizeof(secret));
}

/* ---------------------------------------------------------------- probe */

/* One step of a side's handshake: 0 (done is set once it completes) or
 * -EPROTO when it failed. */
static int he_tls_probe_step(SSL *s, bool *done)
{
    int r, e;
    if (*done) return 0;
    r = SSL_do_handshake(s);
    if (r == 1) {
        *done = true;
        return 0;
    }
    e = SSL_get_error(s, r);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -EPROTO;
}

static int he_tls_probe_pump(SSL *srv, SSL *cli)
{
    bool sdone = false, cdone = false;
    for (int i = 0; i < 200 && !(sdone && cdone); i++)
        if (he_tls_probe_step(srv, &sdone) < 0 || he_tls_probe_step(cli, &cdone) < 0)
            return -EPROTO;
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

/* The client asks for a KeyUpdate (TLS 1.3): the server's next write
 * seals the KeyUpdate under the old keys and its records under the new
 * ones, which only the keylog callback brings to the filter. */
static int he_tls_probe_key_update(SSL *srv, SSL *cli)
{
    unsigned char b[16];
    int r = 0;

    if (SSL_key_update(cli, SSL_KEY_UPDATE_REQUESTED) != 1 || SSL_write(cli, "k", 1) != 1)
        return -EPROTO;
    for (int i = 0; i < 100 && r <= 0; i++) {
        r = SSL_read(srv, b, sizeof(b));
        if (r <= 0 && SSL_get_error(srv, r) != SSL_ERROR_WANT_READ) return -EPROTO;
    }
    if (r != 1 || b[0] != 'k') return -EPROTO;
    return he_tls_probe_data(srv, cli);
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
    else if (version == TLS1_3_VERSION && (rc = he_tls_probe_key_update(srv, cli)) < 0)
        snprintf(err, errlen, "%s: the client could not read the records after a KeyUpdate", name);
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
