/* The extent manager behind the jemalloc hooks. See extents.h.
 *
 * One lock covers the region table and every region's bitmaps and counters.
 * Mapping regions, zeroing and purging happen outside it, on pages that the
 * caller owns at that moment (just claimed, or still held by jemalloc), so
 * threads do not wait for each other's clearing.
 *
 * Cache policy (the preload's, cache.h, with one budget for both):
 *  - Freed extents stay mapped, their pages that hold data dirty, while
 *    the budget the preload's cache shares (HUGEZERO_CACHE_MAX in all) has
 *    room and while the dirty pages stay within the recent demand
 *    (demand.h); beyond that a freed extent is purged at once, and a
 *    new extent that leaves too many dirty pages idle has the oldest
 *    purged. New extents go over dirty pages first. The dirty pages are
 *    charged to the budget whenever the lock is dropped.
 *  - Dirty pages of a region that got none for HUGEZERO_DECAY_MS are purged,
 *    and a region left entirely free that long is unmapped, at the first
 *    hook call after that (there is no thread).
 *  - A region left empty by destroy, or whose arena holds nothing any more,
 *    is unmapped at once: arena.<i>.destroy ends by freeing the arena's
 *    metadata, which jemalloc allocated through these hooks.
 *  - What jemalloc asks to read zero does: the dirty pages an extent
 *    covers are zeroed as it is handed out. Otherwise they are handed out
 *    as they are (*zeroed false), as jemalloc alone reuses its own dirty
 *    pages: no thread zeroes ahead for the hooks, so that clear was on the
 *    program's path, and a value it mallocs and fills was written twice
 *    (bench/RESULTS.md, "Zeroing at hand-out"). HUGEZERO_ZERO_ON_FREE=1
 *    zeroes extents when freed.
 *
 * Lazy regions (the preload's, hz_extents_watch_with): the watch on an
 * extent starts once it is handed out (and zeroed, if asked), and ends,
 * with its advice, before its pages are ours again. */
#include "extents.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "../../include/hugezero/jemalloc.h"
#include "cache.h"
#include "demand.h"
#include "lock.h"
#include "log.h"
#include "options.h"
#include "pages.h"
#include "prim/prim.h"
#include "regions.h"

/* 64 MiB: jemalloc's first extents for an arena are its metadata (2 MiB)
 * and slabs; one region serves many of them, and a 64 MiB request fits a
 * region alone. */
#define REGION_MIN ((size_t)64 << 20)
/* New regions are at least an eighth of what is mapped, so the region count
 * grows with the logarithm of the memory: 64 GiB is about 60 regions. */
#define REGION_GROWTH 8
/* Regions unmapped per batch outside the lock. */
#define RELEASE_BATCH 8

static struct hz_lock lock = HZ_LOCK_INIT;
static size_t charged; /* dirty bytes charged to the budget */
static struct hz_demand demand;
/* When the oldest idle stamp of a region (an empty region's, or its dirty
 * pages') is a decay old (ns; UINT64_MAX: no region is idle): decay has
 * nothing to do before, so no hook call looks for it. */
static uint64_t decay_due = UINT64_MAX;

/* Drop the lock, charging the budget with what the dirty pages became. */
static void unlock(void)
{
	size_t dirty = hz_regions_totals.dirty_bytes;

	hz_cache_budget_charge(hz_cache_budget(), dirty, charged);
	charged = dirty;
	hz_unlock(&lock);
}

/* ---- the watch on lazy regions' extents (no lock) ---- */

static const struct hz_extents_watcher *watcher;

void hz_extents_watch_with(const struct hz_extents_watcher *w)
{
	__atomic_store_n(&watcher, w, __ATOMIC_RELEASE);
}

static const struct hz_extents_watcher *lazy_watcher(void)
{
	return __atomic_load_n(&watcher, __ATOMIC_ACQUIRE);
}

/* The whole 2 MiB pages of [addr, addr + size): only those can become huge
 * pages of the extent's own. */
static struct hz_range whole_2m(uintptr_t addr, size_t size)
{
	uintptr_t lo = hz_align_up(addr, HZ_SZ_2M), hi = hz_align_down(addr + size, HZ_SZ_2M);

	return hz_range_make(lo, lo < hi ? hi - lo : 0);
}

static void watch(uintptr_t addr, size_t size)
{
	const struct hz_extents_watcher *w = lazy_watcher();
	struct hz_range r = whole_2m(addr, size);

	if (w && !hz_range_empty(r))
		w->watch(r.start, hz_range_len(r));
}

