/* The two-block rotation (src/rotation.h): the trial's rules and the
 * callocs that come right after their frees, on a clock of the test's
 * own, then a tight calloc cycle through the recycler, which must hand out
 * only zeroed memory and come to run on two blocks. */
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../src/check.h" /* not tests/check.h, the CHECK macro */
#include "classes.h"
#include "recycle.h"
#include "rotation.h"
#include "stats.h"

#define MiB ((size_t)1 << 20)
#define MS 1000000ull
#define SIZE (64 * MiB)
#define RUN 8            /* rotation.c's */
#define FIRST_RUN 32
#define FIRST_WAIT 256

static uint64_t clock_ns = 1000 * MS;

/* The rotation state of bytes' class: its row of the ledger. */
static struct hz_class_rotation *row(size_t bytes)
{
	return &hz_class_of(bytes)->rotation;
}

/* One calloc of SIZE, period ms after the last, served so, with the
 * pre-zero thread running: whether it is to map the spare instead. */
static bool calloc_after(unsigned period_ms, enum hz_rotation_served how)
{
	clock_ns += period_ms * MS;
	return hz_rotation_calloc(row(SIZE), clock_ns, how, 0, period_ms * MS, true);
}

/* A free of SIZE's last block, now: what the rotation makes of it. */
static enum hz_rotation_free free_now(void)
{
	return hz_rotation_freed(row(SIZE), 0x40000000, clock_ns, false);
}

/* Callocs that cleared, 5 ms apart, as many as a trial waits for (the
 * class's first, or a later one), and the next, which maps the spare. */
static void start_trial(bool first)
{
	for (int i = 0; i < (first ? FIRST_RUN : RUN); i++)
		assert_false(calloc_after(5, HZ_ROT_CLEARS));
	assert_true(calloc_after(5, HZ_ROT_CLEARS)); /* the spare itself */
	calloc_after(40, HZ_ROT_CLEAN); /* holds the spare's faults: not sampled */
}

/* Every class as at start, and SIZE's first calloc seen: a first calloc
 * has no period. */
static int reset(void **state)
{
	(void)state;
	hz_classes_test_reset();
	calloc_after(5, HZ_ROT_OTHER);
	return 0;
}

static void a_faster_cycle_keeps_the_spare_until_the_recheck(void **state)
{
	uint64_t trials = hz_stats.rotation_trials, lost = hz_stats.rotation_lost;

	(void)state;
	start_trial(true);
	for (int i = 0; i < RUN; i++)
		calloc_after(4, HZ_ROT_CLEAN); /* 0.8 of 5 ms */
	assert_int_equal(hz_stats.rotation_trials, trials + 1);
	assert_int_equal(hz_stats.rotation_lost, lost);
	for (int i = 0; i < FIRST_WAIT - 1; i++) {
		assert_int_equal(free_now(), HZ_ROT_FREE_KEEP);
		calloc_after(4, HZ_ROT_CLEAN);
	}
	/* The recheck: the spare goes at the next free, once. */
	calloc_after(4, HZ_ROT_CLEAN);
	assert_int_equal(free_now(), HZ_ROT_FREE_DROP);
	assert_int_equal(free_now(), HZ_ROT_FREE_KEEP);
	/* A new trial follows the next run of RUN at once. */
	start_trial(false);
	assert_int_equal(hz_stats.rotation_trials, trials + 2);
}

static void a_cycle_no_faster_gives_the_spare_back_and_waits(void **state)
{
	uint64_t lost = hz_stats.rotation_lost;

	(void)state;
	start_trial(true);
	for (int i = 0; i < RUN; i++)
		calloc_after(i % 2 ? 5 : 4, HZ_ROT_CLEAN); /* median 5: not 5% faster */
	assert_int_equal(hz_stats.rotation_lost, lost + 1);
	assert_int_equal(free_now(), HZ_ROT_FREE_DROP);
	assert_int_equal(free_now(), HZ_ROT_FREE_KEEP);
	/* The next trial waits FIRST_WAIT callocs, however long the run. */
	for (int i = 0; i < FIRST_WAIT; i++)
		assert_false(calloc_after(5, HZ_ROT_CLEARS));
	assert_true(calloc_after(5, HZ_ROT_CLEARS));
}

