/* Body sources: what every kind shares, and the memory source. The kinds
 * that hold files or cache objects are the handlers' (handler/); the send
 * path (send.c) sees only he_body_ops_t. */
#include <errno.h>
#include <string.h>

#include "server/net/net.h"

static ssize_t he_body_mem_peek(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem)
{
    (void)need_mem;
    s->p = b->mem + off;
    s->fd = -1;
    s->file_off = 0;
    s->len = (size_t)(b->end - off);
    s->fixed_off = -1;
    s->mapped = false;
    return (ssize_t)s->len;
}

static void he_body_mem_release(he_body_t *b)
{
    if (b->done) b->done(b->ctx);
}

static const he_body_ops_t he_body_mem_ops = {
    .peek = he_body_mem_peek,
    .release = he_body_mem_release,
};

void he__body_mem(he_body_t *b, const char *p, size_t len, void (*done)(void *ctx), void *ctx)
{
    memset(b, 0, sizeof(*b));
    b->ops = &he_body_mem_ops;
    b->mem = p;
    b->end = len;
    b->done = done;
    b->ctx = ctx;
}

void he__body_advance(he_body_t *b, size_t n)
{
    if (b->ops && b->ops->advance)
        b->ops->advance(b, n);
    else
        b->off += n;
}

void he__body_release(he_body_t *b)
{
    const he_body_ops_t *ops = b->ops;
    if (ops && ops->release) ops->release(b);
    memset(b, 0, sizeof(*b));
}
