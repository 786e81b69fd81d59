/* Answering a parsed request: routing, validators, ranges, headers, and the
 * body source. Small bodies (playlists, keys, error pages) leave in one
 * send together with the header. File bodies (segments) leave zero-copy by
 * sendfile(2) after the header, which goes first with MSG_MORE so header
 * and first body bytes share a packet. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include "server/base/alog_ring.h"
#include "server/http/access.h"
#include "server/base/hbuf.h"
#include "server/http/http_util.h"
#include "server/base/log.h"
#include "server/server.h"
#include "server/net/tls.h"
#include "server/handler/cache_glue.h"

/* Most a single sendfile may move before the worker looks at its other
 * connections again (like nginx's sendfile_max_chunk). Smaller chunks keep
 * each socket's queue, and so the pages and skbs in flight, small enough to
 * stay in cache. Measured here (HLS line rate, 100 viewers, loadgen with
 * MSG_TRUNC, one worker; server CPU-s per GB, 2 runs each): 4 MiB
 * 0.44-0.47, 1 MiB 0.33, 512 KiB 0.24-0.26, 256 KiB 0.13-0.16, 128 KiB
 * 0.13-0.14, 64 KiB 0.15-0.16. TCP_CORK around the body helped at 4 MiB
 * (0.39-0.40) but not at 256 KiB (0.14-0.17), so it is not used. */
#define HE_SENDFILE_CHUNK (256u << 10)

void he__worker_refresh_date(he_worker_t *w)
{
    time_t now = time(NULL);
    if (now != w->date_sec) {
        w->date_sec = now;
        he_http_date_format(now, w->date);
    }
}

/* Status line and the headers every response carries. */
static void he_respond_start(he_worker_t *w, he_conn_t *c, he_hbuf_t *b, int status)
{
    b->p = c->hdr;
    b->len = 0;
    b->cap = HE_CONN_HDR_CAP;
    b->overflow = false;
    c->status = status;
    he_hb_lit(b, "HTTP/1.1 ");
    he_hb_u64(b, (uint64_t)status);
    he_hb_lit(b, " ");
    he_hb_str(b, he_http_reason(status));
    he_hb_lit(b, "\r\nServer: hlsedge\r\nDate: ");
    he_hb_mem(b, w->date, 29);
    he_hb_lit(b, "\r\n");
    if (w->conf->cors_allow_origin[0]) {
        he_hb_lit(b, "Access-Control-Allow-Origin: ");
        he_hb_str(b, w->conf->cors_allow_origin);
        he_hb_lit(b, "\r\n");
    }
}

static void he_respond_end(he_worker_t *w, he_conn_t *c, he_hbuf_t *b)
{
    if (c->close_after || w->draining) {
        c->close_after = true;
        he_hb_lit(b, "Connection: close\r\n\r\n");
    } else if (c->req.http_major == 1 && c->req.http_minor == 0) {
        he_hb_lit(b, "Connection: keep-alive\r\n\r\n");
    } else {
        he_hb_lit(b, "\r\n");
    }
    c->hdr_len = (uint32_t)b->len;
    c->head_len = (uint16_t)b->len; /* for the access log's body bytes */
    c->hdr_sent = 0;
}

/* ---------------------------------------------------------------- sending */

/* The last byte of a response went to the kernel: account for it (the
 * counters, both latency histograms, the access log record), then let the
 * connection move on. */
static void he_respond_finish(he_worker_t *w, he_conn_t *c)
{
    he_stats_t *st = &w->stats;
    uint32_t gen = c->gen;
    if (c->status >= 100 && c->status < 600) st->status_class[c->status / 100]++;
    st->bytes_out += c->bytes_sent;
    st->kind[c->file ? c->file->kind : HE_SEG_KIND_OTHER]++;
    if (!w->stats_off || he_alog_ring_on(w->alog)) {
        /* The batch's clock, like t_start_ns and t_first_byte_ns: one clock
         * read per batch of completions, not per request. */
        uint64_t now = he__batch_ns, t0 = c->req.t_start_ns;
        uint64_t fb = c->t_first_byte_ns && c->t_first_byte_ns < now ? c->t_first_byte_ns : now;
        uint64_t ttfb_us = 0, total_us = 0;
        if (t0 && now >= t0) {
            total_us = (now - t0) / 1000;
            ttfb_us = fb >= t0 ? (fb - t0) / 1000 : 0;
        }
        if (!w->stats_off) {
            he_hist_record(&st->ttfb, ttfb_us);
            he_hist_record(&st->total, total_us);
        }
        if (he_alog_ring_on(w->alog)) he_alog_push(w, c, now, ttfb_us, total_us);
    }
    if (c->file) {
        he_fcache_put(w->fcache, c->file);
        c->file = NULL;
    }
    if (c->tls) he__tls_account(w, c);
    c->body_kind = HE_BODY_NONE;
    c->bytes_sent = 0;
    he__conn_response_done(w, c);
    /* Retired by a reload while this response was under way: its header
     * did not say Connection: close, so the connection stays for one more
     * request, which will. (A pipelined response already started again
     * does this when it finishes.) */
    if (w->soft_drain && c->gen == gen && c->in_use && !c->closing && !c->busy)
        c->close_after = true;
}