static void a_broken_run_and_other_classes_start_no_trial(void **state)
{
	uint64_t trials = hz_stats.rotation_trials;

	(void)state;
	for (int i = 0; i < 3 * FIRST_RUN; i++)
		assert_false(calloc_after(5, i % FIRST_RUN == FIRST_RUN - 1 ? HZ_ROT_OTHER
									     : HZ_ROT_CLEARS));
	for (int i = 0; i < FIRST_RUN; i++)
		assert_false(calloc_after(5, HZ_ROT_CLEARS));
	/* A class of its own: 8 MiB's has seen nothing. */
	assert_false(hz_rotation_calloc(row(8 * MiB), clock_ns, HZ_ROT_CLEARS, 0, UINT64_MAX, true));
	/* Without the thread nobody would clear the span left behind. */
	clock_ns += 5 * MS;
	assert_false(hz_rotation_calloc(row(SIZE), clock_ns, HZ_ROT_CLEARS, 0, UINT64_MAX, false));
	/* Nor is a spare offered to a calloc that did not clear, however
	 * ripe its class; it breaks the run. */
	assert_false(calloc_after(5, HZ_ROT_CLEAN));
	assert_int_equal(hz_stats.rotation_trials, trials);
	for (int i = 0; i < FIRST_RUN; i++)
		assert_false(calloc_after(5, HZ_ROT_CLEARS));
	assert_true(calloc_after(5, HZ_ROT_CLEARS));
	assert_int_equal(hz_stats.rotation_trials, trials + 1);
}

static void a_dirty_span_clears_when_it_is_the_block_freed_last(void **state)
{
	(void)state;
	for (int i = 0; i < FIRST_RUN; i++)
		assert_false(calloc_after(5, HZ_ROT_CLEARS));
	assert_int_equal(free_now(), HZ_ROT_FREE_KEEP); /* watching: nothing to give back */
	/* Another block's dirty span (many blocks freed in turn, which a
	 * spare does not help), and one in a class that freed nothing: no
	 * spare, and SIZE's run is broken. */
	assert_false(hz_rotation_calloc(row(8 * MiB), clock_ns, HZ_ROT_DIRTY, 0x40000000,
					UINT64_MAX, true));
	clock_ns += 5 * MS;
	assert_false(hz_rotation_calloc(row(SIZE), clock_ns, HZ_ROT_DIRTY, 0x48000000, UINT64_MAX,
					true));
	for (int i = 0; i < FIRST_RUN; i++)
		assert_false(calloc_after(5, HZ_ROT_CLEARS));
	/* The block freed last, asked for in its class by another size. */
	assert_int_equal(free_now(), HZ_ROT_FREE_KEEP);
	clock_ns += 5 * MS;
	assert_true(hz_rotation_calloc(row(SIZE + MiB), clock_ns, HZ_ROT_DIRTY, 0x40000000,
				       UINT64_MAX, true));
}

/* A free of SIZE, then its class's calloc after_us later: what the
 * rotation made of the free. */
static enum hz_rotation_free free_then_calloc(unsigned after_us)
{
	enum hz_rotation_free verdict;

	clock_ns += 1000 * 1000ull; /* the program's write: 1 ms */
	verdict = free_now();
	clock_ns += after_us * 1000ull;
	assert_false(hz_rotation_calloc(row(SIZE), clock_ns, HZ_ROT_CLEARS, 0, after_us * 1000ull,
					true));
	return verdict;
}

