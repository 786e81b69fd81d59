/* HTTP/2 (RFC 9113) with nghttp2: the session of a connection, its
 * streams, the requests they carry, and what a client may not do.
 *
 * A connection becomes HTTP/2 when the TLS handshake chose h2 (ALPN) or a
 * plain one opens with the preface and http2.h2c is on (http1.c). Each
 * stream gets a he_req_t of its own and goes to the same handler as an
 * HTTP/1.1 request once its headers are complete; its answer comes back
 * through he_http_respond (http2_out.c). Requests are handed to the
 * handler after nghttp2_session_mem_recv returns, never from inside it:
 * nghttp2 must not be re-entered, and a handler may answer at once.
 *
 * Limits, each answered with GOAWAY and a counter (he_stats_h2_goaway_t):
 * the streams past http2.max_concurrent_streams are refused by nghttp2
 * (our SETTINGS) and, with client resets, drain a token bucket of
 * http2.max_resets per second (rapid reset, CVE-2023-44487); SETTINGS,
 * PING, PRIORITY, PRIORITY_UPDATE and empty DATA frames drain another of
 * http2.max_control_frames; a header list over http2.max_header_list
 * (which also bounds an HPACK bomb's expansion) ends the session;
 * nghttp2 itself bounds CONTINUATION frames (8 after a HEADERS,
 * CVE-2024-27316), unanswered SETTINGS/PING ACKs (1000) and SETTINGS
 * entries (32), and sends GOAWAY(PROTOCOL_ERROR) for invalid frames. A
 * client that leaves a stream's window at zero for http2.stall_timeout
 * gets that stream reset; one that leaves the connection's window at zero
 * (or reads nothing at all) gets GOAWAY (he_h2_expire). */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/base/log.h"
#include "server/http/http2.h"

/* ---------------------------------------------------------------- limits */

/* Refills both buckets for the time since the last refill. */
static void he_h2_refill(he_h2_conn_t *h2)
{
    const he_conf_t *cf = h2->w->conf;
    uint64_t now = h2->w->now_ms, dt = now - h2->bucket_ms;
    uint64_t rmax = (uint64_t)cf->http2_max_resets * 10, cmax = (uint64_t)cf->http2_max_control * 2;
    uint64_t r, k;

    if (dt == 0) return;
    h2->bucket_ms = now;
    r = h2->reset_tokens + dt * cf->http2_max_resets / 1000;
    k = h2->ctrl_tokens + dt * cf->http2_max_control / 1000;
    h2->reset_tokens = (uint32_t)(r > rmax ? rmax : r);
    h2->ctrl_tokens = (uint32_t)(k > cmax ? cmax : k);
}

