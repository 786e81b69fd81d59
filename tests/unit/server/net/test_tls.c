/* server/tls.c: the contexts hlsedge builds, checked by real handshakes
 * in-process: an OpenSSL client and the server's SSL over a socketpair,
 * both non-blocking and stepped in turn. Versions, suites and server
 * preference, ALPN, SNI selection, session resumption by ticket and by the
 * session cache, ticket key rotation (the clock is injected), reload, and
 * the error text for bad certificate and key files. Certificates come from
 * the openssl command line (skipped, 77, without it). */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "he_test.h"
#include "server/net/tls.c"
#include "server/net/tls_ticket.c"

static char dir[] = "/tmp/he-test-tls-XXXXXX";
static char pem_a[256], pem_b[256], pem_key_only[256], pem_cert_only[256], pem_mismatch[256],
    pem_garbage[256], pem_t61[256];
static uint64_t fake_now = 1000000;

static uint64_t fake_clock(void)
{
    return fake_now;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static int make_certs(void)
{
    if (!mkdtemp(dir)) return -1;
    if (sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
           "-subj /CN=ca -keyout ca.key -out ca.crt >/dev/null 2>&1",
           dir) != 0)
        return -1;
    if (sh("cd %s && openssl req -newkey rsa:2048 -nodes -subj /CN=a.test -keyout a.key -out a.csr "
           ">/dev/null 2>&1 && printf 'subjectAltName=DNS:a.test,DNS:www.a.test\\n' > a.ext && "
           "openssl x509 -req -in a.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
           "-extfile a.ext -out a.crt >/dev/null 2>&1 && cat a.crt ca.crt a.key > a.pem",
           dir) != 0)
        return -1;
    if (sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "
           "/CN=b.test "
           "-keyout b.key -out b.csr >/dev/null 2>&1 && printf "
           "'subjectAltName=DNS:*.b.test,DNS:b.test\\n'"
           " > b.ext && openssl x509 -req -in b.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "
           "2 "
           "-extfile b.ext -out b.crt >/dev/null 2>&1 && cat b.crt b.key > b.pem",
           dir) != 0)
        return -1;
    if (sh("cd %s && cp a.key key_only.pem && cp a.crt cert_only.pem && cat a.crt b.key > "
           "mismatch.pem && printf 'not a certificate\\n' > garbage.pem",
           dir) != 0)
        return -1;
    snprintf(pem_a, sizeof(pem_a), "%s/a.pem", dir);
    snprintf(pem_b, sizeof(pem_b), "%s/b.pem", dir);
    snprintf(pem_key_only, sizeof(pem_key_only), "%s/key_only.pem", dir);
    snprintf(pem_cert_only, sizeof(pem_cert_only), "%s/cert_only.pem", dir);
    snprintf(pem_mismatch, sizeof(pem_mismatch), "%s/mismatch.pem", dir);
    /* a CN in a T61String holds raw bytes: 0xff, which is not UTF-8 */
    if (sh("cd %s && printf '[req]\\ndistinguished_name=dn\\nstring_mask=nombstr\\n[dn]\\n' > "
           "t61.cnf && openssl req -config t61.cnf -x509 -newkey ec -pkeyopt "
           "ec_paramgen_curve:P-256 -nodes -days 2 -subj \"/CN=$(printf '\\377').test\" -keyout "
           "t61.key -out t61.crt >/dev/null 2>&1 && cat t61.crt t61.key > t61.pem",
           dir) != 0)
        return -1;
    snprintf(pem_garbage, sizeof(pem_garbage), "%s/garbage.pem", dir);
    snprintf(pem_t61, sizeof(pem_t61), "%s/t61.pem", dir);
    return 0;
}

static void conf_init(he_conf_t *conf, const char *const *files, unsigned n)
{
    he_conf_defaults(conf);
    for (unsigned i = 0; i < n; i++)
        snprintf(conf->tls_certs[i], sizeof(conf->tls_certs[i]), "%s", files[i]);
    conf->ntls_certs = n;
    conf->tls_ktls = true;
    conf->tls_tickets = true;
    conf->tls_session_cache = 100;
    conf->tls_ticket_rotate_ms = 60000;
}

