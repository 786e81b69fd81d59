/* Replays Zipf traces against the RAM tier (cache/ram.c, S3-FIFO, through
 * its real API) and against a plain LRU of the same capacity written here,
 * and prints miss ratios (by object and by byte) and throughput.
 *
 *   cache_zipf [requests] [objects]     defaults 1000000 100000
 *
 * Objects have deterministic sizes from 4 KiB to 512 KiB (log-uniform),
 * memory is counted in 4 KiB chunks for both policies, caches are 1% and
 * 10% of the working set. "replay/s" includes miss handling (allocating and
 * publishing objects, without copying bytes); "lookup/s" replays the trace
 * again with lookups only on the warm cache. Single-threaded, bounded. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "tests/he_xorshift.h"

#define CHUNK 4096

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- LRU */

typedef struct lru_ent {
    uint32_t id;
    uint32_t chunks;
    int32_t prev, next;
} lru_ent_t;

typedef struct lru {
    lru_ent_t *e;   /* by object id */
    int32_t *where; /* object id -> slot in e, -1 absent (direct-mapped index) */
    int32_t head, tail;
    uint64_t used, cap;
    int32_t nfree, *freelist;
} lru_t;

static void lru_init(lru_t *l, uint32_t nobj, uint64_t cap_chunks)
{
    l->e = calloc(nobj, sizeof(lru_ent_t));
    l->where = malloc(sizeof(int32_t) * nobj);
    l->freelist = malloc(sizeof(int32_t) * nobj);
    for (uint32_t i = 0; i < nobj; i++) {
        l->where[i] = -1;
        l->freelist[i] = (int32_t)(nobj - 1 - i);
    }
    l->nfree = (int32_t)nobj;
    l->head = l->tail = -1;
    l->used = 0;
    l->cap = cap_chunks;
}

static void lru_unlink(lru_t *l, int32_t s)
{
    lru_ent_t *e = &l->e[s];
    if (e->prev >= 0)
        l->e[e->prev].next = e->next;
    else
        l->head = e->next;
    if (e->next >= 0)
        l->e[e->next].prev = e->prev;
    else
        l->tail = e->prev;
}

static void lru_push(lru_t *l, int32_t s)
{
    l->e[s].prev = -1;
    l->e[s].next = l->head;
    if (l->head >= 0)
        l->e[l->head].prev = s;
    else
        l->tail = s;
    l->head = s;
}

static bool lru_get(lru_t *l, uint32_t id)
{
    int32_t s = l->where[id];
    if (s < 0) return false;
    lru_unlink(l, s);
    lru_push(l, s);
    return true;
}

static void lru_put(lru_t *l, uint32_t id, uint32_t chunks)
{
    if (chunks > l->cap / 2) return; /* same rule as the RAM tier */
    while (l->used + chunks > l->cap) {
        int32_t v = l->tail;
        lru_unlink(l, v);
        l->used -= l->e[v].chunks;
        l->where[l->e[v].id] = -1;
        l->freelist[l->nfree++] = v;
    }
    int32_t s = l->freelist[--l->nfree];
    l->e[s].id = id;
    l->e[s].chunks = chunks;
    l->where[id] = s;
    l->used += chunks;
    lru_push(l, s);
}

/* ---------------------------------------------------------------- trace */

