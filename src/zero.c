/* See zero.h. */
#include "zero.h"

#include <errno.h>
#include <sys/mman.h>

#include "../include/hugezero.h"
#include "clear/policy.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "range.h"
#include "sizes.h"
#include "stats.h"

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

/* A block about to be used (a calloc, or a span the thread clears for the
 * calloc that comes next: hint set) that fits in half of the last-level
 * cache is cleared with cached stores: the program's first
 * writes then hit the cache instead of fetching lines non-temporal stores
 * sent to memory. Measured with calloc + write-all + free cycles
 * (bench/RESULTS.md): with 300 MiB of L3, 64 MiB (0.2 of it) 4.7-6.8x
 * glibc with cached stores against 3.8-4.4x with non-temporal ones, and
 * 256 MiB (0.85) the other way round (2.0-2.4x against 3.2-3.5x); with 8
 * MiB of L3, 4 MiB (0.5) 0.29-0.33 ms a cycle cached against 0.49-0.56
 * non-temporal, 6 MiB (0.75) even, 8 MiB (1.0) 2.2-2.5 against 1.3-1.4. */
bool hz_zero_fits_cache(size_t len)
{
	static uint64_t llc = UINT64_MAX;
	uint64_t v = __atomic_load_n(&llc, __ATOMIC_RELAXED);

	if (v == UINT64_MAX) {
		v = hz_prim_llc_size();
		__atomic_store_n(&llc, v, __ATOMIC_RELAXED);
	}
	return len <= v / 2;
}

static bool use_cached_stores(size_t len, uintptr_t hint)
{
	return hint != 0 && hz_zero_fits_cache(len);
}

/* ---- one residency pass per block ----
 *
 * hz_zero_choose reads the residency of the range, and the hz_zero_with
 * that follows on the same range in the same thread (the recycler's
 * pattern) acts on those runs instead of asking the kernel again: the
 * pass costs as much as the drop of a sparse block. They are kept only
 * while nothing can have written the range: until the next hz_zero_*
 * call of the thread, and only while no block was handed out anywhere
 * since (hz_zero_handed_out; the range is free, so only a hand-out, then
 * a write, could make them stale). Many runs (more than fit) are not kept. */
#define KEPT_RUNS 32

struct kept_run {
	struct hz_range run;
	enum hz_prim_res res;
};

struct kept {
	bool valid, exact;
	unsigned count;
	uint64_t epoch;
	struct hz_range range;
	struct kept_run runs[KEPT_RUNS];
};

static __thread struct kept kept;
static uint64_t handouts;
static void (*on_hole)(uintptr_t start, size_t len);

void hz_zero_handed_out(void)
{
	__atomic_add_fetch(&handouts, 1, __ATOMIC_RELEASE);
}

static uint64_t handouts_now(void)
{
	return __atomic_load_n(&handouts, __ATOMIC_ACQUIRE);
}

void hz_zero_on_hole(void (*mark)(uintptr_t start, size_t len))
{
	__atomic_store_n(&on_hole, mark, __ATOMIC_RELEASE);
}

/* What the last user left: its resident bytes, and the bytes of the
 * 2 MiB ranges holding them (what huge pages would make resident). */
struct use {
	size_t resident, huge;
	uintptr_t huge_end; /* the end of the last 2 MiB range counted */
};

static void count_use(struct use *u, struct hz_range run)
{
	uintptr_t from = hz_align_down(run.start, HZ_SZ_2M), to = hz_align_up(run.end, HZ_SZ_2M);

	u->resident += hz_range_len(run);
	if (from < u->huge_end)
		from = u->huge_end; /* the runs come in address order */
	if (to > from)
		u->huge += to - from;
	if (to > u->huge_end)
		u->huge_end = to;
}

static void keep_run(void *ctx, struct hz_range run, enum hz_prim_res res)
{
	if (res == HZ_RES_DATA)
		count_use(ctx, run);
	if (kept.count < KEPT_RUNS)
		kept.runs[kept.count] = (struct kept_run){ run, res };
	else
		kept.valid = false;
	kept.count++;
}

/* The runs of [start, start + len): the kept ones when they are of this
 * range and still true, else a new pass. Either way none are kept after. */
static int residency(uintptr_t start, size_t len, hz_prim_page_fn *fn, void *ctx,
		     bool *exact)
{
	struct hz_range r = hz_range_make(start, len);
	bool mine = kept.valid && kept.range.start == r.start && kept.range.end == r.end &&
		    kept.epoch == handouts_now();

	kept.valid = false;
	if (!mine)
		return hz_prim_residency_scan(start, len, fn, ctx, exact);
	for (unsigned i = 0; i < kept.count; i++)
		fn(ctx, kept.runs[i].run, kept.runs[i].res);
	*exact = kept.exact;
	return 0;
}