/* ---------------------------------------------------------------- handshakes */

typedef struct hs {
    int ok;           /* 1 both sides finished, 0 failed */
    char version[16]; /* as the client sees it */
    char cipher[64];
    char cn[64]; /* server certificate's CN */
    char alpn[32];
    int reused;
    SSL_SESSION *sess; /* the client's, for resumption (caller frees) */
} hs_t;

typedef struct client_opts {
    int min, max;
    const char *ciphers12; /* NULL = default */
    const char *suites13;
    const char *sni;
    const unsigned char *alpn;
    unsigned alpn_len;
    SSL_SESSION *resume;
} client_opts_t;

/* One handshake, then one byte each way (TLS 1.3 tickets arrive after the
 * handshake and need a read to be processed). */
static hs_t handshake(he_tls_t *tls, const client_opts_t *o)
{
    hs_t r;
    int sv[2];
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL *c, *s;
    he_tls_set_t *set = NULL;
    int cdone = 0, sdone = 0;
    char byte;

    memset(&r, 0, sizeof(r));
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    SSL_CTX_set_security_level(cctx, 0);
    SSL_CTX_set_min_proto_version(cctx, o->min ? o->min : TLS1_VERSION);
    SSL_CTX_set_max_proto_version(cctx, o->max ? o->max : TLS1_3_VERSION);
    if (o->ciphers12) SSL_CTX_set_cipher_list(cctx, o->ciphers12);
    if (o->suites13) SSL_CTX_set_ciphersuites(cctx, o->suites13);
    /* no client cache: freeing it would mark our sessions not resumable */
    SSL_CTX_set_session_cache_mode(cctx, SSL_SESS_CACHE_OFF);
    c = SSL_new(cctx);
    SSL_set_fd(c, sv[0]);
    SSL_set_connect_state(c);
    if (o->sni) SSL_set_tlsext_host_name(c, o->sni);
    if (o->alpn) SSL_set_alpn_protos(c, o->alpn, o->alpn_len);
    if (o->resume) SSL_set_session(c, o->resume);
    s = he__tls_ssl_new(tls, 0, &set);
    SSL_set_bio(s, BIO_new_socket(sv[1], BIO_NOCLOSE), BIO_new_socket(sv[1], BIO_NOCLOSE));
    SSL_set_accept_state(s);

    for (int i = 0; i < 200 && !(cdone && sdone); i++) {
        int rc;
        if (!cdone) {
            rc = SSL_do_handshake(c);
            if (rc == 1)
                cdone = 1;
            else if (SSL_get_error(c, rc) != SSL_ERROR_WANT_READ &&
                     SSL_get_error(c, rc) != SSL_ERROR_WANT_WRITE)
                break;
        }
        if (!sdone) {
            rc = SSL_do_handshake(s);
            if (rc == 1)
                sdone = 1;
            else if (SSL_get_error(s, rc) != SSL_ERROR_WANT_READ &&
                     SSL_get_error(s, rc) != SSL_ERROR_WANT_WRITE)
                break;
        }
    }
    if (cdone && sdone) {
        const unsigned char *a;
        unsigned alen;
        X509 *x = SSL_get1_peer_certificate(c);
        r.ok = 1;
        snprintf(r.version, sizeof(r.version), "%s", SSL_get_version(c));
        snprintf(r.cipher, sizeof(r.cipher), "%s", SSL_get_cipher_name(c));
        if (x) {
            X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, r.cn, sizeof(r.cn));
            X509_free(x);
        }
        SSL_get0_alpn_selected(c, &a, &alen);
        if (a && alen < sizeof(r.alpn)) memcpy(r.alpn, a, alen);
        r.reused = SSL_session_reused(c);
        /* application data both ways, so post-handshake tickets land */
        SSL_write(s, "s", 1);
        for (int i = 0; i < 10 && SSL_read(c, &byte, 1) <= 0; i++)
            ;
        SSL_write(c, "c", 1);
        for (int i = 0; i < 10 && SSL_read(s, &byte, 1) <= 0; i++)
            ;
        r.sess = SSL_get1_session(c);
        /* a session freed without close_notify is not resumable */
        SSL_shutdown(c);
        SSL_shutdown(s);
    }
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);
    he__tls_set_release(set);
    SSL_CTX_free(cctx);
    close(sv[0]);
    close(sv[1]);
    return r;
}

