/* HTTP/2's output: a response head as an HPACK header list, its body as
 * DATA frames straight from the body source, and the units the send path
 * pulls (net/send.c).
 *
 * A unit is what nghttp2_session_mem_send hands out, copied into c->hdr
 * (SETTINGS, HEADERS, WINDOW_UPDATE, GOAWAY ... and DATA frame headers),
 * and at most one DATA frame's payload, lent as c->body: a range of the
 * stream's body source, which the send path sends like any body (sendfile
 * for a file range, plain or kTLS; SSL_write from memory or a mapping
 * under userspace TLS; send, sendmsg or send_zc for cache chunks). The
 * no-copy data of nghttp2 makes that possible: read_callback only says
 * how many bytes are there, and send_data_callback, which must send the
 * frame, answers WOULDBLOCK while the send path has it and 0 once it went.
 * A payload in memory that fits behind the frames (a playlist, an error
 * page) is copied there instead, as HTTP/1.1 copies a small body behind
 * its head: one send for many small responses. */
#include <errno.h>
#include <string.h>

#include "server/base/buf.h"
#include "server/base/log.h"
#include "server/http/http2.h"

/* ---------------------------------------------------------------- DATA */

#define HE_H2_TLS_PAYLOAD (16384 - 9)

static inline bool he_h2_tls(const he_h2_conn_t *h2)
{
    return h2->c->tls != NULL;
}

/* How many of the stream's bytes from body.off are there, up to length:
 * the frame's payload. */