/* The exact range, not its whole 2 MiB pages: jemalloc splits a watched
 * extent and gives its pieces back one by one, often none of them with a
 * whole 2 MiB page, and the watch and the advice overlap every piece.
 * Given back: the range goes back to 4 KiB pages for its next extent (a
 * 2 MiB page with any 4 KiB page of it unadvised gets no huge page). */
static void unwatch(uintptr_t addr, size_t size, bool given_back)
{
	const struct hz_extents_watcher *w = lazy_watcher();

	if (!w)
		return;
	w->forget(addr, size);
	if (given_back)
		hz_prim_madvise((void *)addr, size, MADV_NOHUGEPAGE);
}

void hz_extents_purged(uintptr_t addr, size_t size)
{
	unwatch(addr, size, false);
}

/* ---- work done once the lock is dropped ---- */

struct chores {
	struct hz_region release[RELEASE_BATCH];
	unsigned releases;
	struct hz_region_runs purge;         /* idle dirty runs, claimed */
	enum hz_backing purge_backing[HZ_REGION_RUNS];
};

static bool release_full(const struct chores *c)
{
	return c->releases == RELEASE_BATCH;
}

/* Move empty regions (of arena, or of any arena when all) that have been
 * idle since idle_before into c. */
static void collect_empty(struct chores *c, unsigned arena, bool all, uint64_t idle_before)
{
	for (unsigned i = 0; i < hz_region_count && !release_full(c);) {
		struct hz_region *r = &hz_regions[i];

		if (hz_region_empty(r) && (all || r->arena == arena) &&
		    r->idle_since <= idle_before) {
			c->release[c->releases++] = hz_regions_take_out(r);
			continue; /* slot i now holds the next region */
		}
		i++;
	}
}

static void collect_idle_dirty(struct chores *c, uint64_t idle_before)
{
	for (unsigned i = 0; i < hz_region_count && c->purge.count < HZ_REGION_RUNS; i++) {
		struct hz_region *r = &hz_regions[i];
		unsigned from = c->purge.count;

		if (r->dirty_pages == 0 || r->dirty_since > idle_before)
			continue;
		hz_regions_claim_dirty(r, &c->purge, SIZE_MAX);
		for (unsigned k = from; k < c->purge.count; k++)
			c->purge_backing[k] = r->backing;
	}
}

/* Claim about pages dirty pages for purging, from the regions whose dirty
 * pages are oldest; a region holding nothing goes whole. */
static void collect_dirty(struct chores *c, size_t pages)
{
	while (pages > 0 && c->purge.count < HZ_REGION_RUNS) {
		struct hz_region *oldest = NULL;
		unsigned from = c->purge.count;

		for (unsigned i = 0; i < hz_region_count; i++)
			if (hz_regions[i].dirty_pages > 0 &&
			    (!oldest || hz_regions[i].dirty_since < oldest->dirty_since))
				oldest = &hz_regions[i];
		if (!oldest)
			return;
		if (hz_region_empty(oldest) && !release_full(c)) {
			pages -= oldest->dirty_pages < pages ? oldest->dirty_pages : pages;
			c->release[c->releases++] = hz_regions_take_out(oldest);
			continue;
		}
		pages -= hz_regions_claim_dirty(oldest, &c->purge, pages);
		for (unsigned k = from; k < c->purge.count; k++)
			c->purge_backing[k] = oldest->backing;
	}
}

static uint64_t plus_decay(uint64_t t)
{
	uint64_t decay_ns = hz_cache_policy()->decay_ns;

	return t > UINT64_MAX - decay_ns ? UINT64_MAX : t + decay_ns;
}

/* A region was stamped idle at now (hz_regions_unclaim, _mark_dirty). */
static void idle_from(uint64_t now)
{
	uint64_t due = plus_decay(now);

	if (due < decay_due)
		decay_due = due;
}

/* When the idle stamps left are a decay old; now when c is full, so that
 * the next call goes on. */
static uint64_t next_decay(const struct chores *c, uint64_t now)
{
	uint64_t oldest = UINT64_MAX;

	if (release_full(c) || c->purge.count == HZ_REGION_RUNS)
		return now;
	for (unsigned i = 0; i < hz_region_count; i++) {
		const struct hz_region *r = &hz_regions[i];

		if (hz_region_empty(r) && r->idle_since < oldest)
			oldest = r->idle_since;
		if (r->dirty_pages > 0 && r->dirty_since < oldest)
			oldest = r->dirty_since;
	}
	return oldest == UINT64_MAX ? UINT64_MAX : plus_decay(oldest);
}

