/* The server's request parsing: llhttp plus hlsedge's callbacks
 * (server/http1.c), fed arbitrary bytes in arbitrary splits, including
 * pipelined requests resumed after each pause. Limits are small so the
 * 414/431 paths are reached often. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "server/http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static he_conf_t conf;
    static he_worker_t w;
    static he_conn_t c;
    static _Alignas(16) char state[sizeof(he_http1_conn_t) + 257];
    he_req_t *r;
    size_t off = 0;
    unsigned split;

    if (size < 1) return 0;
    he_conf_defaults(&conf);
    conf.max_uri_bytes = 256;
    conf.max_header_bytes = 1024;
    w.conf = &conf;
    w.proto_size = sizeof(state);
    memset(&c, 0, sizeof(c));
    c.proto = state;
    he__http1_init(&c);
    r = he_http_req(&c);

    /* first byte picks the chunk size, so the same request is parsed whole
     * and split at every kind of boundary */
    split = 1u + data[0] % 64u;
    data++;
    size--;
    while (off < size) {
        size_t n = size - off < split ? size - off : split;
        bool ready;
        int err;
        size_t used = he__http1_parse(&w, &c, (const char *)data + off, n, &ready, &err);
        if (err) {
            if (err != 400 && err != 414 && err != 431) abort();
            break;
        }
        if (used > n) abort();
        if (ready) {
            if (r->url_len > conf.max_uri_bytes) abort();
            if (r->range_len >= sizeof(r->range) || r->inm_len >= sizeof(r->inm))
                abort();
            he__http1_next(&c);
        }
        off += used ? used : n;
    }
    return 0;
}
