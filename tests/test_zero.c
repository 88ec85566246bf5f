/* hz_zero_range: a used range reads zero afterwards, and the work done is
 * only what the last user left: untouched pages are left alone and the
 * long runs of sparse use are dropped. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <cmocka.h>

#include "util.h"

#include "prim/pagemap.h"
#include "zero.h"

#define PAGE ((size_t)4096)
#define PAGES 2048 /* 8 MiB */

#define HUGE ((size_t)2 << 20)

/* 2 MiB aligned, as a hugezero block is: which 2 MiB ranges the used pages
 * fall in decides dense use (src/zero.c), and qemu-user places a mapping
 * anywhere. */
static unsigned char *map_range(void)
{
	unsigned char *m = mmap(NULL, PAGES * PAGE + HUGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *p;

	assert_true(m != MAP_FAILED);
	p = (unsigned char *)(((uintptr_t)m + HUGE - 1) & ~(HUGE - 1));
	if (p > m)
		assert_int_equal(munmap(m, (size_t)(p - m)), 0);
	assert_int_equal(munmap(p + PAGES * PAGE, (size_t)(m + HUGE - p)), 0);
	/* 4 KiB pages: each page's residency is its own. */
	assert_int_equal(madvise(p, PAGES * PAGE, MADV_NOHUGEPAGE), 0);
	return p;
}

static void assert_all_zero(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0)
			fail_msg("byte %zu reads %#x after hz_zero_range", i, p[i]);
}

/* Without a working mincore and MADV_DONTNEED (qemu-user ignores
 * MADV_DONTNEED) hz_zero_range clears whole ranges, by design. */
static void need_residency(void)
{
	if (!hz_zero_residency_trusted()) {
		print_message("[  SKIP    ] mincore/MADV_DONTNEED do not behave as on Linux "
			      "here (an emulator?), so whole ranges are cleared\n");
		skip();
	}
}

/* Three pages in four touched (dense use), each holding one non-zero byte
 * at its first, last or a middle offset: exactly the touched pages are
 * written, and the untouched ones stay untouched (they read zero). */
static void dense_use_clears_only_touched_pages(void **state)
{
	unsigned char *p;
	size_t touched = 0;
	unsigned char vec[PAGES];

	(void)state;
	need_residency();
	p = map_range();
	for (size_t i = 0; i < PAGES; i++) {
		size_t off = i % 3 == 0 ? 0 : i % 3 == 1 ? PAGE - 1 : 2049;

		if (i % 4 == 3)
			continue;
		p[i * PAGE + off] = 0xa5;
		touched++;
	}
	size_t written = hz_zero_range((uintptr_t)p, PAGES * PAGE, (uintptr_t)p,
				       HZ_ZERO_WRITE_ONLY);
	assert_int_equal(written, touched * PAGE);
	assert_int_equal(mincore(p, PAGES * PAGE, vec), 0);
	for (size_t i = 3; i < PAGES; i += 4)
		assert_false(vec[i] & 1);
	assert_all_zero(p, PAGES * PAGE);
	munmap(p, PAGES * PAGE);
}

/* Every page full of data: every page is written, the hint's page too. */
static void fully_written_range_is_cleared_whole(void **state)
{
	unsigned char *p = map_range();

	(void)state;
	memset(p, 0x5a, PAGES * PAGE);
	size_t written = hz_zero_range((uintptr_t)p, PAGES * PAGE,
				       (uintptr_t)p + 100 * PAGE + 7, HZ_ZERO_WRITE_ONLY);
	assert_all_zero(p, PAGES * PAGE);
	assert_int_equal(written, PAGES * PAGE);
	munmap(p, PAGES * PAGE);
}

static bool have_swap(void)
{
	struct sysinfo si;

	return sysinfo(&si) != 0 || si.totalswap > 0;
}

/* Write one page in every stride over the first len pages of p, from its
 * start; the rest of p is given back first. */
static void use_pages(unsigned char *p, size_t len, size_t stride)
{
	assert_int_equal(madvise(p, PAGES * PAGE, MADV_DONTNEED), 0);
	for (size_t i = 0; i < len; i += stride)
		p[i * PAGE] = 3;
}

static enum hz_zero_method method_for(unsigned char *p)
{
	enum hz_zero_method m = HZ_ZERO_DROP;

	assert_int_equal(hz_zero_choose((uintptr_t)p, PAGES * PAGE, HZ_ZERO_ANY, &m), 0);
	return m;
}

/* Under half resident but not sparse (src/zero.c, HZ_SPARSE_DIV): cleared, as
 * the next user likely writes those pages again and a drop would cost it a
 * fault per page. A quarter written from the start (a buffer filled in
 * part) is dense use, which earns huge pages; a quarter scattered over the
 * range is not (HZ_ZERO_CLEAR_PART). Either way the pages stay mapped. */
