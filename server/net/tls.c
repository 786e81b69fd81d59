/* TLS contexts: one SSL_CTX per certificate, chosen by SNI; protocol and
 * suite policy; ALPN (h2, http/1.1); OCSP stapling; session tickets and cache; reload;
 * the description for the log and /stats. Per-connection I/O is in
 * tls_conn.c, the ticket keys in tls_ticket.c.
 *
 * Sharing across workers: every worker makes its SSLs from the same
 * contexts, so OpenSSL's session cache (kept in the first context, the
 * session context of every SSL) is shared, and the ticket keys are one
 * process-wide ring. A reload builds a new set of contexts and swaps a
 * pointer under a mutex; each worker notices the new generation with one
 * atomic load per accepted connection and takes a reference, and a set is
 * freed with its last connection. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/base/buf.h"
#include "server/base/log.h"
#include "server/net/tls.h"

/* TLS 1.2: forward secrecy and AEAD only; AES-GCM first (AES-NI). */
#define HE_TLS12_CIPHERS                                                                           \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                                   \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                                   \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define HE_TLS13_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define HE_TLS_GROUPS "X25519:P-256:P-384"
#define HE_TLS_HANDSHAKE_DEFAULT_MS 10000u
#define HE_TLS_MAX_NAMES 64

typedef struct he_tls_cert {
    SSL_CTX *ctx;
    he_tls_set_t *set;
    char file[PATH_MAX];
    char *names[HE_TLS_MAX_NAMES]; /* lower case; "*.example.com" for wildcards */
    unsigned nnames;
    unsigned char *ocsp; /* DER OCSP response to staple, or NULL */
    long ocsp_len;
    char not_after[32];
    char key[24]; /* "RSA 2048", "EC P-256" */
} he_tls_cert_t;

struct he_tls_set {
    atomic_uint refs; /* he_tls.cur, each worker's cached pointer, each connection */
    bool ktls;        /* kTLS set-up goes to the kernel */
    bool seal;        /* else hlsedge seals the records (tls.seal_records, probed) */
    unsigned ncerts;
    he_tls_cert_t certs[HE_CONF_MAX_CERTS];
};

typedef struct he_tls_worker {
    he_tls_set_t *set; /* the set this worker hands to new connections */
    unsigned gen;
    char stage[HE_TLS_STAGE];
} __attribute__((aligned(64))) he_tls_worker_t;

struct he_tls {
    pthread_mutex_t lock; /* cur, and the fields below it */
    he_tls_set_t *cur;
    atomic_uint gen;
    he_tls_worker_t *pw;
    unsigned nworkers;
    char ktls_state[96];
    char seal_state[192]; /* tls.seal_records: "on", or off and why */
    bool tickets;
    unsigned rotate_ms, session_cache, handshake_timeout_ms;
    unsigned reloads, reload_errors;
    char reload_err[HE_CONF_ERR_MAX];
};

/* ---------------------------------------------------------------- callbacks */

static bool he_tls_name_match(const char *pattern, const char *name)
{
    const char *dot;
    if (strcasecmp(pattern, name) == 0) return true;
    if (pattern[0] != '*' || pattern[1] != '.') return false;
    dot = strchr(name, '.'); /* a wildcard covers exactly one label */
    return dot && dot != name && strcasecmp(pattern + 1, dot) == 0;
}

/* The certificate for an SNI name: exact names win over wildcards, earlier
 * certificates over later ones; NULL when none matches (the default then). */
static he_tls_cert_t *he_tls_set_pick(he_tls_set_t *set, const char *name)
{
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < set->ncerts; i++)
            for (unsigned j = 0; j < set->certs[i].nnames; j++) {
                const char *p = set->certs[i].names[j];
                bool wild = p[0] == '*';
                if (wild == (pass == 1) && he_tls_name_match(p, name)) return &set->certs[i];
            }
    return NULL;
}

