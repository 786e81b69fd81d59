/* The file handler: the library under root, through the per-worker
 * open-file cache (fcache.c). Small bodies (playlists, keys) are in
 * memory and leave in one send with the head; others are a file range,
 * sent zero-copy by vmsplice of its mapping or of its copy in huge pages
 * (fcopy.c) over plain TCP, by sendfile over kTLS, and from the mapping
 * under userspace TLS. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/base/log.h"
#include "server/handler/handler.h"

static inline he_fcache_t *he_file_fc(he_worker_t *w)
{
    return w->hook_data[HE_HOOK_FILE];
}

/* ---------------------------------------------------------------- body sources */

static ssize_t he_file_body_peek(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem)
{
    he_file_t *f = b->ctx;
    s->len = (size_t)(b->end - off);
    s->fixed_off = -1;
    s->mapped = false;
    s->fd = -1;
    s->file_off = 0;
    s->spliceable = s->file_too = s->cache_ram = s->file_copy = false;
    if (f->body) {
        s->p = f->body + off;
    } else if (!need_mem) {
        s->p = NULL;
        s->fd = f->fd;
        s->file_off = off;
    } else {
        int err = 0;
        const char *m = he_fcache_map(NULL, f, &err);
        if (!m) {
            he_log_error("mmap /%s: %s", f->path, strerror(err ? -err : EIO));
            return err ? err : -EIO;
        }
        s->p = m + off;
        s->mapped = true;
    }
    return (ssize_t)s->len;
}

/* The file's bytes as its mapping, or its copy in huge pages, and as a
 * file range: the send path vmsplices the memory over plain TCP
 * (send.file_splice) and sends the file over kTLS. A mapping's pages are
 * the page cache's, as sendfile's are. */
static ssize_t he_file_splice_peek(he_body_t *b, uint64_t off, he_body_span_t *s, bool need_mem)
{
    he_file_t *f = b->ctx;
    ssize_t n = he_file_body_peek(b, off, s, need_mem);
    int err = 0;
    const char *m;

    if (n <= 0 || f->body || need_mem) return n;
    if (f->copy) {
        /* the bytes in huge pages (fcopy.c), short spans too: a response
         * is all the copy's, even if the file was truncated since */
        s->p = he_fcopy_bytes(f->copy) + off;
        s->file_copy = s->spliceable = s->file_too = true;
        return n;
    }
    /* a short span stays a file range: the send path would not splice it,
     * and a copy from the mapping could fault on a file that shrank */
    if (n < (ssize_t)HE_SEND_SPLICE_MIN) return n;
    if (!(m = he_fcache_map(NULL, f, &err))) return n; /* no mapping: the file alone */
    s->p = m + off;
    s->mapped = true;
    s->spliceable = s->file_too = true;
    s->cache_ram = false;
    return n;
}

static void he_file_body_release(he_body_t *b)
{
    he_fcache_put(NULL, b->ctx);
}

/* The file changed under the response (it shrank): revalidation could not
 * see it yet, so the entry goes now. */
static void he_file_body_error(he_body_t *b, he_worker_t *w, int err)
{
    (void)err;
    he_fcache_invalidate(he_file_fc(w), b->ctx);
}

static const he_body_ops_t he_file_body_ops = {
    .peek = he_file_body_peek,
    .release = he_file_body_release,
    .error = he_file_body_error,
};

static const he_body_ops_t he_file_splice_ops = {
    .peek = he_file_splice_peek,
    .release = he_file_body_release,
    .error = he_file_body_error,
};

/* ---------------------------------------------------------------- the handler */

static void he_file_validators(he_worker_t *w, he_http_head_t *h, const he_file_t *f)
{
    h->last_modified = he_file_mtime(w, f->mtime) != f->mtime ? w->date : f->last_modified;
    h->last_modified_len = 29;
    h->etag = f->etag;
    h->etag_len = f->etag_len;
    h->cache_control = true;
    h->type = f->type;
}

/* A file asked for again, to be vmspliced over plain TCP, is sent from its
 * copy in huge pages when fd_cache.memory has room (fcopy.c). kTLS sends
 * the file and userspace TLS its mapping, so neither asks for a copy. */
static void he_file_copy(he_worker_t *w, const he_req_t *r, he_file_t *f, const he_body_t *body)
{
    if (body->ops == &he_file_splice_ops && !r->conn->tls)
        he_fcache_copy(he_file_fc(w), f, w->now_ms);
}

