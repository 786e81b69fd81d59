/* The SSD tier's on-disk object header (layout in internal.h): built by
 * swrite.c before the body, checked by the rebuild in store.c. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"

/* ---------------------------------------------------------------- headers */

static void he_cache_hdr_put32(char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static void he_cache_hdr_put64(char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static uint32_t he_cache_hdr_get32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t he_cache_hdr_get64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

int he__cache_hdr_build(char *out, const he_cache_key_t *key, const he_cache_meta_t *m,
                        uint64_t body_len, uint32_t body_crc)
{
    size_t ct = strnlen(m->content_type, sizeof(m->content_type) - 1);
    size_t et = strnlen(m->etag, sizeof(m->etag) - 1);
    size_t lm = strnlen(m->last_modified, sizeof(m->last_modified) - 1);
    size_t ce = strnlen(m->content_encoding, sizeof(m->content_encoding) - 1);
    size_t len = HE__CACHE_HDR_FIXED + key->len + ct + et + lm + ce;
    char *p;
    if (len > HE__CACHE_HDR_MAX || key->len > 0xffff) return -ENAMETOOLONG;
    memset(out, 0, HE__CACHE_HDR_FIXED);
    he_cache_hdr_put32(out, HE__CACHE_STORE_MAGIC);
    he_cache_hdr_put32(out + 4, HE__CACHE_STORE_VERSION);
    he_cache_hdr_put32(out + 8, (uint32_t)len);
    he_cache_hdr_put64(out + 16, body_len);
    he_cache_hdr_put32(out + 24, body_crc);
    out[28] = (char)(m->status & 0xff);
    out[29] = (char)(m->status >> 8);
    out[30] = (char)m->kind;
    out[31] = (char)ce;
    he_cache_hdr_put64(out + 32, (uint64_t)m->fresh.stored_ms);
    he_cache_hdr_put64(out + 40, (uint64_t)m->fresh.expires_ms);
    he_cache_hdr_put32(out + 48, m->fresh.swr_ms);
    he_cache_hdr_put32(out + 52, m->fresh.sie_ms);
    out[56] = (char)(key->len & 0xff);
    out[57] = (char)(key->len >> 8);
    out[58] = (char)ct;
    out[59] = (char)et;
    out[60] = (char)lm;
    p = out + HE__CACHE_HDR_FIXED;
    memcpy(p, key->s, key->len);
    p += key->len;
    memcpy(p, m->content_type, ct);
    p += ct;
    memcpy(p, m->etag, et);
    p += et;
    memcpy(p, m->last_modified, lm);
    p += lm;
    memcpy(p, m->content_encoding, ce);
    he_cache_hdr_put32(out + 12, he__cache_crc32c(0, out, len));
    return (int)len;
}

int he__cache_hdr_parse(const char *buf, size_t n, he_cache_key_t *key, he_cache_meta_t *m,
                        uint32_t *hdr_len, uint64_t *body_len, uint32_t *body_crc)
{
    char tmp[HE__CACHE_HDR_MAX];
    uint32_t len, crc;
    size_t kl, ct, et, lm, ce;
    const char *p;
    if (n < HE__CACHE_HDR_FIXED || he_cache_hdr_get32(buf) != HE__CACHE_STORE_MAGIC)
        return -EBADMSG;
    if (he_cache_hdr_get32(buf + 4) != HE__CACHE_STORE_VERSION)
        return -EPROTONOSUPPORT; /* another format */
    len = he_cache_hdr_get32(buf + 8);
    if (len < HE__CACHE_HDR_FIXED || len > HE__CACHE_HDR_MAX || len > n) return -EBADMSG;
    memcpy(tmp, buf, len);
    crc = he_cache_hdr_get32(tmp + 12);
    he_cache_hdr_put32(tmp + 12, 0);
    if (he__cache_crc32c(0, tmp, len) != crc) return -EBADMSG;
    kl = (unsigned char)buf[56] | (size_t)(unsigned char)buf[57] << 8;
    ct = (unsigned char)buf[58];
    et = (unsigned char)buf[59];
    lm = (unsigned char)buf[60];
    ce = (unsigned char)buf[31];
    if (HE__CACHE_HDR_FIXED + kl + ct + et + lm + ce != len || ct >= sizeof(m->content_type) ||
        et >= sizeof(m->etag) || lm >= sizeof(m->last_modified) ||
        ce >= sizeof(m->content_encoding))
        return -EBADMSG;
    memset(m, 0, sizeof(*m));
    *body_len = he_cache_hdr_get64(buf + 16);
    *body_crc = he_cache_hdr_get32(buf + 24);
    m->status = (uint16_t)((unsigned char)buf[28] | (unsigned char)buf[29] << 8);
    m->kind = (uint8_t)buf[30];
    m->fresh.stored_ms = (int64_t)he_cache_hdr_get64(buf + 32);
    m->fresh.expires_ms = (int64_t)he_cache_hdr_get64(buf + 40);
    m->fresh.swr_ms = he_cache_hdr_get32(buf + 48);
    m->fresh.sie_ms = he_cache_hdr_get32(buf + 52);
    p = buf + HE__CACHE_HDR_FIXED;
    if (he_cache_key_set(key, p, kl) < 0) return -EBADMSG;
    p += kl;
    memcpy(m->content_type, p, ct);
    p += ct;
    memcpy(m->etag, p, et);
    p += et;
    memcpy(m->last_modified, p, lm);
    p += lm;
    memcpy(m->content_encoding, p, ce);
    *hdr_len = len;
    return 0;
}
