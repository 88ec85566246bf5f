/* Large blocks: carved from one PROT_NONE reservation made at start-up, so
 * that "is this pointer ours?" is a range check with no lock, and tracked in
 * an out-of-band table indexed by 2 MiB granule, so a corrupted program heap
 * cannot corrupt our metadata.
 *
 * Every block starts on a granule (2 MiB) boundary, or on a 1 GiB boundary
 * when it is backed by 1 GiB pages or aligned that way, and its usable size
 * is a whole number of granules. */
#ifndef HZ_BLOCKS_H
#define HZ_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing.h"
#include "range.h"
#include "sizes.h"

#define HZ_GRANULE HZ_SZ_2M
/* Largest alignment served: 1 GiB, the largest huge page. */
#define HZ_ALIGN_MAX HZ_SZ_1G

struct hz_reservation {
	uintptr_t start;
	uintptr_t end;
};

/* Set once by hz_blocks_init, read without locks. */
extern struct hz_reservation hz_reservation;

/* Reserve the address space (HUGEZERO_RESERVE, at most half of RLIMIT_AS),
 * once per process: later calls return the first call's result, and calls
 * from several threads wait for it. Returns 0 or a negative errno value; on
 * failure hugezero serves nothing. */
int hz_blocks_init(void);

/* The size hz_blocks_init reserves (or tries to): HUGEZERO_RESERVE, capped
 * at half of RLIMIT_AS, in whole GiB. */
size_t hz_blocks_reservation_size(void);

static inline bool hz_blocks_owns(const void *p)
{
	uintptr_t a = (uintptr_t)p;

	return a >= __atomic_load_n(&hz_reservation.start, __ATOMIC_RELAXED) &&
	       a < __atomic_load_n(&hz_reservation.end, __ATOMIC_RELAXED);
}

/* A new block of at least size bytes aligned to align (a power of two up to
 * HZ_ALIGN_MAX). Fresh blocks are zero. Returns 0 or -ENOMEM. */
int hz_blocks_alloc(size_t size, size_t align, void **out);

/* A run of claimed granules that is not (or no longer) a live block: a
 * freed block kept mapped by the recycler, or part of one. Its range holds
 * whole granules; backing is what it was mapped with. */
struct hz_span {
	struct hz_range range;
	enum hz_backing backing;
};

static inline size_t hz_span_bytes(const struct hz_span *s)
{
	return hz_range_len(s->range);
}

static inline size_t hz_span_granules(const struct hz_span *s)
{
	return hz_span_bytes(s) / HZ_GRANULE;
}

/* Turn a live block into a span that stays mapped and claimed (free without
 * releasing). Stops the program on a double free, like hz_blocks_free. */
void hz_blocks_retire(void *p, struct hz_span *span);

/* Make a span a live block again. Stops the program (one line, then abort)
 * when the span is not one the recycler may hand out: outside the
 * reservation, not claimed, or a block already live. */
void hz_blocks_revive(const struct hz_span *span);

/* Give a span's memory and address space back (to the reservation). A
 * foreign span (below) is reset first: hz_prim_reset_reservation. */
void hz_blocks_release_span(const struct hz_span *span);

/* ---- foreign blocks ----
 *
 * A block the program changed the mapping of (mprotect, mlock, madvise
 * that changes the mapping, mmap MAP_FIXED over it, a userfaultfd: the
 * preload's interposers, src/preload/foreign.c) is "foreign": it is not
 * hugezero's private, anonymous, read-write, unlocked mapping any more.
 * Its free releases it instead of caching it, and the release resets the
 * range to plain reservation, which drops every such change, as glibc's
 * munmap does. The mark is a byte per 2 MiB granule, set lock-free by the
 * interposers (O(granules touched), no system call) and cleared when the
 * granules are claimed again; reading it costs a load per granule of the
 * block at free, and nothing on the paths that do not free. */

/* Mark every granule of the reservation that [start, start + len)
 * touches; the part outside it is ignored. Lock-free, async-signal-safe. */
void hz_blocks_mark_foreign(uintptr_t start, size_t len);

/* While on (mlockall(MCL_FUTURE): every new mapping is locked), every
 * block counts as foreign. */
void hz_blocks_all_foreign(bool on);

/* Whether the span may be cached, zeroed and handed out again: no granule
 * of it is foreign and hz_blocks_all_foreign is off. */
bool hz_blocks_reusable(const struct hz_span *span);

/* Free a block. A pointer inside the reservation that is not a live block's
 * start is a double free or a wild pointer: reported, then the program is
 * stopped, as glibc does for a corrupted heap. */
void hz_blocks_free(void *p);

/* Resize a block to at least size bytes: in place when the granules after
 * it are free (or when shrinking), else by moving its page tables with
 * mremap. The contents up to min(old, new) size are kept. Returns 0 with
 * *out set, or -ENOMEM with the block unchanged. */
int hz_blocks_resize(void *p, size_t size, void **out);

/* Usable bytes of a live block. */
size_t hz_blocks_usable(const void *p);

/* fork handlers: hold the lock across fork, reset it in the child. */
void hz_blocks_fork_prepare(void);
void hz_blocks_fork_parent(void);
void hz_blocks_fork_child(void);

#endif /* HZ_BLOCKS_H */
