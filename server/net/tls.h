/* server/net/tls: TLS termination.
 *
 *   tls.c       server side: one SSL_CTX per certificate (SNI picks one),
 *               protocol and suite policy, ALPN, OCSP stapling, session
 *               tickets with rotating keys shared by every worker, the
 *               session cache, reload, and the description for the log and
 *               /stats.
 *   tls_conn.c  one connection: first-byte check, non-blocking handshake
 *               driven by polls on the worker's ring, SSL_read into the HTTP
 *               parser, and SSL_write of responses when the kernel does not
 *               encrypt (no kTLS).
 *   tls_out.c   the SSL's write BIO: a filter over the socket's that
 *               gathers a large body's records into tls.write_buffer
 *               writes.
 *   tls_seal.c  records sealed by hlsedge (tls.seal_records): after the
 *               handshake OpenSSL hands its write BIO the keys, as it
 *               would hand them to the kernel for kTLS, and the filter
 *               encrypts each record from the caller's pages straight into
 *               the write buffer.
 *
 * After the handshake a connection either has kTLS for sending (the kernel
 * encrypts: send.c's plain send/sendfile path runs unchanged) or sends
 * through SSL_write from the header buffer, RAM bodies and a read-only
 * mapping of the file; with sealed records (tls_seal.c) the encryption
 * reads those pages and writes the record where it leaves from, the only
 * copy in user space. Requests are always read
 * with SSL_read (OpenSSL 3.0 has no kTLS receive for TLS 1.3), so TLS
 * connections never get a ring recv: it would take ciphertext from under
 * OpenSSL. */
#ifndef HE_TLS_H
#define HE_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#include "server/net/net.h"

typedef struct he_tls he_tls_t;
typedef struct he_tls_set he_tls_set_t;

/* ---------------------------------------------------------------- server */

/* Builds the contexts for conf->tls_certs. Returns 0, or a negative errno
 * with a message in err naming the file and what is wrong with it. */
int he_tls_new(he_tls_t **out, const he_conf_t *conf, const he_features_t *f, unsigned nworkers,
               char *err, size_t errlen);
void he_tls_free(he_tls_t *tls);

/* Re-reads every certificate, key and OCSP file of conf and, if all load,
 * swaps them in for new handshakes (handshakes already under way finish on
 * the old ones, which are freed with their last connection). On any error
 * the old ones stay, the return is negative and err says why. Thread-safe;
 * meant for the control thread on SIGHUP. */
int he_tls_reload(he_tls_t *tls, const he_conf_t *conf, char *err, size_t errlen);

/* A JSON object for /stats: configuration in use (listeners, certificates
 * and their names, kTLS state and why, tickets, cache) and the counters of
 * totals: the process's, summed over every worker generation so that they
 * never go back (NULL: s's workers only). {"enabled":false} without TLS
 * listeners. */
void he_tls_describe(const he_server_t *s, const he_stats_t *totals, char *buf, size_t cap);

/* One line: "kTLS: on", "kTLS: off (kernel has no tls ULP)", ... */
const char *he_tls_ktls_state(const he_tls_t *tls);

/* Called by server.c: he_tls_new for s->conf when it has TLS listeners,
 * and the start-up log lines; and the matching free, which logs the TLS
 * totals of the run. */
int he__tls_server_init(he_server_t *s, char *err, size_t errlen);
void he__tls_server_free(he_server_t *s);

/* ---------------------------------------------------------------- internal */

/* Clock for ticket key rotation, in ms; tests replace it. */
extern uint64_t (*he__tls_clock_ms)(void);

/* tls_ticket.c: the ticket keys' callback for every context, and how
 * often a new current key is made. */
#define HE_TLS_ROTATE_DEFAULT_MS 3600000u
#define HE_TLS_TKEYS 3 /* the current ticket key and two previous ones */
int he__tls_ticket_cb(SSL *s, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *ectx,
                      EVP_MAC_CTX *hctx, int enc);
