/* cache: video-aware prefetch (prefetch.c). */
#ifndef HE_CACHE_PREFETCH_H
#define HE_CACHE_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/fill.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/store.h"
#include "conf/conf.h"

/* The worker, on a segment request it served (hit or fill):
 *     n = he_cache_prefetch_next(pf, key.s (path part), wall, he_cache_present,
 *                                &present_ctx, items, 8, &stale);
 *     for each item: he_cache_fill_join(fills, &item.key, NULL, NULL, true, &created)
 *                    and, if created, a fetch of item.target into its sink;
 *     if stale: he_cache_prefetch_refresh(pf, seg path, &item) and a fill of
 *                    item (joined if one runs); when a playlist fill ends,
 *                    he_cache_prefetch_take_pending gives the segment to
 *                    prefetch after again, now from the fresh copy.
 * and whenever a media playlist is served or filled:
 *     he_cache_prefetch_playlist_obj(pf, obj, the request's target)
 *                                               (or _playlist with the bytes)
 * One he_cache_prefetch_t per worker, like the fills table; not shared. */

typedef struct he_cache_prefetch he_cache_prefetch_t;

/* True if key is cached or being filled: prefetch skips it. */
typedef bool (*he_cache_present_fn)(void *ctx, const he_cache_key_t *key);

/* The usual present function: RAM tier, SSD tier, then this worker's
 * fills; counts nothing (a prefetch check is not a hit). Any may be NULL. */
typedef struct he_cache_present_ctx {
    he_cache_ram_t *ram;
    int node;
    he_cache_store_t *store;
    he_cache_fills_t *fills;
} he_cache_present_ctx_t;
bool he_cache_present(void *ctx, const he_cache_key_t *key);

/* What to fill: the cache key and the origin-form target to request (the
 * segment URI as the playlist wrote it, resolved against the playlist's
 * path, query included: a signed URI keeps its token). */
typedef struct he_cache_prefetch_item {
    he_cache_key_t key;
    char target[HE_CACHE_KEY_MAX];
} he_cache_prefetch_item_t;

/* max_renditions: media playlists remembered (least recently used go). */
he_cache_prefetch_t *he_cache_prefetch_new(const he_conf_t *conf, unsigned max_renditions);
void he_cache_prefetch_free(he_cache_prefetch_t *p);
/* A media playlist was served or filled: remember where its segments are
 * (parsed once here, kept with fresh_until_ms; the same bytes again only
 * extend it). path is its key path ("live/720p/index.m3u8"); target, if
 * not NULL, the origin-form request-target a viewer's request for it used
 * (raw: escapes and query as sent), which segment URIs are resolved
 * against and a refresh requests; NULL keeps the one known. Segments with
 * absolute URIs (another host) are never prefetched. 0, or -EINVAL (not a
 * media playlist), -ENOMEM. */
int he_cache_prefetch_playlist(he_cache_prefetch_t *p, const char *path, const char *target,
                               const char *body, size_t len, int64_t fresh_until_ms);
/* The same from the cache's own copy: a complete media playlist object
 * (its key path, its bytes, fresh until its expiry). */
int he_cache_prefetch_playlist_obj(he_cache_prefetch_t *p, he_cache_obj_t *o, const char *target);
/* A viewer fetched a segment (seg_path: its key path, no query): writes up
 * to max items for the next conf->prefetch_segments segments of its
 * rendition that present() does not know. Returns how many. A segment of
 * no known playlist gives 0. *playlist_stale is set when the rendition's
 * playlist has expired (refresh it to see more). */
int he_cache_prefetch_next(he_cache_prefetch_t *p, const char *seg_path, int64_t wall_ms,
                           he_cache_present_fn present, void *ctx, he_cache_prefetch_item_t *out,
                           unsigned max, bool *playlist_stale);
/* The rendition of seg_path has an expired playlist (_next said
 * playlist_stale): writes the playlist's key and the target a viewer's
 * request for it used into out, so the worker fills it like a miss
 * (coalesced with any fill of that key), and remembers seg_path until the
 * fresh copy is parsed. 0, or -ENOENT (a segment of no known playlist),
 * -ENODATA (no viewer's target known: no refresh), -ENAMETOOLONG, -ENOMEM. */
int he_cache_prefetch_refresh(he_cache_prefetch_t *p, const char *seg_path,
                              he_cache_prefetch_item_t *out);
/* After a fresh copy of playlist_path was given to _playlist(_obj): the
 * segment whose prefetch waited on it, into out (its key path). Returns 1
 * (and forgets it), 0 when none waits, or -ENAMETOOLONG. */
int he_cache_prefetch_take_pending(he_cache_prefetch_t *p, const char *playlist_path, char *out,
                                   size_t cap);
/* Renditions remembered now (tests, /stats). */
unsigned he_cache_prefetch_renditions(const he_cache_prefetch_t *p);

#endif
