/* Fuzz target for loadgen's HTTP/1.1 response parser (loadgen/httpc.c over
 * segment/httpresp.c, the llhttp wrapper the origin client shares): the head, then the
 * rest of the input as the body, fed in pieces whose sizes come from the
 * input, alternating between feeding and kernel-style skipping. */
#include "loadgen/httpc.c"

#include <stdlib.h>

static void he_fuzz_sink(void *ctx, const char *p, size_t n)
{
    /* touch every byte so ASan sees out-of-bounds spans */
    unsigned *acc = ctx;
    for (size_t i = 0; i < n; i++)
        *acc += (unsigned char)p[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* copy so reads past the end hit the redzone */
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    he_lg_http_head_t h;
    int rc = he_lg_http_parse_head(buf, size, &h);
    if (rc == 0) {
        if (h.head_len > size || h.head_len == 0) abort();
        he_lg_body_t b;
        he_lg_body_init(&b, &h);
        size_t pos = h.head_len;
        unsigned acc = 0, step = 0;
        while (pos < size && !b.done) {
            size_t piece = 1 + (size_t)((unsigned char)buf[pos] % 17);
            if (piece > size - pos) piece = size - pos;
            uint64_t skippable = he_lg_body_skippable(&b);
            if ((step++ & 1) && skippable) {
                uint64_t k = skippable < piece ? skippable : piece;
                uint64_t before = b.payload;
                he_lg_body_skip(&b, k);
                if (b.payload != before + k) abort();
                pos += k;
                continue;
            }
            ssize_t used = he_lg_body_feed(&b, buf + pos, piece, he_fuzz_sink, &acc);
            if (used < 0) break;
            if ((size_t)used > piece || ((size_t)used < piece && !b.done)) abort();
            pos += (size_t)used;
            if ((size_t)used < piece) break; /* rest belongs to the next response */
        }
        if (b.mode == HE_LG_BODY_LENGTH && b.done && b.payload != (uint64_t)h.content_length)
            abort();
        (void)he_lg_body_eof(&b);
    } else if (rc != HE_LG_AGAIN && rc != -EINVAL) {
        abort();
    }
    free(buf);
    return 0;
}