void he__tls_ticket_rotate_set(unsigned rotate_ms);

/* A new server-side SSL on the worker's current contexts, with a reference
 * on them (*set) that he__tls_set_release drops. */
SSL *he__tls_ssl_new(he_tls_t *tls, unsigned worker, he_tls_set_t **set);
void he__tls_set_release(he_tls_set_t *set);
/* Whether kTLS set-up goes to the kernel on the contexts of set. */
bool he__tls_set_ktls(const he_tls_set_t *set);
/* Whether the write filter seals the records when the kernel does not
 * (tls.seal_records, and the start-up probe passed). */
bool he__tls_set_seal(const he_tls_set_t *set);
/* A per-worker 16 KiB buffer for header + first body bytes in one record. */
char *he__tls_stage(he_tls_t *tls, unsigned worker);
#define HE_TLS_STAGE 16384

/* ---------------------------------------------------------------- sealed records */

/* tls_seal.c. OpenSSL 3.0 hands the write keys of a kTLS-capable suite to
 * its write BIO (BIO_set_ktls, control 72, with a struct
 * tls12_crypto_info_* of <linux/tls.h>, as for the kernel), then writes
 * each record's plaintext from the caller's buffer, announcing a record
 * other than application data with control 74 (its type) first. Those
 * controls are OpenSSL's internal ones, reserved by number in
 * <openssl/bio.h>; he__tls_seal_probe proves them on the library that is
 * loaded before any connection relies on them. */
#define HE_BIO_CTRL_SET_KTLS 72
#define HE_BIO_CTRL_SET_KTLS_TX_CTRL_MSG 74
#define HE_BIO_CTRL_CLEAR_KTLS_TX_CTRL_MSG 75

typedef struct he_tls_seal he_tls_seal_t;
/* Most bytes a record adds to its plaintext: the header, TLS 1.2's explicit
 * nonce or TLS 1.3's inner type, and the tag. */
#define HE_TLS_SEAL_OVERHEAD (5 + 8 + 16)
#define HE_TLS_SEAL_MAX_PLAIN 16384

/* A sealing state for the keys in crypto_info (AES-128-GCM or AES-256-GCM,
 * TLS 1.2 or 1.3). NULL for any other suite or version, or out of memory:
 * OpenSSL then seals the records itself. */
he_tls_seal_t *he__tls_seal_new(const void *crypto_info);
void he__tls_seal_free(he_tls_seal_t *s);
/* Seals the count pieces of in (at most HE_TLS_SEAL_MAX_PLAIN bytes in
 * all) as one record of the given content type into out, which has room
 * for their length plus HE_TLS_SEAL_OVERHEAD: a response's head and its
 * body's first bytes, or a frame's head and its payload, without copying
 * them together first. Returns the record's length, or -EPROTO when the
 * cipher failed, or after a TLS 1.3 KeyUpdate until he__tls_seal_rekey. */
int he__tls_seal_recordv(he_tls_seal_t *s, uint8_t type, const struct iovec *in, int count,
                         unsigned char *out);
/* The next TLS 1.3 write secret (32 or 48 bytes): key and IV from it,
 * sequence number 0. 0, or a negative errno (then nothing more is sealed). */
int he__tls_seal_rekey(he_tls_seal_t *s, const unsigned char *secret, size_t len);
/* The contexts' keylog callback while sealing is on: hands the write
 * secret OpenSSL 3.0 logs after a KeyUpdate to the connection's filter. */
void he__tls_seal_keylog(const SSL *ssl, const char *line);
/* Whether a client reads records sealed by hlsedge from a server on ctx
 * (which has SSL_OP_ENABLE_KTLS and he__tls_seal_keylog): a TLS 1.3 and a
 * TLS 1.2 handshake over a socketpair, three records each checked byte for
 * byte, and in TLS 1.3 three more after a KeyUpdate the client asked for.
 * 0, or a negative errno with why in err. */