static ssize_t he_h2_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                          uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    he_h2_stream_t *st = src->ptr;
    he_body_t *b = &st->body;
    uint64_t want = b->end - b->off, have = 0;
    he_h2_conn_t *h2 = ud;

    (void)buf;
    /* frame header and payload in one TLS record of 16 KiB (userspace TLS
     * stages both and writes them with one SSL_write; kTLS cuts records at
     * 16 KiB too): 16384 - 9 payload bytes, not 16384 and a 9-byte record */
    if (length > HE_H2_TLS_PAYLOAD && he_h2_tls(h2)) length = HE_H2_TLS_PAYLOAD;
    if (want > length) want = length;
    while (have < want) {
        he_body_span_t sp;
        ssize_t n = b->ops->peek(b, b->off + have, &sp, false);
        if (n < 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the source failed: reset */
        if (n == 0) break;
        have += (uint64_t)n;
    }
    if (have > want) have = want;
    if (have == 0 && want > 0) {
        st->deferred = true; /* he__h2_resume when more arrives */
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (b->off + have == b->end) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if ((int64_t)have >= nghttp2_session_get_stream_remote_window_size(s, id) ||
               (int64_t)have >= nghttp2_session_get_remote_window_size(s)) {
        h2->w->stats.h2_flow_stalls++; /* more to send, and no window left for it */
    }
    return (ssize_t)have;
}

int he__h2_send_data_cb(nghttp2_session *s, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud)
{
    he_h2_conn_t *h2 = ud;
    he_conn_t *c = h2->c;
    he_h2_stream_t *st = src->ptr;
    size_t room = HE_CONN_HDR_CAP - c->hdr_len;
    he_body_span_t sp;

    (void)s;
    if (h2->unit_state == HE_H2_UNIT_SENT) {
        h2->unit_state = HE_H2_UNIT_NONE;
        if (frame->hd.stream_id == h2->unit_id) return 0; /* it went */
        /* else that frame was dropped with its stream; this is another */
    }
    if (room < 9) return NGHTTP2_ERR_WOULDBLOCK; /* the next unit */
    memcpy(c->hdr + c->hdr_len, framehd, 9);
    /* small and in memory: copied behind the frames, like HTTP/1.1's small
     * bodies (not a file's mapping, which may shrink under the copy) */
    if (length && length <= room - 9 && st->body.ops->peek(&st->body, st->body.off, &sp, false) >=
                                            (ssize_t)length && sp.p && sp.fixed_off < 0 && !sp.file_too) {
        memcpy(c->hdr + c->hdr_len + 9, sp.p, length);
        c->hdr_len += (uint32_t)(9 + length);
        he__body_advance(&st->body, length);
        return 0;
    }
    c->hdr_len += 9;
    if (length) {
        c->body = st->body;
        c->body.end = st->body.off + length;
        c->body_lent = true;
    }
    h2->unit = st;
    h2->unit_id = frame->hd.stream_id;
    h2->unit_len = (uint32_t)length;
    h2->unit_state = HE_H2_UNIT_QUEUED;
    return NGHTTP2_ERR_WOULDBLOCK; /* until the send path is done with it */
}

/* ---------------------------------------------------------------- units */

/* After a fatal error nghttp2 sends nothing more: a GOAWAY of our own. */
static void he_h2_raw_goaway(he_h2_conn_t *h2, he_conn_t *c)
{
    uint32_t last = h2->s ? (uint32_t)nghttp2_session_get_last_proc_stream_id(h2->s) : 0;
    uint8_t f[17] = {0, 0, 8, NGHTTP2_GOAWAY, 0, 0, 0, 0, 0};
    f[9] = (uint8_t)(last >> 24 & 0x7f);
    f[10] = (uint8_t)(last >> 16);
    f[11] = (uint8_t)(last >> 8);
    f[12] = (uint8_t)last;
    f[13] = (uint8_t)(h2->dead_code >> 24);
    f[14] = (uint8_t)(h2->dead_code >> 16);
    f[15] = (uint8_t)(h2->dead_code >> 8);
    f[16] = (uint8_t)h2->dead_code;
    memcpy(c->hdr, f, sizeof(f));
    c->hdr_len = sizeof(f);
}

bool he__h2_pull(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = he__h2(c);

    c->hdr_len = c->hdr_sent = 0;
    memset(&c->body, 0, sizeof(c->body));
    c->body_lent = false;
    if (h2->in_session || !h2->s || h2->dead_sent) return false;
    if (h2->dead) {
        he_h2_raw_goaway(h2, c);
        h2->dead_sent = true;
        return true;
    }
    if (h2->pend_len) {
        size_t take = h2->pend_len < HE_CONN_HDR_CAP ? h2->pend_len : HE_CONN_HDR_CAP;
        memcpy(c->hdr, h2->pend, take);
        c->hdr_len = (uint32_t)take;
        h2->pend += take;
        h2->pend_len -= take;
        if (h2->pend_len || c->hdr_len == HE_CONN_HDR_CAP) return true;
    }
    h2->in_session = true;
    while (h2->unit_state != HE_H2_UNIT_QUEUED && c->hdr_len < HE_CONN_HDR_CAP) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(h2->s, &d);
        size_t room = HE_CONN_HDR_CAP - c->hdr_len;
        if (n < 0) {
            he_log_debug("worker %u: fd %d: HTTP/2 send: %s", w->id, c->fd,
                         nghttp2_strerror((int)n));
            h2->in_session = false;
            he__conn_close(w, c);
            return false;
        }
        if (n == 0) break;
        if ((size_t)n > room) { /* the rest of this frame starts the next unit */
            memcpy(c->hdr + c->hdr_len, d, room);
            c->hdr_len += (uint32_t)room;
            h2->pend = d + room;
            h2->pend_len = (size_t)n - room;
            break;
        }
        memcpy(c->hdr + c->hdr_len, d, (size_t)n);
        c->hdr_len += (uint32_t)n;
    }
    h2->in_session = false;
    if (c->hdr_len) return true;
    /* Nothing to send: done once nghttp2 wants neither (GOAWAY sent or
     * received and no stream left), or the client left and nothing is
     * being answered; the last frames may still wait as gathered TLS
     * records, and go first. */
    if ((!nghttp2_session_want_read(h2->s) && !nghttp2_session_want_write(h2->s)) ||
        (c->peer_eof && !h2->nstreams))
        he__conn_close_drained(w, c);
    return false;
}

void he__h2_sent(he_worker_t *w, he_conn_t *c)
{
    he_h2_conn_t *h2 = he__h2(c);

    c->bytes_sent = 0; /* each stream counts its own frames */
    c->t_first_byte_ns = 0;
    if (h2->dead_sent) { /* the GOAWAY went, perhaps only into the TLS write buffer */
        he__conn_close_drained(w, c);
        return;
    }
    if (h2->unit_state == HE_H2_UNIT_QUEUED) {
        he_h2_stream_t *st = h2->unit;
        h2->unit_state = HE_H2_UNIT_SENT;
        h2->unit = NULL;
        if (st) {
            /* the send path advanced its copy (c->body, through the
             * source's advance when it has one): here only the offset */
            st->body.off += h2->unit_len;
            if (st->gone) { /* closed while its frame was sent: nghttp2 dropped it */
                h2->unit_state = HE_H2_UNIT_NONE;
                he__h2_stream_free(h2, st);
            }
        }
    }
}