/* ---- zeroing the runs ---- */

struct walk {
	uintptr_t reached;   /* the end of the last run passed */
	uintptr_t hint;
	bool cached;         /* clear with cached stores (use_cached_stores) */
	bool may_swap;
	bool drop;           /* drop resident runs instead of clearing them */
	bool exact;          /* the runs without data hold none, swap or not */
	struct hz_range hot; /* the resident run holding the hint, done last */
	size_t written, dropped, zero_page;
};

static void clear_run(const struct walk *w, struct hz_range run, uintptr_t hint)
{
	if (w->cached)
		hz_clear_cached((void *)run.start, hz_range_len(run));
	else
		hz_clear((void *)run.start, hz_range_len(run), (const void *)hint);
}

static bool drop_run(struct walk *w, struct hz_range run)
{
	if (hz_prim_madvise((void *)run.start, hz_range_len(run), MADV_DONTNEED) != 0)
		return false;
	w->dropped += hz_range_len(run);
	return true;
}

/* A sparse range's resident runs shorter than this are cleared, not
 * dropped. Measured on the 8 MiB-L3 AMD EPYC VM (bench/RESULTS.md, "Sparse
 * blocks: short runs are cleared, not dropped"), per run of 4, 16, 64 and
 * 256 KiB: MADV_DONTNEED took 1.6, 2.9, 6.5 and 18 us, the program's write
 * after it (faults) 2.3, 6.8, 24 and 95 us, a clear with cached stores
 * 0.14, 0.46, 1.8 and 7.2 us. A
 * 64 MiB calloc + write-first-byte + free cycle took 0.68x the time.
 * Longer runs may be 2 MiB pages, whose drop is one page-table entry and
 * whose clear is 2 MiB of stores: they are still dropped. */
#define DROP_RUN_MIN ((size_t)256 << 10)

/* For each run of the residency pass. */
static void finish_run(void *ctx, struct hz_range run, enum hz_prim_res res)
{
	struct walk *w = ctx;

	w->reached = run.end;
	if (res == HZ_RES_ZERO_PAGE) { /* only read: reads zero already */
		w->zero_page += hz_range_len(run);
		return;
	}
	if (res == HZ_RES_NONE) {
		/* A page swapped out may hold data (mincore cannot tell):
		 * drop it, or (the drop refused, as for mlocked memory)
		 * clear it. */
		if (w->exact || !w->may_swap || drop_run(w, run))
			return;
		clear_run(w, run, 0);
		w->written += hz_range_len(run);
		return;
	}
	if (w->drop && hz_range_len(run) >= DROP_RUN_MIN) {
		if (drop_run(w, run))
			return;
	} else if (hz_range_contains(run, w->hint)) {
		w->hot = run;
		return;
	}
	clear_run(w, run, 0);
	w->written += hz_range_len(run);
}

/* Pages whose residency mincore could not tell count as resident (see
 * hz_prim_residency_scan). -ENOMEM: the range has a hole
 * (hz_prim_all_mapped confirms it; when it finds none, residency is
 * unknown: all used). A clean pass is kept for hz_zero_with. */
static int last_use(uintptr_t start, size_t len, struct use *u)
{
	bool exact;
	int ret;

	*u = (struct use){ .resident = 0 };
	kept = (struct kept){ .valid = true, .epoch = handouts_now(),
			      .range = hz_range_make(start, len) };
	ret = hz_prim_residency_scan(start, len, keep_run, u, &exact);
	kept.exact = exact;
	if (ret != 0)
		kept.valid = false;
	if (ret != -ENOMEM)
		return 0;
	if (!hz_prim_all_mapped(start, len))
		return -ENOMEM;
	*u = (struct use){ .resident = len, .huge = len };
	return 0;
}

/* mincore failed with ENOMEM at w->reached, after hz_zero_choose found the
 * range mapped: a hole made since, or a failure that was not one (fault
 * injection). It is asked again: when the rest is all mapped, it is
 * cleared whole (its residency is unknown, and it is known to be there).
 * When not, nothing more is written, and the range is reported (on_hole:
 * the blocks mark it foreign), so the recycler, which reads the mark after
 * zeroing, never hands it out. */