/* ---------------------------------------------------------------- tests */

static void test_versions_and_suites(he_tls_t *tls)
{
    client_opts_t o = {0};
    hs_t r;

    r = handshake(tls, &o);
    HE_CHECK(r.ok);
    HE_CHECK_STR(r.version, "TLSv1.3");
    HE_CHECK_STR(r.cipher, "TLS_AES_128_GCM_SHA256"); /* server preference */
    SSL_SESSION_free(r.sess);

    o.max = TLS1_2_VERSION;
    r = handshake(tls, &o);
    HE_CHECK(r.ok);
    HE_CHECK_STR(r.version, "TLSv1.2");
    HE_CHECK_STR(r.cipher, "ECDHE-RSA-AES128-GCM-SHA256");
    SSL_SESSION_free(r.sess);

    /* the client's order does not matter */
    o.ciphers12 =
        "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256";
    r = handshake(tls, &o);
    HE_CHECK_STR(r.cipher, "ECDHE-RSA-AES128-GCM-SHA256");
    SSL_SESSION_free(r.sess);
    o.ciphers12 = "ECDHE-RSA-CHACHA20-POLY1305";
    r = handshake(tls, &o);
    HE_CHECK_STR(r.cipher, "ECDHE-RSA-CHACHA20-POLY1305");
    SSL_SESSION_free(r.sess);

    /* refused: old versions, CBC, RSA key exchange, non-AEAD TLS 1.3 */
    o.ciphers12 = "ALL:@SECLEVEL=0";
    o.max = TLS1_1_VERSION;
    HE_CHECK(!handshake(tls, &o).ok);
    o.max = TLS1_VERSION;
    HE_CHECK(!handshake(tls, &o).ok);
    o.max = TLS1_2_VERSION;
    o.ciphers12 = "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA384";
    HE_CHECK(!handshake(tls, &o).ok);
    o.ciphers12 = "AES128-GCM-SHA256:AES256-GCM-SHA384";
    HE_CHECK(!handshake(tls, &o).ok);
    o.ciphers12 = NULL;
    o.min = o.max = TLS1_3_VERSION;
    o.suites13 = "TLS_AES_128_CCM_SHA256";
    HE_CHECK(!handshake(tls, &o).ok);
    o.suites13 = "TLS_CHACHA20_POLY1305_SHA256";
    r = handshake(tls, &o);
    HE_CHECK_STR(r.cipher, "TLS_CHACHA20_POLY1305_SHA256");
    SSL_SESSION_free(r.sess);
}

static void test_alpn_and_sni(he_tls_t *tls)
{
    static const unsigned char both[] = "\x02h2\x08http/1.1", h2[] = "\x02h2";
    client_opts_t o = {0};
    hs_t r;

    o.alpn = both;
    o.alpn_len = sizeof(both) - 1;
    r = handshake(tls, &o);
    HE_CHECK_STR(r.alpn, "h2"); /* http2.tls (the default): h2 preferred */
    HE_CHECK_STR(r.cn, "a.test"); /* no SNI: the default (first) certificate */
    SSL_SESSION_free(r.sess);
    o.alpn = h2;
    o.alpn_len = sizeof(h2) - 1;
    r = handshake(tls, &o);
    HE_CHECK_STR(r.alpn, "h2");
    SSL_SESSION_free(r.sess);
    o.alpn = both + 3; /* http/1.1 alone */
    o.alpn_len = sizeof(both) - 4;
    r = handshake(tls, &o);
    HE_CHECK_STR(r.alpn, "http/1.1");
    SSL_SESSION_free(r.sess);

    o.alpn = NULL;
    {
        static const struct {
            const char *sni, *cn;
        } cases[] = {{"a.test", "a.test"},   {"WWW.A.TEST", "a.test"}, {"b.test", "b.test"},
                     {"x.b.test", "b.test"}, {"x.y.b.test", "a.test"}, {"other", "a.test"}};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            o.sni = cases[i].sni;
            r = handshake(tls, &o);
            HE_CHECK(r.ok);
            if (strcmp(r.cn, cases[i].cn) != 0)
                fprintf(stderr, "SNI %s: got %s, expected %s\n", o.sni, r.cn, cases[i].cn);
            HE_CHECK_STR(r.cn, cases[i].cn);
            SSL_SESSION_free(r.sess);
        }
    }
    /* the matcher itself */
    HE_CHECK(he_tls_name_match("*.b.test", "x.b.test"));
    HE_CHECK(!he_tls_name_match("*.b.test", "b.test"));
    HE_CHECK(!he_tls_name_match("*.b.test", ".b.test"));
    HE_CHECK(!he_tls_name_match("*.b.test", "x.y.b.test"));
    HE_CHECK(he_tls_name_match("a.test", "A.Test"));
}