static int he_tls_sni_cb(SSL *s, int *al, void *arg)
{
    he_tls_set_t *set = arg;
    const char *name = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    he_tls_cert_t *c;
    (void)al;
    if (!name || set->ncerts < 2) return SSL_TLSEXT_ERR_OK;
    c = he_tls_set_pick(set, name);
    if (c && c->ctx != SSL_get_SSL_CTX(s)) SSL_set_SSL_CTX(s, c->ctx);
    return SSL_TLSEXT_ERR_OK; /* unknown names get the default certificate */
}

/* arg non-NULL: h2 is offered (http2.tls), and preferred: the server's
 * order decides (SSL_select_next_proto walks ours first). */
static int he_tls_alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char both[] = "\x02h2\x08http/1.1";
    const unsigned char *ours = arg ? both : both + 3;
    unsigned int len = arg ? sizeof(both) - 1 : sizeof(both) - 4;
    unsigned char *sel;
    (void)s;
    if (SSL_select_next_proto(&sel, outlen, ours, len, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* e.g. only "h2": go on without ALPN */
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static int he_tls_status_cb(SSL *s, void *arg)
{
    he_tls_cert_t *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(s));
    unsigned char *copy;
    (void)arg;
    if (!c || !c->ocsp) return SSL_TLSEXT_ERR_NOACK;
    copy = OPENSSL_memdup(c->ocsp, (size_t)c->ocsp_len);
    if (!copy) return SSL_TLSEXT_ERR_NOACK;
    SSL_set_tlsext_status_ocsp_resp(s, copy, c->ocsp_len); /* OpenSSL frees it */
    return SSL_TLSEXT_ERR_OK;
}

/* Encrypted keys are not supported: never prompt on a terminal. */
static int he_tls_no_passwd(char *buf, int size, int rw, void *u)
{
    (void)buf, (void)size, (void)rw, (void)u;
    return 0;
}

/* ---------------------------------------------------------------- loading */

static void he_tls_ssl_err(char *err, size_t errlen, const char *file, const char *what)
{
    unsigned long e = ERR_peek_error(); /* the first: the root cause */
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(err, errlen, "tls.certificates: %s: %s%s%s%s", file, what, r ? " (" : "", r ? r : "",
             r ? ")" : "");
    ERR_clear_error();
}

static void he_tls_add_name(he_tls_cert_t *c, const char *s, size_t len)
{
    char *n;
    if (c->nnames >= HE_TLS_MAX_NAMES || len == 0 || memchr(s, 0, len)) return;
    n = strndup(s, len);
    if (!n) return;
    for (char *p = n; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    c->names[c->nnames++] = n;
}

/* SNI names: the DNS names of subjectAltName, else the subject's CN. */
static void he_tls_cert_names(he_tls_cert_t *c, X509 *x)
{
    GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    if (gens) {
        for (int i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
            const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
            if (g->type == GEN_DNS)
                he_tls_add_name(c, (const char *)ASN1_STRING_get0_data(g->d.dNSName),
                                (size_t)ASN1_STRING_length(g->d.dNSName));
        }
        GENERAL_NAMES_free(gens);
    }
    if (c->nnames == 0) {
        X509_NAME *subj = X509_get_subject_name(x);
        int i = X509_NAME_get_index_by_NID(subj, NID_commonName, -1);
        if (i >= 0) {
            ASN1_STRING *d = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, i));
            he_tls_add_name(c, (const char *)ASN1_STRING_get0_data(d),
                            (size_t)ASN1_STRING_length(d));
        }
    }
}

static void he_tls_cert_info(he_tls_cert_t *c, X509 *x)
{
    EVP_PKEY *pk = X509_get0_pubkey(x);
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1)
        strftime(c->not_after, sizeof(c->not_after), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (pk && EVP_PKEY_is_a(pk, "RSA")) {
        snprintf(c->key, sizeof(c->key), "RSA %d", EVP_PKEY_get_bits(pk));
    } else if (pk && EVP_PKEY_is_a(pk, "EC")) {
        char group[16] = "";
        size_t gl = 0;
        EVP_PKEY_get_utf8_string_param(pk, "group", group, sizeof(group), &gl);
        snprintf(c->key, sizeof(c->key), "EC %s",
                 strcmp(group, "prime256v1") == 0 ? "P-256" : group);
    } else if (pk) {
        snprintf(c->key, sizeof(c->key), "%s", EVP_PKEY_get0_type_name(pk));
    }
}

