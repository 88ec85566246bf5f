/* Large blocks: carved from regions of PROT_NONE address space reserved as
 * blocks need them (1 GiB each, or as large as one block needs), so that
 * "is this pointer ours?" is one table lookup with no lock, and tracked in
 * out-of-band tables indexed by 2 MiB granule, so a corrupted program heap
 * cannot corrupt our metadata. Nothing is reserved at start-up: a process
 * that never makes a large block holds no address space for them.
 *
 * Every block starts on a granule (2 MiB) boundary, or on a 1 GiB boundary
 * when it is backed by 1 GiB pages or aligned that way, and its usable size
 * is a whole number of granules. A block lies inside one region. */
#ifndef HZ_BLOCKS_H
#define HZ_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing.h"
#include "range.h"
#include "sizes.h"
#include "span.h"

/* The smallest range holding every region held now (empty before the
 * first large block). Other mappings may lie between regions: ask
 * hz_blocks_owns or hz_blocks_touches about an address, not this. */
extern struct hz_range hz_reservation;

/* Once per process before the first block; nothing to reserve any more, so
 * it returns 0. Kept for the start-up sequence. */
int hz_blocks_init(void);

/* The most address space the regions may hold together: HUGEZERO_RESERVE,
 * capped at half of RLIMIT_AS (read now), in whole GiB. */
size_t hz_blocks_reservation_size(void);

/* Bytes of address space the regions hold now. */
size_t hz_blocks_held(void);

/* How many blocks the program holds now (live: handed out and not freed)
 * and their usable bytes; cached blocks are not counted. Lock-free, each
 * figure read atomically, the two not at one instant. */
void hz_blocks_live_totals(size_t *blocks, size_t *bytes);

/* The most blocks live at once since the process started, and the most
 * bytes (each its own high-water mark, maybe not at one instant). */
void hz_blocks_peak_totals(size_t *blocks, size_t *bytes);

/* Whether r meets a region (munmap and mremap refuse such ranges). */
bool hz_blocks_touches(struct hz_range r);

/* The i-th region held (in slot order), for tests and reports: false when
 * there are fewer. */
bool hz_blocks_region(size_t i, struct hz_range *out);

/* Give back every region that holds no claimed granule (no block, live or
 * cached): the address space of the program's lowered RLIMIT_AS. Returns
 * the bytes released. */
size_t hz_blocks_release_unused(void);

/* A new block of at least size bytes aligned to align (a power of two up to
 * HZ_ALIGN_MAX). Fresh blocks are zero. Returns 0 or -ENOMEM. */
int hz_blocks_alloc(size_t size, size_t align, void **out);

/* Turn a live block into a span that stays mapped and claimed (free without
 * releasing). Stops the program on a double free, like hz_blocks_free. */
void hz_blocks_retire(void *p, struct hz_span *span);

/* Make a span a live block again. Stops the program (one line, then abort)
 * when the span is not one the recycler may hand out: outside the
 * regions, not claimed, or a block already live. */
void hz_blocks_revive(const struct hz_span *span);

/* Give the memory of [start, start + len) (committed, ours, not foreign)
 * back to the kernel, the range kept in its region: read-write without
 * pages where that costs nothing (blocks.c says when), else PROT_NONE
 * reservation. 0 or a negative errno value (the range then as it was). */
int hz_blocks_drop_memory(uintptr_t start, size_t len);

/* Make every free granule PROT_NONE reservation again (hz_blocks_drop_memory
 * may have left them read-write): before RLIMIT_DATA gets a limit, which
 * counts read-write memory. */
void hz_blocks_reserve_free(void);

/* Give a span's memory back; its address space stays in its region. A
 * foreign span (below) is reset first: hz_prim_reset_reservation. */
void hz_blocks_release_span(const struct hz_span *span);

/* ---- foreign blocks (blocks_foreign.c) ----
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

/* Mark every granule of a region that [start, start + len) touches; the
 * part outside every region is ignored. Lock-free, async-signal-safe. */
void hz_blocks_mark_foreign(uintptr_t start, size_t len);

/* While on (mlockall(MCL_FUTURE): every new mapping is locked), every
 * block counts as foreign. */
void hz_blocks_all_foreign(bool on);

/* Whether the span may be cached, zeroed and handed out again: no granule
 * of it is foreign and hz_blocks_all_foreign is off. */
bool hz_blocks_reusable(const struct hz_span *span);

/* Free a block. A pointer inside a region that is not a live block's
 * start is a double free or a wild pointer: reported, then the program is
 * stopped, as glibc does for a corrupted heap. */
void hz_blocks_free(void *p);

/* Resize a block to at least size bytes: in place when the granules after
 * it are free (or when shrinking), else by moving its page tables with
 * mremap (a tail as hz_blocks_grow's), else by a copy. The contents up to
 * min(old, new) size are kept. Returns 0 with *out set, or -ENOMEM with
 * the block unchanged. */
int hz_blocks_resize(void *p, size_t size, void **out);

/* Grow a live block to at least size bytes, in place or by moving its page
 * tables, never by copying: a cached span made the front of a larger
 * block (recycle.c). A tail started on 4 KiB pages is fresh memory, and
 * starts as a fresh block does. Returns 0 with *out set, or -ENOMEM with
 * the block unchanged. */
int hz_blocks_grow(void *p, size_t size, void **out);

/* The program advised MADV_HUGEPAGE on [start, start + len): when that
 * lies in one live block on 4 KiB pages, from inside its first 2 MiB into
 * its last 2 MiB, and blocks may take THP (hz_backing_thp_allowed), the
 * whole block is advised and becomes a THP block (blocks_foreign.c).
 * Returns whether it did. Lock-free and async-signal-safe: the caller owns the
 * block. */
bool hz_blocks_advise_huge(uintptr_t start, size_t len);

/* Usable bytes of a live block. */
size_t hz_blocks_usable(const void *p);

/* The range and backing of the live block at p. */
void hz_blocks_live_span(const void *p, struct hz_span *out);

/* Move the live block at p onto the front of span, claimed and not live
 * (a cached span taken from the recycler's table), larger than the block
 * and of its backing: the block's pages replace the span's front, the
 * span's tail keeps its pages, nothing fresh is mapped, and the block's
 * old place is given back. Returns 0 with *out set, or a negative errno
 * value with the block and the span unchanged. */
int hz_blocks_move_into(void *p, const struct hz_span *span, void **out);

/* Make span, claimed and not live (a cached span taken from the
 * recycler's table), the tail of the live block at p, which it must
 * follow in the block's region with the block's backing: its pages stay
 * as they are, nothing is mapped. -EINVAL when it does not follow so (the
 * block unchanged); stops the program, as hz_blocks_revive does, when it
 * is not a span the recycler may hand out. */
int hz_blocks_absorb(void *p, const struct hz_span *span);

/* fork handlers: hold the lock across fork, reset it in the child. */
void hz_blocks_fork_prepare(void);
void hz_blocks_fork_parent(void);
void hz_blocks_fork_child(void);

#endif /* HZ_BLOCKS_H */
