/* The extent_hooks_t that jemalloc calls. See include/hugezero/jemalloc.h.
 *
 * jemalloc's conventions: hooks returning bool return false on success and
 * true to opt out, and jemalloc then falls back (a failed dalloc retains the
 * range and tries decommit, purge_forced, purge_lazy in turn). What jemalloc
 * believes after each answer, and so what each hook must really do:
 *  - alloc's *zero is trusted: set only when every byte reads zero.
 *  - A retained range counts as zero only after decommit or purge_forced
 *    succeeded, and jemalloc then skips its own memset for MALLOCX_ZERO.
 *  - A failed split leaks the range (jemalloc #2815): split must succeed.
 *  - A hook that calls malloc runs on arena 0, one that calls mallctl
 *    deadlocks: these never do either.
 *
 * Retained growth is refused. With opt.retain (the default), jemalloc grows
 * an arena by asking for more than it needs (the next size class: 80 MiB
 * for a 64 MiB request) without committing it, uses the front and keeps the
 * trail. Since dalloc gives the front back to hugezero, the next growth
 * finds the hole too small (the trail is still jemalloc's) and needs a new
 * region: one 64 MiB cycle stranded a 16 MiB trail and mapped 80 MiB more,
 * every time. Growth requests are the only ones made with *commit false on
 * entry (jemalloc 5.3: extent_grow_retained; base and exact allocations
 * pass true), so alloc fails them, and jemalloc falls back at once to an
 * exact-size request (extent_alloc_wrapper), which is served.
 *
 * Ranges that are not ours (an arena whose hooks were replaced while it
 * held memory from jemalloc's own mmap) get what jemalloc's default hooks do
 * on Linux, or an opt-out. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "../../include/hugezero/jemalloc.h"
#include "blocks.h"
#include "extents.h"
#include "hooks.h"
#include "pages.h"
#include "prim/prim.h"
#include "stats.h"

static void *hook_alloc(extent_hooks_t *hooks, void *new_addr, size_t size,
			size_t alignment, bool *zero, bool *commit, unsigned arena_ind)
{
	int saved = errno;
	uintptr_t p;
	bool zeroed;

	(void)hooks;
	/* Refuse retained growth (see the top of this file): jemalloc then
	 * asks again for exactly the size it needs. */
	if (new_addr == NULL && !*commit) {
		hz_jemalloc_stat_add(growth_refused, 1);
		return NULL;
	}
	if (hz_extents_alloc(arena_ind, (uintptr_t)new_addr, size, alignment, *zero,
			     &p, &zeroed) != 0) {
		hz_jemalloc_stat_add(alloc_failed, 1);
		errno = saved;
		return NULL;
	}
	hz_jemalloc_stat_add(extents, 1);
	hz_jemalloc_stat_add(extent_bytes, size);
	*zero = zeroed;
	*commit = true;
	errno = saved;
	return (void *)p;
}

static bool hook_dalloc(extent_hooks_t *hooks, void *addr, size_t size,
			bool committed, unsigned arena_ind)
{
	int saved = errno;
	bool opt_out;

	(void)hooks, (void)committed, (void)arena_ind;
	/* Not ours: let jemalloc retain it (what its default hook does). */
	opt_out = hz_extents_free((uintptr_t)addr, size, false) != 0;
	if (!opt_out)
		hz_jemalloc_stat_add(returned_bytes, size);
	errno = saved;
	return opt_out;
}

static void hook_destroy(extent_hooks_t *hooks, void *addr, size_t size,
			 bool committed, unsigned arena_ind)
{
	int saved = errno;

	(void)hooks, (void)committed, (void)arena_ind;
	/* Not ours and not in the reservation: jemalloc's own mmap, which its
	 * default hook unmaps. */
	if (hz_extents_free((uintptr_t)addr, size, true) == 0)
		hz_jemalloc_stat_add(returned_bytes, size);
	else if (!hz_blocks_owns(addr))
		hz_prim_munmap(addr, size);
	errno = saved;
}

/* Our regions are always mapped read-write: committing is a no-op, and a
 * range we decommitted already reads zero, as jemalloc expects of a fresh
 * commit. Foreign ranges: opt out, as jemalloc's default hooks do where the
 * kernel overcommits. */
