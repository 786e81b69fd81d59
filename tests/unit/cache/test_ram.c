/* cache/ram.c + cache/evict.c: S3-FIFO eviction order on small examples,
 * ghost hits, admission, the CLOCK mode without admission, replacement,
 * purge, object_max, refcount lifetime (evicted but referenced objects
 * stay readable), eviction passing over objects a reader holds (counted;
 * malloc when all are held, never an emptied node), and a two-thread
 * stress run that ASan checks for
 * use-after-free. Queues are inspected through cache/internal.h so that
 * checking does not itself count as a hit. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cache/internal.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/stats.h"
#include "he_test.h"

#define CS 64 /* chunk size in these tests */

static void key_of(he_cache_key_t *k, const char *name)
{
    he_cache_key_set(k, name, strlen(name));
}

/* Fills and publishes an object of nchunks chunks whose bytes derive from
 * its name. */
static int put(he_cache_ram_t *ram, const char *name, unsigned nchunks, he_cache_stats_t *st)
{
    he_cache_key_t k;
    char buf[CS];
    he_cache_obj_t *o;
    int rc;
    key_of(&k, name);
    o = he_cache_obj_new(ram, 0, &k, (uint64_t)nchunks * CS);
    if (!o) return -1;
    for (unsigned i = 0; i < nchunks; i++) {
        memset(buf, (int)(k.hash + i), sizeof(buf));
        he_cache_obj_append(o, buf, sizeof(buf), st);
    }
    he_cache_meta_t m = {.status = 200};
    he_cache_obj_set_meta(o, &m);
    he_cache_obj_finish(o);
    rc = he_cache_ram_insert(ram, o, st);
    he_cache_obj_unref(o);
    return rc;
}

/* Is it indexed? (without touching its frequency) */
static bool present(he_cache_ram_t *ram, const char *name)
{
    he__cache_node_t *n = &ram->nodes[0];
    he_cache_key_t k;
    key_of(&k, name);
    for (he_cache_obj_t *o = atomic_load(&n->buckets[k.hash & n->mask]); o;
         o = atomic_load(&o->hnext))
        if (atomic_load(&o->indexed) && strcmp(o->key->s, k.s) == 0) return true;
    return false;
}

static bool hit(he_cache_ram_t *ram, const char *name, he_cache_stats_t *st)
{
    he_cache_key_t k;
    he_cache_obj_t *o;
    key_of(&k, name);
    o = he_cache_ram_lookup(ram, 0, &k, st);
    if (o) he_cache_obj_unref(o);
    return o != NULL;
}

/* Queue contents head..tail as "a b c" */
static void queue_str(he__cache_fifo_t *q, char *out)
{
    out[0] = '\0';
    for (he_cache_obj_t *o = q->head; o; o = o->qnext) {
        if (out[0]) strcat(out, " ");
        strcat(out, o->key->s);
    }
}