/* One token of a bucket; false (and GOAWAY) when it is empty. */
static bool he_h2_take(he_h2_conn_t *h2, uint32_t *tokens, he_stats_h2_goaway_t cause)
{
    he_h2_refill(h2);
    if (*tokens) {
        (*tokens)--;
        return true;
    }
    if (!h2->terminated) {
        he_log_info("worker %u: fd %d: HTTP/2 %s: GOAWAY", h2->w->id, h2->c->fd,
                    cause == HE_STATS_H2_GOAWAY_RAPID_RESET ? "streams reset too fast"
                                                            : "control frame flood");
        he__h2_terminate(h2, cause, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    return false;
}

void he__h2_terminate(he_h2_conn_t *h2, he_stats_h2_goaway_t cause, uint32_t code)
{
    if (h2->terminated || h2->dead) return;
    h2->terminated = true;
    h2->goaway_cause = (int8_t)cause;
    if (nghttp2_session_terminate_session(h2->s, code) != 0) {
        h2->dead = true; /* cannot even queue it: our own GOAWAY */
        h2->dead_code = code;
    }
}

/* nghttp2 failed for good (out of memory, or a flood it detected): the
 * session cannot send any more, so the GOAWAY is ours (http2_out.c). */
static void he_h2_fatal(he_h2_conn_t *h2, int rv)
{
    he_stats_h2_goaway_t cause = HE_STATS_H2_GOAWAY_OTHER;
    h2->dead_code = NGHTTP2_INTERNAL_ERROR;
    if (rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
        cause = HE_STATS_H2_GOAWAY_FLOOD;
        h2->dead_code = NGHTTP2_ENHANCE_YOUR_CALM;
    } else if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
        cause = HE_STATS_H2_GOAWAY_PROTOCOL;
        h2->dead_code = NGHTTP2_PROTOCOL_ERROR;
    }
    he_log_debug("worker %u: fd %d: HTTP/2 session failed: %s", h2->w->id, h2->c->fd,
                 nghttp2_strerror(rv));
    h2->dead = true;
    h2->goaway_cause = (int8_t)cause;
    h2->w->stats.h2_goaway[cause]++; /* the GOAWAY we write is not nghttp2's: count it here */
}

/* ---------------------------------------------------------------- streams */

static he_h2_stream_t *he_h2_stream_of(he_h2_conn_t *h2, int32_t id)
{
    return nghttp2_session_get_stream_user_data(h2->s, id);
}

/* A new stream's fields zeroed, but not its request's header buffers,
 * err_body or url: each is read only up to a length set as it is written
 * (as HTTP/1.1 reuses them). Zeroing the whole stream, 6.8 KB at the
 * default max_uri_bytes, was a fifth of the worker's user-space
 * instructions per playlist request over HTTP/2. */
static void he_h2_stream_clear(he_h2_stream_t *st)
{
    he_req_t *r = &st->req;

    memset(r, 0, offsetof(he_req_t, range));
    memset(&r->range_len, 0, offsetof(he_req_t, accept_enc) - offsetof(he_req_t, range_len));
    memset(&r->authz_len, 0, sizeof(*r) - offsetof(he_req_t, authz_len));
    memset(&st->h2, 0, offsetof(he_h2_stream_t, err_body) - offsetof(he_h2_stream_t, h2));
}

static he_h2_stream_t *he_h2_stream_new(he_h2_conn_t *h2, int32_t id)
{
    he_worker_t *w = h2->w;
    uint32_t cap = w->conf->max_uri_bytes + 1;
    he_h2_stream_t *st = malloc(sizeof(*st) + cap);

    if (!st) return NULL;
    he_h2_stream_clear(st);
    st->h2 = h2;
    st->id = id;
    st->url_cap = cap;
    st->req.conn = h2->c;
    st->req.url = st->url;
    st->req.h2 = st;
    st->req.http_major = 2;
    st->req.keepalive = true;
    st->req.cur_hdr = HE_HDR_NONE;
    st->req.t_start_ns = he__batch_ns;
    st->progress_ms = w->now_ms;
    if (!h2->nstreams) h2->progress_ms = w->now_ms; /* idle is not stalled */
    st->next = h2->streams;
    if (h2->streams) h2->streams->prev = st;
    h2->streams = st;
    h2->nstreams++;
    w->stats.h2_streams_opened++;
    for (size_t i = 0; i < sizeof(h2->early_prio) / sizeof(h2->early_prio[0]); i++)
        if (h2->early_prio[i] == id) st->prio_seen = true;
    if (h2->c->timer != HE_TIMER_H2_STALL) he__conn_timer_set(w, h2->c, HE_TIMER_H2_STALL);
    return st;
}

void he__h2_stream_free(he_h2_conn_t *h2, he_h2_stream_t *st)
{
    he_worker_t *w = h2->w;
    he_conn_t *c = h2->c;

    if (st->prev)
        st->prev->next = st->next;
    else
        h2->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    if (st->ready) { /* closed before the handler saw it */
        he_h2_stream_t **pp = &h2->ready_head, *last = NULL;
        while (*pp && *pp != st) {
            last = *pp;
            pp = &(*pp)->ready_next;
        }
        if (*pp) *pp = st->ready_next;
        if (h2->ready_tail == st) h2->ready_tail = last;
    }
    if (h2->unit == st) h2->unit = NULL;
    he__body_release(&st->body);
    if (st->req.hctx_free) st->req.hctx_free(w, &st->req);
    h2->nstreams--;
    w->stats.h2_streams_closed++;
    free(st);
    if (!h2->nstreams && !c->closing) he__conn_timer_set(w, c, HE_TIMER_H2_IDLE);
}

void he__h2_stream_end(he_h2_conn_t *h2, he_h2_stream_t *st)
{
    he_worker_t *w = h2->w;
    he_conn_t *c = h2->c;
    uint64_t bytes = c->bytes_sent, t_first = c->t_first_byte_ns;

    if (st->ended) return;
    st->ended = true;
    w->stats.h2_requests++;
    /* the end of a response reads the connection's byte count and first
     * byte time: the stream's stand in for them */
    c->bytes_sent = st->bytes;
    c->t_first_byte_ns = st->t_first_ns;
    he__http_response_end(w, c, &st->req);
    c->bytes_sent = bytes;
    c->t_first_byte_ns = t_first;
}

/* ---------------------------------------------------------------- requests */

static uint8_t he_h2_method(const uint8_t *v, size_t n)
{
    static const struct {
        const char *name;
        uint8_t len, method;
    } m[] = {
        {"GET", 3, HTTP_GET},         {"HEAD", 4, HTTP_HEAD},     {"OPTIONS", 7, HTTP_OPTIONS},
        {"PURGE", 5, HTTP_PURGE},     {"POST", 4, HTTP_POST},     {"PUT", 3, HTTP_PUT},
        {"DELETE", 6, HTTP_DELETE},   {"CONNECT", 7, HTTP_CONNECT}, {"PATCH", 5, HTTP_PATCH},
        {"TRACE", 5, HTTP_TRACE},
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (m[i].len == n && memcmp(m[i].name, v, n) == 0) return m[i].method;
    return HTTP_PROPFIND; /* any other method: 405 like any we do not serve */
}

static int he_h2_on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                           size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    he_h2_conn_t *h2 = ud;
    he_h2_stream_t *st;
    he_req_t *r;

    (void)s;
    (void)flags;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    if (!(st = he_h2_stream_of(h2, frame->hd.stream_id))) return 0;
    r = &st->req;
    st->hdr_bytes += (uint32_t)(nlen + vlen + 32);
    if (st->hdr_bytes > h2->w->conf->http2_max_header_list) {
        he_log_info("worker %u: fd %d: HTTP/2 header list over %llu bytes: GOAWAY", h2->w->id,
                    h2->c->fd, (unsigned long long)h2->w->conf->http2_max_header_list);
        he__h2_terminate(h2, HE_STATS_H2_GOAWAY_HEADERS, NGHTTP2_ENHANCE_YOUR_CALM);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (nlen && name[0] == ':') {
        if (nlen == 7 && memcmp(name, ":method", 7) == 0) {
            r->method = he_h2_method(value, vlen);
        } else if (nlen == 5 && memcmp(name, ":path", 5) == 0) {
            if (vlen > h2->w->conf->max_uri_bytes || vlen >= st->url_cap) {
                r->too_long = 14; /* 414 */
            } else {
                memcpy(st->url, value, vlen);
                r->url_len = (uint32_t)vlen;
            }
        }
        return 0; /* :scheme and :authority: one site is served */
    }
    if (nlen == 8 && memcmp(name, "priority", 8) == 0) {
        st->prio_seen = true; /* nghttp2 applies it (RFC 9218) */
        return 0;
    }
    /* the same fields as HTTP/1.1 (http1.c's table): Cookie (RFC 9113
     * 8.2.3 lets a client split it, the pieces join with "; "), Via,
     * Authorization and the conditionals. Host is :authority's job. */
    r->cur_hdr = he__http_hdr_id((const char *)name, nlen);
    if (r->cur_hdr != HE_HDR_NONE && r->cur_hdr != HE_HDR_HOST) {
        r->value_more = false; /* a repeated field joins the list */
        he__http_req_value(r, (const char *)value, vlen);
    }
    r->cur_hdr = HE_HDR_NONE;
    return 0;
}

static int he_h2_on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    he_h2_conn_t *h2 = ud;
    he_h2_stream_t *st;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    if (h2->terminated) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (!(st = he_h2_stream_new(h2, frame->hd.stream_id)))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* out of memory: this stream is reset */
    nghttp2_session_set_stream_user_data(s, frame->hd.stream_id, st);
    return 0;
}

/* Frames that cost us work and carry no request: a budget per second. */
static int he_h2_on_begin_frame(nghttp2_session *s, const nghttp2_frame_hd *hd, void *ud)
{
    he_h2_conn_t *h2 = ud;
    (void)s;
    switch (hd->type) {
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
    case NGHTTP2_PRIORITY:
    case NGHTTP2_PRIORITY_UPDATE:
        break;
    case NGHTTP2_DATA:
    case NGHTTP2_HEADERS:
    case NGHTTP2_CONTINUATION:
        if (hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM)) break; /* empty */
        return 0;
    default:
        return 0;
    }
    he_h2_take(h2, &h2->ctrl_tokens, HE_STATS_H2_GOAWAY_FLOOD);
    return 0;
}