static void he_respond_submit_mem(he_worker_t *w, he_conn_t *c)
{
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    size_t hrem = c->hdr_len - c->hdr_sent;
    size_t brem = c->body_kind == HE_BODY_MEM ? (size_t)(c->body_end - c->body_off) : 0;

    if (brem && hrem && c->hdr_len + brem <= HE_CONN_HDR_CAP) {
        /* A small body costs less copied behind the header than described
         * by a second iovec: one plain send, no msghdr to import. */
        memcpy(c->hdr + c->hdr_len, c->file->body + c->body_off, brem);
        c->hdr_len += (uint32_t)brem;
        hrem += brem;
        c->body_off = c->body_end;
        brem = 0;
    }
    if (brem == 0) {
        io_uring_prep_send(sqe, c->fd, c->hdr + c->hdr_sent, hrem, MSG_NOSIGNAL);
    } else if (hrem == 0) {
        io_uring_prep_send(sqe, c->fd, c->file->body + c->body_off, brem, MSG_NOSIGNAL);
    } else {
        c->iov[0].iov_base = c->hdr + c->hdr_sent;
        c->iov[0].iov_len = hrem;
        c->iov[1].iov_base = c->file->body + c->body_off;
        c->iov[1].iov_len = brem;
        memset(&c->msg, 0, sizeof(c->msg));
        c->msg.msg_iov = c->iov;
        c->msg.msg_iovlen = 2;
        io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
    }
    he__worker_sqe_conn(w, sqe, c, HE_OP_SEND);
}

static void he_respond_arm_pollout(he_worker_t *w, he_conn_t *c)
{
    struct io_uring_sqe *sqe = he__worker_sqe(w);
    io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
    he__worker_sqe_conn(w, sqe, c, HE_OP_POLLOUT);
}

static void he_respond_send_error(he_worker_t *w, he_conn_t *c, int err)
{
    if (err == -ECONNRESET || err == -EPIPE) w->stats.errors[HE_STATS_ERR_RESET]++;
    he__conn_close(w, c);
}

/* sendfile(2) on the worker: the socket is non-blocking, and the file's
 * pages are in the page cache for any segment worth caching. io_uring has
 * no sendfile; IORING_OP_SPLICE needs a pipe and two linked operations per
 * chunk. Measured here (tests/bench/splice_cost.c, 4.6 MB segment over
 * loopback, sender CPU per GB, 3 runs): sendfile 0.28-0.37 s, io_uring
 * splice 0.43-0.55 s. */
static void he_respond_sendfile(he_worker_t *w, he_conn_t *c)
{
    off_t off = (off_t)c->body_off;
    uint64_t want = c->body_end - c->body_off;
    ssize_t n;
    int err, derr;

    if (want > HE_SENDFILE_CHUNK) want = HE_SENDFILE_CHUNK;
    n = sendfile(c->fd, c->file->fd, &off, (size_t)want);
    if (n > 0) {
        /* Often the same batch that parsed the request: the batch clock
         * would say 0 us. One clock read per file response is nothing
         * next to its sendfile. */
        if (!c->t_first_byte_ns) c->t_first_byte_ns = he__now_ns();
        c->body_off += (uint64_t)n;
        c->bytes_sent += (uint64_t)n;
        he__conn_timer_set(w, c, HE_TIMER_SEND);
        if (c->body_off == c->body_end) {
            he_respond_finish(w, c);
            return;
        }
        /* Short or chunk-limited: wait until the socket has room again (a
         * poll on a writable socket completes at once). */
        he_respond_arm_pollout(w, c);
        return;
    }
    if (n == 0) { /* the file shrank under us: the length we promised is a lie */
        he_log_warn("worker %u: %s shrank while sending, closing", w->id, c->file->path);
        if (c->file->ssd) he__rcache_file_error(w, c, -EBADMSG);
        he__conn_close(w, c);
        return;
    }
    err = -errno; /* before anything that may clobber it (malloc, logging) */
    if (err == -EAGAIN) {
        he_respond_arm_pollout(w, c);
        return;
    }
    if (c->file->ssd && (derr = he__rcache_sendfile_disk_error(c->file->fd, c->body_off, err)))
        he__rcache_file_error(w, c, derr);
    he_respond_send_error(w, c, err);
}