static void decay(struct chores *c, uint64_t now)
{
	uint64_t decay_ns = hz_cache_policy()->decay_ns;

	if (now < decay_due)
		return;
	collect_empty(c, 0, true, now - decay_ns);
	collect_idle_dirty(c, now - decay_ns);
	decay_due = next_decay(c, now);
}

static bool arena_holds_nothing(unsigned arena)
{
	for (unsigned i = 0; i < hz_region_count; i++)
		if (hz_regions[i].arena == arena && !hz_region_empty(&hz_regions[i]))
			return false;
	return true;
}

/* Unlocked: unmap, and purge the claimed idle runs, then free them clean. */
static void do_chores(struct chores *c)
{
	uint64_t now;

	for (unsigned i = 0; i < c->releases; i++)
		hz_regions_unmap(&c->release[i]);
	c->releases = 0;
	if (c->purge.count == 0)
		return;
	for (unsigned i = 0; i < c->purge.count; i++)
		hz_pages_purge(c->purge_backing[i], c->purge.run[i].start,
			       hz_range_len(c->purge.run[i]));
	hz_lock(&lock);
	now = hz_prim_now_ns();
	for (unsigned i = 0; i < c->purge.count; i++) {
		struct hz_range run = c->purge.run[i];
		struct hz_region *r = hz_regions_find(run.start);

		hz_regions_unclaim(r, hz_region_page_of(r, run.start), hz_range_len(run) / HZ_SZ_4K,
				   false, now);
	}
	idle_from(now);
	unlock();
	c->purge.count = 0;
}

/* ---- handing out ---- */

static struct hz_region *claim_at(unsigned arena, uintptr_t want, size_t n, size_t align,
				  size_t *first)
{
	struct hz_region *r = hz_regions_find(want);

	if (!r || r->arena != arena || want % align != 0 ||
	    n > (r->range.end - want) / HZ_SZ_4K)
		return NULL;
	*first = hz_region_page_of(r, want);
	return hz_regions_all_free(r, *first, n) ? r : NULL;
}

/* Where dirty pages are, first: they are resident, so the extent reuses
 * them instead of faulting fresh pages beside them, which would leave them
 * idle (the memory of a program cycling values of varying sizes grew by
 * the old ones). Large extents first try a 2 MiB-aligned start, so that
 * purging them can drop whole huge pages. */
static struct hz_region *claim_any(unsigned arena, size_t size, size_t align, size_t *first)
{
	size_t n = size / HZ_SZ_4K;
	struct hz_region *r = NULL;

	if (size >= HZ_SZ_2M && align < HZ_SZ_2M)
		r = hz_regions_fit_dirty(arena, n, HZ_SZ_2M, first);
	if (!r)
		r = hz_regions_fit_dirty(arena, n, align, first);
	if (!r && size >= HZ_SZ_2M && align < HZ_SZ_2M)
		r = hz_regions_fit(arena, n, HZ_SZ_2M, first);
	return r ? r : hz_regions_fit(arena, n, align, first);
}

/* Map a region for the request and find room in it (or anywhere, if
 * another thread freed some meanwhile). Called and returns locked. */
static struct hz_region *grow(unsigned arena, size_t size, size_t align, size_t *first)
{
	size_t min_len = hz_regions_totals.mapped_bytes / REGION_GROWTH;
	struct hz_region fresh;
	const struct hz_extents_watcher *w = lazy_watcher();
	bool lazy;

	if (min_len < REGION_MIN)
		min_len = REGION_MIN;
	unlock();
	/* Outside the lock: watching() may read the memory cgroup. */
	lazy = w && w->watching() && hz_backing_lazy();
	if (hz_regions_map(arena, size, align, min_len, lazy, &fresh) != 0) {
		hz_lock(&lock);
		return NULL;
	}
	hz_lock(&lock);
	if (hz_regions_insert(&fresh) != 0) {
		unlock();
		hz_regions_unmap(&fresh);
		hz_lock(&lock);
		return NULL;
	}
	return hz_regions_fit(arena, size / HZ_SZ_4K, align, first);
}