/* "<file>.ocsp" when present: a DER OCSP response, stapled as is. A file
 * that does not parse is not stapled (a warning, not an error: clients do
 * without a staple, but not without the certificate). */
static void he_tls_cert_ocsp(he_tls_cert_t *c)
{
    char path[PATH_MAX + 8];
    FILE *f;
    long n;
    unsigned char *buf;
    const unsigned char *p;
    OCSP_RESPONSE *resp;

    snprintf(path, sizeof(path), "%s.ocsp", c->file);
    f = fopen(path, "rb");
    if (!f) return;
    if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) <= 0 || n > (1 << 20) ||
        fseek(f, 0, SEEK_SET) < 0 || !(buf = malloc((size_t)n))) {
        fclose(f);
        he_log_warn("tls: %s: empty or unreadable, not stapled", path);
        return;
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        he_log_warn("tls: %s: short read, not stapled", path);
        return;
    }
    fclose(f);
    p = buf;
    resp = d2i_OCSP_RESPONSE(NULL, &p, n);
    if (!resp) {
        ERR_clear_error();
        free(buf);
        he_log_warn("tls: %s: not a DER OCSP response, not stapled", path);
        return;
    }
    OCSP_RESPONSE_free(resp);
    c->ocsp = buf;
    c->ocsp_len = n;
}

static void he_tls_cert_clear(he_tls_cert_t *c)
{
    SSL_CTX_free(c->ctx);
    for (unsigned j = 0; j < c->nnames; j++)
        free(c->names[j]);
    free(c->ocsp);
    memset(c, 0, sizeof(*c));
}

static SSL_CTX *he_tls_ctx_new(const he_conf_t *conf, he_tls_set_t *set, he_tls_cert_t *c)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    /* No renegotiation at all (client-initiated is off by default too). */
    uint64_t opts = SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION |
                    SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF;
    unsigned rotate =
        conf->tls_ticket_rotate_ms ? conf->tls_ticket_rotate_ms : HE_TLS_ROTATE_DEFAULT_MS;
    long lifetime = (long)((uint64_t)rotate * (HE_TLS_TKEYS - 1) / 1000);

    if (!ctx) return NULL;
    if (!conf->tls_tickets) opts |= SSL_OP_NO_TICKET;
#ifdef SSL_OP_ENABLE_KTLS
    /* OpenSSL offers the write keys only with this option: to the kernel,
     * or to the write filter that seals (tls_seal.c) */
    if (set->ktls || set->seal) opts |= SSL_OP_ENABLE_KTLS;
    if (set->seal) SSL_CTX_set_keylog_callback(ctx, he__tls_seal_keylog); /* KeyUpdate */
#endif
    SSL_CTX_set_options(ctx, opts);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* one read(2) takes what has arrived, not a record header and then its
     * body (two per request) */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_security_level(ctx, 2);
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
        SSL_CTX_set_cipher_list(ctx, HE_TLS12_CIPHERS) != 1 ||
        SSL_CTX_set_ciphersuites(ctx, HE_TLS13_SUITES) != 1 ||
        SSL_CTX_set1_groups_list(ctx, HE_TLS_GROUPS) != 1 ||
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"hlsedge", 7) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (conf->tls_session_cache) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
        SSL_CTX_sess_set_cache_size(ctx, conf->tls_session_cache);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
    /* Neither stateless nor stateful tickets: TLS 1.3 sends none. */
    if (!conf->tls_tickets && !conf->tls_session_cache) SSL_CTX_set_num_tickets(ctx, 0);
    /* Sessions and tickets live as long as their ticket key stays in the
     * ring, so a ticket is never refused for its key before it expires. */
    SSL_CTX_set_timeout(ctx, lifetime < 60 ? 60 : lifetime);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, he__tls_ticket_cb);
    SSL_CTX_set_tlsext_servername_callback(ctx, he_tls_sni_cb);
    SSL_CTX_set_tlsext_servername_arg(ctx, set);
    SSL_CTX_set_alpn_select_cb(ctx, he_tls_alpn_cb, conf->http2_tls ? (void *)ctx : NULL);
    SSL_CTX_set_tlsext_status_cb(ctx, he_tls_status_cb);
    SSL_CTX_set_default_passwd_cb(ctx, he_tls_no_passwd);
    SSL_CTX_set_app_data(ctx, c);
    return ctx;
}