/* TLS without kTLS: SSL_write from the header, RAM bodies and the file's
 * mapping (server/tls_conn.c). With kTLS the plain path below is used as
 * is: the kernel encrypts what send and sendfile hand it. */
static void he_respond_send_tls(he_worker_t *w, he_conn_t *c)
{
    int rc = he__tls_write_response(w, c);
    if (rc == HE_TLS_DONE)
        he_respond_finish(w, c);
    else if (rc == HE_TLS_AGAIN)
        he_respond_arm_pollout(w, c);
    else if (rc < 0)
        he_respond_send_error(w, c, rc);
    /* HE_TLS_AGAIN_READ: the connection's read poll resumes it */
}

static void he_respond_send(he_worker_t *w, he_conn_t *c)
{
    if (he__tls_userspace(c)) {
        he_respond_send_tls(w, c);
        return;
    }
    if (c->body_kind != HE_BODY_FILE) {
        he_respond_submit_mem(w, c);
        return;
    }
    /* Header first, directly: it is small and the socket has room in all
     * but pipelined cases; MSG_MORE holds it for the file's first bytes. */
    while (c->hdr_sent < c->hdr_len) {
        ssize_t n = send(c->fd, c->hdr + c->hdr_sent, c->hdr_len - c->hdr_sent,
                         MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE);
        if (n < 0) {
            if (errno == EAGAIN) {
                he_respond_arm_pollout(w, c);
                return;
            }
            he_respond_send_error(w, c, -errno);
            return;
        }
        c->hdr_sent += (uint32_t)n;
        c->bytes_sent += (uint64_t)n;
    }
    he_respond_sendfile(w, c);
}

void he__respond_continue(he_worker_t *w, he_conn_t *c, int res)
{
    size_t n;
    if (res == -EAGAIN) { /* sockets are non-blocking for sendfile's sake */
        he_respond_arm_pollout(w, c);
        return;
    }
    if (res < 0) {
        he_respond_send_error(w, c, res);
        return;
    }
    n = (size_t)res;
    if (!c->t_first_byte_ns) c->t_first_byte_ns = he__batch_ns;
    c->bytes_sent += n;
    if (n) he__conn_timer_set(w, c, HE_TIMER_SEND);
    if (c->hdr_sent < c->hdr_len) {
        size_t h = c->hdr_len - c->hdr_sent;
        if (n < h) h = n;
        c->hdr_sent += (uint32_t)h;
        n -= h;
    }
    c->body_off += n;
    if (c->hdr_sent == c->hdr_len && (c->body_kind != HE_BODY_MEM || c->body_off == c->body_end)) {
        he_respond_finish(w, c);
        return;
    }
    he_respond_submit_mem(w, c);
}

void he__respond_pollout(he_worker_t *w, he_conn_t *c, int res)
{
    if (res < 0 && res != -ECANCELED) {
        he_respond_send_error(w, c, res);
        return;
    }
    if (res >= 0 && (res & (POLLERR | POLLHUP)) && !(res & POLLOUT)) {
        he_respond_send_error(w, c, -ECONNRESET);
        return;
    }
    he_respond_send(w, c);
}

/* ---------------------------------------------------------------- routing */

void he__respond_error(he_worker_t *w, he_conn_t *c, int status)
{
    he_hbuf_t b;
    char body[128];
    int blen = snprintf(body, sizeof(body), "%d %s\n", status, he_http_reason(status));

    if (status == 400 || status == 414 || status == 431) c->close_after = true;
    he_respond_start(w, c, &b, status);
    if (status == 405) he_hb_lit(&b, "Allow: GET, HEAD, OPTIONS\r\n");
    he_hb_lit(&b, "Content-Type: text/plain\r\nContent-Length: ");
    he_hb_u64(&b, (uint64_t)blen);
    he_hb_lit(&b, "\r\n");
    he_respond_end(w, c, &b);
    /* the parser records the method first thing, so even a request cut
     * short by a 400, 414 or 431 is known to be HEAD */
    if (c->req.method != HTTP_HEAD) he_hb_mem(&b, body, (size_t)blen);
    c->hdr_len = (uint32_t)b.len;
    c->body_kind = HE_BODY_NONE;
    he_respond_send(w, c);
}