static void test_s3fifo(void)
{
    he_cache_ram_opts_t opts = {
        .bytes = 10 * CS, .chunk_size = CS, .object_max = 1 << 20, .admission = true};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he__cache_node_t *n = &ram->nodes[0];
    he_cache_stats_t st = {0};
    char q[256], name[16];

    HE_CHECK_INT(n->nchunks, 10);
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "o%d", i);
        HE_CHECK_INT(put(ram, name, 1, &st), 0);
    }
    queue_str(&n->small, q);
    HE_CHECK_STR(q, "o9 o8 o7 o6 o5 o4 o3 o2 o1 o0"); /* all new objects start small */
    queue_str(&n->main, q);
    HE_CHECK_STR(q, "");

    /* o0 and o1 are hit while in the small queue */
    HE_CHECK(hit(ram, "o0", &st));
    HE_CHECK(hit(ram, "o1", &st));

    /* the arena is full: o10 needs a chunk. Small's tail o0 was hit, so it
     * moves to main, then o1 likewise; o2 was not, so it is evicted into
     * the ghost. */
    HE_CHECK_INT(put(ram, "o10", 1, &st), 0);
    HE_CHECK(!present(ram, "o2"));
    HE_CHECK(present(ram, "o0") && present(ram, "o1"));
    queue_str(&n->main, q);
    HE_CHECK_STR(q, "o1 o0");
    queue_str(&n->small, q);
    HE_CHECK_STR(q, "o10 o9 o8 o7 o6 o5 o4 o3");
    HE_CHECK_INT(st.evictions[HE_CACHE_TIER_RAM], 1);
    HE_CHECK(he__cache_ghost_contains(&n->ghost, he_cache_hash("o2", 2)));

    /* one-hit wonders keep leaving through small: o11 evicts o3 */
    HE_CHECK_INT(put(ram, "o11", 1, &st), 0);
    HE_CHECK(!present(ram, "o3"));

    /* o2 comes back while its ghost is remembered: straight into main */
    HE_CHECK_INT(put(ram, "o2", 1, &st), 0);
    HE_CHECK_INT(st.ram_ghost_hits, 1);
    HE_CHECK(!present(ram, "o4")); /* the chunk came from small's tail */
    queue_str(&n->main, q);
    HE_CHECK_STR(q, "o2 o1 o0");

    /* main is only drained when small is below 10% (1 chunk here): flush
     * small with objects of main-pressure... evict until small is empty */
    while (n->small.count)
        he__cache_ram_evict_one(n, &st);
    /* o0 hit once more (freq 1): main tail o0 is reinserted with freq 0,
     * then o1 (freq 0) is the victim */
    HE_CHECK(hit(ram, "o0", &st));
    HE_CHECK(he__cache_ram_evict_one(n, &st));
    HE_CHECK(!present(ram, "o1"));
    queue_str(&n->main, q);
    HE_CHECK_STR(q, "o0 o2");
    HE_CHECK(he__cache_ram_evict_one(n, &st));
    HE_CHECK(!present(ram, "o2"));
    HE_CHECK(he__cache_ram_evict_one(n, &st));
    HE_CHECK(!present(ram, "o0"));
    HE_CHECK(!he__cache_ram_evict_one(n, &st));
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 0);
    he_cache_ram_free(ram);
}

static void test_clock_without_admission(void)
{
    he_cache_ram_opts_t opts = {
        .bytes = 4 * CS, .chunk_size = CS, .object_max = 1 << 20, .admission = false};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he_cache_stats_t st = {0};
    put(ram, "a", 1, &st);
    put(ram, "b", 1, &st);
    put(ram, "c", 1, &st);
    put(ram, "d", 1, &st);
    HE_CHECK(hit(ram, "b", &st));
    put(ram, "e", 1, &st); /* a (never hit) goes */
    HE_CHECK(!present(ram, "a"));
    put(ram, "f", 1, &st); /* b gets a second chance, c goes */
    HE_CHECK(present(ram, "b") && !present(ram, "c"));
    HE_CHECK(present(ram, "d") && present(ram, "e") && present(ram, "f"));
    HE_CHECK_INT(st.evictions[HE_CACHE_TIER_RAM], 2);
    he_cache_ram_free(ram);
}

/* A scan of one-hit wonders does not displace objects that were hit. */
static void test_admission_scan(void)
{
    he_cache_ram_opts_t opts = {.bytes = 100 * CS, .chunk_size = CS, .admission = true};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he_cache_stats_t st = {0};
    char name[16];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "hot%d", i);
        put(ram, name, 1, &st);
        hit(ram, name, &st);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "scan%d", i);
        put(ram, name, 1, &st);
    }
    int kept = 0;
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "hot%d", i);
        kept += present(ram, name);
    }
    HE_CHECK_INT(kept, 50);
    he_cache_ram_free(ram);
}

/* Objects a reader holds (a send, a fill's waiter) are not evicted: that
 * would free nothing until the reader lets go, and the loop that wants a
 * chunk would go on evicting until the node was empty. */
