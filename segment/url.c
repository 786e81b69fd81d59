/* URL rules: the request-target normalizer that keeps the server inside
 * its root, and RFC 3986 reference resolution for playlist URIs.
 *
 * he_seg_url_normalize is the security boundary between the network and
 * the file system. It decodes and checks in one pass and writes only what
 * it has already validated, so no later stage ever sees "..", an encoded
 * separator or a control byte. */
#include "segment/segment.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* Byte classes of the raw request-target. */
enum {
    HE_SEG_C_PLAIN = 0, /* copied as is */
    HE_SEG_C_SLASH,     /* segment separator */
    HE_SEG_C_PCT,       /* start of a %XX escape */
    HE_SEG_C_END,       /* '?' or '#': the path ends here */
    HE_SEG_C_DOT,       /* may form a dot segment */
    HE_SEG_C_BAD        /* never allowed: controls, DEL, backslash */
};

/* One table lookup per byte; everything not listed is PLAIN, which
 * includes bytes >= 0x80 (UTF-8 names are fine). */
static const unsigned char he_seg_url_class[256] = {
    [0x00 ... 0x1f] = HE_SEG_C_BAD, [0x7f] = HE_SEG_C_BAD, ['\\'] = HE_SEG_C_BAD,
    ['/'] = HE_SEG_C_SLASH,         ['%'] = HE_SEG_C_PCT,  ['?'] = HE_SEG_C_END,
    ['#'] = HE_SEG_C_END,           ['.'] = HE_SEG_C_DOT,
};

int he_seg_hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20; /* fold case; digits were handled above */
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int he_seg_url_normalize(const char *target, size_t len, char *out, size_t cap)
{
    /* Per segment we hold back up to two leading dots (dots = 0, 1, 2)
     * until we know whether the segment is ".", ".." or a name that merely
     * starts with dots. The separator before a segment is also held back
     * until the segment's first real byte, so empty and "." segments
     * vanish and nothing written to out is ever taken back. */
    size_t o = 0, i = 1;
    int dots = 0;
    bool named = false;    /* current segment has been written out */
    bool trailing = false; /* the last segment seen was empty: ends in '/' */

    if (target == NULL || len == 0 || target[0] != '/') return -EINVAL;
    if (out == NULL || cap == 0) return -ENAMETOOLONG;
    if (cap > INT_MAX) cap = INT_MAX; /* the length must fit the return type */

    for (;;) {
        unsigned char c;
        int cls;
        if (i < len) {
            c = (unsigned char)target[i++];
            cls = he_seg_url_class[c];
        } else {
            c = 0;
            cls = HE_SEG_C_END;
        }

        if (cls == HE_SEG_C_PCT) {
            if (len - i < 2) return -EINVAL;
            int hi = he_seg_hex_digit((unsigned char)target[i]);
            int lo = he_seg_hex_digit((unsigned char)target[i + 1]);
            if (hi < 0 || lo < 0) return -EINVAL;
            i += 2;
            c = (unsigned char)(hi << 4 | lo);
            /* A decoded '/' would let a name cross directories, and a
             * decoded '?' or '#' is just a byte of the file name. */
            cls = c == '/' ? HE_SEG_C_BAD : he_seg_url_class[c];
            if (cls == HE_SEG_C_END || cls == HE_SEG_C_PCT) cls = HE_SEG_C_PLAIN;
        }

        switch (cls) {
        case HE_SEG_C_BAD:
            return -EINVAL;
        case HE_SEG_C_DOT:
            if (!named && dots < 2) {
                dots++;
                continue;
            }
            break;
        case HE_SEG_C_SLASH:
        case HE_SEG_C_END:
            if (!named && dots == 2) return -EINVAL; /* ".." */
            /* "" and "." segments drop out here, their separator unsent */
            trailing = cls == HE_SEG_C_SLASH || (trailing && !named && dots == 0);
            named = false;
            dots = 0;
            if (cls == HE_SEG_C_SLASH) continue;
            goto done;
        default:
            break;
        }

        /* A byte that makes the current segment a real name: flush the
         * held-back separator and dots, then the byte itself. */
        if (!named) {
            size_t need = (o > 0) + (size_t)dots + 1;
            if (cap - o <= need) return -ENAMETOOLONG;
            if (o > 0) out[o++] = '/';
            while (dots > 0) {
                out[o++] = '.';
                dots--;
            }
            named = true;
        } else if (cap - o <= 1) {
            return -ENAMETOOLONG;
        }
        out[o++] = (char)c;
        /* the common case: a run of plain bytes inside a name */
        size_t run = i;
        while (run < len && he_seg_url_class[(unsigned char)target[run]] == HE_SEG_C_PLAIN)
            run++;
        run -= i;
        if (cap - o <= run) return -ENAMETOOLONG;
        memcpy(out + o, target + i, run);
        o += run;
        i += run;
    }

done:
    /* The query is not ours to interpret, but a raw control byte anywhere
     * in the target means a broken or hostile client. */
    for (; i < len; i++) {
        unsigned char c = (unsigned char)target[i];
        if (c < 0x20 || c == 0x7f) return -EINVAL;
    }
    if (trailing && o > 0) {
        if (cap - o <= 1) return -ENAMETOOLONG;
        out[o++] = '/';
    }
    out[o] = '\0';
    return (int)o;
}

