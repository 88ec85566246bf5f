/* Large blocks carved from regions of address space. See blocks.h.
 *
 * The lock protects the regions' granule bitmaps and metadata and the
 * region table; system calls (mapping, releasing) run outside it, on
 * granules already claimed, so threads allocating large blocks do not wait
 * for each other's mmap. Growing or giving back regions takes grow_lock
 * first (then the lock for the table), so one thread at a time maps a
 * region while the others keep allocating from the regions held. */
#include "blocks.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "backing.h"
#include "bitmap.h"
#include "blocks_impl.h"
#include "blocks_region.h"
#include "blocks_view.h"
#include "lock.h"
#include "log.h"
#include "options.h"
#include "prim/memory.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "range.h"
#include "stats.h"
#include "zero.h"

static struct hz_lock lock = HZ_LOCK_INIT;
static struct hz_lock grow_lock = HZ_LOCK_INIT;
static bool fork_lock_skipped, fork_grow_skipped;
static size_t held; /* bytes of the regions; under the lock */

/* What region_of answers for an address that is not ours: no range, no
 * granules, so every check on it fails. */
static struct hz_block_region no_region;

struct hz_block_region *hz_blocks_region_of(uintptr_t a)
{
	uintptr_t g = a >> HZ_REGION_SHIFT;
	uint8_t id = g < HZ_REGION_GIBS ? __atomic_load_n(&hz_region_of_gib[g], __ATOMIC_ACQUIRE)
					: 0;

	return id ? &hz_block_regions[id - 1] : NULL;
}

/* The region holding a, or no_region. */
static struct hz_block_region *region_of(uintptr_t a)
{
	struct hz_block_region *r = hz_blocks_region_of(a);

	return r ? r : &no_region;
}

/* ---- granule bitmaps (callers hold the lock) ---- */

/* Claimed granules start plain: a foreign mark left from their last block
 * went with its release. */
static void take(struct hz_block_region *r, size_t first, size_t n)
{
	hz_bits_set(r->used, first, n, true);
	for (size_t i = first; i < first + n; i++)
		__atomic_store_n(&r->meta[i].foreign, 0, __ATOMIC_RELAXED);
}

/* First fit of n granules starting on a multiple of align granules (regions
 * start on a 1 GiB boundary, so index alignment is address alignment) in
 * [from, count). */
static int claim_from(struct hz_block_region *r, size_t from, size_t n, size_t align,
		      size_t *first)
{
	size_t i = from, count = r->granules;

	while (true) {
		size_t hit;

		i = hz_align_up(i, align);
		if (i > count || n > count - i)
			return -ENOMEM;
		hit = hz_bits_find(r->used, i, i + n, true);
		if (hit == i + n) {
			take(r, i, n);
			*first = i;
			return 0;
		}
		i = hit + 1;
	}
}

/* First fit from the region's origin (blocks_region.c: where the kernel's
 * address randomisation puts it), then from its start. */
static int claim_in(struct hz_block_region *r, size_t n, size_t align, size_t *first)
{
	if (claim_from(r, r->origin, n, align, first) == 0)
		return 0;
	return r->origin == 0 ? -ENOMEM : claim_from(r, 0, n, align, first);
}

static int claim_any(size_t n, size_t align, struct hz_block_region **r, size_t *first)
{
	for (size_t k = 0; k < HZ_REGIONS_MAX; k++) {
		if (!hz_range_empty(hz_block_regions[k].range) &&
		    claim_in(&hz_block_regions[k], n, align, first) == 0) {
			*r = &hz_block_regions[k];
			return 0;
		}
	}
	return -ENOMEM;
}

void hz_blocks_unclaim(struct hz_block_region *r, size_t first, size_t n)
{
	hz_lock(&lock);
	hz_bits_set(r->used, first, n, false);
	hz_unlock(&lock);
}

/* After mapping granules failed with err: back to the bitmap, unless
 * another mapping took part of their range (-EEXIST, hz_prim_commit): then
 * they stay claimed for good, so no block is ever mapped over it. */
void hz_blocks_unclaim_after(int err, struct hz_block_region *r, size_t first, size_t n)
{
	if (err == -EEXIST)
		hz_debug("%zu MiB at %p hold a mapping not ours: left unused",
			 n * HZ_GRANULE >> 20, (void *)hz_region_addr(r, first));
	else
		hz_blocks_unclaim(r, first, n);
}

/* ---- regions ---- */

int hz_blocks_init(void)
{
	return 0;
}

