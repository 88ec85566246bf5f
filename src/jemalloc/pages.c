/* See pages.h. */
#include "pages.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "prim/memory.h"
#include "prim/prim.h"
#include "range.h"
#include "sizes.h"
#include "zero.h"

enum { UNKNOWN, DROPS_ZERO, DROPS_KEEP };
static int drop_probe = UNKNOWN;

/* Does MADV_DONTNEED make a written private anonymous page read zero? A
 * probe that could not map its page answers no, for good: clearing by
 * writing is always right. */
static bool drop_zeroes(void)
{
	int v = __atomic_load_n(&drop_probe, __ATOMIC_RELAXED);
	struct hz_prim_discard d;

	if (v == UNKNOWN) {
		v = hz_prim_probe_discard(&d) == 0 && d.dontneed_zeroes ? DROPS_ZERO : DROPS_KEEP;
		__atomic_store_n(&drop_probe, v, __ATOMIC_RELAXED);
	}
	return v == DROPS_ZERO;
}

static bool is_hugetlb(enum hz_backing b)
{
	return b == HZ_BACKING_HUGETLB1G || b == HZ_BACKING_HUGETLB2M;
}

/* The range cut at huge-page boundaries: the partial head, the whole pages
 * in the middle and the partial tail (any of them may be empty). */
struct pieces {
	struct hz_range part[3];
};

static struct pieces cut(enum hz_backing b, uintptr_t start, size_t len)
{
	struct hz_range r = hz_range_make(start, len);
	size_t page = b == HZ_BACKING_SMALL ? HZ_SZ_4K : hz_backing_page(b);
	uintptr_t lo = hz_align_up(r.start, page), hi = hz_align_down(r.end, page);
	struct pieces p;

	if (lo >= hi) { /* no whole page inside: all of it is "partial" */
		p.part[0] = r;
		p.part[1] = (struct hz_range){ r.end, r.end };
		p.part[2] = (struct hz_range){ r.end, r.end };
		return p;
	}
	p.part[0] = (struct hz_range){ r.start, lo };
	p.part[1] = (struct hz_range){ lo, hi };
	p.part[2] = (struct hz_range){ hi, r.end };
	return p;
}

static void zero_piece(struct hz_range r, uintptr_t hint, enum hz_zero_how how)
{
	if (!hz_range_empty(r))
		hz_zero_range(r.start, hz_range_len(r), hint, how);
}

void hz_pages_zero(enum hz_backing b, uintptr_t start, size_t len, uintptr_t hint)
{
	struct pieces p;
	int last = -1;

	if (len == 0)
		return;
	if (is_hugetlb(b)) {
		hz_zero_range(start, len, hint, HZ_ZERO_WRITE_ONLY);
		return;
	}
	/* hz_zero_range may drop a sparsely used range with one MADV_DONTNEED.
	 * Called per piece, that never splits a huge page: a partial piece
	 * inside a mapped transparent huge page is all resident, so it is
	 * cleared, not dropped. */
	p = cut(b, start, len);
	for (int i = 0; i < 3; i++) {
		if (hz_range_empty(p.part[i]))
			continue;
		if (hz_range_contains(p.part[i], hint)) {
			last = i; /* the hint's piece goes last */
			continue;
		}
		zero_piece(p.part[i], 0, HZ_ZERO_ANY);
	}
	if (last >= 0)
		zero_piece(p.part[last], hint, HZ_ZERO_ANY);
}

void hz_pages_purge(enum hz_backing b, uintptr_t start, size_t len)
{
	struct pieces p;

	if (len == 0)
		return;
	if (is_hugetlb(b)) {
		/* Dropping would hand pages back to the pool and round up to
		 * whole huge pages: clear instead. */
		hz_zero_range(start, len, 0, HZ_ZERO_WRITE_ONLY);
		return;
	}
	p = cut(b, start, len);
	zero_piece(p.part[0], 0, HZ_ZERO_ANY);
	if (!hz_range_empty(p.part[1]) &&
	    (!drop_zeroes() ||
	     hz_prim_madvise((void *)p.part[1].start, hz_range_len(p.part[1]),
			     MADV_DONTNEED) != 0))
		zero_piece(p.part[1], 0, HZ_ZERO_ANY);
	zero_piece(p.part[2], 0, HZ_ZERO_ANY);
}

int hz_pages_free_lazily(enum hz_backing b, uintptr_t start, size_t len)
{
	struct pieces p;

	if (is_hugetlb(b))
		return -ENOTSUP; /* MADV_FREE fails on hugetlb */
	p = cut(b, start, len);
	if (hz_range_empty(p.part[1]))
		return -EINVAL;
	return hz_prim_madvise((void *)p.part[1].start, hz_range_len(p.part[1]),
			       MADV_FREE);
}

static void add_data_run(void *ctx, struct hz_range run, enum hz_prim_res res)
{
	if (res == HZ_RES_DATA)
		hz_region_runs_add(ctx, run);
}

void hz_pages_data(enum hz_backing b, uintptr_t start, size_t len, struct hz_region_runs *data)
{
	bool exact = false;

	data->count = 0;
	if (b == HZ_BACKING_THP || b == HZ_BACKING_SMALL) {
		if (hz_prim_residency_scan(start, len, add_data_run, data, &exact) == 0 && exact)
			return;
		data->count = 0;
	}
	hz_region_runs_add(data, hz_range_make(start, len));
}