static void he_respond_options(he_worker_t *w, he_conn_t *c)
{
    he_hbuf_t b;
    he_respond_start(w, c, &b, 204);
    he_hb_lit(&b, "Allow: GET, HEAD, OPTIONS\r\n");
    if (w->conf->cors_allow_origin[0])
        he_hb_lit(&b, "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
                      "Access-Control-Allow-Headers: Range, If-None-Match, If-Modified-Since, "
                      "Origin, Accept\r\n"
                      "Access-Control-Max-Age: 86400\r\n");
    /* no Content-Length: a 204 must not carry one (RFC 9110 8.6) */
    he_respond_end(w, c, &b);
    c->body_kind = HE_BODY_NONE;
    he_respond_send(w, c);
}

/* RFC 9110 8.8.2.1: a Last-Modified later than Date (a file stamped in
 * the future) is sent as the Date. Conditionals compare the same time. */
static time_t he_respond_mtime(const he_worker_t *w, const he_file_t *f)
{
    return f->mtime > w->date_sec ? w->date_sec : f->mtime;
}

static void he_respond_validators(he_worker_t *w, he_hbuf_t *b, he_file_t *f)
{
    const char *cc = w->conf->cache_control[f->type];
    he_hb_lit(b, "Last-Modified: ");
    he_hb_mem(b, he_respond_mtime(w, f) != f->mtime ? w->date : f->last_modified, 29);
    he_hb_lit(b, "\r\nETag: ");
    he_hb_mem(b, f->etag, f->etag_len);
    he_hb_lit(b, "\r\n");
    if (cc[0]) {
        he_hb_lit(b, "Cache-Control: ");
        he_hb_str(b, cc);
        he_hb_lit(b, "\r\n");
    }
}

