/* What recycle.c shares with recycle_limits.c (what a request may cost the
 * cache) and recycle_resize.c (realloc into kept memory). Internal to the
 * recycler; the rest of the library uses recycle.h. */
#ifndef HZ_RECYCLE_IMPL_H
#define HZ_RECYCLE_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "cache.h"
#include "span.h"

/* A span that is not plain memory of ours any more (hz_blocks_reusable; a
 * hole hz_zero_choose found) is released, never handed out or zeroed. */
void hz_recycle_give_back_foreign(const struct hz_span *span);

/* A span taken from the table goes back into it, clean or not; what it
 * pushes out, the caller releases with b. */
void hz_recycle_keep_again(const struct hz_span *span, bool clean, struct hz_cache_batch *b);

/* Before the program gets size bytes (reused: the cached span that serves
 * them, or NULL for a fresh block), the cached blocks the memory cgroup
 * cannot hold beside them go first. */
void hz_recycle_make_room(size_t size, const struct hz_span *reused);

/* Before fresh bytes are faulted in: the cached blocks that would take the
 * process past its own peak go first. */
void hz_recycle_stay_within_peak(size_t fresh);

/* A request of size bytes served by a cached span: the peak counts it. */
void hz_recycle_served_within_peak(const struct hz_span *span, size_t size);

/* Live blocks grew from cached memory (a realloc): the peak counts them. */
void hz_recycle_note_live_peak(void);

#endif /* HZ_RECYCLE_IMPL_H */
