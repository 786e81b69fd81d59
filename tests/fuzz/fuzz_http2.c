/* The server's HTTP/2 input path (server/http/http2.c): the preface and
 * then arbitrary bytes as frames into a session, in arbitrary splits, with
 * the limits small so the GOAWAY paths are reached. A handler answers
 * every request (an error page, a memory body whole or as a range, a HEAD),
 * and after each chunk the units the send path would pull are pulled and
 * "sent" (he__h2_pull / sent, as net/send.c calls them), so responses,
 * lent DATA frames, flow control and stream teardown run too. The clock
 * moves 7 ms per chunk and the timeouts are short, so the per-stream stall
 * checks, the stall GOAWAY and the idle GOAWAY (expire) run as conn.c
 * would run them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "server/http/http2.h"

static char he_fz_body[70000];

static void he_fz_handler(he_worker_t *w, he_req_t *r)
{
    he_http_head_t h;
    he_body_t b;
    uint64_t first, last;
    int status;

    if (r->url_len < 2 || r->url[1] == 'e') {
        he_http_respond_error(w, r, r->url_len < 2 ? 400 : 404);
        return;
    }
    status = he_http_evaluate(r, "\"x\"", 3, 0, 0, sizeof(he_fz_body), &first, &last);
    memset(&h, 0, sizeof(h));
    h.status = status;
    h.type = r->url[1] == 'p' ? HE_SEG_TYPE_M3U8 : HE_SEG_TYPE_TS;
    h.has_clen = status != 304;
    h.clen = last - first + 1;
    h.range = status == 206;
    h.first = first;
    h.last = last;
    h.size = sizeof(he_fz_body);
    h.extra = "X-A: b\r\nX-C: d\r\n";
    he__body_mem(&b, he_fz_body + first, (size_t)(last - first + 1), NULL, NULL);
    he_http_respond(w, r, &h, &b);
}

/* What net/send.c does with a pulled unit: all of it went, then sent(). */
static void he_fz_drain(he_worker_t *w, he_conn_t *c)
{
    for (int i = 0; i < 4096 && c->in_use && !c->closing && c->protocol->pull(w, c); i++) {
        if (c->hdr_len > HE_CONN_HDR_CAP) abort();
        if (c->body.ops) {
            if (c->body.end < c->body.off) abort();
            he__body_advance(&c->body, (size_t)(c->body.end - c->body.off));
        }
        if (c->body_lent)
            memset(&c->body, 0, sizeof(c->body));
        else
            he__body_release(&c->body);
        c->protocol->sent(w, c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    static he_conf_t conf;
    static he_server_t srv;
    static he_worker_t w;
    static he_conn_t c;
    static uint32_t free_slot;
    static char hdr[HE_CONN_HDR_CAP];
    static _Alignas(16) char state[sizeof(he_h2_conn_t)];
    size_t off = 0;
    unsigned split;
    bool ready;

    if (size < 1) return 0;
    he_conf_defaults(&conf);
    conf.max_uri_bytes = 256;
    conf.http2_max_streams = 8;
    conf.http2_max_header_list = 2048;
    conf.http2_max_resets = 5;
    conf.http2_max_control = 20;
    conf.http2_stall_timeout_ms = 100;
    conf.http2_idle_timeout_ms = 200;
    memset(&w, 0, sizeof(w));
    w.conf = &conf;
    w.server = &srv;
    w.conns = &c;
    w.free_slots = &free_slot;
    w.conn_cap = 1;
    w.now_ms = 1000;
    memcpy(w.date, "Thu, 01 Jan 2026 00:00:00 GMT", 30);
    he_http_set_handler(he_fz_handler);
    memset(&c, 0, sizeof(c));
    c.gen = 1;
    c.fd = -1;
    c.in_use = true;
    c.hdr = hdr;
    c.proto = state;
    c.protocol = &he_http2_proto;
    c.send_kick = true; /* the send path is this file's: no kicks */
    c.sending = true;
    w.nconns = 1;
    he_http2_proto.open(&w, &c);
    he_http2_proto.data(&w, &c, preface, sizeof(preface) - 1, &ready);

    /* the first byte picks the chunk size */
    split = 1u + data[0] % 128u;
    data++;
    size--;
    while (off < size && c.in_use && !c.closing) {
        size_t n = size - off < split ? size - off : split;
        if (he_http2_proto.data(&w, &c, (const char *)data + off, n, &ready) != n) abort();
        if (ready) abort(); /* h2 hands requests to the handler itself */
        he_fz_drain(&w, &c);
        w.now_ms += 7;
        /* what conn.c's he__conn_timers_expire does for this connection */
        if (c.in_use && !c.closing && c.timer != HE_TIMER_NONE && c.deadline_ms <= w.now_ms &&
            !c.protocol->expire(&w, &c, c.timer))
            he__conn_close(&w, &c);
        he_fz_drain(&w, &c);
        off += n;
    }
    if (c.in_use) he__conn_close(&w, &c);
    return 0;
}