int hz_extents_alloc(unsigned arena, uintptr_t want, size_t size, size_t align,
		     bool must_zero, uintptr_t *out, bool *zeroed)
{
	struct chores c = { .releases = 0, .purge = { .count = 0 } };
	struct hz_region_runs dirty;
	struct hz_region *r;
	enum hz_backing backing;
	size_t first = 0;
	uint64_t now;
	bool lazy;

	if (size == 0 || size % HZ_SZ_4K != 0 || !hz_is_pow2(align) || want % HZ_SZ_4K != 0)
		return -EINVAL;
	if (align < HZ_SZ_4K)
		align = HZ_SZ_4K;
	hz_lock(&lock);
	if (want) {
		r = claim_at(arena, want, size / HZ_SZ_4K, align, &first);
	} else {
		r = claim_any(arena, size, align, &first);
		if (!r)
			r = grow(arena, size, align, &first);
	}
	if (!r) {
		unlock();
		return -ENOMEM;
	}
	hz_regions_claim(r, first, size / HZ_SZ_4K, &dirty);
	backing = r->backing;
	lazy = r->lazy;
	*out = r->range.start + first * HZ_SZ_4K;
	now = hz_prim_now_ns();
	hz_demand_handed_out(&demand, size, now, hz_cache_policy()->decay_ns);
	decay(&c, now);
	if (hz_regions_totals.dirty_bytes > hz_demand_room(&demand))
		collect_dirty(&c, (hz_regions_totals.dirty_bytes - hz_demand_room(&demand)) /
					  HZ_SZ_4K);
	unlock();
	do_chores(&c);
	if (must_zero)
		for (unsigned i = 0; i < dirty.count; i++)
			hz_pages_zero(backing, dirty.run[i].start, hz_range_len(dirty.run[i]), *out);
	*zeroed = must_zero || dirty.count == 0;
	if (lazy)
		watch(*out, size);
	return 0;
}

/* ---- taking back ---- */

/* Stops the program unless all of [addr, addr + size) in r is handed out:
 * freed twice (or meanwhile, by another thread: counted once more, its
 * pages would make a region look empty under live extents). */
static void still_held(const struct hz_region *r, uintptr_t addr, size_t size)
{
	if (hz_regions_any_free(r, hz_region_page_of(r, addr), size / HZ_SZ_4K))
		hz_fatal("jemalloc hook: [%p, +%zu) freed twice", (void *)addr, size);
}

/* The region holding [addr, addr + size), which must be handed out; stops
 * the program otherwise. NULL when the range is not ours. */
static struct hz_region *held_range(uintptr_t addr, size_t size, size_t *first)
{
	struct hz_region *r = hz_regions_find(addr);

	if (!r)
		return NULL;
	if (size == 0 || size % HZ_SZ_4K != 0 || addr % HZ_SZ_4K != 0 ||
	    size > r->range.end - addr)
		hz_fatal("jemalloc hook: [%p, +%zu) is not an extent hugezero handed out",
			 (void *)addr, size);
	*first = hz_region_page_of(r, addr);
	still_held(r, addr, size);
	return r;
}

static size_t runs_bytes(const struct hz_region_runs *runs)
{
	size_t bytes = 0;

	for (unsigned i = 0; i < runs->count; i++)
		bytes += hz_range_len(runs->run[i]);
	return bytes;
}

/* Called locked, with r holding [addr, addr + size), which jemalloc still
 * holds. Unlocked, ends the watch and finds what the pages hold (*data:
 * the runs that keep data; none with zero_on_free, which zeroes them).
 * Returns their region, locked. */
static struct hz_region *settle(struct hz_region *r, uintptr_t addr, size_t size,
				struct hz_region_runs *data)
{
	enum hz_backing backing = r->backing;
	bool lazy = r->lazy;

	unlock();
	if (lazy)
		unwatch(addr, size, true);
	data->count = 0;
	if (hz_cache_policy()->zero_on_free)
		hz_pages_zero(backing, addr, size, 0);
	else
		hz_pages_data(backing, addr, size, data);
	hz_lock(&lock);
	return hz_regions_find(addr);
}

/* Whether to keep data bytes more of dirty pages: within the budget the
 * preload's cache shares, and within what jemalloc's demand swings by. */
static bool keep_dirty(size_t data)
{
	const struct hz_cache_budget *budget = hz_cache_budget();

	return hz_cache_budget_used(budget) + data <= hz_cache_budget_max(budget) &&
	       hz_regions_totals.dirty_bytes + data <= hz_demand_room(&demand);
}