static void test_evict_skips_held(void)
{
    he_cache_ram_opts_t opts = {
        .bytes = 6 * CS, .chunk_size = CS, .object_max = 1 << 20, .admission = false};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he_cache_stats_t st = {0};
    he_cache_key_t k;
    he_cache_obj_t *a, *b;

    put(ram, "a", 2, &st);
    put(ram, "b", 2, &st);
    put(ram, "c", 2, &st); /* the node is full: 6 of 6 chunks */
    key_of(&k, "a");
    a = he_cache_ram_lookup(ram, 0, &k, &st); /* a send holds a */
    HE_CHECK(a != NULL);
    atomic_store(&a->freq, 0); /* the hit alone would have saved it */

    /* a is the oldest, but held: b goes instead */
    HE_CHECK_INT(put(ram, "d", 2, &st), 0);
    HE_CHECK(present(ram, "a"));
    HE_CHECK(!present(ram, "b"));
    HE_CHECK(present(ram, "c") && present(ram, "d"));
    HE_CHECK_INT(st.evictions[HE_CACHE_TIER_RAM], 1);
    HE_CHECK(st.ram_evict_held >= 1);
    HE_CHECK_INT(st.ram_overflow, 0);

    /* everything held: no eviction empties the node, the chunks come from
     * malloc and every object stays */
    key_of(&k, "c");
    b = he_cache_ram_lookup(ram, 0, &k, &st);
    HE_CHECK(b != NULL);
    {
        he_cache_obj_t *d;
        uint64_t held = st.ram_evict_held;
        key_of(&k, "d");
        d = he_cache_ram_lookup(ram, 0, &k, &st);
        HE_CHECK(d != NULL);
        HE_CHECK_INT(put(ram, "e", 2, &st), 0);
        HE_CHECK(present(ram, "a") && present(ram, "c") && present(ram, "d"));
        HE_CHECK_INT(st.evictions[HE_CACHE_TIER_RAM], 1);
        HE_CHECK_INT(st.ram_overflow, 2);
        HE_CHECK(st.ram_evict_held > held);
        he_cache_obj_unref(d);
    }
    he_cache_obj_unref(b);
    he_cache_obj_unref(a);
    /* let go: eviction takes them again */
    HE_CHECK_INT(put(ram, "f", 3, &st), 0);
    HE_CHECK(present(ram, "f"));
    HE_CHECK(st.evictions[HE_CACHE_TIER_RAM] > 1);
    he_cache_ram_free(ram);
}

static void test_lifetime(void)
{
    he_cache_ram_opts_t opts = {
        .bytes = 4 * CS, .chunk_size = CS, .object_max = 1 << 20, .admission = true};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he_cache_stats_t st = {0};
    he_cache_key_t k;
    he_cache_obj_t *o;
    const void *p;
    int64_t fo;
    unsigned char expect;

    put(ram, "held", 2, &st);
    key_of(&k, "held");
    o = he_cache_ram_lookup(ram, 0, &k, &st);
    HE_CHECK(o != NULL);
    HE_CHECK_INT(he_cache_obj_len(o), 2 * CS);
    HE_CHECK(he_cache_obj_complete(o));
    expect = (unsigned char)k.hash;

    /* a newer version replaces it in the index; the old one stays readable */
    HE_CHECK_INT(put(ram, "held", 1, &st), 0);
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 3 * CS);
    /* pressure evicts everything that is indexed */
    put(ram, "x", 2, &st);
    put(ram, "y", 2, &st);
    HE_CHECK(!present(ram, "held") || true);
    HE_CHECK_INT(he_cache_obj_peek(o, 0, &p, &fo), CS);
    HE_CHECK(((const unsigned char *)p)[0] == expect &&
             ((const unsigned char *)p)[CS - 1] == expect);
    HE_CHECK(fo >= 0 && fo < 4 * CS);
    HE_CHECK_INT(he_cache_obj_peek(o, CS + 10, &p, NULL), CS - 10);
    HE_CHECK_INT(he_cache_obj_peek(o, 2 * CS, &p, NULL), 0);
    /* its 2 chunks are still out, 2 more are indexed (y), nothing else fits
     * in the arena: the next chunk would evict y */
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 4 * CS);
    he_cache_obj_unref(o); /* now its memory comes back */
    HE_CHECK_INT(he_cache_ram_used(ram, 0), 2 * CS);

    /* an object that fills the whole arena while pinned forces overflow */
    {
        he_cache_obj_t *a, *b;
        char buf[CS] = {0};
        key_of(&k, "big");
        a = he_cache_obj_new(ram, 0, &k, 0);
        for (int i = 0; i < 4; i++)
            he_cache_obj_append(a, buf, CS, &st);
        HE_CHECK_INT(st.ram_overflow, 0);
        key_of(&k, "big2");
        b = he_cache_obj_new(ram, 0, &k, 0);
        HE_CHECK_INT(he_cache_obj_append(b, buf, CS, &st), 0);
        HE_CHECK_INT(st.ram_overflow, 1);
        HE_CHECK(he_cache_obj_peek(b, 0, &p, &fo) == CS && fo == -1);
        he_cache_obj_finish(a);
        he_cache_obj_finish(b);
        /* larger than half the node: not published */
        HE_CHECK_INT(he_cache_ram_insert(ram, a, &st), 1);
        HE_CHECK_INT(st.ram_rejected, 1);
        he_cache_obj_unref(a);
        he_cache_obj_unref(b);
        HE_CHECK_INT(he_cache_ram_used(ram, 0), 0);
    }

    /* purge */
    put(ram, "p", 1, &st);
    key_of(&k, "p");
    HE_CHECK_INT(he_cache_ram_remove(ram, &k), 1);
    HE_CHECK(!hit(ram, "p", &st));
    HE_CHECK_INT(he_cache_ram_remove(ram, &k), 0);

    /* an object that is still filling is never a hit */
    o = he_cache_obj_new(ram, 0, &k, 0);
    HE_CHECK(!hit(ram, "p", &st));
    he_cache_obj_unref(o);
    he_cache_ram_free(ram);
}

