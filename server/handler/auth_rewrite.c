/* A playlist with the viewer's token carried into every URI it names:
 * built on the one playlist parser's URI walk (segment/playlist.c
 * he_seg_playlist_uris), in one pass, the bytes between URIs copied as
 * they are. Only the output buffer is allocated (or the caller's reused),
 * sized once for the worst case: nothing per line. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "segment/segment.h"
#include "server/handler/auth.h"

typedef struct he_auth_rw {
    const he_auth_rewrite_t *rw;
    const char *in;
    size_t done; /* bytes of in already copied or rewritten */
    char *out;
    size_t len, cap;
    bool nomem;
} he_auth_rw_t;

static void he_auth_rw_put(he_auth_rw_t *s, const char *p, size_t n)
{
    if (s->nomem || n == 0) return;
    if (s->len + n > s->cap) {
        size_t cap = s->cap * 2;
        char *o;
        while (cap < s->len + n)
            cap *= 2;
        if (!(o = realloc(s->out, cap))) {
            s->nomem = true;
            return;
        }
        s->out = o;
        s->cap = cap;
    }
    memcpy(s->out + s->len, p, n);
    s->len += n;
}

/* An absolute URI (scheme:...) or network-path reference (//host...):
 * whether it goes to a host the rule lists. A non-http(s) scheme (data:,
 * skd:) never does. Relative references always get the token. */
static bool he_auth_rw_wanted(const he_auth_rewrite_t *rw, const char *u, size_t n)
{
    const char *host = NULL;
    size_t i = 0, hn;

    if (n >= 2 && u[0] == '/' && u[1] == '/') {
        host = u + 2;
    } else {
        while (i < n && u[i] != ':' && u[i] != '/' && u[i] != '?' && u[i] != '#')
            i++;
        if (i == n || u[i] != ':') return true; /* relative */
        if (!((i == 4 && strncasecmp(u, "http", 4) == 0) ||
              (i == 5 && strncasecmp(u, "https", 5) == 0)))
            return false;
        if (n < i + 3 || u[i + 1] != '/' || u[i + 2] != '/') return false;
        host = u + i + 3;
    }
    for (hn = 0; host + hn < u + n && host[hn] != '/' && host[hn] != '?' && host[hn] != '#'; hn++)
        ;
    for (unsigned h = 0; h < rw->nhosts; h++)
        if (strlen(rw->hosts[h]) == hn && strncasecmp(rw->hosts[h], host, hn) == 0) return true;
    return false;
}

static bool he_auth_rw_dropped(const he_auth_rewrite_t *rw, const char *p, size_t n)
{
    const char *eq = memchr(p, '=', n);
    size_t nn = eq ? (size_t)(eq - p) : n;
    for (const char *const *d = rw->drop; d && *d; d++)
        if (strlen(*d) == nn && memcmp(*d, p, nn) == 0) return true;
    return false;
}

static void he_auth_rw_uri(void *ctx, size_t off, size_t n)
{
    he_auth_rw_t *s = ctx;
    const he_auth_rewrite_t *rw = s->rw;
    const char *u = s->in + off, *frag = memchr(u, '#', n);
    size_t base = frag ? (size_t)(frag - u) : n;
    const char *q = memchr(u, '?', base);
    char sep = '?';

    he_auth_rw_put(s, s->in + s->done, off - s->done);
    s->done = off + n;
    if (!he_auth_rw_wanted(rw, u, n)) {
        he_auth_rw_put(s, u, n);
        return;
    }
    he_auth_rw_put(s, u, q ? (size_t)(q - u) : base);
    if (q) { /* the URI's own parameters, but a token of its own */
        const char *p = q + 1, *qe = u + base;
        while (p < qe) {
            const char *amp = memchr(p, '&', (size_t)(qe - p));
            size_t pn = (size_t)((amp ? amp : qe) - p);
            if (pn && !he_auth_rw_dropped(rw, p, pn)) {
                he_auth_rw_put(s, &sep, 1);
                he_auth_rw_put(s, p, pn);
                sep = '&';
            }
            p = amp ? amp + 1 : qe;
        }
    }
    he_auth_rw_put(s, &sep, 1);
    he_auth_rw_put(s, rw->text, rw->text_len);
    he_auth_rw_put(s, u + base, n - base); /* the fragment */
}

ssize_t he_auth_rewrite(const char *in, size_t len, const he_auth_rewrite_t *rw, char **out,
                        size_t *cap)
{
    he_auth_rw_t s = {.rw = rw, .in = in};
    size_t lines = 1;
    int n;

    /* a line names at most one URI: sized for that, the buffer never
     * grows (a realloc of a long media playlist's output cost more than
     * its rewrite); memchr runs at memory speed */
    for (const char *p = in, *e = in + len; p < e && (p = memchr(p, '\n', (size_t)(e - p))); p++)
        lines++;
    s.cap = len + lines * (rw->text_len + 1) + 64;
    if (*out && *cap >= s.cap) {
        s.out = *out;
        s.cap = *cap;
    } else {
        char *o = realloc(*out, s.cap);
        if (!o) return -ENOMEM;
        s.out = *out = o;
        *cap = s.cap;
    }
    n = he_seg_playlist_uris(in, len, he_auth_rw_uri, &s);
    if (n < 0) return n;
    he_auth_rw_put(&s, in + s.done, len - s.done);
    *out = s.out;
    *cap = s.cap;
    if (s.nomem) return -ENOMEM;
    return (ssize_t)s.len;
}
