/* server/net/tls_seal.c: records sealed by hlsedge. The probe is a real
 * handshake (TLS 1.3, then 1.2) between a server SSL over the write filter
 * and an OpenSSL client, whose reads check every sealed record; it fails,
 * and says why, on contexts where OpenSSL hands no keys over. Direct
 * checks: only AES-GCM of TLS 1.2 and 1.3 is taken; a record's header,
 * length and explicit nonce are as the RFCs say; the same plaintext twice
 * never gives the same ciphertext (the nonce moves on); the record opens
 * with the key, nonce and additional data it should have; and a TLS 1.3
 * KeyUpdate spends the keys. */
#include <errno.h>
#include <linux/tls.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <string.h>

#include "he_test.h"
#include "server/net/tls.h"

/* A server context with a fresh P-256 key and a self-signed certificate. */
static SSL_CTX *server_ctx(bool enable_ktls)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509 *x = X509_new();
    HE_CHECK(ctx && key && x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)"seal.test", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    X509_set_pubkey(x, key);
    HE_CHECK(X509_sign(x, key, EVP_sha256()) > 0);
    HE_CHECK_INT(SSL_CTX_use_certificate(ctx, x), 1);
    HE_CHECK_INT(SSL_CTX_use_PrivateKey(ctx, key), 1);
    if (enable_ktls) {
        SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
        SSL_CTX_set_keylog_callback(ctx, he__tls_seal_keylog);
    }
    X509_free(x);
    EVP_PKEY_free(key);
    return ctx;
}

static void test_probe(void)
{
    char err[160] = "";
    SSL_CTX *ctx = server_ctx(true);
    HE_CHECK_INT(he__tls_seal_probe(ctx, err, sizeof(err)), 0);
    SSL_CTX_free(ctx);
    /* without the option OpenSSL keeps the keys: the probe says so */
    ctx = server_ctx(false);
    HE_CHECK_INT(he__tls_seal_probe(ctx, err, sizeof(err)), -ENOTSUP);
    HE_CHECK(strstr(err, "did not hand the write keys") != NULL);
    SSL_CTX_free(ctx);
    /* without the keylog callback the keys after a KeyUpdate never come:
     * the filter seals nothing more, and the probe says so */
    ctx = server_ctx(true);
    SSL_CTX_set_keylog_callback(ctx, NULL);
    HE_CHECK_INT(he__tls_seal_probe(ctx, err, sizeof(err)), -EPROTO);
    HE_CHECK(strstr(err, "after a KeyUpdate") != NULL);
    SSL_CTX_free(ctx);
}

static struct tls12_crypto_info_aes_gcm_128 info128(uint16_t version, uint64_t seq)
{
    struct tls12_crypto_info_aes_gcm_128 g;
    memset(&g, 0, sizeof(g));
    g.info.version = version;
    g.info.cipher_type = TLS_CIPHER_AES_GCM_128;
    for (int i = 0; i < 16; i++)
        g.key[i] = (unsigned char)(0x10 + i);
    for (int i = 0; i < 8; i++)
        g.iv[i] = (unsigned char)(0xa0 + i);
    for (int i = 0; i < 4; i++)
        g.salt[i] = (unsigned char)(0xc0 + i);
    for (int i = 7; i >= 0; i--, seq >>= 8)
        g.rec_seq[i] = (unsigned char)seq;
    return g;
}

static void test_suites_taken(void)
{
    struct tls12_crypto_info_aes_gcm_128 g = info128(TLS_1_3_VERSION, 0);
    struct tls12_crypto_info_chacha20_poly1305 c;
    he_tls_seal_t *s = he__tls_seal_new(&g);
    HE_CHECK(s != NULL);
    he__tls_seal_free(s);
    g.info.version = 0x0302; /* TLS 1.1 */
    HE_CHECK(he__tls_seal_new(&g) == NULL);
    memset(&c, 0, sizeof(c));
    c.info.version = TLS_1_3_VERSION;
    c.info.cipher_type = TLS_CIPHER_CHACHA20_POLY1305;
    HE_CHECK(he__tls_seal_new(&c) == NULL); /* OpenSSL's to seal */
    HE_CHECK(he__tls_seal_new(NULL) == NULL);
}

