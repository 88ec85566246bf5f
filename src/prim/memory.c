/* Memory operations with a meaning. See memory.h. */
#include "memory.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "fault.h"
#include "prim.h"
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
/* 4096 pages (16 MiB) per mincore call: a 4 KiB vector on the stack. */
#define VEC_PAGES 4096
#define VEC_BYTES (VEC_PAGES * HZ_SZ_4K)

static uint64_t holes_taken;

/* ---- map aligned ---- */

static int trim(uintptr_t from, uintptr_t to)
{
	return from < to ? hz_prim_munmap((void *)from, to - from) : 0;
}

int hz_prim_map_aligned(size_t len, size_t align, uintptr_t congruent, int prot,
			int flags, enum hz_trim how, void **out)
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

/* ---- reservations ---- */

int hz_prim_reserve(size_t len, size_t align, void **out)
{
	return hz_prim_map_aligned(len, align, 0, PROT_NONE, ANON | MAP_NORESERVE,
				   HZ_TRIM_BEST_EFFORT, out);
}

int hz_prim_decommit(uintptr_t start, size_t len)
{
	void *addr;

	return hz_prim_mmap((void *)start, len, PROT_NONE, ANON | MAP_FIXED | MAP_NORESERVE,
			    -1, 0, &addr);
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

/* Reserve [start, start + len) only if nothing is mapped in it. */
static int reserve_noreplace(uintptr_t start, size_t len)
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
		int ret = reserve_noreplace(at, n);

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
	ret = reserve_noreplace(start, len);
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
	if (reserve_noreplace(start, len) != -EEXIST || hz_prim_all_mapped(start, len) ||
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

int hz_prim_residency(uintptr_t start, size_t len, hz_prim_run_fn *fn, void *ctx)
{
	unsigned char vec[VEC_PAGES];
	struct hz_range run = { start, start };
	bool resident = false;
	int err = 0;

	for (uintptr_t at = start; at < start + len; at += VEC_BYTES) {
		size_t n = start + len - at < VEC_BYTES ? start + len - at : VEC_BYTES;
		int ret = hz_prim_mincore((void *)at, n, vec);

		if (ret == -ENOMEM) {
			/* A hole: the runs up to it end here, and nothing of
			 * it or after it is reported as ours to write. */
			len = at - start;
			err = ret;
			break;
		}
		if (ret != 0) {
			memset(vec, 1, n / HZ_SZ_4K); /* unknown counts as used */
			err = err ? err : ret;
		}
		for (size_t i = 0; i < n / HZ_SZ_4K; i++) {
			bool r = vec[i] & 1;

			if (r == resident)
				continue;
			run.end = at + i * HZ_SZ_4K;
			if (!hz_range_empty(run))
				fn(ctx, run, resident);
			run.start = run.end;
			resident = r;
		}
	}
	run.end = start + len;
	if (!hz_range_empty(run))
		fn(ctx, run, resident);
	return err;
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

int hz_prim_probe_discard(struct hz_prim_discard *out)
{
	int found = __atomic_load_n(&discard_probe, __ATOMIC_RELAXED);

	if (found == 0) {
		/* Racing first callers probe twice; they find the same. */
		found = probe_discard();
		if (found == 0)
			return -ENOMEM;
		__atomic_store_n(&discard_probe, found, __ATOMIC_RELAXED);
	}
	out->mincore_works = found & MINCORE_WORKS;
	out->dontneed_zeroes = found & DONTNEED_ZEROES;
	return 0;
}
