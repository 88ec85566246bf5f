/* The program's own MADV_HUGEPAGE on a block (src/blocks_foreign.c,
 * hz_blocks_advise_huge). numpy advises every array of 4 MiB or more from
 * the first page boundary past its pointer to its last byte. On a
 * hugezero block that starts lazy (4 KiB pages, no advice), that range
 * leaves the block's first and last 2 MiB outside one advised mapping, so
 * they faulted 4 KiB pages, and split the block in three mappings. The
 * preload now advises the whole block first: one mapping, advised from
 * the block's start. Advice on the middle of a block, or on its head
 * only, is the program's alone. Skipped, with the reason, where THP is not in "madvise" mode
 * (under "always" no block starts lazy) or the test runs emulated. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sys/mman.h>

#include "util.h"

#define ARRAY 23995904u /* the bytes of a numpy array of 3 M doubles, 24 MB */
#define PAGE 4096u

struct vma {
	uintptr_t lo, hi;
	bool huge; /* VmFlags hg: MADV_HUGEPAGE */
};

/* The mapping holding a, from /proc/self/smaps. */
static struct vma vma_of(uintptr_t a)
{
	struct vma v = { 0, 0, false };
	char line[512];
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = lo <= a && a < hi;
			if (in)
				v.lo = lo, v.hi = hi;
		} else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			v.huge = strstr(line, " hg") != NULL;
		}
	}
	fclose(f);
	return v;
}

static void need_lazy_blocks(void)
{
	if (getenv("HZ_UNDER_EMULATOR") || !hz_test_thp_mode_is("[madvise]")) {
		print_message("[  SKIP    ] THP is not in \"madvise\" mode here, or the test runs "
			      "under an emulator\n");
		skip();
	}
}

/* A block of len bytes not advised at its start: the test's premise. */
static char *lazy_block(size_t len)
{
	char *p = malloc(len);

	assert_non_null(p);
	assert_int_equal((uintptr_t)p % (2 * MiB), 0); /* a hugezero block */
	assert_false(vma_of((uintptr_t)p).huge);
	return p;
}

/* As numpy advises an array: from the page after its pointer (numpy's
 * 4096 - p % 4096 is a whole page when p is aligned) to its end. */
static void advise_as_numpy(char *p, size_t len)
{
	assert_int_equal(madvise(p + PAGE, len - PAGE, MADV_HUGEPAGE), 0);
}

static void numpys_advice_covers_the_whole_block(void **state)
{
	char *p;
	struct vma v;

	(void)state;
	need_lazy_blocks();
	p = lazy_block(ARRAY);
	advise_as_numpy(p, ARRAY);
	v = vma_of((uintptr_t)p);
	print_message("mapping %#lx-%#lx (block %p, %u bytes asked), hg %d\n",
		      (unsigned long)v.lo, (unsigned long)v.hi, (void *)p, ARRAY, v.huge);
	/* One advised mapping from the block's start over all it asked for,
	 * so its first and last 2 MiB can be huge pages too. */
	assert_true(v.huge);
	assert_true(v.lo <= (uintptr_t)p);
	assert_true(v.hi >= (uintptr_t)p + ARRAY);
	memset(p, 7, ARRAY);
	assert_int_equal(hz_test_first_nonzero(p, PAGE), 0);
	free(p);
}

static void advice_on_the_middle_is_the_programs_alone(void **state)
{
	char *p;

	(void)state;
	need_lazy_blocks();
	p = lazy_block(12 * MiB);
	assert_int_equal(madvise(p + 4 * MiB, 4 * MiB, MADV_HUGEPAGE), 0);
	assert_false(vma_of((uintptr_t)p).huge);
	assert_true(vma_of((uintptr_t)p + 4 * MiB).huge);
	assert_false(vma_of((uintptr_t)p + 8 * MiB).huge);
	free(p);
}

/* One page advised at the head of a block written sparsely: the whole
 * block on THP would cost a huge page at every write. */
static void advice_on_the_head_is_the_programs_alone(void **state)
{
	char *p;

	(void)state;
	need_lazy_blocks();
	p = lazy_block(12 * MiB);
	assert_int_equal(madvise(p + PAGE, PAGE, MADV_HUGEPAGE), 0);
	assert_true(vma_of((uintptr_t)p + PAGE).huge);
	assert_false(vma_of((uintptr_t)p + 4 * MiB).huge);
	assert_false(vma_of((uintptr_t)p).huge);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(advice_on_the_middle_is_the_programs_alone),
		cmocka_unit_test(advice_on_the_head_is_the_programs_alone),
		cmocka_unit_test(numpys_advice_covers_the_whole_block),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
