/* Parent selection: weighted rendezvous (highest random weight) hashing
 * over at most HE_CONF_MAX_ORIGINS parents, and their shared health.
 *
 * Rendezvous rather than a ring: with at most 8 parents, scoring each one
 * per fetch costs 8 hashes and logarithms (well under a microsecond,
 * against an origin round trip), needs no ring to build or keep, gives
 * exact weights without virtual points, and the full preference order of
 * a key falls out of the scores: when a parent is down its keys go to
 * each key's second choice, spread over the others in proportion to
 * their weights, and nobody else's key moves.
 *
 * Score of parent i for key k: weight_i / -ln(u), u = hash(k, i) in (0,1)
 * (the logarithmic method for weighted rendezvous hashing): the chance
 * that parent i wins is weight_i / sum of weights. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/key.h"
#include "cache/select.h"
#include "cache/stats.h"

_Static_assert(HE_CACHE_PARENTS_MAX == HE_CONF_MAX_ORIGINS, "one counter per origin");

/* Each origin on a cache line of its own: a failure written by one worker
 * does not disturb the loads of the others' neighbours. */
typedef struct he_cache_health_slot {
    _Atomic uint64_t down_until_ms; /* 0: up */
    _Atomic uint64_t marked_down;
    char pad[48];
} he_cache_health_slot_t;

struct he_cache_health {
    unsigned n;
    unsigned down_ms;
    he_cache_health_slot_t slot[HE_CONF_MAX_ORIGINS];
};

he_cache_health_t *he_cache_health_new(unsigned n, unsigned down_ms)
{
    he_cache_health_t *h;
    /* C11 aligned_alloc wants a size that is a multiple of the alignment
     * (ASan refuses 520 bytes at 64) */
    size_t size = (sizeof(*h) + 63) & ~(size_t)63;
    if (n > HE_CONF_MAX_ORIGINS) return NULL;
    h = aligned_alloc(64, size);
    if (!h) return NULL;
    memset(h, 0, size);
    h->n = n;
    h->down_ms = down_ms;
    return h;
}

void he_cache_health_free(he_cache_health_t *h)
{
    free(h);
}

unsigned he_cache_health_count(const he_cache_health_t *h)
{
    return h ? h->n : 0;
}

bool he_cache_health_up(const he_cache_health_t *h, unsigned i, uint64_t now_ms)
{
    if (!h || i >= h->n) return true;
    return atomic_load_explicit(&h->slot[i].down_until_ms, memory_order_relaxed) <= now_ms;
}

bool he_cache_health_fail(he_cache_health_t *h, unsigned i, uint64_t now_ms)
{
    he_cache_health_slot_t *s;
    uint64_t cur;
    if (!h || i >= h->n || !h->down_ms) return false;
    s = &h->slot[i];
    cur = atomic_load_explicit(&s->down_until_ms, memory_order_relaxed);
    /* already down: the first failure's deadline stands, so a dead parent
     * is tried again down_ms after it was first seen dead */
    if (cur > now_ms) return false;
    if (!atomic_compare_exchange_strong_explicit(&s->down_until_ms, &cur, now_ms + h->down_ms,
                                                 memory_order_relaxed, memory_order_relaxed))
        return false;
    atomic_fetch_add_explicit(&s->marked_down, 1, memory_order_relaxed);
    return true;
}

void he_cache_health_ok(he_cache_health_t *h, unsigned i)
{
    if (!h || i >= h->n) return;
    if (atomic_load_explicit(&h->slot[i].down_until_ms, memory_order_relaxed))
        atomic_store_explicit(&h->slot[i].down_until_ms, 0, memory_order_relaxed);
}

void he_cache_health_get(const he_cache_health_t *h, unsigned i, uint64_t now_ms,
                         he_cache_health_view_t *out)
{
    uint64_t until;
    memset(out, 0, sizeof(*out));
    out->up = true;
    if (!h || i >= h->n) return;
    until = atomic_load_explicit(&h->slot[i].down_until_ms, memory_order_relaxed);
    out->up = until <= now_ms;
    out->down_left_ms = out->up ? 0 : until - now_ms;
    out->marked_down = atomic_load_explicit(&h->slot[i].marked_down, memory_order_relaxed);
}

/* ---------------------------------------------------------------- order */

/* The splitmix64 finalizer: mixes a key's hash with a parent's id. */
static uint64_t he_select_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t he_cache_select_id(const char *url, size_t len)
{
    return he_cache_hash(url, len);
}

uint64_t he_cache_select_key(const char *path, size_t len)
{
    return he_cache_hash(path, len);
}

static double he_select_score(uint64_t key, const he_cache_parent_t *p)
{
    uint64_t h = he_select_mix(key ^ he_select_mix(p->id));
    /* the top 53 bits as a double in (0, 1): never 0 or 1, so the log is finite */
    double u = ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    return (double)(p->weight ? p->weight : 1) / -log(u);
}

void he_cache_select_order(const he_cache_parent_t *p, unsigned n, unsigned mode, uint64_t key_hash,
                           const he_cache_health_t *h, uint64_t now_ms, uint8_t *order)
{
    double score[HE_CONF_MAX_ORIGINS];
    bool up[HE_CONF_MAX_ORIGINS];
    if (n > HE_CONF_MAX_ORIGINS) n = HE_CONF_MAX_ORIGINS;
    for (unsigned i = 0; i < n; i++) {
        order[i] = (uint8_t)i;
        up[i] = he_cache_health_up(h, i, now_ms);
        /* ordered: earlier is better */
        score[i] = mode == HE_CONF_SELECT_HASH ? he_select_score(key_hash, &p[i]) : -(double)i;
    }
    /* insertion sort of at most 8: up before down, then by score */
    for (unsigned i = 1; i < n; i++) {
        uint8_t x = order[i];
        unsigned j = i;
        while (j > 0) {
            uint8_t y = order[j - 1];
            bool before = up[x] != up[y] ? up[x] : score[x] > score[y];
            if (!before) break;
            order[j] = y;
            j--;
        }
        order[j] = x;
    }
}