static void he_h2_ready(he_h2_conn_t *h2, he_h2_stream_t *st)
{
    if (st->ready || st->answered) return;
    st->ready = true;
    st->ready_next = NULL;
    if (h2->ready_tail)
        h2->ready_tail->ready_next = st;
    else
        h2->ready_head = st;
    h2->ready_tail = st;
}

static int he_h2_on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    he_h2_conn_t *h2 = ud;
    he_h2_stream_t *st;

    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
        if (!(st = he_h2_stream_of(h2, frame->hd.stream_id))) return 0;
        he__http_req_drop_cut(&st->req);
        he_h2_ready(h2, st);
        return 0;
    case NGHTTP2_RST_STREAM: /* each one is work thrown away: CVE-2023-44487 */
        he_h2_take(h2, &h2->reset_tokens, HE_STATS_H2_GOAWAY_RAPID_RESET);
        return 0;
    case NGHTTP2_PRIORITY_UPDATE: {
        /* nghttp2 applied it; our default urgency must not overwrite it
         * when the response is submitted (he_h2_submit) */
        const nghttp2_ext_priority_update *pu = frame->ext.payload;
        if ((st = he_h2_stream_of(h2, pu->stream_id))) {
            st->prio_seen = true;
        } else {
            h2->early_prio[h2->early_prio_next] = pu->stream_id;
            h2->early_prio_next = (uint8_t)((h2->early_prio_next + 1) % 4);
        }
        return 0;
    }
    default:
        (void)s;
        return 0;
    }
}

