/* HUGEZERO_ZERO_ON_FREE for the jemalloc extent hooks, called directly as
 * jemalloc calls them (on a made-up arena index): an extent that held a
 * secret reads zero as soon as dalloc returns, although it stays mapped in
 * hugezero's region, and no copy is left in the process
 * (HZ_EXPECT_SECRET=gone). Without the option the same reads find the
 * secret (HZ_EXPECT_SECRET=kept), so the check can fail. Reading freed
 * extents is the point of the test; it goes through /proc/self/mem. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <cmocka.h>

#include <hugezero/jemalloc.h>

#include "secret.h"
#include "../util.h"

#define ARENA 4001

static bool expect_gone;

static void *extent_alloc(size_t size)
{
	extent_hooks_t *h = hz_jemalloc_hooks();
	bool zero = false, commit = true;
	void *p = h->alloc(h, NULL, size, 4 * KiB, &zero, &commit, ARENA);

	assert_non_null(p);
	return p;
}

static void extent_free(void *p, size_t size)
{
	extent_hooks_t *h = hz_jemalloc_hooks();

	assert_false(h->dalloc(h, p, size, true, ARENA));
}

static void check_freed(uintptr_t start, size_t len, const char *what)
{
	struct found f = { 0, 0, 0 };

	secret_scan(start, len, &f);
	assert_int_equal(f.unreadable, 0); /* still mapped in the region */
	if (expect_gone && f.nonzero)
		fail_msg("%s: %zu non-zero bytes right after dalloc", what, f.nonzero);
	if (!expect_gone && f.secrets == 0)
		fail_msg("%s: secret not seen after dalloc: the scan is blind", what);
}

static void freed_extents_hold_no_secret_only_with_zero_on_free(void **state)
{
	static const size_t sizes[] = { 4 * KiB, 2 * MiB, 2 * MiB + 512 * KiB, 8 * MiB,
					64 * MiB };
	char what[64];

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *p = extent_alloc(sizes[i]);

		secret_fill(p, sizes[i], 8);
		extent_free(p, sizes[i]);
		snprintf(what, sizeof(what), "%zu-byte extent", sizes[i]);
		check_freed((uintptr_t)p, sizes[i], what);
	}
}

/* jemalloc splits extents and frees the parts separately: only the freed
 * part is scrubbed, the live one keeps its data. */
static void freed_part_of_split_extent_is_scrubbed_alone(void **state)
{
	extent_hooks_t *h = hz_jemalloc_hooks();
	char *p = extent_alloc(8 * MiB);
	struct found live = { 0, 0, 0 };

	(void)state;
	secret_fill(p, 8 * MiB, 8);
	assert_false(h->split(h, p, 8 * MiB, 3 * MiB, 5 * MiB, true, ARENA));
	extent_free(p + 3 * MiB, 5 * MiB);
	check_freed((uintptr_t)p + 3 * MiB, 5 * MiB, "freed part of a split extent");
	secret_scan((uintptr_t)p, 3 * MiB, &live);
	assert_int_equal(live.secrets, 3 * MiB / 8);
	extent_free(p, 3 * MiB);
	check_freed((uintptr_t)p, 3 * MiB, "other part of a split extent");
}

/* destroy is how jemalloc hands back retained extents when an arena is
 * destroyed: a free too. The region stays mapped while another extent of
 * the arena lives in it (allocated together, they share one). */
static void destroyed_extent_holds_no_secret_only_with_zero_on_free(void **state)
{
	extent_hooks_t *h = hz_jemalloc_hooks();
	char *p = extent_alloc(4 * MiB), *neighbour = extent_alloc(2 * MiB);

	(void)state;
	secret_fill(p, 4 * MiB, 8);
	h->destroy(h, p, 4 * MiB, true, ARENA);
	check_freed((uintptr_t)p, 4 * MiB, "destroyed extent");
	extent_free(neighbour, 2 * MiB);
}

static void process_holds_secret_only_without_zero_on_free(void **state)
{
	size_t scanned, found;

	(void)state;
	found = secret_scan_process(&scanned);
	print_message("scanned %zu MiB of anonymous memory: %zu secret words\n",
		      scanned >> 20, found);
	assert_true(scanned > 0);
	if (expect_gone)
		assert_int_equal(found, 0);
	else
		assert_true(found > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(freed_extents_hold_no_secret_only_with_zero_on_free),
		cmocka_unit_test(freed_part_of_split_extent_is_scrubbed_alone),
		cmocka_unit_test(destroyed_extent_holds_no_secret_only_with_zero_on_free),
		cmocka_unit_test(process_holds_secret_only_without_zero_on_free),
	};
	const char *expect = getenv("HZ_EXPECT_SECRET");

	if (expect == NULL || (strcmp(expect, "gone") && strcmp(expect, "kept"))) {
		fprintf(stderr, "HZ_EXPECT_SECRET must be gone or kept\n");
		return 1;
	}
	expect_gone = strcmp(expect, "gone") == 0;
	secret_init();
	/* An arena that holds nothing gives its regions back at once; this
	 * extent keeps them mapped, so freed extents can be read. */
	extent_alloc(2 * MiB);
	if (mem_fd < 0) {
		fprintf(stderr, "cannot open /proc/self/mem: %s\n", strerror(errno));
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