/* Resumes sess until it fails or n times; returns how many resumed. */
static int resume_chain(he_tls_t *tls, client_opts_t *o, SSL_SESSION *sess, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        hs_t r;
        o->resume = sess;
        r = handshake(tls, o);
        if (!r.ok || !r.reused) {
            SSL_SESSION_free(r.sess);
            break;
        }
        ok++;
        SSL_SESSION_free(sess);
        sess = r.sess;
    }
    SSL_SESSION_free(sess);
    o->resume = NULL;
    return ok;
}

static void test_tickets_and_rotation(he_tls_t *tls)
{
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        client_opts_t o = {.min = v, .max = v};
        hs_t r = handshake(tls, &o), r2;
        HE_CHECK(r.ok && !r.reused && r.sess);
        HE_CHECK_INT(resume_chain(tls, &o, SSL_SESSION_dup(r.sess), 2), 2);

        /* one rotation: the old key still decrypts (and the ticket is renewed) */
        fake_now += 60000;
        o.resume = r.sess;
        r2 = handshake(tls, &o);
        HE_CHECK(r2.ok && r2.reused);
        SSL_SESSION_free(r2.sess);
        /* three rotations later the key has left the ring: a full handshake */
        fake_now += 3 * 60000;
        r2 = handshake(tls, &o);
        HE_CHECK(r2.ok);
        HE_CHECK(!r2.reused);
        SSL_SESSION_free(r2.sess);
        SSL_SESSION_free(r.sess);
    }
    HE_CHECK(he_tls_tk.n == HE_TLS_TKEYS);
}

static void test_session_cache_without_tickets(void)
{
    static const char *const files[] = {pem_a};
    he_conf_t *conf = calloc(1, sizeof(*conf));
    he_features_t f = {0};
    he_tls_t *tls;
    char err[512];

    conf_init(conf, files, 1);
    conf->tls_tickets = false;
    HE_CHECK_INT(he_tls_new(&tls, conf, &f, 1, err, sizeof(err)), 0);
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        client_opts_t o = {.min = v, .max = v};
        hs_t r = handshake(tls, &o);
        HE_CHECK(r.ok);
        HE_CHECK_INT(resume_chain(tls, &o, r.sess, 2), 2); /* from the session cache */
    }
    he_tls_free(tls);
    /* neither tickets nor cache: no resumption */
    conf->tls_session_cache = 0;
    HE_CHECK_INT(he_tls_new(&tls, conf, &f, 1, err, sizeof(err)), 0);
    for (int v = TLS1_2_VERSION; v <= TLS1_3_VERSION; v++) {
        client_opts_t o = {.min = v, .max = v};
        hs_t r = handshake(tls, &o);
        HE_CHECK(r.ok);
        HE_CHECK_INT(resume_chain(tls, &o, r.sess, 1), 0);
    }
    he_tls_free(tls);
    free(conf);
}

/* http2.tls: false offers http/1.1 alone; a client offering only h2 goes
 * on without ALPN. */
