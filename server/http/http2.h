/* HTTP/2's internals, shared by http2.c (the session, streams, input,
 * limits) and http2_out.c (responses, DATA frames, the units the send path
 * pulls). nghttp2 does the framing, HPACK and flow control; it never
 * touches a socket: input is handed to nghttp2_session_mem_recv, output is
 * taken from nghttp2_session_mem_send into c->hdr, and a DATA frame's
 * payload is sent straight from the stream's body source (no-copy data:
 * send_data_callback lends a range of it to the send path as c->body). */
#ifndef HE_HTTP2_H
#define HE_HTTP2_H

#include <nghttp2/nghttp2.h>

#include "server/http/http.h"

typedef struct he_h2_conn he_h2_conn_t;

/* One stream: its request, its response's body source, and what its
 * access-log line needs. Allocated when its HEADERS begin (at most
 * http2.max_concurrent_streams at once, and one more whose last DATA frame
 * the send path still holds), freed when nghttp2 closes it. */
typedef struct he_h2_stream {
    he_req_t req; /* req.h2 points back here */
    he_h2_conn_t *h2;
    struct he_h2_stream *prev, *next; /* the connection's streams */
    struct he_h2_stream *ready_next;  /* headers complete, for the handler */
    int32_t id;
    uint32_t url_cap;
    uint32_t hdr_bytes; /* header list so far, counted as RFC 9113 6.5.2 does */
    he_body_t body;     /* the response's, [off, end) still to send */
    uint64_t bytes;     /* frame bytes of this stream sent (head + DATA) */
    uint64_t t_first_ns;
    uint64_t progress_ms; /* opened, its head or a DATA frame sent, or its source resumed */
    bool ready;     /* on the ready list */
    bool answered;  /* handed to the handler */
    bool responded; /* a response was submitted: it has frames to send */
    bool stall_reset; /* reset for a stall (RST_STREAM queued): checked no more */
    bool ended;     /* its last frame went: counted and logged */
    bool gone;      /* nghttp2 closed it; freed once the send path lends it no more */
    bool deferred;  /* its DATA waits for the body source (he__h2_resume) */
    bool prio_seen; /* the client sent a priority header (RFC 9218) */
    char err_body[HE_HTTP_ERROR_BODY];
    char url[]; /* url_cap bytes */
} he_h2_stream_t;

enum { HE_H2_UNIT_NONE = 0, HE_H2_UNIT_QUEUED, HE_H2_UNIT_SENT };

/* he_conn_t.proto of an HTTP/2 connection. */
struct he_h2_conn {
    nghttp2_session *s;
    he_worker_t *w;
    he_conn_t *c;
    he_h2_stream_t *streams;
    he_h2_stream_t *ready_head, *ready_tail;
    uint32_t nstreams;

    /* The DATA frame the send path holds: its stream, id and payload. A
     * lent frame is QUEUED while it is sent and SENT once it went, until
     * nghttp2 hears of it (send_data_callback, called again, answers 0). */
    he_h2_stream_t *unit;
    int32_t unit_id;
    uint32_t unit_len;
    uint8_t unit_state;
    /* a frame from mem_send that did not fit c->hdr: the rest of it */
    const uint8_t *pend;
    size_t pend_len;

    bool in_session;  /* in mem_recv or mem_send: nghttp2 must not be re-entered */
    bool in_dispatch; /* handing requests to the handler: it kicks once done */
    bool terminated;  /* we ended the session (GOAWAY queued): input is dropped */
    bool dead;        /* nghttp2 failed for good: our own GOAWAY, then close */
    bool dead_sent;
    uint32_t dead_code;
    int8_t goaway_cause; /* he_stats_h2_goaway_t of the GOAWAY we asked for, or -1 */
    bool stall_goaway;   /* the connection stalled once (GOAWAY): the next time closes */
    uint64_t progress_ms; /* a frame of any stream sent, or the stall GOAWAY queued */
    bool idle_goaway;     /* idle for http2.idle_timeout: GOAWAY queued, the next time closes */
    /* streams a PRIORITY_UPDATE named before their HEADERS (RFC 9218 7.1) */
    int32_t early_prio[4];
    uint8_t early_prio_next;

    /* token buckets (http2.max_resets, http2.max_control_frames) */
    uint64_t bucket_ms;
    uint32_t reset_tokens, ctrl_tokens;
};

static inline he_h2_conn_t *he__h2(he_conn_t *c)
{
    return c->proto;
}

/* http2.c */
/* Ends the session for cause: GOAWAY (code) after what is queued, then
 * the connection closes. */
void he__h2_terminate(he_h2_conn_t *h2, he_stats_h2_goaway_t cause, uint32_t code);
/* Frees st (its body, the handler's state). */
void he__h2_stream_free(he_h2_conn_t *h2, he_h2_stream_t *st);
/* st's last frame went: counters, latency, access log. */
void he__h2_stream_end(he_h2_conn_t *h2, he_h2_stream_t *st);

/* http2_out.c: the send path's side of the protocol table */
bool he__h2_pull(he_worker_t *w, he_conn_t *c);
void he__h2_sent(he_worker_t *w, he_conn_t *c);
int he__h2_send_data_cb(nghttp2_session *s, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud);
/* The default RFC 9218 urgency of a response (no priority signal). */
uint8_t he__h2_urgency(const he_http_head_t *h);

#endif