/* Opens a record with EVP directly: nonce and additional data built here
 * from the RFCs, independently of tls_seal.c. Returns the plaintext
 * length (TLS 1.3: without the inner type, which goes to *type). */
static int open_record(const struct tls12_crypto_info_aes_gcm_128 *g, uint64_t seq,
                       const unsigned char *rec, int len, unsigned char *out, uint8_t *type)
{
    bool tls13 = g->info.version == TLS_1_3_VERSION;
    unsigned char nonce[12], aad[13];
    const unsigned char *ct;
    int n, clen, ok;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

    memcpy(nonce, g->salt, 4);
    if (tls13) {
        memcpy(nonce + 4, g->iv, 8);
        for (int i = 0; i < 8; i++)
            nonce[4 + i] ^= (unsigned char)(seq >> (56 - 8 * i));
        ct = rec + 5;
        clen = len - 5 - 16;
        memcpy(aad, rec, 5);
    } else {
        memcpy(nonce + 4, rec + 5, 8); /* explicit */
        ct = rec + 13;
        clen = len - 13 - 16;
        for (int i = 7; i >= 0; i--)
            aad[7 - i] = (unsigned char)(seq >> (8 * i));
        aad[8] = rec[0];
        aad[9] = 3;
        aad[10] = 3;
        aad[11] = (unsigned char)(clen >> 8);
        aad[12] = (unsigned char)clen;
    }
    ok = EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, g->key, nonce) == 1 &&
         EVP_DecryptUpdate(ctx, NULL, &n, aad, tls13 ? 5 : 13) == 1 &&
         EVP_DecryptUpdate(ctx, out, &n, ct, clen) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, (void *)(ct + clen)) == 1 &&
         EVP_DecryptFinal_ex(ctx, out + clen, &n) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) return -1;
    if (tls13) {
        *type = out[clen - 1];
        return clen - 1;
    }
    *type = rec[0];
    return clen;
}

/* One record from one buffer. */
static int seal_one(he_tls_seal_t *s, uint8_t type, const void *in, size_t len, unsigned char *out)
{
    struct iovec one = {.iov_base = (void *)in, .iov_len = len};
    return he__tls_seal_recordv(s, type, &one, 1, out);
}

static void test_records(uint16_t version)
{
    /* a sequence number about to carry into its second byte */
    struct tls12_crypto_info_aes_gcm_128 g = info128(version, 0xff);
    he_tls_seal_t *s = he__tls_seal_new(&g);
    unsigned char in[HE_TLS_SEAL_MAX_PLAIN], r1[HE_TLS_SEAL_MAX_PLAIN + HE_TLS_SEAL_OVERHEAD],
        r2[sizeof(r1)], out[sizeof(r1)];
    bool tls13 = version == TLS_1_3_VERSION;
    uint8_t type = 0;
    int n1, n2;

    HE_CHECK(s != NULL);
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 31);
    n1 = seal_one(s, 23, in, 1000, r1);
    n2 = seal_one(s, 23, in, 1000, r2);
    HE_CHECK_INT(n1, tls13 ? 5 + 1000 + 1 + 16 : 5 + 8 + 1000 + 16);
    HE_CHECK_INT(n2, n1);
    HE_CHECK(r1[0] == 23 && r1[1] == 3 && r1[2] == 3);
    HE_CHECK_INT(r1[3] << 8 | r1[4], n1 - 5);
    HE_CHECK(memcmp(r1 + 5, r2 + 5, (size_t)n1 - 5) != 0); /* a new nonce each time */
    if (!tls13) {
        HE_CHECK(memcmp(r1 + 5, g.iv, 8) == 0); /* the explicit nonce starts where OpenSSL was */
        HE_CHECK(r2[12] == (unsigned char)(g.iv[7] + 1));
    }
    HE_CHECK_INT(open_record(&g, 0xff, r1, n1, out, &type), 1000);
    HE_CHECK(memcmp(out, in, 1000) == 0 && type == 23);
    HE_CHECK_INT(open_record(&g, 0x100, r2, n2, out, &type), 1000);
    HE_CHECK(memcmp(out, in, 1000) == 0);
    HE_CHECK(open_record(&g, 0xff, r2, n2, out, &type) < 0); /* not under the old number */
    /* an alert: TLS 1.3 hides its type inside, TLS 1.2 shows it */
    n1 = seal_one(s, 21, "\x01\x00", 2, r1);
    HE_CHECK_INT(r1[0], tls13 ? 23 : 21);
    HE_CHECK_INT(open_record(&g, 0x101, r1, n1, out, &type), 2);
    HE_CHECK(type == 21 && out[0] == 1 && out[1] == 0);
    /* a full record */
    n1 = seal_one(s, 23, in, sizeof(in), r1);
    HE_CHECK_INT(open_record(&g, 0x102, r1, n1, out, &type), (int)sizeof(in));
    HE_CHECK(memcmp(out, in, sizeof(in)) == 0);
    HE_CHECK_INT(seal_one(s, 23, in, sizeof(in) + 1, r1), -EPROTO);
    if (tls13) {
        /* KeyUpdate: sealed under these keys, then nothing until the next
         * ones; a secret of a length no suite has spends the keys */
        n1 = seal_one(s, 22, "\x18\x00\x00\x01\x00", 5, r1);
        HE_CHECK_INT(open_record(&g, 0x103, r1, n1, out, &type), 5);
        HE_CHECK_INT(seal_one(s, 23, in, 10, r1), -EPROTO);
        HE_CHECK_INT(he__tls_seal_rekey(s, in, 20), -EINVAL);
        HE_CHECK_INT(seal_one(s, 23, in, 10, r1), -EPROTO);
    } else {
        /* a handshake record (a Finished) leaves the keys usable */
        n1 = seal_one(s, 22, "\x14\x00\x00\x0c", 4, r1);
        HE_CHECK_INT(r1[0], 22);
        HE_CHECK(seal_one(s, 23, in, 10, r1) > 0);
    }
    he__tls_seal_free(s);
}

