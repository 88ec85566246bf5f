/* Memory operations with a meaning. See memory.h. */
#include "memory.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "fault.h"
#include "pagemap.h"
#include "prim.h"
#include "../cpu/relax.h"
#include "../sizes.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17 */
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)
/* Holes are refilled 2 MiB at a time, then 4 KiB at a time inside a piece
 * that holds another mapping. */
#define HOLE_STEP HZ_SZ_2M
/* 512 pages (2 MiB) per mincore call: a 512-byte vector on the stack,
 * which may be a signal handler's small one. Blocks up to 1 GiB take one
 * call (big_vec, below) unless another thread has that vector. */
#define VEC_PAGES 512
#define VEC_BYTES (VEC_PAGES * HZ_SZ_4K)

static uint64_t holes_taken;

/* ---- map aligned ---- */

static int trim(uintptr_t from, uintptr_t to)
{
	return from < to ? hz_prim_munmap((void *)from, to - from) : 0;
}

/* hz_prim_map_aligned, also telling where the kernel put the over-map. */
static int map_aligned(size_t len, size_t align, uintptr_t congruent, int prot, int flags,
		       enum hz_trim how, void **out, uintptr_t *picked)
{
	uintptr_t raw, at, end;
	void *mem;
	int ret;

	if (len > SIZE_MAX - align)
		return -ENOMEM;
	ret = hz_prim_mmap(NULL, len + align, prot, flags, -1, 0, &mem);
	if (ret != 0)
		return ret;
	raw = (uintptr_t)mem;
	*picked = raw;
	end = raw + len + align;
	at = raw + ((congruent - raw) & (align - 1));
	/* A whole mapping unmaps without a split, so giving all of it back
	 * cannot fail the way the trim did. */
	ret = trim(raw, at);
	if (ret != 0 && how == HZ_TRIM_OR_FAIL) {
		hz_prim_munmap(mem, len + align);
		return ret;
	}
	ret = trim(at + len, end);
	if (ret != 0 && how == HZ_TRIM_OR_FAIL) {
		hz_prim_munmap((void *)at, end - at);
		return ret;
	}
	*out = (void *)at;
	return 0;
}

int hz_prim_map_aligned(size_t len, size_t align, uintptr_t congruent, int prot,
			int flags, enum hz_trim how, void **out)
{
	uintptr_t picked;

	return map_aligned(len, align, congruent, prot, flags, how, out, &picked);
}

/* ---- reservations ---- */

int hz_prim_reserve_picked(size_t len, size_t align, void **out, uintptr_t *picked)
{
	return map_aligned(len, align, 0, PROT_NONE, ANON | MAP_NORESERVE, HZ_TRIM_BEST_EFFORT,
			   out, picked);
}

int hz_prim_reserve(size_t len, size_t align, void **out)
{
	uintptr_t picked;

	return hz_prim_reserve_picked(len, align, out, &picked);
}

int hz_prim_decommit(uintptr_t start, size_t len)
{
	void *addr;

	return hz_prim_mmap((void *)start, len, PROT_NONE, ANON | MAP_FIXED | MAP_NORESERVE,
			    -1, 0, &addr);
}

int hz_prim_refresh(uintptr_t start, size_t len)
{
	void *addr;

	return hz_prim_mmap((void *)start, len, PROT_READ | PROT_WRITE, ANON | MAP_FIXED, -1, 0,
			    &addr);
}

int hz_prim_reset_reservation(uintptr_t start, size_t len)
{
	int ret;

	hz_prim_munlock((void *)start, len);
	ret = hz_prim_decommit(start, len);
	if (ret == 0)
		hz_prim_munlock((void *)start, len);
	return ret;
}

int hz_prim_reserve_exactly(uintptr_t start, size_t len)
{
	void *addr;
	int ret = hz_prim_mmap((void *)start, len, PROT_NONE,
			       ANON | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0, &addr);

	if (ret != 0)
		return ret;
	if ((uintptr_t)addr != start) {
		/* Before Linux 4.17 the flag is unknown and the address a
		 * hint: the kernel went elsewhere because something is here. */
		hz_prim_munmap(addr, len);
		return -EEXIST;
	}
	return 0;
}

/* Reserve every hole of [start, start + len), step bytes at a time, finer
 * inside a step that holds another mapping. Returns -EEXIST when one did,
 * else the first other error, else 0. */
static int reserve_holes(uintptr_t start, size_t len, size_t step)
{
	int err = 0;

	for (uintptr_t at = start; at < start + len; at += step) {
		size_t n = start + len - at < step ? start + len - at : step;
		int ret = hz_prim_reserve_exactly(at, n);

		if (ret == -EEXIST && step > HZ_SZ_4K)
			ret = reserve_holes(at, n, HZ_SZ_4K);
		if (ret == -EEXIST || err == 0)
			err = ret;
	}
	return err;
}