int he__tls_seal_probe(SSL_CTX *ctx, char *err, size_t errlen);

/* ---------------------------------------------------------------- connection */

enum he_tls_state { HE_TLS_PEEK = 0, HE_TLS_HANDSHAKE, HE_TLS_OPEN };

/* Results of he__tls_send besides a negative errno. */
enum { HE_TLS_DONE = 0, HE_TLS_AGAIN = 1, HE_TLS_AGAIN_READ = 2, HE_TLS_WAIT = 3 };

/* tls_out.c: records gathered for one write(2). buf is there only while
 * a large body is sent (he__tls_out_gather); off..off+len is what waits. */
typedef struct he_tls_out {
    char *buf;
    uint32_t size;  /* written once this many bytes are there */
    uint32_t alloc; /* size plus room for one more record */
    uint32_t off, len;
    bool ktls_send;      /* the socket BIO sends by kTLS, as last asked */
    bool kernel_ok;      /* kTLS set-up goes to the socket (tls.ktls, and the kernel has it) */
    bool seal_ok;        /* else the filter takes the keys (tls.seal_records) */
    uint8_t record_type; /* the next write's content type (control 74); 0: application data */
    he_tls_seal_t *seal; /* the filter seals the records: OpenSSL writes plaintext */
    uint64_t *taken;     /* counts each buffer allocated (the worker's stats), or NULL */
} he_tls_out_t;
#define HE_TLS_OUT_MAX (1u << 20) /* tls.write_buffer's largest */

/* The write BIO for an SSL on fd: the filter, with data o, over a socket
 * BIO (BIO_NOCLOSE). NULL when out of memory. */
BIO *he__tls_out_new(he_tls_out_t *o, int fd);
/* Records from now on gather in a buffer of size bytes (plus one record)
 * until he__tls_out_release. 0 (also when already gathering), -EINVAL for
 * a size of 0 or above HE_TLS_OUT_MAX, -ENOMEM. */
int he__tls_out_gather(he_tls_out_t *o, size_t size);
/* Seals len bytes of application data from count pieces (len at most
 * HE_TLS_SEAL_MAX_PLAIN) as one record and writes or holds it as the
 * filter does what SSL_write hands it, without SSL_write: for a connection
 * whose records hlsedge seals (o->seal), when OpenSSL has nothing of its
 * own to write first. len; 0 when what waits must go first and the socket
 * is full (nothing sealed); or a negative errno. */
int he__tls_out_seal(he_tls_out_t *o, BIO *filter, const struct iovec *in, int count, size_t len);
/* Writes what waits in the buffer: HE_TLS_DONE when it is empty,
 * HE_TLS_AGAIN when the socket is full, or a negative errno. filter is
 * he__tls_out_new's. */
int he__tls_out_flush(he_tls_out_t *o, BIO *filter);
/* Frees the buffer when it is empty, and writes pass through again; false
 * (nothing done) when bytes still wait. */
bool he__tls_out_release(he_tls_out_t *o);
/* The filter's state when b is one of these filters, else NULL. */
he_tls_out_t *he__tls_out_of(BIO *b);
/* Frees the buffer, whatever waits in it, and the sealing state: for
 * he__tls_conn_free, after SSL_free. True when a buffer went. */
bool he__tls_out_free(he_tls_out_t *o);