he_handler_result_t he_file_handle(he_worker_t *w, he_req_t *r, const char *path, size_t len)
{
    he_fcache_t *fc = he_file_fc(w);
    he_http_head_t h;
    he_body_t body;
    he_file_t *f;
    uint64_t first, last;
    int err = 0, status;
    bool hit;

    f = he_fcache_get(fc, path, len, w->now_ms, &err, &hit);
    if (hit)
        w->stats.fcache_hits++;
    else
        w->stats.fcache_misses++;
    if (!f) {
        /* a live LL playlist's preload hint: held until written (6.2.6) */
        if (err == -ENOENT && he__llhold_hint(w, r, path, len)) return HE_HANDLER_DONE;
        /* with no origin to ask, a blocking reload's 404 lasts 4 TD (B.1) */
        if (err == -ENOENT && !w->server->cache && he__llhold_blocking_404(w, r, path, len))
            return HE_HANDLER_DONE;
        if (err == -ENOENT) return HE_HANDLER_DECLINED; /* the edge cache may have it */
        if (err == -EXDEV || err == -EACCES || err == -EPERM) {
            he_log_info("worker %u: refused /%s: %s", w->id, path,
                        err == -EXDEV ? "resolves outside root" : strerror(-err));
            he_http_respond_error(w, r, 403);
        } else if (err == -EISDIR) {
            he_http_respond_error(w, r, 404);
        } else {
            he_log_error("worker %u: open /%s: %s", w->id, path, strerror(-err));
            he_http_respond_error(w, r, 500);
        }
        return HE_HANDLER_DONE;
    }
    r->kind = f->kind;
    /* a live playlist's LL-HLS directives: held, a delta, gzip (llhls.c) */
    if (he__llhls_file(w, r, path, len, f)) return HE_HANDLER_DONE;
    memset(&h, 0, sizeof(h));
    /* the file's own mtime for If-Range: a Last-Modified sent as the Date
     * is no strong validator (RFC 9110 8.8.2.2), so a date never matches it */
    status = he_http_evaluate(r, f->etag, f->etag_len, he_file_mtime(w, f->mtime), f->mtime,
                              f->size, &first, &last);
    switch (status) {
    case 412:
        he_fcache_put(fc, f);
        he_http_respond_error(w, r, 412);
        return HE_HANDLER_DONE;
    case 304:
        h.status = 304;
        he_file_validators(w, &h, f);
        he_fcache_put(fc, f);
        he_auth_respond(w, r, &h, NULL);
        return HE_HANDLER_DONE;
    case 416:
        h.status = 416;
        h.no_ctype = true;
        h.unsatisfied = true;
        h.size = f->size;
        h.has_clen = true;
        he_fcache_put(fc, f);
        he_http_respond(w, r, &h, NULL);
        return HE_HANDLER_DONE;
    default:
        break;
    }
    h.status = status;
    h.has_clen = true;
    h.clen = f->size ? last - first + 1 : 0;
    h.accept_ranges = true;
    h.range = status == 206;
    h.first = first;
    h.last = last;
    h.size = f->size;
    h.expose_headers = true;
    he_file_validators(w, &h, f);
    char ttl[48];
    unsigned part_ttl = f->kind == HE_SEG_KIND_SEGMENT ? he__llhold_part_ttl(w, path, len) : 0;
    if (part_ttl) { /* a part or segment of an LL playlist: 6 TD (Appendix B.1) */
        snprintf(ttl, sizeof(ttl), "Cache-Control: max-age=%u\r\n", part_ttl);
        h.cache_control = false;
        h.extra = ttl;
    }
    memset(&body, 0, sizeof(body));
    body.ops = w->conf->send_file_splice && !f->body ? &he_file_splice_ops : &he_file_body_ops;
    he_file_copy(w, r, f, &body);
    body.ctx = f;
    body.off = first;
    body.end = f->size ? last + 1 : 0;
    body.name = f->path;
    he_auth_respond(w, r, &h, &body); /* the body holds f's reference now */
    return HE_HANDLER_DONE;
}

/* ---------------------------------------------------------------- worker hooks */

static int he_file_worker_setup(he_worker_t *w)
{
    he_server_t *s = w->server;
    he_fcache_t *fc =
        he_fcache_new(s->root_fd, s->conf->fd_cache_entries, s->conf->fd_cache_valid_ms,
                      s->conf->cache_live_fraction_pct, s->features.openat2_beneath);
    const char *off = NULL;
    if (!fc) return -ENOMEM;
    w->hook_data[HE_HOOK_FILE] = fc;
    /* copies are sent by vmsplice, and are worth it only in huge pages */
    if (!s->conf->fd_cache_memory)
        off = "fd_cache.memory: 0";
    else if (!s->conf->send_file_splice)
        off = "send.file_splice: false";
    else if (!he__thp_available())
        off = "transparent huge pages are off in the kernel";
    he_fcache_copies(fc, !off, w->node);
    /* by every worker of the generation (the same budget), so none can
     * serve before the store has it */
    he_fcopy_configure(off ? 0 : s->conf->fd_cache_memory);
    if (w->id == 0) {
        if (off)
            he_log_info("fd_cache: no copies of files in huge pages (%s)", off);
        else
            he_log_info("fd_cache: copies of files of 1-16 MiB in huge pages, up to %llu MiB",
                        (unsigned long long)(s->conf->fd_cache_memory >> 20));
    }
    return 0;
}

static void he_file_worker_cleanup(he_worker_t *w)
{
    he_fcache_free(he_file_fc(w));
    w->hook_data[HE_HOOK_FILE] = NULL;
}

const he_worker_hooks_t he_file_worker_hooks = {
    .name = "file",
    .setup = he_file_worker_setup,
    .cleanup = he_file_worker_cleanup,
};