static int hole_taken(void)
{
	__atomic_add_fetch(&holes_taken, 1, __ATOMIC_RELAXED);
	return -EEXIST;
}

int hz_prim_reserve_hole(uintptr_t start, size_t len)
{
	int ret;

	hz_prim_fault_before_put_back(start, len);
	ret = hz_prim_reserve_exactly(start, len);
	if (ret == -EEXIST)
		ret = reserve_holes(start, len, HOLE_STEP);
	return ret == -EEXIST ? hole_taken() : ret;
}

uint64_t hz_prim_holes_taken(void)
{
	return __atomic_load_n(&holes_taken, __ATOMIC_RELAXED);
}

/* See memory.h. (qemu-user refuses mincore on PROT_NONE pages too: there
 * a failed commit keeps its range unused, never reused.) */
bool hz_prim_all_mapped(uintptr_t start, size_t len)
{
	unsigned char vec[VEC_PAGES];

	for (uintptr_t at = start; at < start + len; at += VEC_BYTES) {
		size_t n = start + len - at < VEC_BYTES ? start + len - at : VEC_BYTES;

		/* madvise fails with ENOMEM on a hole too: asked second, so
		 * one failure that is not a hole (fault injection) does not
		 * read as one. MADV_NORMAL changes nothing on our mappings. */
		if (hz_prim_mincore((void *)at, n, vec) == -ENOMEM &&
		    hz_prim_madvise((void *)at, n, MADV_NORMAL) == -ENOMEM)
			return false;
	}
	return true;
}

/* A MAP_FIXED mmap over our reservation [start, start + len) failed. An
 * mmap that fails either kept the old mapping (Linux 6.12 and later, for
 * most failures) or unmapped all of the range first (before 6.12 always;
 * 6.18 still does for a hugetlb mapping the pool cannot back, see
 * tests/test_prim.c), and since then another thread may have mapped
 * something into the hole. So: refill
 * a hole without replacing anything; if the range is mapped through, the
 * reservation was kept; if only partly, the rest is someone else's. A
 * put-back the kernel refuses otherwise (vm.max_map_count) is ignored, as
 * it always was: the range is then taken for still reserved. */
static int put_back_after_failure(uintptr_t start, size_t len)
{
	hz_prim_fault_before_put_back(start, len);
	if (hz_prim_reserve_exactly(start, len) != -EEXIST || hz_prim_all_mapped(start, len) ||
	    reserve_holes(start, len, HOLE_STEP) != -EEXIST)
		return 0;
	return hole_taken();
}

static int map_flags(enum hz_prim_pages pages)
{
	switch (pages) {
	case HZ_PAGES_HUGETLB_1G: return MAP_HUGETLB | (30 << MAP_HUGE_SHIFT);
	case HZ_PAGES_HUGETLB_2M: return MAP_HUGETLB | (21 << MAP_HUGE_SHIFT);
	default: return 0;
	}
}

