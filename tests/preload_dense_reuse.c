/* Dense reuse earns huge pages (src/prezero_share.c, src/backing.c). Under
 * the preload, with THP in "madvise" mode, a fresh 32 MiB block is lazy:
 * 4 KiB pages at first touch, collapsed only after
 * HUGEZERO_COLLAPSE_DELAY_MS (10 s). Each user here writes its first half,
 * so the block is used densely; once it is reused, what its next user
 * writes beyond that half must fault in huge pages at once, or the next
 * fresh block of the size must get them at first touch. Before, a lazy
 * block stayed on 4 KiB pages until the collapse, and on a VM where a
 * 4 KiB fault costs 10 us that made every reuse pay for it (bench/RESULTS.md,
 * "dense reuse earns THP"). A block too large to keep on trial (over
 * 64 MiB) goes back at its free, but how it was used still counts: the
 * next fresh block of its size gets huge pages at first touch after a
 * dense use, 4 KiB pages after a sparse one (src/recycle.c,
 * note_use_of_released). The meson test sets HUGEZERO_THP_CHECK=0, so
 * that a fresh huge page need not fault faster than 4 KiB pages here, and
 * MALLOC_PERTURB_=0 (meson sets it otherwise): a perturbed free writes
 * the whole block, which then reads as used densely.
 * Skipped, with the reason, where THP is not in "madvise" mode or the
 * test runs emulated. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <malloc.h>
#include <sys/mman.h>

#include "util.h"

#define BLOCK (32 * MiB)
#define ROUNDS 8 /* the first frees teach the cache that the size is reused */

/* The compiler must not drop a write to memory that is freed next. */
static void written(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void need_lazy_thp(void)
{
	if (getenv("HZ_UNDER_EMULATOR") || !hz_test_thp_mode_is("[madvise]")) {
		print_message("[  SKIP    ] THP is not in \"madvise\" mode here, or the test runs "
			      "under an emulator\n");
		skip();
	}
}

static void reused_half_written_block_gets_huge_pages(void **state)
{
	unsigned char *p;
	uint64_t huge;

	(void)state;
	need_lazy_thp();
	for (int i = 0; i < ROUNDS; i++) {
		p = calloc(1, BLOCK);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % (2 * MiB), 0); /* a hugezero block */
		memset(p, i + 1, BLOCK / 2);
		written(p);
		free(p);
	}
	p = calloc(1, BLOCK);
	assert_non_null(p);
	/* Written, not read first: a read would map the zero page there. */
	memset(p, 0x5a, BLOCK);
	written(p);
	huge = hz_test_smaps_sum((uintptr_t)p, (uintptr_t)p + BLOCK, "AnonHugePages:");
	print_message("AnonHugePages in the block: %llu MiB of %zu\n",
		      (unsigned long long)(huge >> 20), BLOCK >> 20);
	/* One huge page at least: memory too fragmented for more is not the
	 * recycler's doing. The lazy block of before had none for 10 s. */
	assert_true(huge >= 2 * MiB);
	free(p);
}

/* Whether the mapping holding p is advised for THP (smaps' VmFlags "hg"):
 * the backing gave it huge pages at first touch; a lazy block has no
 * advice. */
static bool advised_thp(uintptr_t p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	unsigned long a, b;
	bool in = false;
	int advised = -1;

	assert_non_null(f);
	while (advised < 0 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = a <= p && p < b;
		else if (in && strncmp(line, "VmFlags:", 8) == 0)
			advised = strstr(line, " hg") != NULL;
	}
	fclose(f);
	assert_true(advised >= 0);
	return advised == 1;
}

/* A block of len bytes written every stride bytes (4096: densely), freed,
 * then the next fresh one: whether the backing gave it huge pages. */
static bool next_fresh_after_release_is_thp(size_t len, size_t stride)
{
	unsigned char *p;
	bool thp;

	/* No cached span from the cases before may serve either block (a
	 * merge of kept THP blocks): the first must be fresh and lazy. */
	malloc_trim(0);
	p = malloc(len);
	assert_non_null(p);
	assert_false(advised_thp((uintptr_t)p));
	for (size_t off = 0; off < len; off += stride)
		p[off] = 1;
	written(p);
	free(p); /* over 64 MiB, of a size not seen before: released */
	p = malloc(len);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % (2 * MiB), 0);
	thp = advised_thp((uintptr_t)p);
	print_message("next fresh %zu MiB block after one written every %zu KiB: %s\n",
		      len >> 20, stride >> 10, thp ? "THP" : "4 KiB pages");
	free(p);
	return thp;
}

