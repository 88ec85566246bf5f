/* Dense reuse earns huge pages (src/prezero_share.c, src/backing.c). Under
 * the preload, with THP in "madvise" mode, a fresh 32 MiB block is lazy:
 * 4 KiB pages at first touch, collapsed only after
 * HUGEZERO_COLLAPSE_DELAY_MS (10 s). Each user here writes its first half,
 * so the block is used densely; once it is reused, what its next user
 * writes beyond that half must fault in huge pages at once, or the next
 * fresh block of the size must get them at first touch. Before, a lazy
 * block stayed on 4 KiB pages until the collapse, and on a VM where a
 * 4 KiB fault costs 10 us that made every reuse pay for it (bench/RESULTS.md,
 * "dense reuse earns THP"). Skipped, with the reason, where THP is not in
 * "madvise" mode or the test runs emulated. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util.h"

#define BLOCK (32 * MiB)
#define ROUNDS 8 /* the first frees teach the cache that the size is reused */

/* The compiler must not drop a write to memory that is freed next. */
static void written(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void reused_half_written_block_gets_huge_pages(void **state)
{
	unsigned char *p;
	uint64_t huge;

	(void)state;
	if (getenv("HZ_UNDER_EMULATOR") || !hz_test_thp_mode_is("[madvise]")) {
		print_message("skipped: THP is not in \"madvise\" mode here, or the test runs "
			      "under an emulator\n");
		skip();
	}
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reused_half_written_block_gets_huge_pages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