static void finish_after_failed_probe(struct walk *w, uintptr_t end)
{
	struct hz_range rest = { w->reached, end };

	if (hz_range_empty(rest))
		return;
	if (!hz_prim_all_mapped(rest.start, hz_range_len(rest))) {
		void (*mark)(uintptr_t, size_t) = __atomic_load_n(&on_hole, __ATOMIC_ACQUIRE);

		if (mark)
			mark(rest.start, hz_range_len(rest));
		return;
	}
	clear_run(w, rest, hz_range_contains(rest, w->hint) ? w->hint : 0);
	w->written += hz_range_len(rest);
}

/* Clear (or drop) the resident runs, the one holding the hint last. */
static size_t zero_resident_runs(uintptr_t start, size_t len, uintptr_t hint,
				 bool may_swap, bool drop)
{
	struct walk w = { .reached = start, .hint = hint,
			  .cached = use_cached_stores(len, hint),
			  .may_swap = may_swap, .drop = drop };

	if (residency(start, len, finish_run, &w, &w.exact) == -ENOMEM)
		finish_after_failed_probe(&w, start + len);
	if (!hz_range_empty(w.hot)) {
		clear_run(&w, w.hot, hint);
		w.written += hz_range_len(w.hot);
	}
	hz_stats_add(zeroed_bytes, w.written);
	hz_stats_add(dropped_bytes, w.dropped);
	hz_stats_add(zero_page_bytes, w.zero_page);
	return w.written;
}

/* Sparse use, which is dropped: under 1/HZ_SPARSE_DIV (sizes.h) of the
 * pages resident.
 * A dropped page the next user writes again costs a fault, a cleared one a
 * store: per 256 KiB run the drop and the faults after it took 113 us and
 * the clear 7.2 us on the 8 MiB-L3 AMD EPYC VM (DROP_RUN_MIN), and on the
 * Zen 5 VM a 4 KiB fault runs at 0.42 GB/s against 30 GB/s for clearing.
 * So the drop pays only for pages the next user leaves alone, and a block
 * used under 1/16 is one whose next use likely leaves most of them. With
 * half (the rule before), the 2000 x 5-25 MiB mixed workload, whose blocks
 * are written 10-100% from their start, dropped 300 MiB that the next
 * users faulted back in 4 KiB pages: 140k faults, 2.3-2.6 s against
 * 1.7-1.8 (bench/RESULTS.md, "dense reuse earns THP"). */

/* Dense use, which earns huge pages (prezero_share.c): the 2 MiB ranges
 * holding the resident pages are at most twice their bytes, so that huge
 * pages there (khugepaged collapses a range with a single page in it)
 * cost at most twice the RSS the user made. A block written from its start
 * (a buffer filled in part) is dense; one with pages scattered over it is
 * not, unless half of it or more is resident. */
static bool dense(const struct use *u)
{
	return u->huge <= 2 * u->resident;
}

/* A sparse range's next user is unlikely to touch its pages either: the
 * zeroing is left to the kernel, on demand. */
int hz_zero_choose(uintptr_t start, size_t len, enum hz_zero_how how,
		   enum hz_zero_method *method)
{
	struct use u;

	/* mincore tells a hole (ENOMEM) even where it cannot be trusted to
	 * tell residency (emulators), and it costs a few microseconds per
	 * 64 MiB: asked for every range, before anything is written. */
	if (last_use(start, len, &u) != 0)
		return -EFAULT;
	*method = HZ_ZERO_CLEAR;
	if (how != HZ_ZERO_ANY || !hz_zero_residency_trusted())
		return 0;
	if (u.resident < len / HZ_SPARSE_DIV)
		*method = HZ_ZERO_DROP;
	else if (!dense(&u))
		*method = HZ_ZERO_CLEAR_PART;
	return 0;
}

size_t hz_zero_with(uintptr_t start, size_t len, uintptr_t hint,
		    enum hz_zero_method method, enum hz_zero_how how)
{
	if (!hz_zero_residency_trusted()) {
		kept.valid = false;
		if (use_cached_stores(len, hint))
			hz_clear_cached((void *)start, len);
		else
			hz_clear((void *)start, len, (const void *)hint);
		hz_stats_add(zeroed_bytes, len);
		return len;
	}
	/* Dropping only the resident runs spares the kernel a walk over page
	 * tables that are mostly empty; with swap the whole range goes, as
	 * pages that look untouched may be swapped out. */
	if (method == HZ_ZERO_DROP && how == HZ_ZERO_ANY) {
		if (!swap_possible())
			return zero_resident_runs(start, len, hint, false, true);
		if (hz_prim_madvise((void *)start, len, MADV_DONTNEED) == 0) {
			kept.valid = false;
			hz_stats_add(dropped_bytes, len);
			return 0;
		}
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