static void released_dense_block_gives_the_next_fresh_one_huge_pages(void **state)
{
	(void)state;
	need_lazy_thp();
	assert_true(next_fresh_after_release_is_thp(128 * MiB, 4096));
}

static void released_sparse_block_leaves_the_next_fresh_one_on_small_pages(void **state)
{
	(void)state;
	need_lazy_thp();
	assert_false(next_fresh_after_release_is_thp(256 * MiB, 4 * MiB));
}

/* count mmaps of len (aligned by the preload), each written every stride
 * bytes before the next is made: how many of the later ones are advised
 * THP at map time. The size is the test's own (no earlier case made its
 * class's evidence). */
static int mmaps_advised_at_map(size_t len, size_t stride, int count)
{
	char *p[16];
	int advised = 0;

	assert_true(count <= 16);
	for (int i = 0; i < count; i++) {
		p[i] = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(p[i] != MAP_FAILED);
		assert_int_equal((uintptr_t)p[i] % (2 * MiB), 0);
		advised += i > 0 && advised_thp((uintptr_t)p[i]);
		for (size_t off = 0; off < len; off += stride)
			p[i][off] = 1;
	}
	for (int i = 0; i < count; i++)
		munmap(p[i], len);
	print_message("%d of %d mmaps of %zu MiB after ones written every %zu KiB: THP at map\n",
		      advised, count - 1, len >> 20, stride >> 10);
	return advised;
}

/* cc1's GC pages: mmaps of one size, each written through before the
 * next. All are advised but the first and the samples (left on 4 KiB pages
 * to show their use): the 3rd, then the 7th (src/classes.h); after
 * sparse ones none is. */
static void densely_used_mmaps_give_the_next_of_their_size_huge_pages(void **state)
{
	(void)state;
	need_lazy_thp();
	assert_int_equal(mmaps_advised_at_map(6 * MiB, 4096, 9), 6);
}

static void sparsely_used_mmaps_leave_the_next_on_small_pages(void **state)
{
	(void)state;
	need_lazy_thp();
	assert_int_equal(mmaps_advised_at_map(12 * MiB, 1 * MiB, 9), 0);
}

/* A class of 2 MiB mmaps written whole, then one page each: the mmaps
 * trusted on the dense evidence stop at the next sample, judged sparse,
 * within the 64 MiB a wrong guess may cost (HZ_GUESS_MAX). A 2 MiB range
 * touched in part once read as "not yet", and the class kept its huge
 * pages for good. */
static void mmaps_that_turn_sparse_lose_their_huge_pages_at_the_next_sample(void **state)
{
	enum { DENSE = 30, SPARSE = 40, LAST = 8 };
	char *p[DENSE + SPARSE];
	int advised_dense = 0, advised_sparse = 0, advised_last = 0;

	(void)state;
	need_lazy_thp();
	for (int i = 0; i < DENSE + SPARSE; i++) {
		bool thp;

		p[i] = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
		assert_true(p[i] != MAP_FAILED);
		thp = advised_thp((uintptr_t)p[i]);
		if (i < DENSE) {
			memset(p[i], 1, 2 * MiB);
			advised_dense += thp;
		} else {
			p[i][4096] = 1;
			advised_sparse += thp;
			advised_last += thp && i >= DENSE + SPARSE - LAST;
		}
	}
	for (int i = 0; i < DENSE + SPARSE; i++)
		munmap(p[i], 2 * MiB);
	print_message("2 MiB mmaps advised at map: %d of %d written whole, then %d of %d "
		      "written one page each, %d of the last %d\n", advised_dense, DENSE,
		      advised_sparse, SPARSE, advised_last, LAST);
	assert_true(advised_dense >= DENSE - 4); /* the first and 3 samples */
	assert_true(advised_sparse * 2 * MiB <= 64 * MiB);
	assert_int_equal(advised_last, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reused_half_written_block_gets_huge_pages),
		cmocka_unit_test(released_dense_block_gives_the_next_fresh_one_huge_pages),
		cmocka_unit_test(released_sparse_block_leaves_the_next_fresh_one_on_small_pages),
		cmocka_unit_test(densely_used_mmaps_give_the_next_of_their_size_huge_pages),
		cmocka_unit_test(sparsely_used_mmaps_leave_the_next_on_small_pages),
		cmocka_unit_test(mmaps_that_turn_sparse_lose_their_huge_pages_at_the_next_sample),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