/* Purge the runs (jemalloc still holds them), unlocked. */
static struct hz_region *purge_runs(enum hz_backing backing, struct hz_region_runs *runs)
{
	uintptr_t any = runs->run[0].start;

	unlock();
	for (unsigned i = 0; i < runs->count; i++)
		hz_pages_purge(backing, runs->run[i].start, hz_range_len(runs->run[i]));
	runs->count = 0;
	hz_lock(&lock);
	return hz_regions_find(any);
}

int hz_extents_free(uintptr_t addr, size_t size, bool destroy)
{
	struct chores c = { .releases = 0, .purge = { .count = 0 } };
	struct hz_region_runs data;
	struct hz_region *r;
	size_t first;
	bool gone;
	unsigned arena;
	uint64_t now;

	hz_lock(&lock);
	r = held_range(addr, size, &first);
	if (!r) {
		unlock();
		return -ENOENT;
	}
	r = settle(r, addr, size, &data);
	still_held(r, addr, size);
	now = hz_prim_now_ns();
	hz_demand_given_back(&demand, size, now, hz_cache_policy()->decay_ns);
	/* destroy frees too (jemalloc's retained extents, at arena destroy):
	 * a region it leaves empty goes at once, dirty or not. */
	if (!destroy && data.count > 0 && !keep_dirty(runs_bytes(&data))) {
		r = purge_runs(r->backing, &data);
		still_held(r, addr, size);
	}
	arena = r->arena;
	hz_regions_unclaim(r, first, size / HZ_SZ_4K, false, now);
	for (unsigned i = 0; i < data.count; i++)
		hz_regions_mark_dirty(r, data.run[i], now);
	idle_from(now);
	if (destroy && hz_region_empty(r))
		c.release[c.releases++] = hz_regions_take_out(r);
	gone = arena_holds_nothing(arena);
	if (gone)
		collect_empty(&c, arena, false, UINT64_MAX);
	decay(&c, now);
	unlock();
	do_chores(&c);
	/* A destroyed arena may leave more empty regions than one batch. */
	while (gone) {
		hz_lock(&lock);
		gone = arena_holds_nothing(arena);
		if (gone)
			collect_empty(&c, arena, false, UINT64_MAX);
		unlock();
		gone = gone && c.releases > 0;
		do_chores(&c);
	}
	return 0;
}

/* ---- questions ---- */

int hz_extents_find(uintptr_t addr, size_t size, enum hz_backing *backing)
{
	struct hz_region *r;
	int ret = -ENOENT;

	hz_lock(&lock);
	r = hz_regions_find(addr);
	if (r) {
		ret = size <= r->range.end - addr ? 0 : -EINVAL;
		*backing = r->backing;
	} else if (size > 0 && hz_regions_find(addr + size - 1)) {
		ret = -EINVAL;
	}
	unlock();
	return ret;
}

int hz_extents_mergeable(uintptr_t a, size_t a_size, uintptr_t b, size_t b_size)
{
	struct hz_region *ra, *rb;
	int ret;

	hz_lock(&lock);
	ra = hz_regions_find(a);
	rb = hz_regions_find(b);
	if (!ra && !rb)
		ret = -ENOENT;
	else if (ra == rb && a + a_size == b && b_size <= rb->range.end - b)
		ret = 0;
	else
		ret = -EXDEV;
	unlock();
	return ret;
}

void hz_extents_stats(unsigned arena, struct hz_jemalloc_stats *out)
{
	memset(out, 0, sizeof(*out));
	hz_lock(&lock);
	for (unsigned i = 0; i < hz_region_count; i++) {
		const struct hz_region *r = &hz_regions[i];
		size_t bytes = hz_range_len(r->range);

		if (arena != HZ_JEMALLOC_ALL_ARENAS && r->arena != arena)
			continue;
		out->regions++;
		out->mapped_bytes += bytes;
		out->active_bytes += (hz_region_pages(r) - r->free_pages) * HZ_SZ_4K;
		out->dirty_bytes += r->dirty_pages * HZ_SZ_4K;
		if (r->backing == HZ_BACKING_THP)
			out->thp_bytes += bytes;
		else if (r->backing == HZ_BACKING_SMALL)
			out->small_bytes += bytes;
		else
			out->hugetlb_bytes += bytes;
	}
	unlock();
}

void hz_extents_fork_child(void)
{
	hz_lock_reset(&lock);
}