typedef struct he_tls_conn {
    SSL *ssl;
    BIO *rbio; /* memory: what the ring's recv brought, for SSL_read (owned by ssl) */
    BIO *wbio; /* tls_out.c's filter over the socket (owned by ssl) */
    he_tls_out_t out;
    he_tls_set_t *set;
    uint8_t state;         /* enum he_tls_state */
    bool poll_armed;       /* a HE_OP_TLS_POLL is in flight */
    bool ktls_tx;          /* the kernel encrypts sends: send.c's plain path */
    bool reading;          /* the SSL_read loop is under way (a response may call back) */
    bool eof;              /* the ring's recv saw the client's FIN */
    bool write_wants_read; /* SSL_write said WANT_READ: resume from the read side */
    bool read_wants_write; /* SSL_read said WANT_WRITE: the poll waits for POLLOUT */
    bool fatal;            /* no close_notify: the session is broken */
    bool write_pending;    /* SSL_write wants a retry: at least the same length again */

    /* tls.first_record (tls_conn.c he__tls_record_cap) */
    uint32_t small_left;    /* bytes the small records may still take */
    uint64_t last_write_ns; /* the last bytes handed to the socket; 0 = none yet */
} he_tls_conn_t;

/* On accept from a TLS listener: creates the SSL and starts the handshake
 * (under the TLS handshake timer). The connection may be closed on return. */
void he__tls_conn_start(he_worker_t *w, he_conn_t *c);
/* The socket writable again for the handshake or a read (HE_OP_TLS_POLL). */
void he__tls_on_poll(he_worker_t *w, he_conn_t *c, int res);
/* Bytes the ring's recv brought: the first byte's check, the handshake,
 * then records read into he__conn_on_data. The connection may be closed
 * on return. */
void he__tls_on_input(he_worker_t *w, he_conn_t *c, const char *data, size_t len);
/* The ring's recv saw EOF: what is buffered is read first. */
void he__tls_on_eof(he_worker_t *w, he_conn_t *c);
/* he__conn_arm_recv for TLS connections: reads records left buffered
 * while input was full, then says whether the ring should receive more
 * (false after EOF, or when the connection went). */
bool he__tls_want_recv(he_worker_t *w, he_conn_t *c);
/* Sends what is left of the response (head, then body) with SSL_write.
 * HE_TLS_DONE: all sent; HE_TLS_AGAIN: wait for POLLOUT and call again;
 * HE_TLS_AGAIN_READ: the read side resumes it; HE_TLS_WAIT: the body
 * source has nothing yet; or a negative errno. */
int he__tls_send(he_worker_t *w, he_conn_t *c);
/* Writes the records a pulling protocol's turn gathered (he__tls_send
 * leaves them to the turn's end): HE_TLS_DONE when none wait (the buffer
 * is freed), HE_TLS_AGAIN when the socket is full, or a negative errno. */
int he__tls_drain(he_worker_t *w, he_conn_t *c);
/* tls.first_record: the most bytes the next record may carry, or 0 for
 * no limit (16 KiB records). The first tls.first_record bytes of a
 * connection, and the first after a second without writes, go in a record
 * of their own, about one TCP segment. The caller takes what it wrote off
 * c->tls->small_left and sets last_write_ns. */
size_t he__tls_record_cap(const he_worker_t *w, he_conn_t *c, uint64_t now_ns);
/* At the end of a response: adds its bytes to the kTLS or userspace total. */
void he__tls_account(he_worker_t *w, he_conn_t *c);
/* Sends close_notify now (once) on an open, healthy session, for a close
 * that half-closes after it (he__conn_close_graceful). 0, or a negative
 * errno when there is none to send or it did not fit the socket. */
int he__tls_close_notify(he_worker_t *w, he_conn_t *c);
/* Sends close_notify when the session is healthy and it was not sent yet,
 * frees the SSL. */
void he__tls_conn_free(he_worker_t *w, he_conn_t *c);

/* True when responses on c go through SSL_write (TLS without kTLS). */
static inline bool he__tls_userspace(const he_conn_t *c)
{
    return c->tls && !c->tls->ktls_tx;
}

/* True while c holds a write buffer (tls_out.c): sealed records may wait
 * in it, and he__tls_drain writes them and then frees it. */
static inline bool he__tls_out_held(const he_conn_t *c)
{
    return c->tls && c->tls->out.buf;
}

#endif
