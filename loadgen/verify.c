/* loadgen: --verify: a checksum per URL (FNV-1a over the body), and a check
 * that every fetch of the same URL, by any viewer on any thread, returned
 * the same bytes. */
#include "loadgen/engine.h"

#include <stdlib.h>
#include <string.h>

uint64_t he_lg_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static he_lg_vent_t *he_lg_vmap_slot(he_lg_vmap_t *m, uint64_t key)
{
    size_t mask = m->cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & mask;
    while (m->e[i].count && m->e[i].key != key)
        i = (i + 1) & mask;
    return &m->e[i];
}

static bool he_lg_vmap_grow(he_lg_vmap_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 256;
    he_lg_vent_t *old = m->e;
    size_t ocap = m->cap;
    m->e = calloc(ncap, sizeof(*m->e));
    if (!m->e) {
        m->e = old;
        return false;
    }
    m->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].count) *he_lg_vmap_slot(m, old[i].key) = old[i];
    free(old);
    return true;
}

bool he_lg_vmap_add(he_lg_vmap_t *m, uint64_t key, uint64_t csum, uint64_t len, uint64_t count)
{
    if ((m->n + 1) * 2 > m->cap && !he_lg_vmap_grow(m)) return true; /* out of memory: skip */
    he_lg_vent_t *e = he_lg_vmap_slot(m, key);
    if (!e->count) {
        e->key = key;
        e->csum = csum;
        e->len = len;
        e->count = count;
        m->n++;
        return true;
    }
    e->count += count;
    if (e->csum != csum || e->len != len) {
        e->mismatch = true;
        return false;
    }
    return true;
}

size_t he_lg_vmap_merge(he_lg_vmap_t *dst, const he_lg_vmap_t *src)
{
    size_t bad = 0;
    for (size_t i = 0; i < src->cap; i++) {
        const he_lg_vent_t *e = &src->e[i];
        if (!e->count) continue;
        if (!he_lg_vmap_add(dst, e->key, e->csum, e->len, e->count)) bad++;
        if (e->mismatch) he_lg_vmap_slot(dst, e->key)->mismatch = true;
    }
    return bad;
}

size_t he_lg_vmap_mismatches(const he_lg_vmap_t *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->e[i].count && m->e[i].mismatch) n++;
    return n;
}

void he_lg_vmap_free(he_lg_vmap_t *m)
{
    free(m->e);
    memset(m, 0, sizeof(*m));
}