static int he_tls_cert_load(const he_conf_t *conf, he_tls_set_t *set, he_tls_cert_t *c,
                            const char *file, char *err, size_t errlen)
{
    X509 *x;
    FILE *f;

    snprintf(c->file, sizeof(c->file), "%s", file);
    c->set = set;
    f = fopen(file, "r");
    if (!f) {
        snprintf(err, errlen, "tls.certificates: %s: %s", file, strerror(errno));
        return -errno;
    }
    fclose(f);
    ERR_clear_error();
    c->ctx = he_tls_ctx_new(conf, set, c);
    if (!c->ctx) {
        he_tls_ssl_err(err, errlen, file, "cannot set up a TLS context");
        return -ENOMEM;
    }
    if (SSL_CTX_use_certificate_chain_file(c->ctx, file) != 1) {
        he_tls_ssl_err(err, errlen, file, "no usable PEM certificate");
        return -EINVAL;
    }
    if (SSL_CTX_use_PrivateKey_file(c->ctx, file, SSL_FILETYPE_PEM) != 1) {
        he_tls_ssl_err(err, errlen, file,
                       "no usable private key (the file holds the certificate, its chain and "
                       "an unencrypted PEM key)");
        return -EINVAL;
    }
    if (SSL_CTX_check_private_key(c->ctx) != 1) {
        he_tls_ssl_err(err, errlen, file, "the private key does not match the certificate");
        return -EINVAL;
    }
    x = SSL_CTX_get0_certificate(c->ctx);
    he_tls_cert_names(c, x);
    he_tls_cert_info(c, x);
    if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
        he_log_warn("tls: %s: the certificate expired at %s", file, c->not_after);
    he_tls_cert_ocsp(c);
    ERR_clear_error();
    return 0;
}

static void he_tls_set_free(he_tls_set_t *set)
{
    for (unsigned i = 0; i < set->ncerts; i++)
        he_tls_cert_clear(&set->certs[i]);
    free(set);
}

void he__tls_set_release(he_tls_set_t *set)
{
    if (set && atomic_fetch_sub(&set->refs, 1) == 1) he_tls_set_free(set);
}

bool he__tls_set_ktls(const he_tls_set_t *set)
{
    return set->ktls;
}

bool he__tls_set_seal(const he_tls_set_t *set)
{
    return set->seal;
}

static int he_tls_set_build(const he_conf_t *conf, bool ktls, bool seal, he_tls_set_t **out,
                            char *err, size_t errlen)
{
    he_tls_set_t *set;
    if (conf->ntls_certs == 0) {
        snprintf(err, errlen, "tls.listen is set but tls.certificates lists no certificate");
        return -EINVAL;
    }
    set = calloc(1, sizeof(*set));
    if (!set) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    atomic_init(&set->refs, 1);
    set->ktls = ktls;
    set->seal = seal;
    for (unsigned i = 0; i < conf->ntls_certs && i < HE_CONF_MAX_CERTS; i++) {
        int rc = he_tls_cert_load(conf, set, &set->certs[i], conf->tls_certs[i], err, errlen);
        set->ncerts = i + 1;
        if (rc < 0) {
            he_tls_set_free(set);
            return rc;
        }
    }
    *out = set;
    return 0;
}

