/* See zero.h. */
#include "zero.h"

#include <string.h>
#include <sys/mman.h>

#include "../include/hugezero.h"
#include "clear/policy.h"
#include "prim/prim.h"
#include "range.h"

#define PAGE ((size_t)4096)
/* 4096 pages (16 MiB) per mincore call: a 4 KiB vector on the stack. */
#define VEC_PAGES 4096

enum { UNKNOWN, TRUSTED, UNTRUSTED };
static int residency_probe = UNKNOWN;

/* Does an untouched page look non-resident, a written one resident, and
 * does MADV_DONTNEED make a written page read zero? (Under some emulators
 * it does not, as jemalloc found.) UNKNOWN when the probe could not map its
 * two pages (RLIMIT_AS or vm.max_map_count reached): asked again next time
 * rather than distrusting mincore for the rest of the process. */
static int probe_residency(void)
{
	unsigned char vec[2] = { 0, 0 };
	volatile unsigned char *p;
	void *mem;
	int ok;

	if (hz_prim_mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &mem) != 0)
		return UNKNOWN;
	p = mem;
	p[0] = 0xab;
	ok = hz_prim_mincore(mem, 2 * PAGE, vec) == 0 && (vec[0] & 1) && !(vec[1] & 1);
	ok = ok && hz_prim_madvise(mem, PAGE, MADV_DONTNEED) == 0 && p[0] == 0 &&
	     p[PAGE - 1] == 0;
	hz_prim_munmap(mem, 2 * PAGE);
	return ok ? TRUSTED : UNTRUSTED;
}

bool hz_zero_residency_trusted(void)
{
	int r = __atomic_load_n(&residency_probe, __ATOMIC_RELAXED);

	if (r == UNKNOWN) {
		r = probe_residency();
		if (r != UNKNOWN)
			__atomic_store_n(&residency_probe, r, __ATOMIC_RELAXED);
	}
	return r == TRUSTED;
}

/* With swap, a page that is not resident may still hold data. Checked at
 * most once a second: swapon is rare, and sysinfo on every free is not. */
static bool swap_possible(void)
{
	static uint64_t checked_at;
	static int present = 1;
	uint64_t now = hz_prim_now_ns(), ram, swap;

	if (now - __atomic_load_n(&checked_at, __ATOMIC_RELAXED) > 1000000000u ||
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

static void finish_run(struct walk *w, struct hz_range run, bool resident)
{
	if (hz_range_empty(run))
		return;
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

/* mincore for up to VEC_PAGES pages from at; unknown counts as written. */
static size_t residency(uintptr_t at, size_t n, unsigned char *vec)
{
	if (hz_prim_mincore((void *)at, n, vec) != 0)
		memset(vec, 1, n / PAGE);
	return n;
}

static size_t chunk_len(uintptr_t at, uintptr_t end)
{
	return end - at < VEC_PAGES * PAGE ? end - at : VEC_PAGES * PAGE;
}

static size_t resident_bytes(uintptr_t start, size_t len)
{
	unsigned char vec[VEC_PAGES];
	size_t bytes = 0;

	for (uintptr_t at = start; at < start + len; at += VEC_PAGES * PAGE) {
		size_t n = residency(at, chunk_len(at, start + len), vec);

		for (size_t i = 0; i < n / PAGE; i++)
			bytes += (vec[i] & 1) * PAGE;
	}
	return bytes;
}

/* Clear (or drop) the resident runs, the one holding the hint last. */
static size_t zero_resident_runs(uintptr_t start, size_t len, uintptr_t hint,
				 bool may_swap, bool drop)
{
	struct walk w = { hint, use_cached_stores(len, hint), may_swap, drop, { 0, 0 }, 0 };
	unsigned char vec[VEC_PAGES];
	struct hz_range run = { start, start };
	bool resident = false;

	for (uintptr_t at = start; at < start + len; at += VEC_PAGES * PAGE) {
		size_t n = residency(at, chunk_len(at, start + len), vec);

		for (size_t i = 0; i < n / PAGE; i++) {
			bool r = vec[i] & 1;

			if (r != resident) {
				run.end = at + i * PAGE;
				finish_run(&w, run, resident);
				run.start = run.end;
				resident = r;
			}
		}
	}
	run.end = start + len;
	finish_run(&w, run, resident);
	if (!hz_range_empty(w.hot)) {
		clear_run(&w, w.hot, hint);
		w.written += hz_range_len(w.hot);
	}
	return w.written;
}

/* Below half resident, the next user is unlikely to touch the pages
 * either: leave the zeroing to the kernel, on demand. */
enum hz_zero_method hz_zero_choose(uintptr_t start, size_t len, enum hz_zero_how how)
{
	if (how == HZ_ZERO_ANY && hz_zero_residency_trusted() && resident_bytes(start, len) < len / 2)
		return HZ_ZERO_DROP;
	return HZ_ZERO_CLEAR;
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
	return hz_zero_with(start, len, hint, hz_zero_choose(start, len, how), how);
}