static uint32_t *make_trace(uint32_t nreq, uint32_t nobj, double alpha)
{
    double *cdf = malloc(sizeof(double) * nobj), sum = 0;
    uint32_t *t = malloc(sizeof(uint32_t) * nreq);
    /* popularity rank r -> object id through a fixed permutation, so that
     * popularity and size are independent */
    uint32_t *perm = malloc(sizeof(uint32_t) * nobj);
    for (uint32_t i = 0; i < nobj; i++) {
        sum += 1.0 / pow((double)(i + 1), alpha);
        cdf[i] = sum;
        perm[i] = i;
    }
    for (uint32_t i = nobj - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(he_xorshift64(&rng) % (i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (uint32_t i = 0; i < nreq; i++) {
        double u = (double)(he_xorshift64(&rng) >> 11) / 9007199254740992.0 * sum;
        uint32_t lo = 0, hi = nobj - 1;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        t[i] = perm[lo];
    }
    free(cdf);
    free(perm);
    return t;
}

static uint32_t size_chunks(uint32_t id)
{
    /* log-uniform 4 KiB .. 512 KiB */
    uint64_t h = he_cache_hash(&id, sizeof(id));
    double x = (double)(h >> 11) / 9007199254740992.0;
    return (uint32_t)exp(x * log(128.0)) ? (uint32_t)exp(x * log(128.0)) : 1;
}

static void key_for(he_cache_key_t *k, uint32_t id)
{
    char name[32];
    int n = snprintf(name, sizeof(name), "v/seg_%u.ts", id);
    he_cache_key_set(k, name, (size_t)n);
}

typedef struct result {
    double miss, byte_miss, replay_rate, lookup_rate;
} result_t;

static result_t run_s3fifo(const uint32_t *t, uint32_t nreq, uint64_t cap_chunks, bool admission)
{
    he_cache_ram_opts_t o = {.bytes = cap_chunks * CHUNK,
                             .chunk_size = CHUNK,
                             .object_max = cap_chunks * CHUNK,
                             .admission = admission};
    he_cache_ram_t *ram = he_cache_ram_new(&o);
    static he_cache_stats_t st;
    he_cache_key_t k;
    uint64_t misses = 0, bytes = 0, miss_bytes = 0;
    result_t r;
    double t0 = now_s();
    for (uint32_t i = 0; i < nreq; i++) {
        uint32_t sz = size_chunks(t[i]);
        he_cache_obj_t *obj;
        key_for(&k, t[i]);
        bytes += sz;
        obj = he_cache_ram_lookup(ram, 0, &k, &st);
        if (obj) {
            he_cache_obj_unref(obj);
            continue;
        }
        misses++;
        miss_bytes += sz;
        obj = he_cache_obj_new(ram, 0, &k, (uint64_t)sz * CHUNK);
        for (uint32_t c = 0; c < sz; c++) {
            void *p;
            he_cache_obj_space(obj, &p, &st);
            he_cache_obj_commit(obj, CHUNK);
        }
        he_cache_obj_finish(obj);
        he_cache_ram_insert(ram, obj, &st);
        he_cache_obj_unref(obj);
    }
    r.replay_rate = nreq / (now_s() - t0);
    t0 = now_s();
    for (uint32_t i = 0; i < nreq; i++) {
        he_cache_obj_t *obj;
        key_for(&k, t[i]);
        obj = he_cache_ram_lookup(ram, 0, &k, &st);
        if (obj) he_cache_obj_unref(obj);
    }
    r.lookup_rate = nreq / (now_s() - t0);
    r.miss = (double)misses / nreq;
    r.byte_miss = (double)miss_bytes / (double)bytes;
    he_cache_ram_free(ram);
    return r;
}

static result_t run_lru(const uint32_t *t, uint32_t nreq, uint32_t nobj, uint64_t cap_chunks)
{
    lru_t l;
    he_cache_key_t k;
    uint64_t misses = 0, bytes = 0, miss_bytes = 0;
    result_t r;
    double t0 = now_s();
    lru_init(&l, nobj, cap_chunks);
    for (uint32_t i = 0; i < nreq; i++) {
        uint32_t sz = size_chunks(t[i]);
        key_for(&k, t[i]); /* same key work as the real tier, for fair rates */
        bytes += sz;
        if (lru_get(&l, t[i])) continue;
        misses++;
        miss_bytes += sz;
        lru_put(&l, t[i], sz);
    }
    r.replay_rate = nreq / (now_s() - t0);
    t0 = now_s();
    for (uint32_t i = 0; i < nreq; i++) {
        key_for(&k, t[i]);
        lru_get(&l, t[i]);
    }
    r.lookup_rate = nreq / (now_s() - t0);
    r.miss = (double)misses / nreq;
    r.byte_miss = (double)miss_bytes / (double)bytes;
    free(l.e);
    free(l.where);
    free(l.freelist);
    return r;
}

int main(int argc, char **argv)
{
    uint32_t nreq = argc > 1 ? (uint32_t)atoi(argv[1]) : 1000000;
    uint32_t nobj = argc > 2 ? (uint32_t)atoi(argv[2]) : 100000;
    static const double alphas[] = {0.8, 1.0};
    static const double fracs[] = {0.01, 0.10};
    uint64_t ws = 0;
    for (uint32_t i = 0; i < nobj; i++)
        ws += size_chunks(i);
    printf("objects %u, requests %u, working set %.1f MiB (4 KiB chunks)\n", nobj, nreq,
           (double)ws * CHUNK / 1048576.0);
    printf("%-5s %-6s %-14s %8s %10s %12s %12s\n", "alpha", "cache", "policy", "miss", "byte-miss",
           "replay/s", "lookup/s");
    for (size_t a = 0; a < 2; a++) {
        uint32_t *t = make_trace(nreq, nobj, alphas[a]);
        for (size_t f = 0; f < 2; f++) {
            uint64_t cap = (uint64_t)(ws * fracs[f]);
            result_t s3 = run_s3fifo(t, nreq, cap, true);
            result_t ck = run_s3fifo(t, nreq, cap, false);
            result_t lr = run_lru(t, nreq, nobj, cap);
            printf("%-5.1f %-6s %-14s %8.4f %10.4f %12.0f %12.0f\n", alphas[a], f ? "10%" : "1%",
                   "S3-FIFO", s3.miss, s3.byte_miss, s3.replay_rate, s3.lookup_rate);
            printf("%-5.1f %-6s %-14s %8.4f %10.4f %12.0f %12.0f\n", alphas[a], f ? "10%" : "1%",
                   "CLOCK (no adm)", ck.miss, ck.byte_miss, ck.replay_rate, ck.lookup_rate);
            printf("%-5.1f %-6s %-14s %8.4f %10.4f %12.0f %12.0f\n", alphas[a], f ? "10%" : "1%",
                   "LRU", lr.miss, lr.byte_miss, lr.replay_rate, lr.lookup_rate);
        }
        free(t);
    }
    return 0;
}
