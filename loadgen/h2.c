/* loadgen --http2: a connection's requests as streams of one HTTP/2
 * session (nghttp2, client side), h2c prior knowledge on http:// and ALPN
 * h2 on https://. nghttp2 only transforms bytes: conn.c receives into the
 * head buffer (or through OpenSSL) and hands them to he_lg_h2_feed, and
 * sends what he_lg_h2_take gives it, on the thread's ring, as for
 * HTTP/1.1. A viewer asks one thing at a time, so one stream is open at a
 * time; all of a viewer's requests share the connection. Bodies are
 * framed, so they are read (no MSG_TRUNC): payload bytes are counted, and
 * kept or checksummed as for HTTP/1.1. */
#include "loadgen/engine.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Large windows: the server, not our flow control, should be measured. */
#define HE_LG_H2_WINDOW (16 << 20)

static int he_lg_h2_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                              size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags,
                              void *ud)
{
    he_lg_conn_t *c = ud;
    (void)s;
    (void)flags;
    if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != c->h2_stream) return 0;
    if (nlen == 7 && memcmp(name, ":status", 7) == 0 && vlen == 3) {
        int st = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
        if (st >= 200) c->head.status = st; /* 1xx: the real one follows */
    }
    return 0;
}

static int he_lg_h2_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *p,
                            size_t n, void *ud)
{
    he_lg_conn_t *c = ud;
    (void)s;
    (void)flags;
    if (id != c->h2_stream) return 0;
    c->body.payload += n;
    he_lg_conn_body_bytes(c, (const char *)p, n);
    return 0;
}

static int he_lg_h2_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    he_lg_conn_t *c = ud;
    (void)s;
    if (id != c->h2_stream) return 0;
    c->h2_stream = 0;
    c->h2_done = code == NGHTTP2_NO_ERROR && c->head.status ? 1 : -1;
    return 0;
}

int he_lg_h2_open(he_lg_conn_t *c)
{
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, HE_LG_H2_WINDOW},
    };
    nghttp2_session_callbacks *cb;
    nghttp2_session *s;
    int rc;
    /* the session copies the table: made and dropped per connection */
    if (nghttp2_session_callbacks_new(&cb) != 0) return -ENOMEM;
    nghttp2_session_callbacks_set_on_header_callback(cb, he_lg_h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, he_lg_h2_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, he_lg_h2_on_close);
    rc = nghttp2_session_client_new(&s, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) return -ENOMEM;
    c->h2 = s;
    c->h2_pend = NULL;
    c->h2_pend_len = 0;
    c->h2_stream = 0;
    c->h2_done = 0;
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, HE_LG_H2_WINDOW) != 0)
        return -ENOMEM;
    return 0;
}

void he_lg_h2_free(he_lg_conn_t *c)
{
    if (c->h2) nghttp2_session_del(c->h2);
    c->h2 = NULL;
    c->h2_pend_len = 0;
}

int he_lg_h2_request(he_lg_conn_t *c, const char *target, int64_t range_off, int64_t range_len)
{
    const he_lg_endpoint_t *e = he_lg_endpoint_at(c->ep);
    char range[64];
    nghttp2_nv nv[6];
    size_t n = 0;
    int32_t id;

#define HE_LG_NV(k, v, vl)                                                                         \
    nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), sizeof(k) - 1, (vl), NGHTTP2_NV_FLAG_NONE}
    HE_LG_NV(":method", "GET", 3);
    HE_LG_NV(":path", target, strlen(target));
    HE_LG_NV(":scheme", e->tls ? "https" : "http", e->tls ? 5 : 4);
    HE_LG_NV(":authority", e->hosthdr, strlen(e->hosthdr));
    HE_LG_NV("user-agent", "hlsedge-loadgen", 15);
    if (range_len > 0) {
        int k = snprintf(range, sizeof(range), "bytes=%lld-%lld", (long long)range_off,
                         (long long)(range_off + range_len - 1));
        HE_LG_NV("range", range, (size_t)k);
    }
#undef HE_LG_NV
    id = nghttp2_submit_request(c->h2, NULL, nv, n, NULL, NULL);
    if (id < 0) return -EPROTO;
    c->h2_stream = id;
    c->h2_done = 0;
    return 0;
}

int he_lg_h2_feed(he_lg_conn_t *c, const char *p, size_t n)
{
    ssize_t rv = nghttp2_session_mem_recv(c->h2, (const uint8_t *)p, n);
    return rv < 0 ? -EPROTO : 0;
}

size_t he_lg_h2_take(he_lg_conn_t *c, char *out, size_t cap)
{
    size_t len = 0;
    while (len < cap) {
        if (!c->h2_pend_len) {
            const uint8_t *d;
            ssize_t k = nghttp2_session_mem_send(c->h2, &d);
            if (k <= 0) break;
            c->h2_pend = (const char *)d;
            c->h2_pend_len = (size_t)k;
        }
        size_t take = c->h2_pend_len < cap - len ? c->h2_pend_len : cap - len;
        memcpy(out + len, c->h2_pend, take);
        len += take;
        c->h2_pend += take;
        c->h2_pend_len -= take;
    }
    return len;
}

bool he_lg_h2_alive(const he_lg_conn_t *c)
{
    /* 0 once a GOAWAY came and no stream is left */
    return c->h2 && nghttp2_session_want_read(c->h2);
}
