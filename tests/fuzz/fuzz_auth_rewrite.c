/* Fuzz target for handler/auth_rewrite.c (and segment/playlist.c's URI
 * walk under it): any bytes as a playlist to tokenise. The output must be
 * the input with the token text added (so at least as long when it is a
 * playlist), and the walk must name only spans inside the input. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "segment/segment.h"
#include "server/handler/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

typedef struct {
    size_t n, last;
} walk_t;

static void on_uri(void *ctx, size_t off, size_t len)
{
    walk_t *w = ctx;
    if (off < w->last || off + len > w->n || len == 0) abort(); /* in order, inside */
    w->last = off + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static const char *const drop[] = {"__token__", NULL};
    static const char *const hosts[] = {"cdn.example.com"};
    he_auth_rewrite_t rw = {.text = "__token__=exp=1~acl=/*~hmac=ab",
                            .text_len = 30,
                            .drop = drop,
                            .hosts = hosts,
                            .nhosts = 1};
    char *buf = malloc(n ? n : 1), *out = NULL;
    size_t cap = 0;
    walk_t w = {.n = n};
    if (!buf) return 0;
    memcpy(buf, d, n);
    int nu = he_seg_playlist_uris(buf, n, on_uri, &w);
    ssize_t got = he_auth_rewrite(buf, n, &rw, &out, &cap);
    if (nu < 0 && got != -EINVAL) abort();
    if (got >= 0 && (size_t)got < n) abort(); /* only ever adds */
    if (nu >= 0 && got < 0 && got != -ENOMEM) abort();
    free(out);
    free(buf);
    return 0;
}