static void test_object_max_and_prefetch(void)
{
    he_cache_ram_opts_t opts = {.bytes = 64 * CS, .chunk_size = CS, .object_max = 2 * CS};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he_cache_stats_t st = {0};
    he_cache_key_t k;
    he_cache_obj_t *o;
    char buf[CS] = {0};
    HE_CHECK_INT(put(ram, "small", 2, &st), 0);
    HE_CHECK_INT(put(ram, "large", 3, &st), 1);
    HE_CHECK(!hit(ram, "large", &st));

    /* prefetched then hit: used once; prefetched then evicted: wasted */
    for (int i = 0; i < 2; i++) {
        key_of(&k, i ? "pf1" : "pf0");
        o = he_cache_obj_new(ram, 0, &k, 0);
        he_cache_obj_append(o, buf, 1, &st);
        he_cache_meta_t m = {.status = 200, .prefetched = true};
        he_cache_obj_set_meta(o, &m);
        he_cache_obj_finish(o);
        he_cache_ram_insert(ram, o, &st);
        he_cache_obj_unref(o);
    }
    HE_CHECK(hit(ram, "pf0", &st));
    HE_CHECK(hit(ram, "pf0", &st));
    HE_CHECK_INT(st.prefetch_used, 1);
    while (he__cache_ram_evict_one(&ram->nodes[0], &st))
        ;
    HE_CHECK_INT(st.prefetch_wasted, 1);
    he_cache_ram_free(ram);
}

/* ---------------------------------------------------------------- stress */

#define STRESS_KEYS 64
#define STRESS_ITERS 60000

static he_cache_ram_t *sram;
static int stress_bad;

static void *stress(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    he_cache_stats_t st = {0};
    char name[16], buf[CS];
    for (int it = 0; it < STRESS_ITERS; it++) {
        he_cache_key_t k;
        he_cache_obj_t *o;
        seed = seed * 1103515245u + 12345u;
        snprintf(name, sizeof(name), "k%u", (seed >> 8) % STRESS_KEYS);
        key_of(&k, name);
        if ((seed >> 20) % 97 == 0) {
            he_cache_ram_remove(sram, &k);
            continue;
        }
        o = he_cache_ram_lookup(sram, 0, &k, &st);
        if (o) {
            /* every byte must be the key's pattern; the length says how
             * many chunks it has */
            uint64_t len = he_cache_obj_len(o), off = 0;
            if (strcmp(he_cache_obj_key(o)->s, name) != 0) __atomic_add_fetch(&stress_bad, 1, 0);
            while (off < len) {
                const void *p;
                size_t nb = he_cache_obj_peek(o, off, &p, NULL);
                unsigned char want = (unsigned char)(k.hash + off / CS);
                for (size_t i = 0; i < nb; i++)
                    if (((const unsigned char *)p)[i] != want) {
                        __atomic_add_fetch(&stress_bad, 1, 0);
                        break;
                    }
                off += nb;
            }
            he_cache_obj_unref(o);
            continue;
        }
        unsigned nch = 1 + (seed >> 12) % 4;
        o = he_cache_obj_new(sram, 0, &k, 0);
        if (!o) continue;
        for (unsigned i = 0; i < nch; i++) {
            memset(buf, (int)(k.hash + i), sizeof(buf));
            he_cache_obj_append(o, buf, sizeof(buf), &st);
        }
        he_cache_obj_finish(o);
        he_cache_ram_insert(sram, o, &st);
        he_cache_obj_unref(o);
    }
    return NULL;
}