int hz_prim_commit(uintptr_t start, size_t len, enum hz_prim_pages pages, bool *advised)
{
	void *addr;
	int ret = hz_prim_mmap((void *)start, len, PROT_READ | PROT_WRITE,
			       ANON | MAP_FIXED | map_flags(pages), -1, 0, &addr);

	*advised = false;
	if (ret != 0)
		return put_back_after_failure(start, len) == -EEXIST ? -EEXIST : ret;
	if (pages == HZ_PAGES_THP)
		*advised = hz_prim_madvise((void *)start, len, MADV_HUGEPAGE) == 0;
	else if (pages == HZ_PAGES_SMALL)
		*advised = hz_prim_madvise((void *)start, len, MADV_NOHUGEPAGE) == 0;
	return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Built outside the reservation, then moved in: nothing of the range
 * changes until the memory is there, every page faulted in. */
int hz_prim_commit_populated(uintptr_t start, size_t len, enum hz_prim_pages pages)
{
	void *tmp;
	int ret;

	if (pages != HZ_PAGES_HUGETLB_1G && pages != HZ_PAGES_HUGETLB_2M)
		return -EINVAL;
	ret = hz_prim_mmap(NULL, len, PROT_READ | PROT_WRITE, ANON | map_flags(pages), -1, 0,
			   &tmp);
	if (ret != 0)
		return ret;
	/* -EINVAL before 5.14: no way to fault in without risking SIGBUS. */
	ret = hz_prim_madvise(tmp, len, MADV_POPULATE_WRITE);
	if (ret == 0)
		ret = hz_prim_move_mapping(tmp, len, (void *)start);
	if (ret == 0)
		return 0;
	hz_prim_munmap(tmp, len); /* a failed move leaves the source mapped */
	/* A move that failed after unmapping its target (the kernel
	 * unmaps first) left a hole: refill it, as after a failed commit. */
	return put_back_after_failure(start, len) == -EEXIST ? -EEXIST : ret;
}

/* ---- residency ---- */

/* Runs being built: contiguous pieces of one state join, a change of
 * state passes the run so far to fn. */
struct runs {
	struct hz_range run;
	enum hz_prim_res res;
	hz_prim_page_fn *fn;
	void *ctx;
};

static void push(struct runs *r, uintptr_t start, uintptr_t end, enum hz_prim_res res)
{
	if (start >= end)
		return;
	if (!hz_range_empty(r->run) && res != r->res) {
		r->fn(r->ctx, r->run, r->res);
		r->run.start = start;
	} else if (hz_range_empty(r->run)) {
		r->run.start = start;
	}
	r->run.end = end;
	r->res = res;
}

static void push_vec(struct runs *r, uintptr_t at, const unsigned char *vec, size_t pages)
{
	size_t i = 0;

	while (i < pages) {
		size_t j = i + 1;
		bool res = vec[i] & 1;

		while (j < pages && (bool)(vec[j] & 1) == res)
			j++;
		push(r, at + i * HZ_SZ_4K, at + j * HZ_SZ_4K, res ? HZ_RES_DATA : HZ_RES_NONE);
		i = j;
	}
}

/* One mincore call per block up to 1 GiB: the vector is in .bss (pages
 * never used never become resident), taken by one thread at a time; the
 * others, and larger blocks, ask 2 MiB at a time with a vector on the
 * stack. */
#define BIG_VEC_PAGES (HZ_SZ_1G / HZ_SZ_4K)
static unsigned char big_vec[BIG_VEC_PAGES];
static int big_vec_busy;

static int mincore_piece(struct runs *r, uintptr_t at, size_t n, unsigned char *vec, int *err)
{
	int ret = hz_prim_mincore((void *)at, n, vec);

	if (ret == -ENOMEM)
		return ret;
	if (ret != 0) {
		memset(vec, 1, n / HZ_SZ_4K); /* unknown counts as used */
		*err = *err ? *err : ret;
	}
	push_vec(r, at, vec, n / HZ_SZ_4K);
	return 0;
}

/* [start, end) with mincore. Returns where a hole stopped it (end: none). */
static uintptr_t mincore_runs(struct runs *r, uintptr_t start, uintptr_t end, int *err)
{
	unsigned char vec[VEC_PAGES];
	int idle = 0;

	if (end - start <= HZ_SZ_1G &&
	    __atomic_compare_exchange_n(&big_vec_busy, &idle, 1, false, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED)) {
		int ret = mincore_piece(r, start, end - start, big_vec, err);

		__atomic_store_n(&big_vec_busy, 0, __ATOMIC_RELEASE);
		return ret == -ENOMEM ? start : end;
	}
	for (uintptr_t at = start; at < end; at += VEC_BYTES) {
		size_t n = end - at < VEC_BYTES ? end - at : VEC_BYTES;

		if (mincore_piece(r, at, n, vec, err) == -ENOMEM)
			return at;
	}
	return end;
}

static enum hz_prim_res region_res(uint64_t categories)
{
	if (categories & HZ_PAGE_IS_SWAPPED)
		return HZ_RES_DATA; /* holds data, resident or not */
	if (!(categories & HZ_PAGE_IS_PRESENT))
		return HZ_RES_NONE;
	return categories & HZ_PAGE_IS_PFNZERO ? HZ_RES_ZERO_PAGE : HZ_RES_DATA;
}

#define SCAN_REGIONS 64

/* [*at, end) with PAGEMAP_SCAN, *at moving on. Returns 0 when done (a hole
 * at *at when *at < end), or the scan's error at *at: mincore goes on. */
static int pagemap_runs(struct runs *r, uintptr_t *at, uintptr_t end)
{
	struct hz_prim_page_region vec[SCAN_REGIONS];

	while (*at < end) {
		uintptr_t walk_end;
		int n = hz_prim_pagemap_scan(*at, end, vec, SCAN_REGIONS, &walk_end);

		if (n < 0)
			return n;
		if (n == 0)
			return 0; /* nothing mapped at *at: a hole */
		for (int i = 0; i < n; i++) {
			if (vec[i].start != *at)
				return 0; /* a hole */
			push(r, vec[i].start, vec[i].end, region_res(vec[i].categories));
			*at = vec[i].end;
		}
		if (*at < walk_end)
			return 0; /* a hole up to walk_end */
	}
	return 0;
}

int hz_prim_residency_scan(uintptr_t start, size_t len, hz_prim_page_fn *fn, void *ctx,
			   bool *exact)
{
	struct runs r = { { start, start }, HZ_RES_NONE, fn, ctx };
	uintptr_t at = start, end = start + len;
	int err = 0;

	*exact = pagemap_runs(&r, &at, end) == 0;
	if (!*exact)
		at = mincore_runs(&r, at, end, &err);
	if (!hz_range_empty(r.run))
		fn(ctx, r.run, r.res);
	/* A hole: the runs up to it were passed, nothing of it or after it
	 * is reported as ours to write. */
	return at < end ? -ENOMEM : err;
}

/* hz_prim_residency's runs: data or not, a zero-page run joining the
 * runs without data around it. */
struct bool_runs {
	struct hz_range run;
	bool resident;
	hz_prim_run_fn *fn;
	void *ctx;
};

static void as_bool(void *ctx, struct hz_range run, enum hz_prim_res res)
{
	struct bool_runs *b = ctx;
	bool resident = res == HZ_RES_DATA;

	if (!hz_range_empty(b->run) && resident != b->resident) {
		b->fn(b->ctx, b->run, b->resident);
		b->run.start = run.start;
	} else if (hz_range_empty(b->run)) {
		b->run.start = run.start;
	}
	b->run.end = run.end;
	b->resident = resident;
}

int hz_prim_residency(uintptr_t start, size_t len, hz_prim_run_fn *fn, void *ctx)
{
	struct bool_runs b = { { start, start }, false, fn, ctx };
	bool exact;
	int ret = hz_prim_residency_scan(start, len, as_bool, &b, &exact);

	if (!hz_range_empty(b.run))
		fn(ctx, b.run, b.resident);
	return ret;
}

/* ---- what discarding does ---- */

enum { PROBED = 1, MINCORE_WORKS = 2, DONTNEED_ZEROES = 4 };
static int discard_probe; /* 0 until probed */

/* Write the first page of two, then ask mincore and drop it. */
static int probe_discard(void)
{
	unsigned char vec[2] = { 0, 0 };
	volatile unsigned char *p;
	int found = PROBED;
	void *mem;

	if (hz_prim_mmap(NULL, 2 * HZ_SZ_4K, PROT_READ | PROT_WRITE, ANON, -1, 0, &mem) != 0)
		return 0;
	p = mem;
	p[0] = 0xab;
	p[HZ_SZ_4K - 1] = 0xab;
	if (hz_prim_mincore(mem, 2 * HZ_SZ_4K, vec) == 0 && (vec[0] & 1) && !(vec[1] & 1))
		found |= MINCORE_WORKS;
	if (hz_prim_madvise(mem, HZ_SZ_4K, MADV_DONTNEED) == 0 && p[0] == 0 && p[HZ_SZ_4K - 1] == 0)
		found |= DONTNEED_ZEROES;
	hz_prim_munmap(mem, 2 * HZ_SZ_4K);
	return found;
}

/* One thread probes; one that comes meanwhile waits for its answer (a
 * probe takes microseconds), at most PROBE_WAIT_NS, then probes itself (a
 * fork child whose parent was probing in another thread). Two probes at
 * once are harmless (each writes its own page), but the second can get
 * the page the first just unmapped, and ThreadSanitizer, which does not
 * see raw mmap and munmap, reports the two writes as a race. */
#define PROBE_WAIT_NS 1000000ull

static int probe_once(void)
{
	static int probing;
	uint64_t t0 = hz_prim_now_ns();
	int found;

	while (__atomic_exchange_n(&probing, 1, __ATOMIC_ACQUIRE)) {
		found = __atomic_load_n(&discard_probe, __ATOMIC_ACQUIRE);
		if (found != 0)
			return found;
		if (hz_prim_now_ns() - t0 > PROBE_WAIT_NS)
			return probe_discard();
		hz_cpu_relax();
	}
	found = __atomic_load_n(&discard_probe, __ATOMIC_ACQUIRE);
	if (found == 0) {
		found = probe_discard();
		if (found != 0)
			__atomic_store_n(&discard_probe, found, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&probing, 0, __ATOMIC_RELEASE);
	return found;
}

int hz_prim_probe_discard(struct hz_prim_discard *out)
{
	int found = __atomic_load_n(&discard_probe, __ATOMIC_ACQUIRE);

	if (found == 0) {
		found = probe_once();
		if (found == 0)
			return -ENOMEM;
	}
	out->mincore_works = found & MINCORE_WORKS;
	out->dontneed_zeroes = found & DONTNEED_ZEROES;
	return 0;
}