static void test_alpn_without_h2(void)
{
    static const char *const files[] = {pem_a};
    static const unsigned char both[] = "\x02h2\x08http/1.1", h2[] = "\x02h2";
    he_conf_t *conf = calloc(1, sizeof(*conf));
    he_features_t f = {0};
    client_opts_t o = {0};
    he_tls_t *tls;
    char err[512];
    hs_t r;

    conf_init(conf, files, 1);
    conf->http2_tls = false;
    HE_CHECK_INT(he_tls_new(&tls, conf, &f, 1, err, sizeof(err)), 0);
    o.alpn = both;
    o.alpn_len = sizeof(both) - 1;
    r = handshake(tls, &o);
    HE_CHECK_STR(r.alpn, "http/1.1");
    SSL_SESSION_free(r.sess);
    o.alpn = h2;
    o.alpn_len = sizeof(h2) - 1;
    r = handshake(tls, &o);
    HE_CHECK(r.ok); /* no common protocol: no ALPN, no failure */
    HE_CHECK_STR(r.alpn, "");
    SSL_SESSION_free(r.sess);
    he_tls_free(tls);
    free(conf);
}

static void test_bad_files(void)
{
    static const struct {
        const char *file, *want;
    } cases[] = {
        {"/nonexistent/x.pem", "No such file or directory"},
        {pem_garbage, "no usable PEM certificate"},
        {pem_key_only, "no usable PEM certificate"},
        {pem_cert_only, "no usable private key"},
        {pem_mismatch, "does not match the certificate"},
    };
    he_conf_t *conf = calloc(1, sizeof(*conf));
    he_features_t f = {0};
    he_tls_t *tls;
    char err[512];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *files[] = {pem_a, cases[i].file};
        conf_init(conf, files, 2);
        err[0] = 0;
        HE_CHECK(he_tls_new(&tls, conf, &f, 1, err, sizeof(err)) < 0);
        HE_CHECK(tls == NULL);
        if (!strstr(err, cases[i].want) || !strstr(err, cases[i].file))
            fprintf(stderr, "error for %s: \"%s\"\n", cases[i].file, err);
        HE_CHECK(strstr(err, cases[i].want) != NULL);
        HE_CHECK(strstr(err, "tls.certificates: ") == err || cases[i].file[0] != '/');
    }
    conf_init(conf, NULL, 0);
    HE_CHECK(he_tls_new(&tls, conf, &f, 1, err, sizeof(err)) < 0);
    HE_CHECK(strstr(err, "tls.certificates") != NULL);
    free(conf);
}

