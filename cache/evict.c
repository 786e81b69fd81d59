/* RAM tier eviction: S3-FIFO (Yang et al., SOSP 2023).
 *
 * Why S3-FIFO rather than SIEVE: both make a hit a single relaxed store of
 * per-object bits (no list moves, no lock), but S3-FIFO also brings the
 * admission we need: new objects enter a small FIFO (10% of the node's
 * chunks) and only those hit while there move to the main FIFO; the rest
 * leave a hash in the ghost FIFO, and an object that comes back while its
 * ghost is remembered goes straight to main. One-hit wonders (a viewer
 * seeking through an old VOD, a crawler) therefore never displace the
 * working set, which SIEVE alone would let them do until its hand passes.
 *
 *   insert: ghost hit -> main head; else small head (admission off: main)
 *   evict:  if small holds >= 10% (or main is empty): take small's tail;
 *           hit since insert -> move to main head, else evict it into the
 *           ghost. Otherwise take main's tail; freq > 0 -> freq--, back to
 *           main's head (CLOCK-like reinsertion), else evict it.
 *   held:   an object a reader holds (a send, a fill's waiter: references
 *           beyond the index's) is skipped, small's to main like a hit,
 *           main's back to its head, and counted (ram_evict_held).
 *           Evicting it would free nothing until the reader lets go, so
 *           under pressure the loop asking for a chunk would go on evicting
 *           until the node was empty. When everything is held, no victim:
 *           the chunk comes from malloc (ram_overflow).
 *
 * Sizes are counted in chunks, the unit memory is handed out in. Every
 * function here runs with the node lock held. This file knows the queues
 * only: it hands victims to ram.c, which unindexes and drops them, and
 * calls nothing there. */
#include <stdlib.h>
#include <string.h>

#include "cache/internal.h"
#include "cache/obj.h"
#include "cache/stats.h"

#define HE__CACHE_GHOST_PROBE 8

static void he_cache_fifo_push(he__cache_fifo_t *q, he_cache_obj_t *o)
{
    o->qprev = NULL;
    o->qnext = q->head;
    if (q->head)
        q->head->qprev = o;
    else
        q->tail = o;
    q->head = o;
    q->count++;
    q->chunks += o->nchunks;
}

static void he_cache_fifo_unlink(he__cache_fifo_t *q, he_cache_obj_t *o)
{
    if (o->qprev)
        o->qprev->qnext = o->qnext;
    else
        q->head = o->qnext;
    if (o->qnext)
        o->qnext->qprev = o->qprev;
    else
        q->tail = o->qprev;
    o->qprev = o->qnext = NULL;
    q->count--;
    q->chunks -= o->nchunks;
}

int he__cache_evict_init(he__cache_node_t *n)
{
    he__cache_ghost_t *g = &n->ghost;
    uint64_t cap = n->nchunks, tab = 16;
    if (cap > (1u << 20)) cap = 1u << 20;
    if (cap < 1) cap = 1;
    while (tab < cap * 2)
        tab <<= 1;
    g->cap = cap;
    g->chunks_cap = n->nchunks - n->nchunks / 10;
    g->ring_hash = calloc(cap, sizeof(uint64_t));
    g->ring_chunks = calloc(cap, sizeof(uint32_t));
    g->tab = malloc(tab * sizeof(*g->tab));
    if (!g->ring_hash || !g->ring_chunks || !g->tab) return -1;
    for (uint64_t i = 0; i < tab; i++) {
        g->tab[i].hash = 0;
        g->tab[i].seq = UINT64_MAX;
    }
    g->tab_mask = tab - 1;
    return 0;
}

void he__cache_evict_free(he__cache_node_t *n)
{
    free(n->ghost.ring_hash);
    free(n->ghost.ring_chunks);
    free(n->ghost.tab);
}

static bool he_cache_ghost_valid(const he__cache_ghost_t *g, const he__cache_ghost_slot_t *s)
{
    return s->seq >= g->tail && s->seq < g->head && g->ring_hash[s->seq % g->cap] == s->hash;
}

bool he__cache_ghost_contains(const he__cache_ghost_t *g, uint64_t hash)
{
    for (unsigned i = 0; i < HE__CACHE_GHOST_PROBE; i++) {
        const he__cache_ghost_slot_t *s = &g->tab[(hash + i) & g->tab_mask];
        if (s->hash == hash && he_cache_ghost_valid(g, s)) return true;
    }
    return false;
}