size_t hz_blocks_held(void)
{
	return __atomic_load_n(&held, __ATOMIC_RELAXED);
}

/* Blocks live now: one each from hand-out to free, whatever realloc does
 * to its size meanwhile (a block moved by realloc is still one). Relaxed:
 * a statistic (mallinfo), never a decision. */
static size_t live_blocks, peak_blocks;

static void count_blocks(int delta)
{
	size_t live = __atomic_add_fetch(&live_blocks, (size_t)delta, __ATOMIC_RELAXED);
	size_t peak = __atomic_load_n(&peak_blocks, __ATOMIC_RELAXED);

	while (delta > 0 && live > peak &&
	       !__atomic_compare_exchange_n(&peak_blocks, &peak, live, true, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

void hz_blocks_live_totals(size_t *blocks, size_t *bytes)
{
	*blocks = __atomic_load_n(&live_blocks, __ATOMIC_RELAXED);
	*bytes = (size_t)__atomic_load_n(&hz_stats.live_bytes, __ATOMIC_RELAXED);
}

void hz_blocks_peak_totals(size_t *blocks, size_t *bytes)
{
	*blocks = __atomic_load_n(&peak_blocks, __ATOMIC_RELAXED);
	*bytes = (size_t)__atomic_load_n(&hz_stats.peak_bytes, __ATOMIC_RELAXED);
}

/* Map a new region (grow_lock held) and claim n granules in it. */
static int grow(size_t n, size_t align, struct hz_block_region **out, size_t *first)
{
	size_t cap = hz_blocks_reservation_size(); /* reads RLIMIT_AS: outside the lock */
	struct hz_block_region fresh;
	uintptr_t near;
	size_t slot, size;
	int ret;

	hz_lock(&lock);
	ret = hz_region_free_slot(&slot, &near);
	size = hz_region_next_size(n * HZ_GRANULE, held, cap);
	hz_unlock(&lock);
	if (ret != 0 || size == 0)
		return -ENOMEM;
	ret = hz_region_map(size, near, &fresh);
	if (ret != 0)
		return ret;
	/* The block the region is made for starts at its origin, or as
	 * close to it as the block fits. Under an RLIMIT_AS (cap read it)
	 * no region may be spared: a region packed from its start keeps its
	 * free granules in one run, which a block as large as the rest of it
	 * needs, where a new region would not fit under the limit. */
	if (hz_prim_address_space_limit() != UINT64_MAX)
		fresh.origin = 0;
	if (fresh.origin > fresh.granules - n)
		fresh.origin %= fresh.granules - n + 1;
	hz_lock(&lock);
	hz_block_regions[slot] = fresh;
	hz_region_publish(&fresh, (uint8_t)(slot + 1));
	__atomic_store_n(&held, held + size, __ATOMIC_RELAXED);
	hz_region_update_hull();
	ret = claim_in(&hz_block_regions[slot], n, align, first);
	hz_unlock(&lock);
	*out = &hz_block_regions[slot];
	return ret;
}

/* Claim n granules aligned to align granules in a region held, or in a new
 * one. */
int hz_blocks_claim(size_t n, size_t align, struct hz_block_region **r, size_t *first)
{
	int ret;

	hz_lock(&lock);
	ret = claim_any(n, align, r, first);
	hz_unlock(&lock);
	if (ret == 0)
		return 0;
	hz_lock(&grow_lock);
	/* Another thread may have grown meanwhile. */
	hz_lock(&lock);
	ret = claim_any(n, align, r, first);
	hz_unlock(&lock);
	if (ret != 0)
		ret = grow(n, align, r, first);
	hz_unlock(&grow_lock);
	return ret;
}

size_t hz_blocks_release_unused(void)
{
	struct hz_block_region gone[HZ_REGIONS_MAX];
	size_t count = 0, bytes = 0;

	hz_lock(&grow_lock);
	hz_lock(&lock);
	for (size_t k = 0; k < HZ_REGIONS_MAX; k++) {
		struct hz_block_region *r = &hz_block_regions[k];

		if (hz_range_empty(r->range) ||
		    hz_bits_find(r->used, 0, r->granules, true) != r->granules)
			continue;
		/* No granule claimed: no block, live or cached, and so no
		 * pointer the program may pass to free. */
		hz_region_publish(r, 0);
		gone[count++] = *r;
		bytes += hz_range_len(r->range);
		*r = (struct hz_block_region){ .granules = 0 };
	}
	__atomic_store_n(&held, held - bytes, __ATOMIC_RELAXED);
	hz_region_update_hull();
	hz_unlock(&lock);
	for (size_t k = 0; k < count; k++)
		hz_region_unmap(&gone[k]);
	hz_unlock(&grow_lock);
	return bytes;
}

bool hz_blocks_region(size_t i, struct hz_range *out)
{
	bool found = false;

	hz_lock(&lock);
	for (size_t k = 0; k < HZ_REGIONS_MAX && !found; k++) {
		if (!hz_range_empty(hz_block_regions[k].range) && i-- == 0) {
			*out = hz_block_regions[k].range;
			found = true;
		}
	}
	hz_unlock(&lock);
	return found;
}

/* ---- blocks ---- */

/* The metadata of the live block starting at p, and its region; stops the
 * program when p is not one (double free, or a pointer into the middle of
 * a block). */
struct block_meta *hz_blocks_live(const void *p, const char *what, struct hz_block_region **r)
{
	uintptr_t a = (uintptr_t)p;
	struct hz_block_region *in = region_of(a);
	struct block_meta *m;

	if (!hz_range_empty(in->range) && (a - in->range.start) % HZ_GRANULE == 0) {
		m = &in->meta[hz_region_index(in, a)];
		if (__atomic_load_n(&m->live, __ATOMIC_ACQUIRE)) {
			if (r)
				*r = in;
			return m;
		}
	}
	hz_fatal("%s(%p): not a live hugezero block (double free or invalid pointer)",
		 what, p);
}

/* Round size up to whole pages of the block's backing, failing on
 * overflow. */
int hz_blocks_len(size_t size, size_t page, size_t *len)
{
	if (size > HZ_BLOCK_MAX)
		return -ENOMEM;
	*len = hz_align_up(size == 0 ? 1 : size, page);
	return 0;
}

size_t hz_blocks_unit(enum hz_backing b)
{
	size_t page = hz_backing_page(b);

	return page > HZ_GRANULE ? page : HZ_GRANULE;
}

int hz_blocks_alloc(size_t size, size_t align, void **out)
{
	enum hz_backing want = hz_backing_first();
	size_t unit = hz_blocks_unit(want);
	struct hz_block_region *r;
	size_t len, first;
	enum hz_backing got;
	struct block_meta *m;
	int ret;

	if (hz_blocks_len(size, unit, &len) != 0 || align > HZ_ALIGN_MAX)
		return -ENOMEM;
	if (align < unit)
		align = unit;
	ret = hz_blocks_claim(len / HZ_GRANULE, align / HZ_GRANULE, &r, &first);
	if (ret != 0) {
		hz_stats_fallback(HZ_FB_RESERVE_FULL);
		return ret;
	}
	ret = hz_backing_map(hz_region_addr(r, first), len, want,
			     &(struct hz_lazy_block){ size ? size : 1, len }, &got);
	if (ret != 0) {
		hz_blocks_unclaim_after(ret, r, first, len / HZ_GRANULE);
		hz_stats_fallback(HZ_FB_MAP_FAILED);
		return -ENOMEM;
	}
	m = &r->meta[first];
	m->granules = (uint32_t)(len / HZ_GRANULE);
	m->backing = (uint8_t)got;
	__atomic_store_n(&m->live, 1, __ATOMIC_RELEASE);
	hz_blocks_count_live((int64_t)len);
	count_blocks(1);
	*out = (void *)hz_region_addr(r, first);
	return 0;
}

/* ---- the memory of free granules ----
 *
 * Where freed blocks lie between live ones (a program that frees every
 * other block), a PROT_NONE range between two read-write blocks is a
 * mapping of its own: twice the mappings glibc leaves, whose munmap makes
 * holes the live blocks' mappings sit between. So the memory of a freed
 * block goes back with its range kept read-write (hz_prim_refresh), which
 * the kernel merges with its read-write neighbours, as jemalloc keeps its
 * retained memory mapped (opt.retain) for the same reason. Only where it
 * costs nothing: the kernel overcommits (in mode 2 the range would hold
 * commit charge) and RLIMIT_DATA is unlimited (read-write ranges count in
 * VmData; a program that sets a limit has them made reservation again
 * first, hz_blocks_reserve_free). A read or write of a freed block then
 * finds zeros instead of a fault, as it finds the memory of a cached
 * block. */
static bool kept_mapped; /* some free granule may be read-write */

int hz_blocks_drop_memory(uintptr_t start, size_t len)
{
	if (hz_os()->overcommits && !hz_prim_data_limited() && hz_prim_refresh(start, len) == 0) {
		/* Named as a fresh lazy block is (4 KiB pages, none resident
		 * here), so that the kernel merges it with such blocks beside
		 * it: a name of its own, or none next to named blocks, would
		 * keep it apart as PROT_NONE did. */
		hz_backing_name_mapping(start, len, HZ_BACKING_SMALL);
		__atomic_store_n(&kept_mapped, true, __ATOMIC_RELAXED);
		return 0;
	}
	return hz_prim_decommit(start, len);
}

/* One run of free granules of r from granule *from on, claimed while its
 * memory goes (so that no block is mapped there meanwhile) and made
 * reservation; false when there is none. */
static bool reserve_free_run(struct hz_block_region *r, size_t *from)
{
	size_t start, end;

	hz_lock(&lock);
	start = hz_bits_find(r->used, *from, r->granules, false);
	end = hz_bits_find(r->used, start, r->granules, true);
	if (start < end)
		take(r, start, end - start);
	hz_unlock(&lock);
	if (start >= end)
		return false;
	/* Refused (vm.max_map_count): the range stays as it was. */
	hz_prim_reset_reservation(hz_region_addr(r, start), (end - start) * HZ_GRANULE);
	hz_blocks_unclaim(r, start, end - start);
	*from = end;
	return true;
}

void hz_blocks_reserve_free(void)
{
	if (!__atomic_exchange_n(&kept_mapped, false, __ATOMIC_RELAXED))
		return;
	hz_lock(&grow_lock); /* no region comes or goes meanwhile */
	for (size_t k = 0; k < HZ_REGIONS_MAX; k++) {
		size_t from = 0;

		if (hz_range_empty(hz_block_regions[k].range))
			continue;
		while (reserve_free_run(&hz_block_regions[k], &from))
			;
	}
	hz_unlock(&grow_lock);
}

/* Give [start, start + len) back to its region and its granules back to
 * the bitmap; a foreign range is reset (hz_prim_reset_reservation). If the
 * kernel refuses (vm.max_map_count reached; memory the program sealed),
 * drop the memory but keep the granules claimed: reusing them could map
 * over a mapping the kernel placed in a hole, or hand out what the program
 * changed. */
void hz_blocks_release_range(uintptr_t start, size_t len)
{
	struct hz_block_region *r = region_of(start);
	bool foreign = hz_blocks_foreign_range(start, len);
	int ret;

	/* A foreign range with a hole (the program unmapped part of it, or
	 * MADV_DONTFORK left it out of this child) may hold another mapping
	 * the kernel placed there since: a reset would replace it. Only its
	 * memory goes; its granules stay claimed, never used again. */
	if (foreign && !hz_prim_all_mapped(start, len)) {
		hz_prim_madvise((void *)start, len, MADV_DONTNEED);
		hz_debug("%zu MiB at %p have a hole: left unused", len >> 20, (void *)start);
		return;
	}
	ret = foreign ? hz_prim_reset_reservation(start, len) : hz_blocks_drop_memory(start, len);
	if (ret != 0) {
		hz_prim_madvise((void *)start, len, MADV_DONTNEED);
		hz_debug("could not return %zu bytes at %p to the reservation; "
			 "their address space stays unused", len, (void *)start);
		return;
	}
	hz_blocks_unclaim(r, hz_region_index(r, start), len / HZ_GRANULE);
}

void hz_blocks_retire(void *p, struct hz_span *span)
{
	struct block_meta *m = hz_blocks_live(p, "free", NULL);

	span->range = hz_range_make((uintptr_t)p, (size_t)m->granules * HZ_GRANULE);
	span->backing = (enum hz_backing)m->backing;
	if (!__atomic_exchange_n(&m->live, 0, __ATOMIC_ACQ_REL))
		hz_fatal("free(%p): hugezero block freed twice at once", p);
	hz_blocks_count_live(-(int64_t)hz_span_bytes(span));
	count_blocks(-1);
}

/* Checks on hand-out, always on and O(1), as musl's mallocng checks on
 * reuse: a recycler bug that hands one span out twice, or a span it does
 * not hold, stops the program here instead of corrupting two owners'
 * data. The span must lie in one region on granule boundaries, its first
 * and last granules be claimed (read under the lock: other claims change
 * the same bitmap words), and its block not be live already. */
struct hz_block_region *hz_blocks_check_hand_out(const struct hz_span *span)
{
	uintptr_t start = span->range.start, end = span->range.end;
	size_t granules = hz_span_granules(span);
	struct hz_block_region *r = region_of(start);
	bool claimed;

	if (hz_range_empty(r->range) || granules == 0 || granules > UINT32_MAX ||
	    end > r->range.end || end <= start || (start - r->range.start) % HZ_GRANULE != 0 ||
	    span->backing >= HZ_BACKING_COUNT)
		hz_fatal("malloc: span %p + %zu granules handed out is not inside hugezero's "
			 "reservation (recycler bug)", (void *)start, granules);
	hz_lock(&lock);
	claimed = hz_bits_get(r->used, hz_region_index(r, start)) &&
		  hz_bits_get(r->used, hz_region_index(r, end) - 1);
	hz_unlock(&lock);
	if (!claimed)
		hz_fatal("malloc: span %p + %zu granules handed out is not claimed (recycler bug)",
			 (void *)start, granules);
	if (__atomic_load_n(&r->meta[hz_region_index(r, start)].live, __ATOMIC_ACQUIRE))
		hz_fatal("malloc: block %p handed out while live (recycler bug: handed out twice)",
			 (void *)start);
	return r;
}

void hz_blocks_revive(const struct hz_span *span)
{
	struct hz_block_region *r = hz_blocks_check_hand_out(span);
	struct block_meta *m = &r->meta[hz_region_index(r, span->range.start)];

	m->granules = (uint32_t)hz_span_granules(span);
	m->backing = (uint8_t)span->backing;
	if (__atomic_exchange_n(&m->live, 1, __ATOMIC_ACQ_REL))
		hz_fatal("malloc: block %p handed out twice at once (recycler bug)",
			 (void *)span->range.start);
	hz_blocks_count_live((int64_t)hz_span_bytes(span));
	count_blocks(1);
}

void hz_blocks_count_live(int64_t delta)
{
	if (delta > 0)
		hz_zero_handed_out();
	hz_stats_live(delta);
}

void hz_blocks_release_span(const struct hz_span *span)
{
	hz_blocks_release_range(span->range.start, hz_span_bytes(span));
}

void hz_blocks_free(void *p)
{
	struct hz_span span;

	hz_blocks_retire(p, &span);
	hz_blocks_release_span(&span);
}

size_t hz_blocks_usable(const void *p)
{
	return (size_t)hz_blocks_live(p, "malloc_usable_size", NULL)->granules * HZ_GRANULE;
}

void hz_blocks_live_span(const void *p, struct hz_span *out)
{
	const struct block_meta *m = hz_blocks_live(p, "realloc", NULL);

	out->range = hz_range_make((uintptr_t)p, (size_t)m->granules * HZ_GRANULE);
	out->backing = (enum hz_backing)m->backing;
}

/* Claim granules [first + old_g, first + new_g) of r, right after a
 * block, if they are free. */
int hz_blocks_claim_after(struct hz_block_region *r, size_t first, size_t old_g, size_t new_g)
{
	int ret = -ENOMEM;

	hz_lock(&lock);
	if (first + new_g <= r->granules &&
	    hz_bits_find(r->used, first + old_g, first + new_g, true) == first + new_g) {
		take(r, first + old_g, new_g - old_g);
		ret = 0;
	}
	hz_unlock(&lock);
	return ret;
}

void hz_blocks_fork_prepare(void)
{
	/* fork from a signal handler that interrupted this thread inside a
	 * lock: waiting would deadlock, so the child just resets it. The
	 * grow lock comes first, as in claim. */
	fork_grow_skipped = hz_lock_held_here(&grow_lock);
	if (!fork_grow_skipped)
		hz_lock(&grow_lock);
	fork_lock_skipped = hz_lock_held_here(&lock);
	if (!fork_lock_skipped)
		hz_lock(&lock);
}

void hz_blocks_fork_parent(void)
{
	if (!fork_lock_skipped)
		hz_unlock(&lock);
	if (!fork_grow_skipped)
		hz_unlock(&grow_lock);
}

void hz_blocks_fork_child(void)
{
	hz_lock_reset(&lock);
	hz_lock_reset(&grow_lock);
}

#ifdef HZ_TEST_CORE
/* ---- the tables, for the checks of the test core (blocks_check.c) ---- */

void hz_blocks_view_begin(struct hz_blocks_view *v)
{
	hz_lock(&lock);
	v->regions = hz_block_regions;
}

void hz_blocks_view_end(void)
{
	hz_unlock(&lock);
}
#endif