/* ---------------------------------------------------------------- heads */

#define HE_H2_NV_MAX 32
#define HE_H2_NV_ARENA 2048

/* A head spelled for nghttp2: lowercase names, values copied here (the
 * field lister's values may live on its stack), and nghttp2 copies the
 * values again. The names of known fields are static, so nghttp2 takes
 * them as they are (NO_COPY_NAME): its copy of a name also lowercases
 * it, byte by byte, and that was a tenth of what nghttp2 spent per
 * playlist response. */
typedef struct he_h2_head {
    nghttp2_nv nv[HE_H2_NV_MAX];
    size_t n;
    char arena[HE_H2_NV_ARENA];
    size_t used;
    bool overflow;
} he_h2_head_t;

static const char *he_h2_keep(he_h2_head_t *hh, const char *v, size_t n)
{
    char *p;
    if (hh->used + n > sizeof(hh->arena)) {
        hh->overflow = true;
        return NULL;
    }
    p = hh->arena + hh->used;
    memcpy(p, v, n);
    hh->used += n;
    return p;
}

/* name_static: name lives as long as the program (a literal); else it is
 * kept in the arena like the value. */
static void he_h2_nv(he_h2_head_t *hh, const char *name, size_t nlen, bool name_static,
                     const char *v, size_t vlen)
{
    const char *nk = name_static ? name : he_h2_keep(hh, name, nlen), *vk = he_h2_keep(hh, v, vlen);
    if (!nk || !vk || hh->n == HE_H2_NV_MAX) {
        hh->overflow = true;
        return;
    }
    hh->nv[hh->n].name = (uint8_t *)nk;
    hh->nv[hh->n].namelen = nlen;
    hh->nv[hh->n].value = (uint8_t *)vk;
    hh->nv[hh->n].valuelen = vlen;
    hh->nv[hh->n].flags = name_static ? NGHTTP2_NV_FLAG_NO_COPY_NAME : NGHTTP2_NV_FLAG_NONE;
    hh->n++;
}

/* Whole "Name: value" lines (handlers' extras): lowercase names. */
static void he_h2_extra(he_h2_head_t *hh, const char *v, size_t n)
{
    const char *end = v + n;
    while (v < end) {
        const char *eol = memchr(v, '\r', (size_t)(end - v));
        const char *colon = memchr(v, ':', (size_t)((eol ? eol : end) - v));
        char name[64];
        size_t nlen;
        if (!eol) eol = end;
        if (colon && (nlen = (size_t)(colon - v)) < sizeof(name)) {
            const char *val = colon + 1;
            for (size_t i = 0; i < nlen; i++)
                name[i] = (char)(v[i] >= 'A' && v[i] <= 'Z' ? v[i] + 32 : v[i]);
            while (val < eol && *val == ' ')
                val++;
            he_h2_nv(hh, name, nlen, false, val, (size_t)(eol - val));
        }
        v = eol + (eol < end && eol[0] == '\r' ? 2 : 0);
    }
}

static void he_h2_field(void *ctx, he_http_field_t f, const char *v, size_t n)
{
    he_h2_head_t *hh = ctx;
    if (f == HE_HTTP_F_EXTRA) {
        he_h2_extra(hh, v, n);
        return;
    }
    he_h2_nv(hh, he__http_field_h2[f].name, he__http_field_h2[f].len, true, v, n);
}

/* RFC 9218 without a signal from the client (draft-pantos-hls-rfc8216bis
 * B.1): playlists and keys first (urgency 1), then media by size, 2 to 6.
 * Segments of one presentation last about as long, so a larger one is a
 * higher bitrate: the order by size never puts a higher bitrate ahead of
 * a lower one. */