/* ---------------------------------------------------------------- server API */

static void he_tls_apply_conf(he_tls_t *tls, const he_conf_t *conf)
{
    tls->tickets = conf->tls_tickets;
    tls->rotate_ms =
        conf->tls_ticket_rotate_ms ? conf->tls_ticket_rotate_ms : HE_TLS_ROTATE_DEFAULT_MS;
    tls->session_cache = conf->tls_session_cache;
    tls->handshake_timeout_ms = conf->tls_handshake_timeout_ms ? conf->tls_handshake_timeout_ms
                                                               : HE_TLS_HANDSHAKE_DEFAULT_MS;
    he__tls_ticket_rotate_set(tls->rotate_ms);
}

void he__tls_guard_install(void); /* tls_conn.c */

int he_tls_new(he_tls_t **out, const he_conf_t *conf, const he_features_t *f, unsigned nworkers,
               char *err, size_t errlen)
{
    he_tls_t *tls = calloc(1, sizeof(*tls));
    bool ktls = false;
    bool seal = false;
    int rc;

    *out = NULL;
    if (!tls) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
#ifdef OPENSSL_NO_KTLS
    snprintf(tls->ktls_state, sizeof(tls->ktls_state), "off (OpenSSL built without kTLS)");
#else
    if (!conf->tls_ktls)
        snprintf(tls->ktls_state, sizeof(tls->ktls_state), "off (disabled by config)");
    else if (!f->ktls)
        snprintf(tls->ktls_state, sizeof(tls->ktls_state), "off (kernel has no tls ULP)");
    else
        snprintf(tls->ktls_state, sizeof(tls->ktls_state), "on");
    ktls = conf->tls_ktls && f->ktls;
#endif
    pthread_mutex_init(&tls->lock, NULL);
    atomic_init(&tls->gen, 1);
    tls->nworkers = nworkers;
    tls->pw = aligned_alloc(64, sizeof(*tls->pw) * (nworkers ? nworkers : 1));
    if (!tls->pw) {
        he_tls_free(tls);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memset(tls->pw, 0, sizeof(*tls->pw) * (nworkers ? nworkers : 1));
    he_tls_apply_conf(tls, conf);
    snprintf(tls->seal_state, sizeof(tls->seal_state), "off (OpenSSL built without kTLS)");
#ifndef OPENSSL_NO_KTLS
    if (!conf->tls_seal_records)
        snprintf(tls->seal_state, sizeof(tls->seal_state), "off (disabled by config)");
    seal = conf->tls_seal_records;
#endif
    rc = he_tls_set_build(conf, ktls, seal, &tls->cur, err, errlen);
    if (rc < 0) {
        he_tls_free(tls);
        return rc;
    }
    if (seal) {
        /* Sealing rests on OpenSSL's internal kTLS hand-over: proven on the
         * library that is loaded, with the first certificate, before any
         * client relies on it; a failure falls back to SSL_write. */
        char why[160];
        he_tls_set_t *set = tls->cur;
        if (he__tls_seal_probe(set->certs[0].ctx, why, sizeof(why)) == 0) {
            snprintf(tls->seal_state, sizeof(tls->seal_state), "on");
        } else {
            snprintf(tls->seal_state, sizeof(tls->seal_state), "off (probe: %s)", why);
            set->seal = false;
            for (unsigned i = 0; i < set->ncerts; i++) {
                SSL_CTX_set_keylog_callback(set->certs[i].ctx, NULL);
                if (!set->ktls) SSL_CTX_clear_options(set->certs[i].ctx, SSL_OP_ENABLE_KTLS);
            }
        }
    }
    he__tls_guard_install();
    *out = tls;
    return 0;
}

void he_tls_free(he_tls_t *tls)
{
    if (!tls) return;
    if (tls->pw)
        for (unsigned i = 0; i < tls->nworkers; i++)
            he__tls_set_release(tls->pw[i].set);
    he__tls_set_release(tls->cur);
    free(tls->pw);
    pthread_mutex_destroy(&tls->lock);
    free(tls);
}

int he_tls_reload(he_tls_t *tls, const he_conf_t *conf, char *err, size_t errlen)
{
    he_tls_set_t *set, *old;
    int rc;

    pthread_mutex_lock(&tls->lock);
    rc = he_tls_set_build(conf, tls->cur->ktls, tls->cur->seal, &set, err, errlen);
    if (rc < 0) {
        tls->reload_errors++;
        snprintf(tls->reload_err, sizeof(tls->reload_err), "%s", err);
        pthread_mutex_unlock(&tls->lock);
        he_log_error("TLS reload failed, keeping the certificates in use: %s", err);
        return rc;
    }
    old = tls->cur;
    tls->cur = set;
    tls->reloads++;
    tls->reload_err[0] = 0;
    he_tls_apply_conf(tls, conf);
    atomic_fetch_add_explicit(&tls->gen, 1, memory_order_release);
    pthread_mutex_unlock(&tls->lock);
    he__tls_set_release(old);
    he_log_info("TLS reload: %u certificate%s loaded for new handshakes", set->ncerts,
                set->ncerts == 1 ? "" : "s");
    return 0;
}

SSL *he__tls_ssl_new(he_tls_t *tls, unsigned worker, he_tls_set_t **setp)
{
    he_tls_worker_t *pw = &tls->pw[worker];
    SSL *ssl;

    if (!pw->set || pw->gen != atomic_load_explicit(&tls->gen, memory_order_acquire)) {
        he_tls_set_t *old = pw->set;
        pthread_mutex_lock(&tls->lock);
        pw->set = tls->cur;
        atomic_fetch_add(&pw->set->refs, 1);
        pw->gen = atomic_load(&tls->gen);
        pthread_mutex_unlock(&tls->lock);
        he__tls_set_release(old);
    }
    ssl = SSL_new(pw->set->certs[0].ctx);
    if (!ssl) return NULL;
    atomic_fetch_add_explicit(&pw->set->refs, 1, memory_order_relaxed);
    *setp = pw->set;
    return ssl;
}

char *he__tls_stage(he_tls_t *tls, unsigned worker)
{
    return tls->pw[worker].stage;
}

const char *he_tls_ktls_state(const he_tls_t *tls)
{
    return tls->ktls_state;
}

/* ---------------------------------------------------------------- describe */

/* The send path in one phrase, for the log and /stats. */
static const char *he_tls_send_path(const he_tls_set_t *set)
{
    if (set->ktls && set->seal)
        return "kTLS sendfile/send; records sealed by hlsedge from the page cache (mmap) or RAM "
               "when a suite is not offloaded";
    if (set->ktls) return "kTLS sendfile/send (SSL_write when a suite is not offloaded)";
    if (set->seal)
        return "records sealed by hlsedge (AES-GCM) from the page cache (mmap) or RAM, "
               "SSL_write for other suites";
    return "SSL_write from the page cache (mmap) or RAM";
}

static void he_tls_sum(const he_server_t *s, he_stats_t *t)
{
    memset(t, 0, sizeof(*t));
    for (unsigned i = 0; s->workers && i < s->nworkers; i++) {
        const he_stats_t *w = &s->workers[i].stats;
        t->tls_handshakes += w->tls_handshakes;
        t->tls_handshake_errors += w->tls_handshake_errors;
        t->tls_resumed += w->tls_resumed;
        t->tls_conn_ktls += w->tls_conn_ktls;
        t->tls_conn_userspace += w->tls_conn_userspace;
        t->tls_conn_ktls_fallback += w->tls_conn_ktls_fallback;
        t->tls_conn_sealed += w->tls_conn_sealed;
        t->tls_bytes_ktls += w->tls_bytes_ktls;
        t->tls_bytes_userspace += w->tls_bytes_userspace;
        for (int e = 0; e < HE_STATS_TLS_ERR_COUNT; e++)
            t->tls_errors[e] += w->tls_errors[e];
    }
}

static const char *const he_tls_err_names[HE_STATS_TLS_ERR_COUNT] = {
    [HE_STATS_TLS_ERR_PLAIN_HTTP] = "plain_http", [HE_STATS_TLS_ERR_GARBAGE] = "garbage",
    [HE_STATS_TLS_ERR_TRUNCATED] = "truncated",   [HE_STATS_TLS_ERR_PROTOCOL] = "protocol",
    [HE_STATS_TLS_ERR_OTHER] = "other",
};

void he_tls_describe(const he_server_t *s, const he_stats_t *totals, char *buf, size_t cap)
{
    he_buf_t b;
    he_tls_t *tls = s->tls;
    he_stats_t sum;
    const he_stats_t *t = totals;

    if (!cap) return;
    he_buf_fixed(&b, buf, cap); /* cut when too small: the caller sees it by the length */
    if (!tls) {
        he_buf_printf(&b, "{\"enabled\":false}");
        return;
    }
    if (!t) {
        he_tls_sum(s, &sum);
        t = &sum;
    }
    he_buf_printf(&b, "{\"enabled\":true,\"listen\":[");
    for (unsigned i = 0; i < s->nlisten_tls; i++) {
        if (i) he_buf_lit(&b, ",");
        he_buf_json_str(&b, he__listener_conf(s, s->nlisten - s->nlisten_tls + i, NULL)->text);
    }
    pthread_mutex_lock(&tls->lock);
    he_buf_printf(&b, "],\"ktls\":");
    he_buf_json_str(&b, tls->ktls_state);
    he_buf_printf(&b, ",\"seal_records\":");
    he_buf_json_str(&b, tls->seal_state);
    he_buf_printf(&b,
                  ",\"send_path\":\"%s\",\"protocols\":[\"TLSv1.2\",\"TLSv1.3\"],"
                  "\"certificates\":[",
                  he_tls_send_path(tls->cur));
    for (unsigned i = 0; i < tls->cur->ncerts; i++) {
        const he_tls_cert_t *c = &tls->cur->certs[i];
        he_buf_printf(&b, "%s{\"file\":", i ? "," : "");
        he_buf_json_str(&b, c->file);
        he_buf_printf(&b, ",\"default\":%s,\"names\":[", i == 0 ? "true" : "false");
        for (unsigned j = 0; j < c->nnames; j++) {
            if (j) he_buf_lit(&b, ",");
            he_buf_json_str(&b, c->names[j]);
        }
        he_buf_printf(&b, "],\"key\":");
        he_buf_json_str(&b, c->key);
        he_buf_printf(&b, ",\"not_after\":");
        he_buf_json_str(&b, c->not_after);
        he_buf_printf(&b, ",\"ocsp_stapled\":%s}", c->ocsp ? "true" : "false");
    }
    he_buf_printf(&b,
                  "],\"session_tickets\":%s,\"ticket_rotate_ms\":%u,\"session_cache\":%u,"
                  "\"handshake_timeout_ms\":%u,\"reloads\":%u,\"reload_errors\":%u,"
                  "\"last_reload_error\":",
                  tls->tickets ? "true" : "false", tls->rotate_ms, tls->session_cache,
                  tls->handshake_timeout_ms, tls->reloads, tls->reload_errors);
    he_buf_json_str(&b, tls->reload_err);
    pthread_mutex_unlock(&tls->lock);
    he_buf_printf(&b,
                  ",\"handshakes\":%llu,\"resumed\":%llu,\"handshake_errors\":%llu,\"errors\":{",
                  (unsigned long long)t->tls_handshakes, (unsigned long long)t->tls_resumed,
                  (unsigned long long)t->tls_handshake_errors);
    for (int e = 0; e < HE_STATS_TLS_ERR_COUNT; e++)
        he_buf_printf(&b, "%s\"%s\":%llu", e ? "," : "", he_tls_err_names[e],
                      (unsigned long long)t->tls_errors[e]);
    he_buf_printf(&b,
                  "},\"connections\":{\"ktls\":%llu,\"userspace\":%llu,\"ktls_fallback\":%llu,"
                  "\"sealed\":%llu},\"bytes\":{\"ktls\":%llu,\"userspace\":%llu}}",
                  (unsigned long long)t->tls_conn_ktls, (unsigned long long)t->tls_conn_userspace,
                  (unsigned long long)t->tls_conn_ktls_fallback,
                  (unsigned long long)t->tls_conn_sealed, (unsigned long long)t->tls_bytes_ktls,
                  (unsigned long long)t->tls_bytes_userspace);
}

/* ---------------------------------------------------------------- server hooks */

int he__tls_server_init(he_server_t *s, char *err, size_t errlen)
{
    const he_conf_t *conf = s->conf;
    he_tls_t *tls;
    char addrs[256] = "";
    int rc;

    if (conf->ntls_listen == 0) return 0;
    rc = he_tls_new(&s->tls, conf, &s->features, s->nworkers, err, errlen);
    if (rc < 0) return rc;
    tls = s->tls;
    for (unsigned i = 0; i < conf->ntls_listen; i++)
        snprintf(addrs + strlen(addrs), sizeof(addrs) - strlen(addrs), "%s%s", i ? ", " : "",
                 conf->tls_listen[i].text);
    he_log_info("TLS on %s: TLS 1.2+1.3, kTLS: %s; session tickets %s (key rotates every %u s, "
                "shared by all workers); session cache %u; handshake timeout %u ms",
                addrs, tls->ktls_state, tls->tickets ? "on" : "off", tls->rotate_ms / 1000,
                tls->session_cache, tls->handshake_timeout_ms);
    he_log_info("TLS send path: %s; sealed records: %s", he_tls_send_path(tls->cur),
                tls->seal_state);
    for (unsigned i = 0; i < tls->cur->ncerts; i++) {
        const he_tls_cert_t *c = &tls->cur->certs[i];
        char names[512] = "";
        for (unsigned j = 0; j < c->nnames; j++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", j ? " " : "",
                     c->names[j]);
        he_log_info("TLS certificate %s%s: %s; %s; expires %s; OCSP %s", c->file,
                    i == 0 ? " (default)" : "", names[0] ? names : "(no names)", c->key,
                    c->not_after, c->ocsp ? "stapled" : "not stapled");
    }
    return 0;
}

void he__tls_server_free(he_server_t *s)
{
    he_stats_t t;
    if (!s->tls) return;
    he_tls_sum(s, &t);
    he_log_info("TLS totals: %llu handshakes (%llu resumed), %llu failed (plain_http %llu, "
                "garbage %llu, truncated %llu, protocol %llu, other %llu); connections: kTLS "
                "%llu, userspace %llu (kTLS fallback %llu, sealed by hlsedge %llu); bytes: kTLS "
                "%llu, userspace %llu",
                (unsigned long long)t.tls_handshakes, (unsigned long long)t.tls_resumed,
                (unsigned long long)t.tls_handshake_errors,
                (unsigned long long)t.tls_errors[HE_STATS_TLS_ERR_PLAIN_HTTP],
                (unsigned long long)t.tls_errors[HE_STATS_TLS_ERR_GARBAGE],
                (unsigned long long)t.tls_errors[HE_STATS_TLS_ERR_TRUNCATED],
                (unsigned long long)t.tls_errors[HE_STATS_TLS_ERR_PROTOCOL],
                (unsigned long long)t.tls_errors[HE_STATS_TLS_ERR_OTHER],
                (unsigned long long)t.tls_conn_ktls, (unsigned long long)t.tls_conn_userspace,
                (unsigned long long)t.tls_conn_ktls_fallback, (unsigned long long)t.tls_conn_sealed,
                (unsigned long long)t.tls_bytes_ktls, (unsigned long long)t.tls_bytes_userspace);
    he_tls_free(s->tls);
    s->tls = NULL;
}
