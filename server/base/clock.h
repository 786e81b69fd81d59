/* Monotonic time for the data path. Workers read the clock once per batch
 * of completions (he__batch_ns): every event of a batch happened by then,
 * and a clock read per event was 2.5% of the playlist profile (read_tsc is
 * slow on a paravirtualized clock). */
#ifndef HE_BASE_CLOCK_H
#define HE_BASE_CLOCK_H

#include <stdint.h>

uint64_t he__now_ns(void);
/* he__now_ns() when this thread's current batch of completions was reaped. */
extern __thread uint64_t he__batch_ns;

#endif