uint8_t he__h2_urgency(const he_http_head_t *h)
{
    static const uint64_t step[] = {256u << 10, 1u << 20, 2u << 20, 4u << 20};
    uint8_t u = 2;
    switch (h->type) {
    case HE_SEG_TYPE_M3U8:
    case HE_SEG_TYPE_KEY:
        return 1;
    case HE_SEG_TYPE_TS:
    case HE_SEG_TYPE_M4S:
    case HE_SEG_TYPE_MP4:
    case HE_SEG_TYPE_AAC:
    case HE_SEG_TYPE_VTT:
        for (size_t i = 0; i < sizeof(step) / sizeof(step[0]) && h->clen >= step[i]; i++)
            u++;
        return u;
    default:
        return NGHTTP2_EXTPRI_DEFAULT_URGENCY;
    }
}

/* Once the response is queued: sent now when the handler is done (dispatch
 * kicks), else from a completion of its own, since the end of a unit may
 * free this stream under the caller (a fill's waiter list). */
static void he_h2_kick(he_h2_conn_t *h2)
{
    if (h2->in_dispatch || h2->in_session) return;
    he__send_kick_later(h2->w, h2->c);
}

static void he_h2_submit(he_worker_t *w, he_req_t *r, const he_http_head_t *h, bool has_body)
{
    he_h2_stream_t *st = r->h2;
    he_h2_conn_t *h2 = st->h2;
    nghttp2_data_provider prd;
    he_h2_head_t hh;
    char status[4];
    int rv;

    if (!h2->s || h2->dead || st->gone) {
        he__body_release(&st->body);
        return;
    }
    hh.n = hh.used = 0;
    hh.overflow = false;
    status[0] = (char)('0' + h->status / 100 % 10);
    status[1] = (char)('0' + h->status / 10 % 10);
    status[2] = (char)('0' + h->status % 10);
    he_h2_nv(&hh, ":status", 7, true, status, 3);
    he__http_head_fields(w, h, he_h2_field, &hh);
    if (hh.overflow) {
        he_log_error("worker %u: response head for %.*s over %d bytes", w->id,
                     (int)(r->url_len > 200 ? 200 : r->url_len), r->url, HE_H2_NV_ARENA);
        he__body_release(&st->body);
        nghttp2_submit_rst_stream(h2->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        he_h2_kick(h2);
        return;
    }
    if (!st->prio_seen) {
        nghttp2_extpri pri = {.urgency = he__h2_urgency(h), .inc = h->type != HE_SEG_TYPE_M3U8};
        nghttp2_session_change_extpri_stream_priority(h2->s, st->id, &pri, 0);
    }
    prd.source.ptr = st;
    prd.read_callback = he_h2_read;
    rv = nghttp2_submit_response(h2->s, st->id, hh.nv, hh.n, has_body ? &prd : NULL);
    st->responded = rv == 0;
    st->progress_ms = w->now_ms; /* the stall is the client's from here */
    if (rv != 0) {
        he__body_release(&st->body);
        nghttp2_submit_rst_stream(h2->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    }
    he_h2_kick(h2);
}

void he__h2_respond(he_worker_t *w, he_req_t *r, const he_http_head_t *h, he_body_t *body)
{
    he_h2_stream_t *st = r->h2;
    bool has_body;

    r->status = h->status;
    st->answered = true;
    /* no body for HEAD, nor after a 204, 304 or 416 head (RFC 9110 15) */
    has_body = body && body->ops && r->method != HTTP_HEAD && body->end > body->off &&
               h->status != 204 && h->status != 304 && h->status != 416;
    he__body_release(&st->body);
    if (has_body)
        st->body = *body;
    else if (body)
        he__body_release(body);
    if (body) memset(body, 0, sizeof(*body)); /* the stream's now */
    he_h2_submit(w, r, h, has_body);
}

void he__h2_respond_error(he_worker_t *w, he_req_t *r, const he_http_head_t *h, const char *body,
                          size_t len)
{
    he_h2_stream_t *st = r->h2;
    he_body_t b;

    if (len > sizeof(st->err_body)) len = sizeof(st->err_body);
    memcpy(st->err_body, body, len);
    he__body_mem(&b, st->err_body, len, NULL, NULL);
    he__h2_respond(w, r, h, &b);
}

void he__h2_resume(he_worker_t *w, he_req_t *r)
{
    he_h2_stream_t *st = r->h2;
    he_h2_conn_t *h2 = st->h2;
    (void)w;
    if (!st->deferred || !h2->s || st->gone) return;
    st->deferred = false;
    st->progress_ms = w->now_ms; /* waiting on the source was not a stall */
    nghttp2_session_resume_data(h2->s, st->id);
    he_h2_kick(h2);
}