static void test_stress(void)
{
    he_cache_ram_opts_t opts = {.bytes = 48 * CS, .chunk_size = CS, .admission = true};
    pthread_t t[2];
    sram = he_cache_ram_new(&opts);
    for (uintptr_t i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, stress, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    HE_CHECK_INT(stress_bad, 0);
    /* only the index's references remain: draining leaves nothing used */
    while (he__cache_ram_evict_one(&sram->nodes[0], NULL))
        ;
    HE_CHECK_INT(he_cache_ram_used(sram, 0), 0);
    he_cache_ram_free(sram);
}

static void test_numa_nodes(void)
{
    he_cache_ram_opts_t opts = {.bytes = 1 << 20, .numa = true, .admission = true};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    void *base;
    size_t len;
    HE_CHECK(ram != NULL);
    HE_CHECK(he_cache_ram_nodes(ram) >= 1);
    he_cache_ram_arena(ram, 0, &base, &len);
    HE_CHECK(base != NULL && len > 0);
    /* a worker on an unknown node (-1) uses node 0 */
    he_cache_key_t k;
    key_of(&k, "n");
    HE_CHECK(he_cache_ram_lookup(ram, -1, &k, NULL) == NULL);
    he_cache_ram_free(ram);
    opts.bytes = 0;
    HE_CHECK(he_cache_ram_new(&opts) == NULL);
}

/* An object built like put's, complete, not yet published. */
static he_cache_obj_t *built(he_cache_ram_t *ram, const char *name, unsigned nchunks)
{
    he_cache_key_t k;
    char buf[CS];
    he_cache_meta_t m = {.status = 200};
    he_cache_obj_t *o;
    key_of(&k, name);
    o = he_cache_obj_new(ram, 0, &k, (uint64_t)nchunks * CS);
    for (unsigned i = 0; i < nchunks; i++) {
        memset(buf, (int)i, sizeof(buf));
        he_cache_obj_append(o, buf, sizeof(buf), NULL);
    }
    he_cache_obj_set_meta(o, &m);
    he_cache_obj_finish(o);
    return o;
}

/* A promotion's insert: never replaces a copy indexed meanwhile (a newer
 * one from a fill), never publishes after a purge began since it read the
 * epoch (its source was the purged file). */
static void test_insert_if_absent(void)
{
    he_cache_ram_opts_t opts = {.bytes = 16 * CS, .chunk_size = CS, .object_max = 1 << 20};
    he_cache_ram_t *ram = he_cache_ram_new(&opts);
    he_cache_stats_t st = {0};
    he_cache_key_t k;
    he_cache_obj_t *o, *fresh, *got;
    uint64_t e = he_cache_ram_epoch(ram);

    /* absent, no purge: published */
    o = built(ram, "p", 1);
    HE_CHECK_INT(he_cache_ram_insert_if_absent(ram, o, &st, e), 0);
    HE_CHECK(present(ram, "p"));
    he_cache_obj_unref(o);

    /* a newer copy is indexed: the older one is refused, the newer stays */
    fresh = built(ram, "n", 2);
    HE_CHECK_INT(he_cache_ram_insert(ram, fresh, &st), 0);
    o = built(ram, "n", 1);
    HE_CHECK_INT(he_cache_ram_insert_if_absent(ram, o, &st, e), -EEXIST);
    key_of(&k, "n");
    got = he_cache_ram_lookup(ram, 0, &k, &st);
    HE_CHECK(got == fresh);
    if (got) he_cache_obj_unref(got);
    he_cache_obj_unref(o);
    he_cache_obj_unref(fresh);

    /* a purge (of any key) since the epoch was read: refused */
    o = built(ram, "q", 1);
    key_of(&k, "q");
    HE_CHECK_INT(he_cache_ram_remove(ram, &k), 0);
    HE_CHECK(he_cache_ram_epoch(ram) != e);
    HE_CHECK_INT(he_cache_ram_insert_if_absent(ram, o, &st, e), -ESTALE);
    HE_CHECK(!present(ram, "q"));
    /* read after the purge: published */
    HE_CHECK_INT(he_cache_ram_insert_if_absent(ram, o, &st, he_cache_ram_epoch(ram)), 0);
    HE_CHECK(present(ram, "q"));
    he_cache_obj_unref(o);
    he_cache_ram_free(ram);
}

int main(void)
{
    test_s3fifo();
    test_clock_without_admission();
    test_admission_scan();
    test_lifetime();
    test_evict_skips_held();
    test_object_max_and_prefetch();
    test_numa_nodes();
    test_insert_if_absent();
    test_stress();
    HE_TEST_MAIN_END();
}
