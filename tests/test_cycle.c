/* How a size class's callocs follow its frees (src/cycle.h), on a clock of
 * the test's own: which frees leave the thread asleep, and which blocks it
 * clears in the cache; then a calloc cycle through the recycler, which must
 * hand out only zeroed memory and come to have the thread clear its block
 * in the cache. */
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "../src/check.h" /* not tests/check.h, the CHECK macro */
#include "classes.h"
#include "cycle.h"
#include "prezero.h"
#include "recycle.h"
#include "stats.h"
#include "zero.h"

#define MiB ((size_t)1 << 20)
#define MS 1000000ull
#define SIZE (64 * MiB)
#define FREED 0x40000000 /* the start of SIZE's blocks freed here */

static uint64_t clock_ns = 1000 * MS;

/* The cycle of bytes' class: its row of the ledger. */
static struct hz_class_cycle *row(size_t bytes)
{
	return &hz_class_of(bytes)->cycle;
}

/* A calloc of SIZE, after_us after the last free returned, served by
 * the kept span at start (0: a fresh block). */
static void calloc_served(unsigned after_us, uintptr_t start)
{
	clock_ns += after_us * 1000ull;
	hz_cycle_calloc(row(SIZE), clock_ns, start, after_us * 1000ull);
}

/* A free of SIZE's block at FREED, after the program's 1 ms write: what
 * the cycle makes of it. */
static enum hz_cycle_free free_now(void)
{
	clock_ns += MS;
	return hz_cycle_freed(row(SIZE), FREED, clock_ns, false);
}

static int reset(void **state)
{
	(void)state;
	hz_classes_test_reset();
	return 0;
}

static void callocs_right_after_their_frees_leave_the_thread_asleep(void **state)
{
	(void)state;
	for (int i = 0; i < HZ_CYCLE_RUN; i++) {
		assert_int_equal(free_now(), HZ_CYCLE_KEEP);
		calloc_served(3, FREED);
	}
	/* HZ_CYCLE_RUN callocs came right after their frees: the next free
	 * lets the thread sleep, in their class only. Its calloc comes 100
	 * us later, when the thread could have cleared 2 MiB. */
	assert_int_equal(hz_cycle_freed(row(8 * MiB), 0x50000000, clock_ns, false), HZ_CYCLE_KEEP);
	assert_int_equal(free_now(), HZ_CYCLE_AT_ONCE);
	calloc_served(100, FREED);
	for (int i = 0; i < HZ_CYCLE_RUN; i++) {
		assert_int_equal(free_now(), HZ_CYCLE_KEEP);
		calloc_served(19, FREED);
	}
	assert_int_equal(free_now(), HZ_CYCLE_AT_ONCE);
	calloc_served(19, FREED);
	/* A calloc with no free of its class since the last one. */
	calloc_served(1, FREED);
	assert_int_equal(free_now(), HZ_CYCLE_KEEP);
	/* The program's rhythm, whatever the class's. */
	assert_int_equal(hz_cycle_freed(row(SIZE), FREED, clock_ns, true), HZ_CYCLE_AT_ONCE);
}

/* HZ_CYCLE_RUN frees, each followed 500 us later by a calloc served by
 * the span at start. */
static void cycles_taking(uintptr_t start)
{
	for (int i = 0; i < HZ_CYCLE_RUN; i++) {
		assert_int_equal(free_now(), HZ_CYCLE_KEEP); /* late: the thread is woken */
		calloc_served(500, start);
	}
}

/* Callocs that take the block their class freed last (whether the thread
 * cleared it, was clearing it or had not begun) make its next blocks
 * cleared in the cache; a span freed earlier (as when many blocks are
 * freed in turn, where clearing in the cache would fill it for nothing),
 * or a fresh block, breaks the run. */
static void callocs_of_the_block_freed_last_have_it_cleared_in_the_cache(void **state)
{
	(void)state;
	cycles_taking(0x48000000);
	assert_false(hz_classes_clear_in_cache(SIZE));
	cycles_taking(FREED);
	assert_true(hz_classes_clear_in_cache(SIZE));
	assert_true(hz_classes_clear_in_cache(SIZE + MiB)); /* its class */
	assert_false(hz_classes_clear_in_cache(8 * MiB));
	free_now();
	calloc_served(500, 0x48000000);
	assert_false(hz_classes_clear_in_cache(SIZE));
	cycles_taking(FREED);
	assert_true(hz_classes_clear_in_cache(SIZE));
	calloc_served(500, 0);
	assert_false(hz_classes_clear_in_cache(SIZE));
}

static uint64_t cleared_in_cache(void)
{
	return __atomic_load_n(&hz_stats.cleared_in_cache, __ATOMIC_RELAXED);
}

/* calloc, write all, free, then 2 ms of other work, as a program's loop
 * whose calloc comes late: every block the recycler hands out reads zero,
 * and within 2048 cycles the thread clears the block in the cache for the
 * next calloc. Skipped where the block would not fit in half the
 * last-level cache. */
static void late_calloc_cycle_reads_zero_and_is_cleared_in_the_cache(void **state)
{
	static const char zero[4096];
	const struct timespec work = { .tv_nsec = 2 * 1000 * 1000 };
	uint64_t before = cleared_in_cache();
	size_t len = 4 * MiB;
	int i;

	(void)state;
	if (hz_prezero_mode() != HZ_PREZERO_OPT_THREAD) {
		print_message("[  SKIP    ] HUGEZERO_PREZERO is not thread (or a memory cgroup "
			      "limit made it sync): no thread clears anything\n");
		skip();
	}
	if (!hz_zero_fits_cache(len)) {
		print_message("[  SKIP    ] the last-level cache is unknown or under 8 MiB: no "
			      "clear is in the cache\n");
		skip();
	}
	hz_recycle_drain();
	for (i = 0; i < 2048 && cleared_in_cache() == before; i++) {
		char *p;

		assert_int_equal(hz_recycle_alloc(len, 0, true, (void **)&p), 0);
		for (size_t off = 0; off < len; off += sizeof zero)
			assert_int_equal(memcmp(p + off, zero, sizeof zero), 0);
		memset(p, i + 1, len);
		hz_recycle_free(p);
		nanosleep(&work, NULL);
	}
	print_message("# after %d cycles: %.1f MiB cleared in the cache\n", i,
		      (double)(cleared_in_cache() - before) / (double)MiB);
	assert_true(cleared_in_cache() > before);
	hz_recycle_drain();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(callocs_right_after_their_frees_leave_the_thread_asleep,
				       reset),
		cmocka_unit_test_setup(callocs_of_the_block_freed_last_have_it_cleared_in_the_cache,
				       reset),
		cmocka_unit_test_setup(late_calloc_cycle_reads_zero_and_is_cleared_in_the_cache,
				       reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