/* ---------------------------------------------------------------- resolve */

/* A URI reference split into its RFC 3986 components. Absent components
 * have NULL pointers; present-but-empty ones ("?" alone) do not. */
typedef struct he_seg_uri {
    const char *scheme, *auth, *path, *query, *frag;
    size_t scheme_len, auth_len, path_len, query_len, frag_len;
} he_seg_uri_t;

static bool he_seg_is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static void he_seg_uri_split(const char *s, he_seg_uri_t *u)
{
    const char *p = s, *q;
    memset(u, 0, sizeof(*u));

    /* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
    if (he_seg_is_alpha(*p)) {
        for (q = p + 1;
             he_seg_is_alpha(*q) || (*q >= '0' && *q <= '9') || *q == '+' || *q == '-' || *q == '.';
             q++)
            ;
        if (*q == ':') {
            u->scheme = p;
            u->scheme_len = (size_t)(q - p);
            p = q + 1;
        }
    }
    if (p[0] == '/' && p[1] == '/') {
        p += 2;
        u->auth = p;
        p += strcspn(p, "/?#");
        u->auth_len = (size_t)(p - u->auth);
    }
    u->path = p;
    p += strcspn(p, "?#");
    u->path_len = (size_t)(p - u->path);
    if (*p == '?') {
        u->query = ++p;
        p += strcspn(p, "#");
        u->query_len = (size_t)(p - u->query);
    }
    if (*p == '#') {
        u->frag = ++p;
        u->frag_len = strlen(p);
    }
}

/* Bounded appender: remembers overflow instead of failing at each call. */
typedef struct he_seg_buf {
    char *p;
    size_t len, cap;
    bool overflow;
} he_seg_buf_t;

static void he_seg_put(he_seg_buf_t *b, const char *s, size_t n)
{
    if (b->overflow || b->cap - b->len <= n) {
        b->overflow = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static bool he_seg_starts(const char *p, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n >= k && memcmp(p, lit, k) == 0;
}

static bool he_seg_equals(const char *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* RFC 3986 5.2.4 remove_dot_segments, in place on p[0, n). The output
 * never grows past the input consumed so far, so one buffer serves both;
 * where the RFC replaces a prefix with "/", we overwrite the input byte
 * just before the remaining input instead. Returns the new length. */
static size_t he_seg_remove_dots(char *p, size_t n)
{
    size_t i = 0, o = 0;
    while (i < n) {
        const char *in = p + i;
        size_t left = n - i;
        if (he_seg_starts(in, left, "../")) {
            i += 3;
        } else if (he_seg_starts(in, left, "./")) {
            i += 2;
        } else if (he_seg_starts(in, left, "/./")) {
            i += 2;
        } else if (he_seg_equals(in, left, "/.")) {
            i += 1;
            p[i] = '/';
        } else if (he_seg_starts(in, left, "/../") || he_seg_equals(in, left, "/..")) {
            if (left == 3) {
                i += 2;
                p[i] = '/';
            } else {
                i += 3;
            }
            while (o > 0 && p[--o] != '/')
                ;
        } else if (he_seg_equals(in, left, ".") || he_seg_equals(in, left, "..")) {
            i = n;
        } else {
            size_t k = 1;
            while (k < left && in[k] != '/')
                k++;
            memmove(p + o, in, k);
            o += k;
            i += k;
        }
    }
    return o;
}

/* Appends the merged path a + c and removes its dot segments in place.
 * The merge must fit in the buffer before the dots go, so a result that
 * would fit only after a long detour ("x/../") reports -ENAMETOOLONG;
 * playlist URIs are far shorter than any buffer this is given. */
static void he_seg_put_path(he_seg_buf_t *b, const char *a, size_t alen, const char *c, size_t clen)
{
    size_t start = b->len;
    he_seg_put(b, a, alen);
    he_seg_put(b, c, clen);
    if (!b->overflow) b->len = start + he_seg_remove_dots(b->p + start, b->len - start);
}

int he_seg_uri_resolve(const char *base, const char *ref, char *out, size_t cap)
{
    he_seg_uri_t B, R;
    he_seg_buf_t b = {out, 0, cap > INT_MAX ? (size_t)INT_MAX : cap, false};
    const char *query = NULL;
    size_t query_len = 0;

    if (base == NULL || ref == NULL) return -EINVAL;
    if (out == NULL || cap == 0) return -ENAMETOOLONG;
    he_seg_uri_split(base, &B);
    he_seg_uri_split(ref, &R);

    /* The scheme and authority come from the first of R, B that has one;
     * RFC 3986 5.3 recomposes them in this order. */
    const he_seg_uri_t *sa = R.scheme ? &R : &B;
    const he_seg_uri_t *au = (R.scheme || R.auth) ? &R : &B;
    if (sa->scheme) {
        he_seg_put(&b, sa->scheme, sa->scheme_len);
        he_seg_put(&b, ":", 1);
    }
    if (au->auth) {
        he_seg_put(&b, "//", 2);
        he_seg_put(&b, au->auth, au->auth_len);
    }

    if (R.scheme || R.auth) {
        he_seg_put_path(&b, R.path, R.path_len, "", 0);
        query = R.query, query_len = R.query_len;
    } else if (R.path_len == 0) {
        /* same document: base path as is, ref query if it has one */
        he_seg_put(&b, B.path, B.path_len);
        if (R.query)
            query = R.query, query_len = R.query_len;
        else
            query = B.query, query_len = B.query_len;
    } else if (R.path[0] == '/') {
        he_seg_put_path(&b, R.path, R.path_len, "", 0);
        query = R.query, query_len = R.query_len;
    } else {
        /* merge (5.2.3): the base's directory, or "/" for "http://h" */
        size_t dir = B.path_len;
        while (dir > 0 && B.path[dir - 1] != '/')
            dir--;
        if (B.auth && B.path_len == 0)
            he_seg_put_path(&b, "/", 1, R.path, R.path_len);
        else
            he_seg_put_path(&b, B.path, dir, R.path, R.path_len);
        query = R.query, query_len = R.query_len;
    }
    if (query) {
        he_seg_put(&b, "?", 1);
        he_seg_put(&b, query, query_len);
    }
    if (R.frag) {
        he_seg_put(&b, "#", 1);
        he_seg_put(&b, R.frag, R.frag_len);
    }
    if (b.overflow) {
        out[0] = '\0';
        return -ENAMETOOLONG;
    }
    out[b.len] = '\0';
    return (int)b.len;
}