static int he_h2_on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    he_h2_conn_t *h2 = ud;
    he_h2_stream_t *st = he_h2_stream_of(h2, id);
    (void)code;
    if (!st) return 0;
    nghttp2_session_set_stream_user_data(s, id, NULL);
    st->gone = true;
    /* the send path may still be sending its last DATA frame from the
     * body: freed when that unit ends (he__h2_sent) */
    if (h2->unit == st && h2->unit_state == HE_H2_UNIT_QUEUED) return 0;
    he__h2_stream_free(h2, st);
    return 0;
}

static int he_h2_on_frame_send(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    he_h2_conn_t *h2 = ud;
    he_worker_t *w = h2->w;
    he_h2_stream_t *st;
    (void)s;

    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (!(st = he_h2_stream_of(h2, frame->hd.stream_id))) return 0;
        st->bytes += 9 + frame->hd.length;
        if (frame->hd.type == NGHTTP2_HEADERS) {
            st->req.head_len = (uint16_t)(9 + frame->hd.length);
            st->t_first_ns = he__batch_ns;
        }
        /* a response byte moved: neither it nor the connection stalls */
        st->progress_ms = h2->progress_ms = w->now_ms;
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) he__h2_stream_end(h2, st);
        return 0;
    case NGHTTP2_RST_STREAM:
        if (frame->rst_stream.error_code == NGHTTP2_REFUSED_STREAM) {
            w->stats.h2_refused++; /* past the limit: stream churn all the same */
            he_h2_take(h2, &h2->reset_tokens, HE_STATS_H2_GOAWAY_RAPID_RESET);
        }
        return 0;
    case NGHTTP2_GOAWAY: {
        he_stats_h2_goaway_t cause;
        if (h2->goaway_cause >= 0) {
            cause = (he_stats_h2_goaway_t)h2->goaway_cause;
        } else {
            switch (frame->goaway.error_code) {
            case NGHTTP2_NO_ERROR:
                cause = HE_STATS_H2_GOAWAY_NO_ERROR;
                break;
            case NGHTTP2_PROTOCOL_ERROR:
            case NGHTTP2_FRAME_SIZE_ERROR:
            case NGHTTP2_STREAM_CLOSED:
                cause = HE_STATS_H2_GOAWAY_PROTOCOL;
                break;
            case NGHTTP2_FLOW_CONTROL_ERROR:
                cause = HE_STATS_H2_GOAWAY_FLOW_CONTROL;
                break;
            case NGHTTP2_COMPRESSION_ERROR:
                cause = HE_STATS_H2_GOAWAY_COMPRESSION;
                break;
            case NGHTTP2_ENHANCE_YOUR_CALM: /* nghttp2's own rate limits */
                cause = HE_STATS_H2_GOAWAY_FLOOD;
                break;
            default:
                cause = HE_STATS_H2_GOAWAY_OTHER;
                break;
            }
        }
        w->stats.h2_goaway[cause]++;
        return 0;
    }
    default:
        return 0;
    }
}