static void partial_use_is_cleared_not_dropped(void **state)
{
	unsigned char *p, vec[PAGES];
	enum hz_zero_method m;

	(void)state;
	need_residency();
	p = map_range();
	use_pages(p, PAGES / 16 - 1, 1); /* just under 1/16: sparse */
	assert_int_equal(method_for(p), HZ_ZERO_DROP);
	use_pages(p, PAGES / 4, 1);
	assert_int_equal(method_for(p), HZ_ZERO_CLEAR);
	use_pages(p, PAGES, 2); /* half, scattered */
	assert_int_equal(method_for(p), HZ_ZERO_CLEAR);
	use_pages(p, PAGES, 4);
	m = method_for(p);
	assert_int_equal(m, HZ_ZERO_CLEAR_PART);
	assert_int_equal(hz_zero_with((uintptr_t)p, PAGES * PAGE, 0, m, HZ_ZERO_ANY),
			 PAGES / 4 * PAGE);
	assert_int_equal(mincore(p, PAGES * PAGE, vec), 0);
	for (size_t i = 0; i < PAGES; i++)
		assert_int_equal(vec[i] & 1, i % 4 == 0);
	assert_all_zero(p, PAGES * PAGE);
	munmap(p, PAGES * PAGE);
}

/* Sparse use (under 1/16 of the pages resident): a run of 256 KiB is
 * dropped, not written (the kernel zeroes what is touched again); single
 * pages are cleared, which costs less than their madvise, let alone the
 * program's fault after it (src/zero.c, DROP_RUN_MIN). */
#define RUN_AT 288 /* apart from the single pages, every 64th: 95 of 2048 */
#define RUN_PAGES 64 /* 256 KiB */

static void sparse_use_drops_long_runs_and_clears_single_pages(void **state)
{
	unsigned char *p, vec[PAGES];
	size_t singles = 0;

	(void)state;
	need_residency();
	p = map_range();
	memset(p + RUN_AT * PAGE, 1, RUN_PAGES * PAGE);
	for (size_t i = 0; i < PAGES; i += 64) {
		if (i >= RUN_AT && i < RUN_AT + RUN_PAGES)
			continue;
		p[i * PAGE + 5] = 1;
		singles++;
	}
	size_t written = hz_zero_range((uintptr_t)p, PAGES * PAGE, 0, HZ_ZERO_ANY);
	/* Before the reads below map the zero page over the dropped run. */
	assert_int_equal(mincore(p, PAGES * PAGE, vec), 0);
	for (size_t i = RUN_AT; i < RUN_AT + RUN_PAGES; i++)
		assert_false(vec[i] & 1);
	/* With swap a page that looks untouched may be swapped out: the
	 * whole range is dropped, single pages too. */
	if (have_swap())
		singles = 0;
	for (size_t i = 0; i < PAGES; i += 64)
		if (i < RUN_AT || i >= RUN_AT + RUN_PAGES)
			assert_int_equal(vec[i] & 1, singles > 0);
	assert_int_equal(written, singles * PAGE);
	assert_all_zero(p, PAGES * PAGE);
	munmap(p, PAGES * PAGE);
}

/* A used range with a hole (the program unmapped a page; MADV_DONTFORK
 * leaves whole holes in a child): mincore fails with ENOMEM there, and
 * that never reads as "clear everything". hz_zero_choose refuses the
 * range, hz_zero_range writes none of it, and hz_zero_with, given a
 * method chosen before the hole appeared, stops before the hole instead of
 * faulting (PAGEMAP_SCAN: at the hole exactly; mincore, one call for the
 * whole range, fails on all of it). Every backing, trusted mincore or not. */
static void range_with_a_hole_is_never_written_through(void **state)
{
	const size_t len = 32 << 20, hole = 20 << 20;
	enum hz_zero_how hows[] = { HZ_ZERO_WRITE_ONLY, HZ_ZERO_ANY };
	enum hz_zero_method m = HZ_ZERO_CLEAR;

	(void)state;
	if (!hz_test_mincore_sees_holes()) {
		print_message("[  SKIP    ] mincore and madvise do not both fail on an "
			      "unmapped page here (qemu-user)\n");
		skip();
	}
	for (unsigned i = 0; i < 2; i++) {
		unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		assert_true(p != MAP_FAILED);
		memset(p, 0x5a, len);
		assert_int_equal(munmap(p + hole, PAGE), 0);
		assert_int_equal(hz_zero_choose((uintptr_t)p, len, hows[i], &m), -EFAULT);
		assert_int_equal(hz_zero_range((uintptr_t)p, len, (uintptr_t)p, hows[i]), 0);
		assert_int_equal(p[0], 0x5a);
		assert_int_equal(p[len - 1], 0x5a);
		/* What comes before the hole may be cleared; the rest not. */
		if (hz_zero_residency_trusted()) {
			size_t w = hz_zero_with((uintptr_t)p, len, 0, HZ_ZERO_CLEAR, hows[i]);

			assert_true(w <= hole);
			if (hz_prim_pagemap_fd() >= 0)
				assert_int_equal(w, hole);
			assert_int_equal(p[hole + PAGE], 0x5a);
			assert_int_equal(p[len - 1], 0x5a);
		}
		munmap(p, len);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dense_use_clears_only_touched_pages),
		cmocka_unit_test(fully_written_range_is_cleared_whole),
		cmocka_unit_test(partial_use_is_cleared_not_dropped),
		cmocka_unit_test(sparse_use_drops_long_runs_and_clears_single_pages),
		cmocka_unit_test(range_with_a_hole_is_never_written_through),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
