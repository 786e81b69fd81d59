/* cache: the edge cache. A RAM tier (per NUMA node, S3-FIFO, lock-free
 * hits), an SSD tier (files with checksummed headers, rebuilt at start-up),
 * freshness rules, an HTTP/1.1 origin client without I/O of its own,
 * coalesced fills that stream to their waiters, and video-aware prefetch.
 *
 * Nothing here reads a clock: every function that needs the time takes it.
 * Wall-clock times (Date, Expires, stored-at) are Unix milliseconds
 * ("wall_ms"); deadlines for timeouts are monotonic milliseconds
 * ("now_ms"), both supplied by the caller.
 *
 *   key.c      cache keys: normalized path + configured query parameters
 *   ram.c      RAM tier: node arenas and memory, references, lock-free index
 *   obj.c      RAM tier: creating, filling and reading objects
 *   evict.c    RAM tier: S3-FIFO queues, ghost, admission
 *   fresh.c    freshness: Cache-Control, Expires, overrides, live playlists
 *   crc32c.c   CRC32C for the SSD tier
 *   store.c    SSD tier: directories, index, eviction, rebuild
 *   store_hdr.c SSD tier: the header each object file starts with
 *   swrite.c   SSD tier: the write state machine (io_uring or syscalls)
 *   httpc.c    HTTP/1.1 response parser and request builder
 *   origin.c   origin URLs, start-up resolution, a worker's origins + TLS context
 *   pool.c     keep-alive connections per worker per origin
 *   fetch.c    origin fetch state machine: connect, TLS, send, receive, failover
 *   fetch_io.c a fetch's operations on an SQE or with blocking syscalls
 *   fill.c     coalesced fills, read-while-fill waiters, publishing
 *   prefetch.c next segments of a rendition, used/wasted accounting
 *   stats.c    names of the counters' causes, errno to disk error cause
 *
 * This header includes every section; a file that needs one includes it:
 *   result.h   HE_CACHE_OK / HE_CACHE_AGAIN
 *   stats.h    counters and their causes (plain data: no liburing)
 *   key.h      cache keys and the hash
 *   fresh.h    freshness, Cache-Control
 *   obj.h      the RAM tier and its objects
 *   store.h    the SSD tier and its writes
 *   origin.h   the response head, its parser, origins, pools, the fetch
 *   fill.h     coalesced fills and waiters
 *   prefetch.h prefetch of next segments
 */
#ifndef HE_CACHE_H
#define HE_CACHE_H

#include "cache/fill.h"
#include "cache/fresh.h"
#include "cache/key.h"
#include "cache/obj.h"
#include "cache/origin.h"
#include "cache/prefetch.h"
#include "cache/result.h"
#include "cache/select.h"
#include "cache/stats.h"
#include "cache/store.h"

#endif