static bool hook_commit(extent_hooks_t *hooks, void *addr, size_t size,
			size_t offset, size_t length, unsigned arena_ind)
{
	int saved = errno;
	enum hz_backing b;
	bool opt_out;

	(void)hooks, (void)size, (void)arena_ind;
	opt_out = hz_extents_find((uintptr_t)addr + offset, length, &b) != 0;
	errno = saved;
	return opt_out;
}

/* Decommit and the two purges differ only in what they do to a range of
 * ours (purge it, or free it lazily) and to a foreign one (jemalloc's
 * default madvise, or an opt-out). */
enum purge_kind {
	/* Make it read zero and give back what can be given back; the
	 * mapping stays. jemalloc then treats the range as zero and
	 * uncommitted. Foreign ranges: opt out. */
	PURGE_DECOMMIT,
	/* Success means "it reads zero now": jemalloc will skip zeroing it.
	 * Foreign: jemalloc's default, as private anonymous memory reads
	 * zero after MADV_DONTNEED. */
	PURGE_FORCED,
	/* MADV_FREE the whole pages inside (hz_pages_free_lazily); an opt-out
	 * when there are none. Foreign: jemalloc's default, MADV_FREE. */
	PURGE_LAZY,
};

/* Returns the hooks' answer: false when done, true to opt out. */
static bool purge(uintptr_t at, size_t length, enum purge_kind kind)
{
	int saved = errno;
	enum hz_backing b;
	int ret = hz_extents_find(at, length, &b);
	bool opt_out = true;

	if (ret == 0) {
		hz_extents_purged(at, length);
		if (kind == PURGE_LAZY) {
			opt_out = hz_pages_free_lazily(b, at, length) != 0;
		} else {
			hz_pages_purge(b, at, length);
			opt_out = false;
		}
		if (!opt_out)
			hz_jemalloc_stat_add(purged_bytes, length);
	} else if (ret == -ENOENT && kind != PURGE_DECOMMIT) {
		opt_out = hz_prim_madvise((void *)at, length,
					  kind == PURGE_FORCED ? MADV_DONTNEED : MADV_FREE) != 0;
	}
	errno = saved;
	return opt_out;
}

static bool hook_decommit(extent_hooks_t *hooks, void *addr, size_t size,
			  size_t offset, size_t length, unsigned arena_ind)
{
	(void)hooks, (void)size, (void)arena_ind;
	return purge((uintptr_t)addr + offset, length, PURGE_DECOMMIT);
}

static bool hook_purge_lazy(extent_hooks_t *hooks, void *addr, size_t size,
			    size_t offset, size_t length, unsigned arena_ind)
{
	(void)hooks, (void)size, (void)arena_ind;
	return purge((uintptr_t)addr + offset, length, PURGE_LAZY);
}

static bool hook_purge_forced(extent_hooks_t *hooks, void *addr, size_t size,
			      size_t offset, size_t length, unsigned arena_ind)
{
	(void)hooks, (void)size, (void)arena_ind;
	return purge((uintptr_t)addr + offset, length, PURGE_FORCED);
}

/* Splitting is bookkeeping only (pages are tracked one by one), so it
 * succeeds for any range inside a region, hugetlb included: no range is
 * ever unmapped in part. */
static bool hook_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a,
		       size_t size_b, bool committed, unsigned arena_ind)
{
	int saved = errno;
	enum hz_backing b;
	bool opt_out;

	(void)hooks, (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
	opt_out = hz_extents_find((uintptr_t)addr, size, &b) == -EINVAL;
	errno = saved;
	return opt_out;
}

/* Merging within one region is bookkeeping too; across regions it is
 * refused, so every extent stays inside one region's backing. */
static bool hook_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a,
		       void *addr_b, size_t size_b, bool committed, unsigned arena_ind)
{
	int saved = errno;
	bool opt_out;

	(void)hooks, (void)committed, (void)arena_ind;
	opt_out = hz_extents_mergeable((uintptr_t)addr_a, size_a, (uintptr_t)addr_b,
				       size_b) == -EXDEV;
	errno = saved;
	return opt_out;
}

extent_hooks_t hz_jemalloc_hooks_table = {
	.alloc = hook_alloc,
	.dalloc = hook_dalloc,
	.destroy = hook_destroy,
	.commit = hook_commit,
	.decommit = hook_decommit,
	.purge_lazy = hook_purge_lazy,
	.purge_forced = hook_purge_forced,
	.split = hook_split,
	.merge = hook_merge,
};