/* A record sealed from pieces is the record sealed from their whole: the
 * same bytes under the same sequence number, split anywhere (a frame's
 * 9-byte head, a piece that leaves AES's 16-byte blocks mid-way, an empty
 * one), for both versions. */
static void test_pieces(uint16_t version)
{
    struct tls12_crypto_info_aes_gcm_128 g = info128(version, 7);
    he_tls_seal_t *whole = he__tls_seal_new(&g), *split = he__tls_seal_new(&g);
    unsigned char in[HE_TLS_SEAL_MAX_PLAIN], r1[HE_TLS_SEAL_MAX_PLAIN + HE_TLS_SEAL_OVERHEAD],
        r2[sizeof(r1)], out[sizeof(r1)];
    static const size_t cuts[][3] = {{9, 16375, 0}, {1, 0, 999}, {17, 300, 683}, {0, 1000, 0}};
    uint8_t type = 0;

    HE_CHECK(whole != NULL && split != NULL);
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 7 + 3);
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
        size_t len = cuts[k][0] + cuts[k][1] + cuts[k][2];
        struct iovec v[3] = {{in, cuts[k][0]},
                             {in + cuts[k][0], cuts[k][1]},
                             {in + cuts[k][0] + cuts[k][1], cuts[k][2]}};
        int n1 = seal_one(whole, 23, in, len, r1);
        int n2 = he__tls_seal_recordv(split, 23, v, 3, r2);
        HE_CHECK(n1 > 0);
        HE_CHECK_INT(n2, n1);
        HE_CHECK(memcmp(r1, r2, (size_t)n1) == 0);
        HE_CHECK_INT(open_record(&g, 7 + k, r2, n2, out, &type), (int)len);
        HE_CHECK(memcmp(out, in, len) == 0 && type == 23);
    }
    {
        struct iovec v[2] = {{in, 9}, {in, HE_TLS_SEAL_MAX_PLAIN - 8}}; /* a byte too many */
        HE_CHECK_INT(he__tls_seal_recordv(split, 23, v, 2, r2), -EPROTO);
    }
    he__tls_seal_free(whole);
    he__tls_seal_free(split);
}

int main(void)
{
    test_probe();
    test_suites_taken();
    test_records(TLS_1_3_VERSION);
    test_records(TLS_1_2_VERSION);
    test_pieces(TLS_1_3_VERSION);
    test_pieces(TLS_1_2_VERSION);
    HE_TEST_MAIN_END();
}