void he__respond(he_worker_t *w, he_conn_t *c)
{
    he_req_t *r = &c->req;
    char path[PATH_MAX];
    he_file_t *f;
    he_hbuf_t b;
    he_http_cond_t cond;
    uint64_t first = 0, last = 0;
    he_http_range_result_t range = HE_HTTP_RANGE_NONE;
    int len, err = 0;
    bool hit, cache_skip;

    /* the edge cache (respond_cache.c): set again by an origin-first
     * fallback, which answers this request from root */
    cache_skip = c->cache_skip;
    c->cache_skip = false;
    c->cache_st = 0;
    /* a fallback re-enters here for the same request: it was counted */
    if (!cache_skip) switch (r->method) {
        case HTTP_GET:
            w->stats.requests[HE_STATS_METHOD_GET]++;
            break;
        case HTTP_HEAD:
            w->stats.requests[HE_STATS_METHOD_HEAD]++;
            break;
        case HTTP_OPTIONS:
            w->stats.requests[HE_STATS_METHOD_OPTIONS]++;
            break;
        default:
            w->stats.requests[HE_STATS_METHOD_OTHER]++;
            break;
        }
    c->t_first_byte_ns = 0;
    c->bytes_sent = 0;
    if (r->has_body) c->close_after = true;
    /* timeouts.keepalive 0: say so in this response, not by closing
     * under the client at the next tick */
    if (!r->keepalive || !w->conf->keepalive_timeout_ms) c->close_after = true;
    if (r->method == HTTP_PURGE && w->cache) {
        he__rcache_purge(w, c);
        return;
    }

    if (r->method != HTTP_GET && r->method != HTTP_HEAD && r->method != HTTP_OPTIONS) {
        he__respond_error(w, c, 405);
        return;
    }
    if (r->method == HTTP_OPTIONS && r->url_len == 1 && c->url[0] == '*') {
        he_respond_options(w, c);
        return;
    }
    len = he_seg_url_normalize(c->url, r->url_len, path, sizeof(path));
    if (len < 0) {
        if (len != -ENAMETOOLONG) w->stats.errors[HE_STATS_ERR_BAD_REQUEST]++;
        he__respond_error(w, c, len == -ENAMETOOLONG ? 414 : 400);
        return;
    }
    if (r->method == HTTP_OPTIONS) {
        he_respond_options(w, c);
        return;
    }

    if (w->cache && w->cache->conf->origin_first && !cache_skip && he__rcache_respond(w, c)) return;
    f = he_fcache_get(w->fcache, path, (size_t)len, w->now_ms, &err, &hit);
    if (hit)
        w->stats.fcache_hits++;
    else
        w->stats.fcache_misses++;
    if (!f) {
        if (err == -EXDEV || err == -EACCES || err == -EPERM) {
            he_log_info("worker %u: refused /%s: %s", w->id, path,
                        err == -EXDEV ? "resolves outside root" : strerror(-err));
            he__respond_error(w, c, 403);
        } else if (err == -ENOENT && w->cache && !w->cache->conf->origin_first &&
                   he__rcache_respond(w, c)) {
            return; /* root-first: not in the library, so the cache or the origin */
        } else if (err == -ENOENT && cache_skip) {
            he__respond_error(w, c, 502); /* origin-first: neither the origin nor root */
        } else if (err == -ENOENT || err == -EISDIR) {
            he__respond_error(w, c, 404);
        } else {
            he_log_error("worker %u: open /%s: %s", w->id, path, strerror(-err));
            he__respond_error(w, c, 500);
        }
        return;
    }
    c->file = f;

    memset(&cond, 0, sizeof(cond));
    if (r->inm_len) cond.if_none_match = r->inm, cond.if_none_match_len = r->inm_len;
    if (r->ims_len) cond.if_modified_since = r->ims, cond.if_modified_since_len = r->ims_len;
    if (r->im_len) cond.if_match = r->im, cond.if_match_len = r->im_len;
    if (r->ius_len) cond.if_unmodified_since = r->ius, cond.if_unmodified_since_len = r->ius_len;
    switch (he_http_cond_eval(&cond, f->etag, f->etag_len, he_respond_mtime(w, f))) {
    case HE_HTTP_COND_NOT_MODIFIED:
        he_respond_start(w, c, &b, 304);
        he_respond_validators(w, &b, f);
        he_respond_end(w, c, &b);
        c->body_kind = HE_BODY_NONE;
        he_respond_send(w, c);
        return;
    case HE_HTTP_COND_PRECONDITION_FAILED:
        he__respond_error(w, c, 412);
        return;
    default:
        break;
    }

    /* the file's own mtime: a Last-Modified sent as the Date is no strong
     * validator (RFC 9110 8.8.2.2), so an If-Range date never matches it */
    if (r->range_len && (!r->if_range_len || he_http_if_range_ok(r->if_range, r->if_range_len,
                                                                 f->etag, f->etag_len, f->mtime)))
        range = he_http_range_parse(r->range, r->range_len, f->size, &first, &last);
    if (range == HE_HTTP_RANGE_UNSATISFIABLE) {
        he_respond_start(w, c, &b, 416);
        he_hb_lit(&b, "Content-Range: bytes */");
        he_hb_u64(&b, f->size);
        he_hb_lit(&b, "\r\nContent-Length: 0\r\n");
        he_respond_end(w, c, &b);
        c->body_kind = HE_BODY_NONE;
        he_respond_send(w, c);
        return;
    }
    if (range != HE_HTTP_RANGE_OK) {
        first = 0;
        last = f->size ? f->size - 1 : 0;
    }

    he_respond_start(w, c, &b, range == HE_HTTP_RANGE_OK ? 206 : 200);
    he_hb_lit(&b, "Content-Type: ");
    he_hb_str(&b, he_seg_type_mime(f->type));
    he_hb_lit(&b, "\r\nContent-Length: ");
    he_hb_u64(&b, f->size ? last - first + 1 : 0);
    he_hb_lit(&b, "\r\nAccept-Ranges: bytes\r\n");
    if (range == HE_HTTP_RANGE_OK) {
        he_hb_lit(&b, "Content-Range: bytes ");
        he_hb_u64(&b, first);
        he_hb_lit(&b, "-");
        he_hb_u64(&b, last);
        he_hb_lit(&b, "/");
        he_hb_u64(&b, f->size);
        he_hb_lit(&b, "\r\n");
    }
    if (w->conf->cors_allow_origin[0])
        he_hb_lit(&b, "Access-Control-Expose-Headers: Content-Length, Content-Range, ETag\r\n");
    he_respond_validators(w, &b, f);
    he_respond_end(w, c, &b);
    if (b.overflow) {
        he_log_error("worker %u: response header for /%s over %d bytes", w->id, path,
                     HE_CONN_HDR_CAP);
        he__conn_close(w, c);
        return;
    }

    c->body_off = first;
    c->body_end = f->size ? last + 1 : 0;
    if (r->method == HTTP_HEAD || c->body_end == c->body_off)
        c->body_kind = HE_BODY_NONE;
    else
        c->body_kind = f->body ? HE_BODY_MEM : HE_BODY_FILE;
    he_respond_send(w, c);
}

/* For the cache's responses (respond_cache.c): the accounting and the
 * memory/file send paths of this file. */
void he__respond_finish(he_worker_t *w, he_conn_t *c)
{
    he_respond_finish(w, c);
}

void he__respond_send(he_worker_t *w, he_conn_t *c)
{
    he_respond_send(w, c);
}
