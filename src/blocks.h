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

#define HZ_GRANULE HZ_SZ_2M
/* Largest alignment served: 1 GiB, the largest huge page. */
#define HZ_ALIGN_MAX HZ_SZ_1G
/* No block is larger than HUGEZERO_RESERVE's largest value (64 TiB): a
 * request above it fails before any rounding could wrap. */
#define HZ_BLOCK_MAX ((size_t)1 << 46)

/* Regions start and end on 1 GiB boundaries, so one byte per GiB of the
 * 47-bit user address space (128 KiB) says which region, if any, holds an
 * address: nonzero is the region's slot plus one. Written under the blocks
 * lock, with a release store after the region's tables are ready; read
 * with an acquire load and no lock. Regions the kernel places above 2^47
 * (5-level paging, an explicit hint) are not used. */
#define HZ_REGION_SHIFT 30
#define HZ_REGION_GIBS ((size_t)1 << (47 - HZ_REGION_SHIFT))
extern uint8_t hz_region_of_gib[HZ_REGION_GIBS];

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

static inline bool hz_blocks_owns(const void *p)
{
	uintptr_t g = (uintptr_t)p >> HZ_REGION_SHIFT;

	return g < HZ_REGION_GIBS && __atomic_load_n(&hz_region_of_gib[g], __ATOMIC_ACQUIRE) != 0;
}

/* Whether a and b lie in the same region, or both outside every region
 * (the cache merges adjacent spans only then: two regions side by side are
 * two mappings, and a block never spans both). */
static inline bool hz_blocks_same_region(uintptr_t a, uintptr_t b)
{
	uintptr_t ga = a >> HZ_REGION_SHIFT, gb = b >> HZ_REGION_SHIFT;
	uint8_t ra = ga < HZ_REGION_GIBS ? __atomic_load_n(&hz_region_of_gib[ga], __ATOMIC_ACQUIRE) : 0;
	uint8_t rb = gb < HZ_REGION_GIBS ? __atomic_load_n(&hz_region_of_gib[gb], __ATOMIC_ACQUIRE) : 0;

	return ra == rb;
}

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

/* A run of claimed granules that is not (or no longer) a live block: a
 * freed block kept mapped by the recycler, or part of one. */
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
