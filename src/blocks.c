/* Large blocks carved from the reservation. See blocks.h.
 *
 * The lock protects the granule bitmap and the metadata table; system calls
 * (mapping, releasing) run outside it, on granules already claimed, so
 * threads allocating large blocks do not wait for each other's mmap. */
#include "blocks.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "backing.h"
#include "blocks_view.h"
#include "lock.h"
#include "log.h"
#include "options.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "range.h"
#include "stats.h"

struct hz_reservation hz_reservation;

static struct hz_lock lock = HZ_LOCK_INIT;
static bool fork_lock_skipped;
static uint64_t *used;           /* one bit per granule: 1 = claimed */
static struct block_meta *meta;  /* one entry per granule */
static size_t granule_count;

static size_t index_of(uintptr_t a)
{
	return (a - hz_reservation.start) / HZ_GRANULE;
}

static uintptr_t addr_of(size_t index)
{
	return hz_reservation.start + index * HZ_GRANULE;
}

/* ---- granule bitmap (callers hold the lock) ---- */

/* Claimed granules start plain: a foreign mark left from their last
 * block went with its release. */
static void mark(size_t first, size_t n, bool taken)
{
	for (size_t i = first; i < first + n; i++) {
		uint64_t bit = 1ULL << (i % 64);

		if (taken) {
			used[i / 64] |= bit;
			__atomic_store_n(&meta[i].foreign, 0, __ATOMIC_RELAXED);
		} else {
			used[i / 64] &= ~bit;
		}
	}
}

/* First claimed granule in [from, to), or to. */
static size_t next_used(size_t from, size_t to)
{
	while (from < to) {
		uint64_t bits = used[from / 64] >> (from % 64);

		if (bits) {
			size_t i = from + (size_t)__builtin_ctzll(bits);

			return i < to ? i : to;
		}
		from = (from / 64 + 1) * 64;
	}
	return to;
}

/* First fit of n granules starting on a multiple of align granules (the
 * reservation starts on a 1 GiB boundary, so index alignment is address
 * alignment). */
static int claim(size_t n, size_t align, size_t *first)
{
	size_t i = 0;

	while (true) {
		size_t hit;

		i = hz_align_up(i, align);
		if (i > granule_count || n > granule_count - i)
			return -ENOMEM;
		hit = next_used(i, i + n);
		if (hit == i + n) {
			mark(i, n, true);
			*first = i;
			return 0;
		}
		i = hit + 1;
	}
}

static void unclaim(size_t first, size_t n)
{
	hz_lock(&lock);
	mark(first, n, false);
	hz_unlock(&lock);
}

/* After mapping granules failed with err: back to the bitmap, unless
 * another mapping took part of their range (-EEXIST, hz_prim_commit): then
 * they stay claimed for good, so no block is ever mapped over it. */
static void unclaim_after(int err, size_t first, size_t n)
{
	if (err == -EEXIST)
		hz_debug("%zu MiB at %p hold a mapping not ours: left unused",
			 n * HZ_GRANULE >> 20, (void *)addr_of(first));
	else
		unclaim(first, n);
}

/* ---- set-up ---- */

size_t hz_blocks_reservation_size(void)
{
	uint64_t size = hz_option_u64(HZ_OPT_RESERVE);
	uint64_t limit = hz_prim_address_space_limit();

	/* Leave the program at least half of what RLIMIT_AS allows. */
	if (limit != UINT64_MAX && size > limit / 2)
		size = hz_align_down(limit / 2, HZ_ALIGN_MAX);
	return (size_t)hz_align_down(size, HZ_ALIGN_MAX);
}

static int map_tables(size_t count)
{
	size_t meta_bytes = hz_align_up(count * sizeof(struct block_meta), HZ_SZ_4K);
	size_t map_bytes = hz_align_up((count + 63) / 64 * sizeof(uint64_t), HZ_SZ_4K);
	void *mem;
	int ret;

	/* Out of band, and never through malloc: we may be malloc. Pages are
	 * touched only as granules are used. */
	ret = hz_prim_mmap(NULL, meta_bytes + map_bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &mem);
	if (ret != 0)
		return ret;
	meta = mem;
	used = (uint64_t *)((char *)mem + meta_bytes);
	return 0;
}