static void test_reload_and_describe(void)
{
    static const char *const one[] = {pem_a}, *const two[] = {pem_b, pem_a},
                             *const bad[] = {pem_b, pem_garbage};
    he_conf_t *conf = calloc(1, sizeof(*conf));
    he_features_t f = {0};
    he_server_t s;
    he_tls_t *tls;
    char err[512], desc[4096];
    client_opts_t o = {0};
    hs_t r;

    conf_init(conf, one, 1);
    HE_CHECK_INT(he_tls_new(&tls, conf, &f, 2, err, sizeof(err)), 0);
    r = handshake(tls, &o);
    HE_CHECK_STR(r.cn, "a.test");
    SSL_SESSION_free(r.sess);

    conf_init(conf, bad, 2);
    HE_CHECK(he_tls_reload(tls, conf, err, sizeof(err)) < 0);
    HE_CHECK(strstr(err, "garbage.pem") != NULL);
    r = handshake(tls, &o);
    HE_CHECK_STR(r.cn, "a.test"); /* the old ones stay */
    SSL_SESSION_free(r.sess);

    conf_init(conf, two, 2);
    HE_CHECK_INT(he_tls_reload(tls, conf, err, sizeof(err)), 0);
    r = handshake(tls, &o);
    HE_CHECK_STR(r.cn, "b.test"); /* the new default */
    SSL_SESSION_free(r.sess);

    memset(&s, 0, sizeof(s));
    s.conf = conf;
    s.tls = tls;
    he_tls_describe(&s, NULL, desc, sizeof(desc));
    HE_CHECK(strstr(desc, "\"enabled\":true") != NULL);
    HE_CHECK(strstr(desc, "\"names\":[\"*.b.test\",\"b.test\"]") != NULL);
    HE_CHECK(strstr(desc, "\"key\":\"EC P-256\"") != NULL);
    HE_CHECK(strstr(desc, "\"key\":\"RSA 2048\"") != NULL);
    HE_CHECK(strstr(desc, "\"ktls\":\"off (kernel has no tls ULP)\"") != NULL);
    HE_CHECK(strstr(desc, "\"reloads\":1,\"reload_errors\":1") != NULL);
    HE_CHECK(desc[strlen(desc) - 1] == '}');
    {
        /* the counters given (the process's), not those of s's workers */
        he_stats_t *t = calloc(1, sizeof(*t));
        t->tls_handshakes = 7;
        t->tls_resumed = 3;
        t->tls_errors[HE_STATS_TLS_ERR_GARBAGE] = 2;
        t->tls_bytes_ktls = 1234;
        he_tls_describe(&s, t, desc, sizeof(desc));
        HE_CHECK(strstr(desc, "\"handshakes\":7,\"resumed\":3,") != NULL);
        HE_CHECK(strstr(desc, "\"garbage\":2,") != NULL);
        HE_CHECK(strstr(desc, "\"bytes\":{\"ktls\":1234,") != NULL);
        free(t);
    }
    /* a small buffer: cut, never overrun */
    he_tls_describe(&s, NULL, desc, 40);
    HE_CHECK(strlen(desc) == 39);
    s.tls = NULL;
    he_tls_describe(&s, NULL, desc, sizeof(desc));
    HE_CHECK_STR(desc, "{\"enabled\":false}");
    he_tls_free(tls);

    conf->tls_ktls = false;
    HE_CHECK_INT(he_tls_new(&tls, conf, &f, 1, err, sizeof(err)), 0);
    HE_CHECK_STR(he_tls_ktls_state(tls), "off (disabled by config)");
    he_tls_free(tls);
    free(conf);
}

/* A certificate name that is not UTF-8 still makes valid JSON. */
static void test_describe_non_utf8(void)
{
    static const char *const files[] = {pem_t61};
    he_conf_t *conf = calloc(1, sizeof(*conf));
    he_features_t f = {0};
    he_server_t s;
    char err[512], desc[4096];

    conf_init(conf, files, 1);
    memset(&s, 0, sizeof(s));
    s.conf = conf;
    HE_CHECK_INT(he_tls_new(&s.tls, conf, &f, 1, err, sizeof(err)), 0);
    if (s.tls) {
        he_tls_describe(&s, NULL, desc, sizeof(desc));
        HE_CHECK(strstr(desc, "\"names\":[\"\\ufffd.test\"]") != NULL);
        HE_CHECK(strchr(desc, '\xff') == NULL);
        he_tls_free(s.tls);
    }
    free(conf);
}

int main(void)
{
    static const char *const files[] = {pem_a, pem_b};
    he_conf_t *conf;
    he_features_t f = {0};
    he_tls_t *tls;
    char err[512];

    signal(SIGPIPE, SIG_IGN);
    if (make_certs() < 0) {
        fprintf(stderr, "test_tls: openssl command line unavailable, skipped\n");
        return 77;
    }
    he__tls_clock_ms = fake_clock;
    conf = calloc(1, sizeof(*conf));
    conf_init(conf, files, 2);
    HE_CHECK_INT(he_tls_new(&tls, conf, &f, 1, err, sizeof(err)), 0);
    if (tls) {
        test_versions_and_suites(tls);
        test_alpn_and_sni(tls);
        test_tickets_and_rotation(tls);
        he_tls_free(tls);
    }
    test_session_cache_without_tickets();
    test_alpn_without_h2();
    test_bad_files();
    test_reload_and_describe();
    test_describe_non_utf8();
    free(conf);
    sh("rm -rf %s", dir);
    HE_TEST_MAIN_END();
}
