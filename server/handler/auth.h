/* handler/: signed URLs. The router's first step under an auth rule
 * (auth.c) checks the request's token and takes it out of the target;
 * a playlist answered to it then carries the token in every URI
 * (auth_rewrite.c); the token schemes themselves are pure functions
 * (auth_token.c).
 *
 *   auth_token.c    EdgeAuth 2.0 and nginx secure_link: parse and verify
 *   auth_rewrite.c  a playlist with a query text added to its URIs
 *   auth_cache.c    rewritten playlists kept per worker, per token
 *   auth.c          the handler step, the answer's rewrite, the access log's view */
#ifndef HE_HANDLER_AUTH_H
#define HE_HANDLER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf/conf.h"
#include "server/base/stats.h"

/* ---------------------------------------------------------------- auth_token.c */

/* A field of an EdgeAuth token: its value's bytes in the token. */
typedef struct he_auth_field {
    const char *p;
    size_t len;
} he_auth_field_t;

/* An EdgeAuth 2.0 token, "[ip=IP~][st=START~]exp=END~acl=ACL[!ACL...]~
 * [id=ID~][data=DATA~]hmac=HEX", split into its fields (pointers into the
 * token). signed_len: the bytes the HMAC covers, those before "~hmac=". */
typedef struct he_auth_edgeauth {
    he_auth_field_t ip, st, exp, acl, id, data, hmac;
    uint64_t start, end; /* st (0 when absent) and exp, seconds since the epoch */
    size_t signed_len;
} he_auth_edgeauth_t;

/* Splits tok (already percent-decoded). 0, or -EINVAL: an unknown or
 * duplicate field, no exp or hmac, hmac not last or not 64 hex digits, a
 * time that is not a number, an empty field. */
int he_auth_edgeauth_parse(const char *tok, size_t len, he_auth_edgeauth_t *t);
/* Whether one ACL (a path in which '*' matches any run of bytes) covers
 * path; acl may hold several separated by '!'. */
bool he_auth_acl_match(const char *acl, size_t acl_len, const char *path, size_t path_len);
/* Checks a parsed token for path ("/live/a.ts", normalized), the client's
 * address as text and the time now (seconds): the HMAC-SHA256 under any of
 * the rule's keys (constant-time compare), the time window with the rule's
 * skew, the ACL (or, without one, the path as the url= the HMAC covers),
 * the ip. */
he_stats_auth_t he_auth_edgeauth_verify(const char *tok, const he_auth_edgeauth_t *t,
                                        const he_conf_auth_t *rule, const char *path,
                                        size_t path_len, const char *ip, uint64_t now);
/* The checks of a token whose signature is known good: the time window,
 * the ACL, the ip (he_auth_edgeauth_verify's after the HMAC). */
he_stats_auth_t he_auth_edgeauth_check(const he_auth_edgeauth_t *t, const he_conf_auth_t *rule,
                                       const char *path, size_t path_len, const char *ip,
                                       uint64_t now);
/* ACL tokens this thread verified under rule of configuration generation
 * gen, by their text as it came (percent-encoded): a player sends the same
 * token with every request, and finding it skips the decoding, the parse
 * and the signature (the checks above still run). keep remembers tok
 * (decoded) and its parse t; find returns the parse, valid until the next
 * keep. */
const he_auth_edgeauth_t *he_auth_known_find(uint64_t gen, const he_conf_auth_t *rule,
                                             const char *raw, size_t raw_len);
void he_auth_known_keep(uint64_t gen, const he_conf_auth_t *rule, const char *raw, size_t raw_len,
                        const char *tok, size_t tok_len, const he_auth_edgeauth_t *t);
/* nginx secure_link: md5 (base64url, no padding) over the rule's template
 * with $expires, $uri, $remote_addr and $secret (each key in turn)
 * substituted; expires (NULL: none given) is when it ends. */
he_stats_auth_t he_auth_secure_link_verify(const he_conf_auth_t *rule, const char *md5,
                                           size_t md5_len, const char *expires,
                                           size_t expires_len, const char *uri, size_t uri_len,
                                           const char *ip, uint64_t now);
/* Percent-decodes src into dst (cap bytes): the length, or -EINVAL for a
 * bad escape or a decoded NUL, -ENAMETOOLONG. */