static int reserve(void)
{
	size_t size = hz_blocks_reservation_size();
	uintptr_t start;
	void *mem;
	int ret;

	if (size < HZ_ALIGN_MAX)
		return -ENOMEM;
	/* 1 GiB aligned, so any block alignment up to HZ_ALIGN_MAX is an
	 * index alignment. */
	ret = hz_prim_reserve(size, HZ_ALIGN_MAX, &mem);
	if (ret != 0)
		return ret;
	start = (uintptr_t)mem;
	granule_count = size / HZ_GRANULE;
	ret = map_tables(granule_count);
	if (ret != 0) {
		hz_prim_munmap((void *)start, size);
		return ret;
	}
	hz_prim_name_mapping((void *)start, size, "hugezero-reserve");
	__atomic_store_n(&hz_reservation.start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&hz_reservation.end, start + size, __ATOMIC_RELEASE);
	hz_info("reserved %zu GiB of address space at %p for large blocks",
		size >> 30, (void *)start);
	return 0;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;

static void init(void)
{
	init_result = reserve();
}

int hz_blocks_init(void)
{
	pthread_once(&init_once, init);
	return init_result;
}

/* ---- blocks ---- */

/* The metadata of the live block starting at p; stops the program when p
 * is not one (double free, or a pointer into the middle of a block). */
static struct block_meta *live_block(const void *p, const char *what)
{
	uintptr_t a = (uintptr_t)p;
	struct block_meta *m;

	if ((a - hz_reservation.start) % HZ_GRANULE == 0) {
		m = &meta[index_of(a)];
		if (__atomic_load_n(&m->live, __ATOMIC_ACQUIRE))
			return m;
	}
	hz_fatal("%s(%p): not a live hugezero block (double free or invalid pointer)",
		 what, p);
}

/* Round size up to whole pages of the block's backing, failing on
 * overflow. */
static int block_len(size_t size, size_t page, size_t *len)
{
	if (size > hz_reservation.end - hz_reservation.start)
		return -ENOMEM;
	*len = hz_align_up(size == 0 ? 1 : size, page);
	return 0;
}

static size_t unit_of(enum hz_backing b)
{
	size_t page = hz_backing_page(b);

	return page > HZ_GRANULE ? page : HZ_GRANULE;
}

int hz_blocks_alloc(size_t size, size_t align, void **out)
{
	enum hz_backing want = hz_backing_first(size);
	size_t unit = unit_of(want);
	size_t len, first;
	enum hz_backing got;
	int ret;

	if (block_len(size, unit, &len) != 0 || align > HZ_ALIGN_MAX)
		return -ENOMEM;
	if (align < unit)
		align = unit;
	hz_lock(&lock);
	ret = claim(len / HZ_GRANULE, align / HZ_GRANULE, &first);
	hz_unlock(&lock);
	if (ret != 0) {
		hz_stats_fallback(HZ_FB_RESERVE_FULL);
		return ret;
	}
	ret = hz_backing_map(addr_of(first), len, want, &got);
	if (ret != 0) {
		unclaim_after(ret, first, len / HZ_GRANULE);
		hz_stats_fallback(HZ_FB_MAP_FAILED);
		return -ENOMEM;
	}
	meta[first].granules = (uint32_t)(len / HZ_GRANULE);
	meta[first].backing = (uint8_t)got;
	__atomic_store_n(&meta[first].live, 1, __ATOMIC_RELEASE);
	hz_stats_live((int64_t)len);
	*out = (void *)addr_of(first);
	return 0;
}

static bool foreign_granules(size_t first, size_t n);

/* Give [start, start + len) back to the reservation and its granules back
 * to the bitmap; a foreign range is reset (hz_prim_reset_reservation). If
 * the kernel refuses (vm.max_map_count reached; memory the program
 * sealed), drop the memory but keep the granules claimed: reusing them
 * could map over a mapping the kernel placed in a hole, or hand out what
 * the program changed. */
static void release(uintptr_t start, size_t len)
{
	bool foreign = foreign_granules(index_of(start), len / HZ_GRANULE);
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
	ret = foreign ? hz_prim_reset_reservation(start, len) : hz_prim_decommit(start, len);
	if (ret != 0) {
		hz_prim_madvise((void *)start, len, MADV_DONTNEED);
		hz_debug("could not return %zu bytes at %p to the reservation; "
			 "their address space stays unused", len, (void *)start);
		return;
	}
	unclaim(index_of(start), len / HZ_GRANULE);
}

void hz_blocks_retire(void *p, struct hz_span *span)
{
	struct block_meta *m = live_block(p, "free");

	span->range = hz_range_make((uintptr_t)p, (size_t)m->granules * HZ_GRANULE);
	span->backing = (enum hz_backing)m->backing;
	if (!__atomic_exchange_n(&m->live, 0, __ATOMIC_ACQ_REL))
		hz_fatal("free(%p): hugezero block freed twice at once", p);
	hz_stats_live(-(int64_t)hz_span_bytes(span));
}

static bool claimed_granule(size_t i)
{
	return used[i / 64] & (1ULL << (i % 64));
}

/* Checks on hand-out, always on and O(1), as musl's mallocng checks on
 * reuse: a recycler bug that hands one span out twice, or a span it does
 * not hold, stops the program here instead of corrupting two owners'
 * data. The span must lie in the reservation on granule boundaries, its
 * first and last granules be claimed (read under the lock: other claims
 * change the same bitmap words), and its block not be live already. */
static void check_hand_out(const struct hz_span *span)
{
	uintptr_t start = span->range.start, end = span->range.end;
	size_t granules = hz_span_granules(span);
	bool claimed;

	if (granules == 0 || granules > UINT32_MAX || start < hz_reservation.start ||
	    end > hz_reservation.end || end <= start ||
	    (start - hz_reservation.start) % HZ_GRANULE != 0 || span->backing >= HZ_BACKING_COUNT)
		hz_fatal("malloc: span %p + %zu granules handed out is not inside hugezero's "
			 "reservation (recycler bug)", (void *)start, granules);
	hz_lock(&lock);
	claimed = claimed_granule(index_of(start)) && claimed_granule(index_of(end) - 1);
	hz_unlock(&lock);
	if (!claimed)
		hz_fatal("malloc: span %p + %zu granules handed out is not claimed (recycler bug)",
			 (void *)start, granules);
	if (__atomic_load_n(&meta[index_of(start)].live, __ATOMIC_ACQUIRE))
		hz_fatal("malloc: block %p handed out while live (recycler bug: handed out twice)",
			 (void *)start);
}

void hz_blocks_revive(const struct hz_span *span)
{
	struct block_meta *m;

	check_hand_out(span);
	m = &meta[index_of(span->range.start)];
	m->granules = (uint32_t)hz_span_granules(span);
	m->backing = (uint8_t)span->backing;
	if (__atomic_exchange_n(&m->live, 1, __ATOMIC_ACQ_REL))
		hz_fatal("malloc: block %p handed out twice at once (recycler bug)",
			 (void *)span->range.start);
	hz_stats_live((int64_t)hz_span_bytes(span));
}

void hz_blocks_release_span(const struct hz_span *span)
{
	release(span->range.start, hz_span_bytes(span));
}

/* ---- foreign blocks ---- */

static int all_foreign;

void hz_blocks_mark_foreign(uintptr_t start, size_t len)
{
	/* end first: it is published last (reserve), after start and the
	 * tables, so a call racing start-up sees all of them or nothing. */
	uintptr_t hi = __atomic_load_n(&hz_reservation.end, __ATOMIC_ACQUIRE);
	uintptr_t lo = __atomic_load_n(&hz_reservation.start, __ATOMIC_RELAXED);
	uintptr_t end = len > UINTPTR_MAX - start ? UINTPTR_MAX : start + len;

	if (start < lo)
		start = lo;
	if (end > hi)
		end = hi;
	/* Release: a free that reads the mark after this store also sees
	 * everything the program did before its call. */
	for (uintptr_t a = start; a < end; a = hz_align_down(a, HZ_GRANULE) + HZ_GRANULE)
		__atomic_store_n(&meta[index_of(a)].foreign, 1, __ATOMIC_RELEASE);
}

void hz_blocks_all_foreign(bool on)
{
	__atomic_store_n(&all_foreign, on, __ATOMIC_RELEASE);
}

static bool foreign_granules(size_t first, size_t n)
{
	if (__atomic_load_n(&all_foreign, __ATOMIC_ACQUIRE))
		return true;
	for (size_t i = first; i < first + n; i++)
		if (__atomic_load_n(&meta[i].foreign, __ATOMIC_ACQUIRE))
			return true;
	return false;
}

bool hz_blocks_reusable(const struct hz_span *span)
{
	return !foreign_granules(index_of(span->range.start), hz_span_granules(span));
}

void hz_blocks_free(void *p)
{
	struct hz_span span;

	hz_blocks_retire(p, &span);
	hz_blocks_release_span(&span);
}

size_t hz_blocks_usable(const void *p)
{
	return (size_t)live_block(p, "malloc_usable_size")->granules * HZ_GRANULE;
}

/* Claim the granules right after the block and back them. */
static int grow_in_place(size_t first, size_t old_g, size_t new_g,
			 enum hz_backing backing)
{
	enum hz_backing got;
	int ret = -ENOMEM;

	hz_lock(&lock);
	if (first + new_g <= granule_count &&
	    next_used(first + old_g, first + new_g) == first + new_g) {
		mark(first + old_g, new_g - old_g, true);
		ret = 0;
	}
	hz_unlock(&lock);
	if (ret != 0)
		return ret;
	ret = hz_backing_map(addr_of(first + old_g), (new_g - old_g) * HZ_GRANULE,
			     backing, &got);
	if (ret != 0)
		unclaim_after(ret, first + old_g, new_g - old_g);
	return ret;
}

/* The moved block's old place stops being live before its granules go
 * back: once they are unclaimed, another thread may make a block there, and
 * clearing the flag after that would clear the new block's (its free would
 * then stop the program as a double free). */
static void retire_old_place(struct block_meta *old)
{
	__atomic_store_n(&old->live, 0, __ATOMIC_RELEASE);
}

/* Kernels before 5.7: a plain move, which leaves a hole where the block
 * was; its put-back never replaces what another thread mapped there. */
static int move_leaving_hole(size_t first, size_t old_g, size_t new_g, size_t to,
			     struct block_meta *old)
{
	uintptr_t start = addr_of(first);
	void *moved;
	int ret;

	ret = hz_prim_mremap((void *)start, old_g * HZ_GRANULE, new_g * HZ_GRANULE,
			     MREMAP_MAYMOVE | MREMAP_FIXED, (void *)addr_of(to), &moved);
	if (ret != 0) {
		unclaim(to, new_g);
		return ret;
	}
	retire_old_place(old);
	ret = hz_prim_reserve_hole(start, old_g * HZ_GRANULE);
	if (ret == 0 || ret == -EEXIST)
		unclaim_after(ret, first, old_g);
	return 0;
}

/* Move the block's page tables to a new, larger place in the reservation:
 * map the new tail there, then move the pages with MREMAP_DONTUNMAP, which
 * leaves the old range mapped (and empty) until it is released. No step
 * opens a hole in the reservation: the kernel could place another mapping
 * in one, and we would take the pointers into it for ours (free would
 * stop the program). */
static int move_block(size_t first, size_t old_g, size_t new_g, size_t unit,
		      enum hz_backing backing, struct block_meta *old, uintptr_t *new_start,
		      bool foreign)
{
	uintptr_t start = addr_of(first);
	size_t old_len = old_g * HZ_GRANULE, to;
	enum hz_backing got;
	void *moved;
	int ret;

	hz_lock(&lock);
	ret = claim(new_g, unit / HZ_GRANULE, &to);
	hz_unlock(&lock);
	if (ret != 0)
		return ret;
	ret = hz_backing_map(addr_of(to) + old_len, (new_g - old_g) * HZ_GRANULE, backing, &got);
	if (ret != 0) {
		unclaim(to, old_g);
		unclaim_after(ret, to + old_g, new_g - old_g);
		return ret;
	}
	ret = hz_prim_mremap((void *)start, old_len, old_len,
			     MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
			     (void *)addr_of(to), &moved);
	if (ret != 0) {
		release(addr_of(to) + old_len, (new_g - old_g) * HZ_GRANULE);
		unclaim(to, old_g);
		/* EINVAL: no MREMAP_DONTUNMAP (or not for this memory). */
		if (ret == -EINVAL) {
			hz_lock(&lock);
			ret = claim(new_g, unit / HZ_GRANULE, &to);
			hz_unlock(&lock);
			if (ret == 0)
				ret = move_leaving_hole(first, old_g, new_g, to, old);
		}
		if (ret != 0)
			return ret;
	} else {
		retire_old_place(old);
		release(start, old_len);
	}
	/* The pages moved with their mappings' properties (mremap), so the
	 * mark moves too: claiming the new place cleared it. */
	if (foreign)
		hz_blocks_mark_foreign(addr_of(to), old_g * HZ_GRANULE);
	*new_start = addr_of(to);
	return 0;
}

/* Last resort when the page tables cannot move (mremap of hugetlb memory
 * fails on older kernels): a new block and a copy. */
static int copy_block(void *p, size_t size, size_t old_g, void **out)
{
	void *q;

	if (hz_blocks_alloc(size, HZ_GRANULE, &q) != 0)
		return -ENOMEM;
	memcpy(q, p, old_g * HZ_GRANULE);
	hz_blocks_free(p);
	hz_stats_add(realloc_copied, 1);
	*out = q;
	return 0;
}

int hz_blocks_resize(void *p, size_t size, void **out)
{
	struct block_meta *m = live_block(p, "realloc");
	enum hz_backing backing = (enum hz_backing)m->backing;
	size_t unit = unit_of(backing);
	size_t first = index_of((uintptr_t)p);
	size_t old_g = m->granules, new_g, len;
	uintptr_t start = (uintptr_t)p;

	if (block_len(size, unit, &len) != 0)
		return -ENOMEM;
	new_g = len / HZ_GRANULE;
	if (new_g < old_g) {
		/* Shrink: only the tail's memory goes back. */
		if (hz_prim_decommit(start + len, (old_g - new_g) * HZ_GRANULE) == 0) {
			unclaim(first + new_g, old_g - new_g);
			m->granules = (uint32_t)new_g;
			hz_stats_live(-(int64_t)((old_g - new_g) * HZ_GRANULE));
		}
		hz_stats_add(realloc_in_place, 1);
	} else if (new_g > old_g) {
		if (grow_in_place(first, old_g, new_g, backing) == 0) {
			hz_stats_add(realloc_in_place, 1);
		} else if (move_block(first, old_g, new_g, unit, backing, m, &start,
				      foreign_granules(first, old_g)) == 0) {
			/* m stopped being live inside the move (retire_old_place). */
			m = &meta[index_of(start)];
			m->backing = (uint8_t)backing;
			__atomic_store_n(&m->live, 1, __ATOMIC_RELEASE);
			hz_stats_add(realloc_moved, 1);
		} else {
			return copy_block(p, size, old_g, out);
		}
		m->granules = (uint32_t)new_g;
		hz_stats_live((int64_t)((new_g - old_g) * HZ_GRANULE));
	}
	*out = (void *)start;
	return 0;
}

void hz_blocks_fork_prepare(void)
{
	/* fork from a signal handler that interrupted this thread inside the
	 * lock: waiting would deadlock, so the child just resets it. */
	fork_lock_skipped = hz_lock_held_here(&lock);
	if (!fork_lock_skipped)
		hz_lock(&lock);
}

void hz_blocks_fork_parent(void)
{
	if (!fork_lock_skipped)
		hz_unlock(&lock);
}

void hz_blocks_fork_child(void)
{
	hz_lock_reset(&lock);
}

#ifdef HZ_TEST_CORE
/* ---- the tables, for the checks of the test core (blocks_check.c) ---- */

void hz_blocks_view_begin(struct hz_blocks_view *v)
{
	hz_lock(&lock);
	v->meta = meta;
	v->used = used;
	v->granule_count = granule_count;
}

void hz_blocks_view_end(void)
{
	hz_unlock(&lock);
}
#endif