static void callocs_right_after_their_frees_leave_the_thread_asleep(void **state)
{
	(void)state;
	for (int i = 0; i < RUN; i++)
		assert_int_equal(free_then_calloc(3), HZ_ROT_FREE_KEEP);
	/* RUN callocs came right after their frees: the next free lets the
	 * thread sleep, in their class only. Its calloc comes 100 us later,
	 * when the thread could have cleared 2 MiB. */
	assert_int_equal(hz_rotation_freed(row(8 * MiB), 0x50000000, clock_ns, false),
			 HZ_ROT_FREE_KEEP);
	assert_int_equal(free_then_calloc(100), HZ_ROT_FREE_AT_ONCE);
	for (int i = 0; i < RUN; i++)
		assert_int_equal(free_then_calloc(19), HZ_ROT_FREE_KEEP);
	assert_int_equal(free_then_calloc(19), HZ_ROT_FREE_AT_ONCE);
	/* A calloc with no free of its class since the last one. */
	calloc_after(1, HZ_ROT_CLEARS);
	assert_int_equal(free_now(), HZ_ROT_FREE_KEEP);
}

static void a_class_trying_a_spare_wakes_the_thread(void **state)
{
	(void)state;
	start_trial(true);
	/* The spare's cycle: the thread clears the block freed while the
	 * program writes the other, however soon the next calloc comes. */
	for (int i = 0; i < 2 * RUN; i++)
		assert_int_equal(free_then_calloc(3), HZ_ROT_FREE_KEEP);
}

/* calloc, write all, free, as a program's tight loop: every block the
 * recycler hands out reads zero, the spare's and the one the thread
 * cleared beside the program's writes, and the loop comes to run on two
 * blocks: through a trial, or without one when the cycle found a second
 * block by itself (a calloc that found the guard held by a preempted
 * thread takes a fresh block), which CI's load makes common. Two blocks
 * show as callocs that no longer clear: under half the bytes of the last
 * 16 cycles. Up to 512 cycles. */
#define WINDOW 16

static void tight_calloc_cycle_reads_zero_and_comes_to_two_blocks(void **state)
{
	static const char zero[4096];
	size_t len = 8 * MiB;
	uint64_t trials = hz_stats.rotation_trials, cleared[WINDOW] = { 0 };
	int i;

	(void)state;
	hz_recycle_drain();
	for (i = 0; i < 512; i++) {
		char *p;

		cleared[i % WINDOW] = hz_stats.cleared_bytes;
		assert_int_equal(hz_recycle_alloc(len, 0, true, (void **)&p), 0);
		for (size_t off = 0; off < len; off += sizeof zero)
			assert_int_equal(memcmp(p + off, zero, sizeof zero), 0);
		memset(p, i + 1, len);
		hz_recycle_free(p);
		if (hz_stats.rotation_trials > trials)
			break;
		/* cleared[(i + 1) % WINDOW] is the count WINDOW cycles ago */
		if (i >= 64 && hz_stats.cleared_bytes - cleared[(i + 1) % WINDOW] < WINDOW * len / 2)
			break;
	}
	print_message("# after %d cycles: %llu spares tried; the last %d callocs cleared %.1f MiB\n",
		      i + 1, (unsigned long long)(hz_stats.rotation_trials - trials), WINDOW,
		      (double)(hz_stats.cleared_bytes - cleared[(i + 1) % WINDOW]) / (double)MiB);
	assert_true(i < 512);
	hz_recycle_drain();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(a_faster_cycle_keeps_the_spare_until_the_recheck, reset),
		cmocka_unit_test_setup(a_cycle_no_faster_gives_the_spare_back_and_waits, reset),
		cmocka_unit_test_setup(a_broken_run_and_other_classes_start_no_trial, reset),
		cmocka_unit_test_setup(a_dirty_span_clears_when_it_is_the_block_freed_last, reset),
		cmocka_unit_test_setup(callocs_right_after_their_frees_leave_the_thread_asleep,
				       reset),
		cmocka_unit_test_setup(a_class_trying_a_spare_wakes_the_thread, reset),
		cmocka_unit_test_setup(tight_calloc_cycle_reads_zero_and_comes_to_two_blocks, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