void he__cache_ghost_add(he__cache_ghost_t *g, uint64_t hash, uint32_t chunks)
{
    he__cache_ghost_slot_t *victim = NULL;
    while (g->tail < g->head &&
           (g->head - g->tail >= g->cap || g->chunks + chunks > g->chunks_cap)) {
        g->chunks -= g->ring_chunks[g->tail % g->cap];
        g->tail++;
    }
    g->ring_hash[g->head % g->cap] = hash;
    g->ring_chunks[g->head % g->cap] = chunks;
    g->chunks += chunks;
    for (unsigned i = 0; i < HE__CACHE_GHOST_PROBE; i++) {
        he__cache_ghost_slot_t *s = &g->tab[(hash + i) & g->tab_mask];
        if (s->hash == hash || !he_cache_ghost_valid(g, s)) {
            victim = s;
            break;
        }
        if (!victim || s->seq < victim->seq) victim = s;
    }
    victim->hash = hash;
    victim->seq = g->head;
    g->head++;
}

void he__cache_evict_insert(he__cache_node_t *n, he_cache_obj_t *o, he_cache_stats_t *st)
{
    uint64_t h = atomic_load_explicit(&o->hash, memory_order_relaxed);
    atomic_store_explicit(&o->freq, 0, memory_order_relaxed);
    if (!n->ram->opts.admission) {
        o->queue = HE__CACHE_Q_MAIN;
        he_cache_fifo_push(&n->main, o);
    } else if (he__cache_ghost_contains(&n->ghost, h)) {
        if (st) st->ram_ghost_hits++;
        o->queue = HE__CACHE_Q_MAIN;
        he_cache_fifo_push(&n->main, o);
    } else {
        o->queue = HE__CACHE_Q_SMALL;
        he_cache_fifo_push(&n->small, o);
    }
}

void he__cache_evict_remove(he__cache_node_t *n, he_cache_obj_t *o)
{
    if (o->queue == HE__CACHE_Q_SMALL)
        he_cache_fifo_unlink(&n->small, o);
    else if (o->queue == HE__CACHE_Q_MAIN)
        he_cache_fifo_unlink(&n->main, o);
    o->queue = HE__CACHE_Q_NONE;
}

/* References beyond the index's: read under the node lock, but a lock-free
 * hit may take one right after; that reader keeps the memory alive as
 * before, the skip is only about not evicting what is known in use. */
static bool he_cache_obj_held(he_cache_obj_t *o)
{
    return atomic_load_explicit(&o->refs, memory_order_relaxed) > 1;
}

he_cache_obj_t *he__cache_evict_victim(he__cache_node_t *n, he_cache_stats_t *st)
{
    uint64_t small_cap = n->nchunks / 10 ? n->nchunks / 10 : 1;
    /* each pass moves an object or lowers a frequency, so this ends; the
     * bound only guards against hits racing the frequencies back up */
    uint64_t guard = 4 * (n->small.count + n->main.count) + 8;
    uint64_t held = 0; /* main's objects skipped as held, this call */
    while (guard--) {
        he_cache_obj_t *t;
        if (n->small.count && (n->small.chunks >= small_cap || n->main.count == 0)) {
            bool busy;
            t = n->small.tail;
            he_cache_fifo_unlink(&n->small, t);
            busy = he_cache_obj_held(t);
            if (busy && st) st->ram_evict_held++;
            if (busy || atomic_load_explicit(&t->freq, memory_order_relaxed) > 0) {
                atomic_store_explicit(&t->freq, 0, memory_order_relaxed);
                t->queue = HE__CACHE_Q_MAIN;
                he_cache_fifo_push(&n->main, t);
                continue;
            }
            he__cache_ghost_add(&n->ghost, atomic_load_explicit(&t->hash, memory_order_relaxed),
                                t->nchunks);
            t->queue = HE__CACHE_Q_NONE;
            return t;
        }
        if (!n->main.count) return NULL;
        t = n->main.tail;
        he_cache_fifo_unlink(&n->main, t);
        if (he_cache_obj_held(t)) {
            he_cache_fifo_push(&n->main, t);
            if (st) st->ram_evict_held++;
            if (++held >= n->main.count) return NULL; /* all of main is held */
            continue;
        }
        {
            uint8_t f = atomic_load_explicit(&t->freq, memory_order_relaxed);
            if (f > 0 && guard > 0) {
                atomic_store_explicit(&t->freq, f - 1, memory_order_relaxed);
                he_cache_fifo_push(&n->main, t);
                continue;
            }
        }
        t->queue = HE__CACHE_Q_NONE;
        return t;
    }
    return NULL;
}