/* The requests whose headers are complete, in order, to the handler. */
static void he_h2_dispatch(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = he__h2(c);
    uint32_t gen = c->gen;

    h2->in_dispatch = true;
    while (h2->ready_head && c->gen == gen && c->in_use && !c->closing) {
        he_h2_stream_t *st = h2->ready_head;
        he_req_t *r = &st->req;
        h2->ready_head = st->ready_next;
        if (!h2->ready_head) h2->ready_tail = NULL;
        st->ready = false;
        st->answered = true; /* whatever answers it, it is answered once */
        if (r->too_long == 14)
            he_http_respond_error(w, r, 414);
        else if (!r->url_len)
            he_http_respond_error(w, r, 400);
        else
            he__http_handle(w, r);
    }
    if (c->gen == gen && c->in_use) h2->in_dispatch = false;
}

/* ---------------------------------------------------------------- the session */

static nghttp2_session_callbacks *he_h2_cbs;
static nghttp2_option *he_h2_opt;
static pthread_once_t he_h2_once = PTHREAD_ONCE_INIT;

static void he_h2_init_once(void)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, he_h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, he_h2_on_header);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, he_h2_on_begin_frame);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, he_h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, he_h2_on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, he_h2_on_frame_send);
    nghttp2_session_callbacks_set_send_data_callback(cb, he__h2_send_data_cb);
    if (nghttp2_option_new(&he_h2_opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        return;
    }
    /* Our buckets decide about resets (they count refused streams too),
     * so nghttp2's own (1000, 33/s) must not come first. */
    nghttp2_option_set_stream_reset_rate_limit(he_h2_opt, UINT32_MAX, UINT32_MAX);
    nghttp2_option_set_no_closed_streams(he_h2_opt, 1);
    /* RFC 9218 7.1: nghttp2 drops PRIORITY_UPDATE frames unless asked to
     * handle them */
    nghttp2_option_set_builtin_recv_extension_type(he_h2_opt, NGHTTP2_PRIORITY_UPDATE);
    he_h2_cbs = cb;
}

static size_t he_h2_conn_size(const he_conf_t *conf)
{
    (void)conf;
    return sizeof(he_h2_conn_t);
}

