/* Session ticket keys, one process-wide ring shared by every worker and
 * every TLS context (tls.c), so that tickets stay valid across reloads. */
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "server/net/tls.h"

static uint64_t he_tls_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
uint64_t (*he__tls_clock_ms)(void) = he_tls_mono_ms;

/* ---------------------------------------------------------------- ticket keys */

/* Process-wide, so that tickets stay valid across reloads and across the
 * server generations a configuration reload may create. Rotated lazily: the
 * first handshake after rotate_ms makes a new current key; tickets under the
 * previous keys are still accepted (and renewed) until they fall off. */
typedef struct he_tls_tkey {
    unsigned char name[16], aes[32], hmac[32];
} he_tls_tkey_t;

static struct {
    pthread_mutex_t lock;
    he_tls_tkey_t keys[HE_TLS_TKEYS];
    unsigned n;
    uint64_t made_ms; /* when keys[0] became current */
    unsigned rotate_ms;
    uint64_t rotations;
} he_tls_tk = {.lock = PTHREAD_MUTEX_INITIALIZER, .rotate_ms = HE_TLS_ROTATE_DEFAULT_MS};

static int he_tls_tk_new_key(void)
{
    he_tls_tkey_t k;
    if (RAND_bytes((unsigned char *)&k, sizeof(k)) != 1) return -EIO;
    memmove(&he_tls_tk.keys[1], &he_tls_tk.keys[0], sizeof(k) * (HE_TLS_TKEYS - 1));
    he_tls_tk.keys[0] = k;
    if (he_tls_tk.n < HE_TLS_TKEYS) he_tls_tk.n++;
    he_tls_tk.rotations++;
    OPENSSL_cleanse(&k, sizeof(k));
    return 0;
}

/* Under the lock: brings the ring up to date with the clock. */
static int he_tls_tk_advance(uint64_t now)
{
    uint64_t steps;
    if (he_tls_tk.n == 0) {
        he_tls_tk.made_ms = now;
        return he_tls_tk_new_key();
    }
    if (now < he_tls_tk.made_ms + he_tls_tk.rotate_ms) return 0;
    steps = (now - he_tls_tk.made_ms) / he_tls_tk.rotate_ms;
    if (steps > HE_TLS_TKEYS) steps = HE_TLS_TKEYS;
    while (steps--)
        if (he_tls_tk_new_key() < 0) return -EIO;
    he_tls_tk.made_ms = now;
    return 0;
}

int he__tls_ticket_cb(SSL *s, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *ectx,
                      EVP_MAC_CTX *hctx, int enc)
{
    he_tls_tkey_t k;
    char digest[] = "SHA256";
    OSSL_PARAM params[3];
    unsigned idx = 0;
    int ok;

    (void)s;
    pthread_mutex_lock(&he_tls_tk.lock);
    if (he_tls_tk_advance(he__tls_clock_ms()) < 0) {
        pthread_mutex_unlock(&he_tls_tk.lock);
        return -1;
    }
    if (!enc) {
        while (idx < he_tls_tk.n && memcmp(he_tls_tk.keys[idx].name, name, 16) != 0)
            idx++;
        if (idx == he_tls_tk.n) { /* unknown or expired key: full handshake */
            pthread_mutex_unlock(&he_tls_tk.lock);
            return 0;
        }
    }
    k = he_tls_tk.keys[idx];
    pthread_mutex_unlock(&he_tls_tk.lock);

    if (enc) {
        memcpy(name, k.name, 16);
        ok =
            RAND_bytes(iv, 16) == 1 && EVP_EncryptInit_ex(ectx, EVP_aes_256_cbc(), NULL, k.aes, iv);
    } else {
        ok = EVP_DecryptInit_ex(ectx, EVP_aes_256_cbc(), NULL, k.aes, iv);
    }
    params[0] = OSSL_PARAM_construct_octet_string("key", k.hmac, sizeof(k.hmac));
    params[1] = OSSL_PARAM_construct_utf8_string("digest", digest, 0);
    params[2] = OSSL_PARAM_construct_end();
    ok = ok && EVP_MAC_CTX_set_params(hctx, params);
    OPENSSL_cleanse(&k, sizeof(k));
    if (!ok) return -1;
    return enc || idx == 0 ? 1 : 2; /* 2: valid, but issue a ticket under the current key */
}

void he__tls_ticket_rotate_set(unsigned rotate_ms)
{
    pthread_mutex_lock(&he_tls_tk.lock);
    he_tls_tk.rotate_ms = rotate_ms;
    pthread_mutex_unlock(&he_tls_tk.lock);
}