int he_auth_pct_decode(const char *src, size_t len, char *dst, size_t cap);

/* ---------------------------------------------------------------- auth_rewrite.c */

/* What a playlist's URIs get. */
typedef struct he_auth_rewrite {
    const char *text; /* "__token__=..." as it goes into a query */
    size_t text_len;
    const char *const *drop; /* query parameters the URIs lose (a token of their own); NULL-ended */
    const char *const *hosts; /* absolute URIs to these hosts get text too */
    unsigned nhosts;
} he_auth_rewrite_t;

/* The playlist in (len bytes) with rw->text added to the query of every
 * URI it names (he_seg_playlist_uris), into *out (*cap bytes; NULL or too
 * small: realloc'd, and *out, *cap updated; the caller frees it whatever
 * the result). One pass, no allocation per line. The length, -EINVAL when
 * in is no playlist, -ENOMEM. */
ssize_t he_auth_rewrite(const char *in, size_t len, const he_auth_rewrite_t *rw, char **out,
                        size_t *cap);

/* ---------------------------------------------------------------- auth.c */

/* A rewritten playlist's bytes: sent by every response holding a
 * reference and kept by the cache (auth_cache.c) with one more. One
 * worker's thread only. */
typedef struct he_auth_buf {
    char *p;
    size_t cap, len; /* allocated, used */
    unsigned refs;
    /* a kept output's copy in a mapping of its own, sent by vmsplice and
     * unmapped with the buffer, never reused (net.h, spliceable); or NULL */
    char *sealed;
    size_t sealed_cap;
    struct he_auth_arena *arena; /* the region sealed is in (auth.c), or NULL: its own */
} he_auth_buf_t;

/* Drops one reference; the last returns the buffer to this thread's pool
 * (or frees it). */
void he_auth_buf_unref(he_auth_buf_t *b);

/* ---------------------------------------------------------------- auth_cache.c */

/* Which output an entry is: the rule (the configuration's generation and
 * the rule's index), the normalized path, the stored version (its ETag
 * and size) and the token parameters carried ("__token__=..."). */
typedef struct he_auth_cache_key {
    unsigned gen, rule;
    const char *path;
    size_t path_len;
    const char *etag;
    size_t etag_len;
    const char *text;
    size_t text_len;
    uint64_t size;
} he_auth_cache_key_t;

typedef struct he_auth_cache he_auth_cache_t;

/* A 64-bit hash of n bytes continuing h (a seed, or the hash so far):
 * eight bytes at a time, for keys looked up on every request. Not a MAC:
 * a match is always confirmed by comparing the bytes. */
uint64_t he__auth_hash(uint64_t h, const char *p, size_t n);

/* At most max_entries outputs and max_bytes (their buffers' capacity, their
 * sealed copies and the keys). NULL on -ENOMEM or max_entries 0 (then no caching: get misses,
 * put keeps nothing). */
he_auth_cache_t *he_auth_cache_new(unsigned max_entries, size_t max_bytes);
/* Drops every entry's reference. */
void he_auth_cache_free(he_auth_cache_t *c);
/* The output for k with a reference for the caller, or NULL; now in
 * seconds (an entry whose token has expired is dropped, not returned). */
he_auth_buf_t *he_auth_cache_get(he_auth_cache_t *c, const he_auth_cache_key_t *k, uint64_t now);
/* Keeps out (one more reference) for k until expires (seconds), making
 * room by dropping expired then least recently used entries; the entry for
 * an older version of the same path and token goes. False when it is not
 * kept (too large, already expired, already there, -ENOMEM). */
bool he_auth_cache_put(he_auth_cache_t *c, const he_auth_cache_key_t *k, he_auth_buf_t *out,
                       uint64_t expires, uint64_t now);
/* Whether this (target, stored version, token) was asked for before:
 * remembers it if not. A second request admits a master's rewrite. */
bool he_auth_cache_again(he_auth_cache_t *c, const char *url, size_t url_len, const char *etag,
                         size_t etag_len, const char *text, size_t text_len);
unsigned he_auth_cache_entries(const he_auth_cache_t *c);
size_t he_auth_cache_bytes(const he_auth_cache_t *c);

#endif