static void he_h2_open(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = c->proto;
    const he_conf_t *cf = w->conf;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cf->http2_max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)cf->http2_stream_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)cf->http2_max_header_list},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };

    memset(h2, 0, sizeof(*h2));
    h2->w = w;
    h2->c = c;
    h2->goaway_cause = -1;
    h2->bucket_ms = w->now_ms;
    h2->reset_tokens = cf->http2_max_resets * 10;
    h2->ctrl_tokens = cf->http2_max_control * 2;
    w->stats.h2_conns++;
    if (!c->tls) w->stats.h2_conns_h2c++;
    pthread_once(&he_h2_once, he_h2_init_once);
    if (!he_h2_cbs || nghttp2_session_server_new2(&h2->s, he_h2_cbs, h2, he_h2_opt) != 0) {
        he_log_error("worker %u: cannot start an HTTP/2 session (out of memory)", w->id);
        h2->s = NULL;
        he__conn_close(w, c);
        return;
    }
    if (nghttp2_submit_settings(h2->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(h2->s, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)cf->http2_conn_window) != 0) {
        he__conn_close(w, c);
        return;
    }
    he__conn_timer_set(w, c, HE_TIMER_H2_IDLE);
}

static size_t he_h2_data(he_worker_t *w, he_conn_t *c, const char *p, size_t n, bool *ready)
{
    he_h2_conn_t *h2 = c->proto;
    uint32_t gen = c->gen;
    ssize_t rv;

    *ready = false;
    if (!h2->s || h2->dead || h2->terminated || c->closing) return n; /* dropped */
    h2->in_session = true;
    rv = nghttp2_session_mem_recv(h2->s, (const uint8_t *)p, n);
    h2->in_session = false;
    if (rv < 0)
        he_h2_fatal(h2, (int)rv);
    else
        he_h2_dispatch(w, c);
    if (c->gen == gen && c->in_use && !c->closing) he__send_kick(w, c);
    return n;
}

static void he_h2_request(he_worker_t *w, he_conn_t *c)
{
    (void)w;
    (void)c; /* never: data() hands requests to the handler itself */
}

/* The client sent EOF: what it asked for is still answered. */
static void he_h2_eof(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = c->proto;
    if (!h2->nstreams && !c->sending) he__conn_close_drained(w, c);
}

/* A drain: GOAWAY(NO_ERROR) names the last stream we answer; those finish
 * and then the connection closes (want_read and want_write go 0). */
static void he_h2_idle(he_worker_t *w, he_conn_t *c, bool hard)
{
    he_h2_conn_t *h2 = c->proto;
    (void)hard;
    if (!h2->s || h2->dead || h2->terminated || h2->goaway_cause == HE_STATS_H2_GOAWAY_NO_ERROR)
        return;
    h2->goaway_cause = HE_STATS_H2_GOAWAY_NO_ERROR;
    if (nghttp2_submit_goaway(h2->s, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(h2->s), NGHTTP2_NO_ERROR,
                              NULL, 0) != 0) {
        he__conn_close(w, c);
        return;
    }
    he__send_kick(w, c);
}

/* Streams that wait on the client, checked four times per
 * http2.stall_timeout while streams are open (conn.c's HE_TIMER_H2_STALL):
 * - a stream with frames to send, its window at zero and nothing sent for
 *   the timeout is reset (RST_STREAM CANCEL): the client stopped reading
 *   it, its neighbours go on. A stream held back by the others' priority
 *   has a window and is not reset; one waiting on its body source (an
 *   origin fill) is not waiting on the client.
 * - a connection none of whose frames went for the timeout while streams
 *   have waited that long (the connection's window at zero, the socket not
 *   read, or every stream's window at zero) gets GOAWAY, and closes if the
 *   GOAWAY does not go either (false: conn.c closes and counts it).
 * Idle connections: he_h2_expire_idle. */
