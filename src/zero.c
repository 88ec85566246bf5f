/* See zero.h. */
#include "zero.h"

#include <errno.h>
#include <sys/mman.h>

#include "../include/hugezero.h"
#include "blocks.h"
#include "clear/policy.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "range.h"
#include "sizes.h"

/* A probe that could not map its scratch pages (RLIMIT_AS or
 * vm.max_map_count reached) answers "untrusted" this time and is asked
 * again next time, rather than distrusting mincore for the rest of the
 * process. */
bool hz_zero_residency_trusted(void)
{
	struct hz_prim_discard d;

	return hz_prim_probe_discard(&d) == 0 && d.mincore_works && d.dontneed_zeroes;
}

/* With swap, a page that is not resident may still hold data. Checked at
 * most once a second: swapon is rare, and sysinfo on every free is not. */
static bool swap_possible(void)
{
	static uint64_t checked_at;
	static int present = 1;
	uint64_t now = hz_prim_now_ns(), ram, swap;

	if (now - __atomic_load_n(&checked_at, __ATOMIC_RELAXED) > HZ_NS_PER_SEC ||
	    __atomic_load_n(&checked_at, __ATOMIC_RELAXED) == 0) {
		__atomic_store_n(&present, hz_prim_memory(&ram, &swap) != 0 || swap > 0,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&checked_at, now, __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&present, __ATOMIC_RELAXED);
}

/* A block about to be used (a calloc, hint set) that fits in a quarter of
 * the last-level cache is cleared with cached stores: the program's first
 * writes then hit the cache instead of fetching lines non-temporal stores
 * sent to memory. Measured on a CPU with 300 MiB of L3 (bench/RESULTS.md,
 * hugezero bench): 64 MiB calloc + write-all cycles 4.7-6.8x glibc with
 * cached stores against 3.8-4.4x with non-temporal ones; at 256 MiB it is
 * the other way round (2.0-2.4x against 3.2-3.5x). On a 32 MiB-L3 CPU the
 * rule keeps non-temporal stores for everything above 8 MiB. */
static bool use_cached_stores(size_t len, uintptr_t hint)
{
	static uint64_t llc = UINT64_MAX;
	uint64_t v = __atomic_load_n(&llc, __ATOMIC_RELAXED);

	if (hint == 0)
		return false;
	if (v == UINT64_MAX) {
		v = hz_prim_llc_size();
		__atomic_store_n(&llc, v, __ATOMIC_RELAXED);
	}
	return len <= v / 4;
}

struct walk {
	uintptr_t reached;   /* the end of the last run passed */
	uintptr_t hint;
	bool cached;         /* clear with cached stores (use_cached_stores) */
	bool may_swap;
	bool drop;           /* drop resident runs instead of clearing them */
	struct hz_range hot; /* the resident run holding the hint, done last */
	size_t written;
};

static void clear_run(const struct walk *w, struct hz_range run, uintptr_t hint)
{
	if (w->cached)
		hz_clear_cached((void *)run.start, hz_range_len(run));
	else
		hz_clear((void *)run.start, hz_range_len(run), (const void *)hint);
}

/* For each run of hz_prim_residency. */
static void finish_run(void *ctx, struct hz_range run, bool resident)
{
	struct walk *w = ctx;

	w->reached = run.end;
	if (!resident) {
		/* A page swapped out may hold data: drop it, or (the drop
		 * refused, as for mlocked memory) clear it. */
		if (!w->may_swap ||
		    hz_prim_madvise((void *)run.start, hz_range_len(run), MADV_DONTNEED) == 0)
			return;
		clear_run(w, run, 0);
		w->written += hz_range_len(run);
		return;
	}
	if (w->drop) {
		if (hz_prim_madvise((void *)run.start, hz_range_len(run), MADV_DONTNEED) == 0)
			return;
	} else if (hz_range_contains(run, w->hint)) {
		w->hot = run;
		return;
	}
	clear_run(w, run, 0);
	w->written += hz_range_len(run);
}

static void count_resident(void *ctx, struct hz_range run, bool resident)
{
	if (resident)
		*(size_t *)ctx += hz_range_len(run);
}

/* Pages whose residency mincore could not tell count as resident (see
 * hz_prim_residency). -ENOMEM: the range has a hole (hz_prim_all_mapped
 * confirms it; when it finds none, residency is unknown: all used). */
static int resident_bytes(uintptr_t start, size_t len, size_t *bytes)
{
	*bytes = 0;
	if (hz_prim_residency(start, len, count_resident, bytes) != -ENOMEM)
		return 0;
	if (!hz_prim_all_mapped(start, len))
		return -ENOMEM;
	*bytes = len;
	return 0;
}

/* mincore failed with ENOMEM at w->reached, after hz_zero_choose found the
 * range mapped: a hole made since, or a failure that was not one (fault
 * injection). It is asked again: when the rest is all mapped, it is
 * cleared whole (its residency is unknown, and it is known to be there).
 * When not, nothing more is written, and the range is marked foreign, so
 * the recycler, which reads the mark after zeroing, never hands it out. */
static void finish_after_failed_probe(struct walk *w, uintptr_t end)
{
	struct hz_range rest = { w->reached, end };

	if (hz_range_empty(rest))
		return;
	if (!hz_prim_all_mapped(rest.start, hz_range_len(rest))) {
		hz_blocks_mark_foreign(rest.start, hz_range_len(rest));
		return;
	}
	clear_run(w, rest, hz_range_contains(rest, w->hint) ? w->hint : 0);
	w->written += hz_range_len(rest);
}

/* Clear (or drop) the resident runs, the one holding the hint last. */
static size_t zero_resident_runs(uintptr_t start, size_t len, uintptr_t hint,
				 bool may_swap, bool drop)
{
	struct walk w = { start, hint, use_cached_stores(len, hint), may_swap, drop, { 0, 0 }, 0 };

	if (hz_prim_residency(start, len, finish_run, &w) == -ENOMEM)
		finish_after_failed_probe(&w, start + len);
	if (!hz_range_empty(w.hot)) {
		clear_run(&w, w.hot, hint);
		w.written += hz_range_len(w.hot);
	}
	return w.written;
}

/* Below half resident, the next user is unlikely to touch the pages
 * either: leave the zeroing to the kernel, on demand. */
int hz_zero_choose(uintptr_t start, size_t len, enum hz_zero_how how,
		   enum hz_zero_method *method)
{
	size_t resident;

	/* mincore tells a hole (ENOMEM) even where it cannot be trusted to
	 * tell residency (emulators), and it costs a few microseconds per
	 * 64 MiB: asked for every range, before anything is written. */
	if (resident_bytes(start, len, &resident) != 0)
		return -EFAULT;
	*method = how == HZ_ZERO_ANY && hz_zero_residency_trusted() && resident < len / 2
			  ? HZ_ZERO_DROP
			  : HZ_ZERO_CLEAR;
	return 0;
}

size_t hz_zero_with(uintptr_t start, size_t len, uintptr_t hint,
		    enum hz_zero_method method, enum hz_zero_how how)
{
	if (!hz_zero_residency_trusted()) {
		if (use_cached_stores(len, hint))
			hz_clear_cached((void *)start, len);
		else
			hz_clear((void *)start, len, (const void *)hint);
		return len;
	}
	/* Dropping only the resident runs spares the kernel a walk over page
	 * tables that are mostly empty; with swap the whole range goes, as
	 * pages that look untouched may be swapped out. */
	if (method == HZ_ZERO_DROP && how == HZ_ZERO_ANY) {
		if (!swap_possible())
			return zero_resident_runs(start, len, hint, false, true);
		if (hz_prim_madvise((void *)start, len, MADV_DONTNEED) == 0)
			return 0;
	}
	return zero_resident_runs(start, len, hint, how == HZ_ZERO_ANY && swap_possible(),
				  false);
}

size_t hz_zero_range(uintptr_t start, size_t len, uintptr_t hint,
		     enum hz_zero_how how)
{
	enum hz_zero_method m;

	if (hz_zero_choose(start, len, how, &m) != 0)
		return 0;
	return hz_zero_with(start, len, hint, m, how);
}
