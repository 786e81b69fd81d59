/* server/base/alog_ring.c on its own: the producer's reserve and commit
 * against a consumer written here (tail advanced by hand, as the control
 * thread's drain does), so the ring's rules hold without the formatter:
 * sizes rounded to 8, no record crosses the end (a size-0 skip marker
 * instead), full means full, and the cache names. */
#include <stdlib.h>
#include <string.h>

#include "he_test.h"
#include "server/base/alog_ring.h"

/* Takes every committed record, checking each carries its sequence
 * number in status; returns how many. */
static unsigned consume(he_alog_ring_t *r, unsigned *next)
{
    unsigned tail = atomic_load(&r->tail), head = atomic_load(&r->head), n = 0;
    while (tail != head) {
        he_alog_rec_t *rec = (he_alog_rec_t *)(r->data + (tail & r->mask));
        if (rec->size == 0) { /* skip marker: the rest of the ring is unused */
            tail += r->size - (tail & r->mask);
            continue;
        }
        HE_CHECK_INT(rec->size % 8, 0);
        HE_CHECK(rec->size >= sizeof(*rec) + rec->target_len);
        HE_CHECK_INT(rec->status, (*next)++ & 0xffff);
        HE_CHECK(rec->target_len == 0 || rec->target[0] == '/');
        tail += rec->size;
        n++;
    }
    atomic_store(&r->tail, tail);
    return n;
}

static void test_ring_rules(void)
{
    he_alog_ring_t *r = he_alog_ring_new(4096);
    unsigned seq = 0, want = 0, skips_seen = 0;

    HE_CHECK(r != NULL);
    HE_CHECK(he_alog_ring_new(6000) == NULL); /* not a power of two */
    HE_CHECK(he_alog_ring_new(1024) == NULL); /* too small */
    HE_CHECK(!he_alog_ring_on(r));            /* off until the control thread opens a log */
    HE_CHECK(!he_alog_ring_on(NULL));
    for (int round = 0; round < 20; round++) {
        unsigned made = 0;
        for (;;) {
            size_t len = 1 + (size_t)((seq * 29 + (unsigned)round * 7) % 200);
            unsigned head = atomic_load(&r->head);
            he_alog_rec_t *rec = he_alog_reserve(r, len);
            if (!rec) break;
            HE_CHECK((((uintptr_t)rec) & 7) == 0);
            HE_CHECK((char *)rec + rec->size <= r->data + r->size); /* never wraps */
            if ((char *)rec == r->data && (head & r->mask) != 0) skips_seen++;
            rec->target_len = (uint16_t)len;
            memset(rec->target, 'x', len);
            rec->target[0] = '/';
            rec->status = (uint16_t)seq++;
            he_alog_commit(r, rec);
            made++;
        }
        HE_CHECK(made > 3);
        /* full: still full until the consumer runs */
        HE_CHECK(he_alog_reserve(r, 200) == NULL);
        HE_CHECK_INT(consume(r, &want), made);
        HE_CHECK_INT(want, seq);
        HE_CHECK(he_alog_reserve(r, 200) != NULL); /* room again, not committed */
    }
    HE_CHECK(skips_seen > 0); /* the rounds crossed the ring's end */
    he_alog_ring_free(r);
}

static void test_full_is_full(void)
{
    he_alog_ring_t *r = he_alog_ring_new(4096);
    unsigned n = 0, want = 0;
    he_alog_rec_t *rec;
    HE_CHECK(r != NULL);
    while ((rec = he_alog_reserve(r, 56)) != NULL) { /* 64 + 56 = 120 bytes each */
        rec->target_len = 0;
        rec->status = (uint16_t)n++;
        he_alog_commit(r, rec);
    }
    HE_CHECK_INT(n, 4096 / 120);
    /* 16 bytes left at the end: a 64-byte record would need the skip too */
    HE_CHECK(he_alog_reserve(r, 0) == NULL);
    HE_CHECK_INT(consume(r, &want), n);
    he_alog_ring_free(r);
}

static void test_cache_names(void)
{
    HE_CHECK(strcmp(he_alog_cache_name(HE_ALOG_CACHE_NONE), "-") == 0);
    HE_CHECK(strcmp(he_alog_cache_name(HE_ALOG_CACHE_HIT_RAM), "HIT-RAM") == 0);
    HE_CHECK(strcmp(he_alog_cache_name(HE_ALOG_CACHE_PREFETCHED), "PREFETCHED") == 0);
    HE_CHECK(strcmp(he_alog_cache_name(HE_ALOG_CACHE_COUNT), "-") == 0);
}

int main(void)
{
    test_ring_rules();
    test_full_is_full();
    test_cache_names();
    HE_TEST_MAIN_END();
}