static bool he_h2_expire_stall(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = c->proto;
    uint64_t now = w->now_ms, tmo = w->conf->http2_stall_timeout_ms;
    bool waiting = false, fresh = false, reset = false;

    if (!h2->s || h2->dead) return false;
    if (h2->stall_goaway) {
        if (now - h2->progress_ms >= tmo) return false;
        he__conn_timer_set(w, c, HE_TIMER_H2_STALL);
        return true;
    }
    for (he_h2_stream_t *st = h2->streams; st; st = st->next) {
        if (!st->responded || st->ended || st->gone || st->deferred || st->stall_reset) continue;
        if (now - st->progress_ms >= tmo &&
            nghttp2_session_get_stream_remote_window_size(h2->s, st->id) <= 0) {
            he_log_debug("worker %u: fd %d: HTTP/2 stream %d made no progress for %llu ms: reset",
                         w->id, c->fd, st->id, (unsigned long long)tmo);
            if (nghttp2_submit_rst_stream(h2->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL) == 0) {
                w->stats.h2_stream_stalls++;
                st->stall_reset = true; /* once: the RST_STREAM is queued */
                reset = true;
                continue;
            }
        }
        waiting = true;
        /* its response was submitted or its source resumed lately: the
         * connection has not kept it waiting for the timeout yet */
        if (now - st->progress_ms < tmo) fresh = true;
    }
    /* GOAWAY too when the streams just reset were all the connection was
     * waiting on: it read nothing at all for the timeout (a zero-window
     * slow reader, RFC 9113 6.9) */
    if ((waiting ? !fresh : reset) && now - h2->progress_ms >= tmo && !h2->terminated) {
        he_log_info("worker %u: fd %d: HTTP/2 connection made no progress for %llu ms: GOAWAY",
                    w->id, c->fd, (unsigned long long)tmo);
        h2->stall_goaway = true;
        h2->progress_ms = now;
        he__h2_terminate(h2, HE_STATS_H2_GOAWAY_STALL, NGHTTP2_ENHANCE_YOUR_CALM);
        reset = true;
    }
    he__conn_timer_set(w, c, HE_TIMER_H2_STALL);
    if (reset) he__send_kick(w, c);
    return true;
}

/* No stream for http2.idle_timeout: GOAWAY(NO_ERROR) first (RFC 9113 9.1:
 * the client knows no stream of its was lost and reconnects when it wants
 * more), then the close once it went (he__h2_pull); if it does not go
 * within another timeout, the close all the same. */
static bool he_h2_expire_idle(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = c->proto;
    if (!h2->s || h2->dead || h2->terminated || h2->idle_goaway) {
        he__conn_close(w, c);
        return true;
    }
    h2->idle_goaway = true;
    w->stats.errors[HE_STATS_ERR_TIMEOUT_KEEPALIVE]++;
    he_log_debug("worker %u: HTTP/2 idle timeout, GOAWAY on fd %d", w->id, c->fd);
    he__conn_timer_set(w, c, HE_TIMER_H2_IDLE);
    he_h2_idle(w, c, false);
    return true;
}

static bool he_h2_expire(he_worker_t *w, he_conn_t *c, int list)
{
    if (list == HE_TIMER_H2_STALL) return he_h2_expire_stall(w, c);
    if (list == HE_TIMER_H2_IDLE) return he_h2_expire_idle(w, c);
    return false;
}

static void he_h2_dispose(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = c->proto;
    (void)w;
    while (h2->streams)
        he__h2_stream_free(h2, h2->streams);
    if (h2->s) nghttp2_session_del(h2->s);
    h2->s = NULL;
}

const he_proto_t he_http2_proto = {
    .name = "h2",
    .conn_size = he_h2_conn_size,
    .open = he_h2_open,
    .data = he_h2_data,
    .request = he_h2_request,
    .eof = he_h2_eof,
    .idle = he_h2_idle,
    .sent = he__h2_sent,
    .pull = he__h2_pull,
    .dispose = he_h2_dispose,
    .expire = he_h2_expire,
};
