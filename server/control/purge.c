/* POST /purge on the admin listener: the target comes in the body or as
 * ?path= (percent-decoded; a + is a +). The cache itself removes the entries
 * (he_server_purge); this file reads the request and words the answer:
 *
 *   200 "purged"       entries went from the RAM or SSD tier
 *   404 "not cached"   the target's key was in neither
 *   404 "purge: no cache ..."   no generation has a cache (no origin.urls)
 *   400                no target, or one that makes no cache key
 *   500                out of memory */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "segment/segment.h"
#include "server/control/control.h"

#define HE_PURGE_TARGET_MAX 4096

/* %XX only. '+' stays a '+': the value is a URL path, and a path's '+'
 * is a '+' (the viewer's request for /a+b.ts makes the key /a+b.ts); a
 * space comes as %20. A '%' not followed by two hex digits stays as it is. */
static size_t he_purge_unescape(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        int hi, lo;
        if (in[i] == '%' && i + 2 < n && (hi = he_seg_hex_digit((unsigned char)in[i + 1])) >= 0 &&
            (lo = he_seg_hex_digit((unsigned char)in[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
            continue;
        }
        out[o++] = in[i];
    }
    out[o] = 0;
    return o;
}

/* The target of req into target (NUL-terminated); its length, 0: none. */
static size_t he_purge_target(const he_admin_req_t *req, char *target, size_t cap)
{
    size_t n;

    for (const char *q = req->query; q && *q;) {
        const char *amp = strchr(q, '&');
        size_t l = amp ? (size_t)(amp - q) : strlen(q);
        if (l > 5 && memcmp(q, "path=", 5) == 0)
            return he_purge_unescape(q + 5, l - 5, target, cap);
        q = amp ? amp + 1 : NULL;
    }
    n = req->body_len;
    while (n && (req->body[n - 1] == '\n' || req->body[n - 1] == '\r' || req->body[n - 1] == ' '))
        n--;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(target, req->body, n);
    target[n] = 0;
    return n;
}

void he__control_route_purge(void *ctx, const he_admin_req_t *req, he_admin_resp_t *resp)
{
    he_control_t *ctl = ctx;
    char target[HE_PURGE_TARGET_MAX];
    size_t n = he_purge_target(req, target, sizeof(target));
    int rc = -ENODEV;

    if (n == 0) {
        he_admin_resp_text(resp, 400, "purge: give the path in the body or as ?path=\n");
        return;
    }
    /* The newest generation that has a cache makes the key: a reload that
     * turned the cache off leaves the older ones' entries purgeable while
     * they drain. */
    for (unsigned i = ctl->ngens; i-- > 0 && rc == -ENODEV;)
        rc = he_server_purge(ctl->gens[i].server, target, n);
    if (rc == -ENODEV)
        he_admin_resp_text(resp, 404, "purge: no cache (origin.urls is not set)\n");
    else if (rc == -ENOMEM)
        he_admin_resp_text(resp, 500, "out of memory\n");
    else if (rc < 0)
        he_admin_resp_text(resp, 400, "purge: not a valid path\n");
    else if (rc == 0)
        he_admin_resp_text(resp, 404, "not cached\n");
    else
        he_admin_resp_text(resp, 200, "purged\n");
}
