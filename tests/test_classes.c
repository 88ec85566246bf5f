/* The size-class ledger (src/classes.h) on a clock of the test's own: when
 * a class turns warm and how long its blocks stay, a miss that a block let
 * go would have served, the spare beyond a class's cycle, the page-size
 * evidence, the clean target, and the callocs that leave the thread
 * asleep. */
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "classes.h"
#include "times.h"

#define MiB ((size_t)1 << 20)
#define MS 1000000ull
#define DECAY (10000 * MS)
#define SIZE (64 * MiB)
#define PROBE_NS (1000 * MS)   /* HZ_UNREUSED_NS, times.h */
#define MIN_STAY_NS (250 * MS)
#define STAY_MULT 8

static uint64_t now_ns = 1000 * MS;

static int reset(void **state)
{
	(void)state;
	hz_classes_test_reset();
	return 0;
}

/* A free of SIZE, then its reuse after ms milliseconds. */
static void cycle(uint64_t ms)
{
	hz_class_freed(SIZE, now_ns);
	now_ns += ms * MS;
	hz_class_hit(SIZE, now_ns, now_ns - ms * MS);
}

static void a_class_without_reuse_is_a_short_probe(void **state)
{
	bool probe = false;

	(void)state;
	hz_class_freed(SIZE, now_ns);
	assert_false(hz_class_warm(SIZE));
	assert_int_equal(hz_class_stay(SIZE, DECAY, &probe), PROBE_NS);
	assert_true(probe);
	/* The probe's stay is the decay's when that is shorter. */
	assert_int_equal(hz_class_stay(SIZE, 10 * MS, &probe), 10 * MS);
}

static void reuse_warms_the_class_and_sets_the_stay_from_its_time(void **state)
{
	bool probe = true;

	(void)state;
	for (int i = 0; i < 4; i++)
		cycle(100);
	assert_true(hz_class_warm(SIZE));
	assert_int_equal(hz_class_stay(SIZE, DECAY, &probe), STAY_MULT * 100 * MS);
	assert_false(probe);
	/* Quick reuse: the stay is never below the thread's tick. */
	hz_classes_test_reset();
	for (int i = 0; i < 8; i++)
		cycle(1);
	assert_int_equal(hz_class_stay(SIZE, DECAY, &probe), MIN_STAY_NS);
	/* Another class learned nothing from it. */
	assert_false(hz_class_warm(SIZE / 2));
}

static void frees_without_reuse_cool_a_warm_class(void **state)
{
	(void)state;
	cycle(10);
	assert_true(hz_class_warm(SIZE));
	for (int i = 0; i < 4; i++)
		hz_class_freed(SIZE, now_ns);
	assert_false(hz_class_warm(SIZE)); /* 1 hit for 5 frees */
}

static void a_miss_after_a_block_was_let_go_counts_as_its_reuse_once(void **state)
{
	(void)state;
	hz_class_freed(SIZE, now_ns);
	hz_class_let_go(SIZE);
	now_ns += 300 * MS;
	assert_true(hz_class_missed(SIZE, now_ns, DECAY));
	assert_true(hz_class_warm(SIZE));
	/* One block let go, one reuse: the next miss is a plain miss. */
	assert_false(hz_class_missed(SIZE, now_ns, DECAY));
	/* A block let go, but the miss comes after the decay. */
	hz_class_let_go(SIZE);
	now_ns += DECAY;
	assert_false(hz_class_missed(SIZE, now_ns, DECAY));
}

static void a_spare_is_what_stayed_cached_a_whole_stay(void **state)
{
	unsigned k = 26; /* SIZE's class */
	bool probe;
	uint64_t stay;

	(void)state;
	assert_int_equal(hz_class_spare(k, now_ns, DECAY), 0); /* starts the first look */
	hz_class_cached(SIZE, true);
	hz_class_cached(SIZE, true);
	hz_class_cached(SIZE, false);
	assert_int_equal(hz_class_spare(k, now_ns, DECAY), 0); /* no stay has passed */
	stay = hz_class_stay(SIZE, DECAY, &probe);
	now_ns += stay;
	/* The low mark was 0 (the look started with nothing cached). */
	assert_int_equal(hz_class_spare(k, now_ns, DECAY), 0);
	now_ns += stay;
	/* One block stayed cached all that stay: a spare. */
	assert_int_equal(hz_class_spare(k, now_ns, DECAY), SIZE);
	/* Once given, it starts again. */
	assert_int_equal(hz_class_spare(k, now_ns, DECAY), 0);
}

static void dense_evidence_is_per_class_and_replaced_by_the_last_note(void **state)
{
	(void)state;
	assert_false(hz_class_dense(SIZE));
	hz_class_note_dense(SIZE, true);
	assert_true(hz_class_dense(SIZE + MiB)); /* the same class */
	assert_false(hz_class_dense(2 * SIZE));
	hz_class_note_dense(SIZE, false);
	assert_false(hz_class_dense(SIZE));
}

/* The mmaps of bytes' class taking THP at once before the next sample. */
static int trusted_before_a_sample(size_t bytes)
{
	int n = 0;

	while (hz_class_mmap_thp(bytes))
		n++;
	return n;
}

/* A class's mmaps take huge pages at once on dense evidence, all but
 * samples: 2 apart, then 4, 8, ... while dense verdicts come in a row,
 * as long as the mmaps trusted between two hold at most 64 MiB
 * (HZ_GUESS_MAX); a sparse verdict ends it, a dense one starts over. */
static void samples_grow_apart_while_the_evidence_holds(void **state)
{
	static const int trusted_2m[] = { 1, 3, 7, 15, 31, 31 };

	(void)state;
	assert_false(hz_class_mmap_thp(2 * MiB)); /* no evidence yet */
	for (size_t i = 0; i < sizeof(trusted_2m) / sizeof(trusted_2m[0]); i++) {
		hz_class_note_mmap(2 * MiB, true);
		assert_int_equal(trusted_before_a_sample(2 * MiB), trusted_2m[i]);
	}
	assert_false(hz_class_mmap_thp(2 * MiB)); /* samples until a verdict */
	hz_class_note_mmap(2 * MiB, false);
	assert_false(hz_class_mmap_thp(2 * MiB));
	hz_class_note_mmap(2 * MiB, true);
	assert_int_equal(trusted_before_a_sample(2 * MiB), 1);

	for (int i = 0; i < 3; i++) {
		hz_class_note_mmap(8 * MiB, true);
		assert_int_equal(trusted_before_a_sample(8 * MiB), i == 0 ? 1 : i == 1 ? 3 : 7);
		hz_class_note_mmap(32 * MiB, true); /* never further than 2 apart */
		assert_int_equal(trusted_before_a_sample(32 * MiB), 1);
		hz_class_note_mmap(64 * MiB, true); /* every one a sample */
		assert_int_equal(trusted_before_a_sample(64 * MiB), 0);
	}
	hz_class_note_mmap(256 * 1024, true); /* a piece: 256 apart at most */
	for (int i = 0; i < 8; i++)
		hz_class_note_mmap(256 * 1024, true);
	assert_int_equal(trusted_before_a_sample(256 * 1024), 255);
}

static void forgetting_reuse_keeps_the_page_size_evidence(void **state)
{
	(void)state;
	cycle(10);
	hz_class_note_dense(SIZE, true);
	hz_classes_forget_reuse();
	assert_false(hz_class_warm(SIZE));
	assert_true(hz_class_dense(SIZE));
}

static void the_clean_target_is_eight_of_the_largest_calloc_and_fades_when_met(void **state)
{
	(void)state;
	assert_int_equal(hz_classes_clean_target(), 0);
	hz_classes_calloc_seen(SIZE);
	hz_classes_calloc_seen(SIZE / 4); /* a smaller one changes nothing */
	assert_int_equal(hz_classes_clean_target(), 8 * SIZE);
	hz_classes_clean_enough();
	assert_int_equal(hz_classes_clean_target(), 7 * SIZE);
	hz_classes_calloc_seen(SIZE);
	assert_int_equal(hz_classes_clean_target(), 8 * SIZE);
	for (int i = 0; i < 200; i++)
		hz_classes_clean_enough();
	assert_true(hz_classes_clean_target() < SIZE / 1000);
}

/* A calloc of bytes, after_free_ns after the last free, served by a
 * clean span (one the thread cleared, not the block just freed). */
static void calloc_after(size_t bytes, uint64_t after_free_ns)
{
	struct hz_class_request r = { .size = bytes, .zero = true, .decay_ns = DECAY,
				      .start = 0x50000000, .after_free_ns = after_free_ns };

	now_ns += after_free_ns;
	r.now = now_ns;
	hz_classes_request(&r);
}

static enum hz_cycle_free free_of(size_t bytes)
{
	now_ns += MS;
	return hz_classes_free(bytes, 0x40000000, now_ns, true).cycle;
}

/* The program's rhythm: callocs that each come right after a free of a
 * block that could serve them, whatever the classes, leave the thread
 * asleep at the next free, as a class's own run would (blocks of 6 and 8
 * MiB freed, 6 MiB asked for). A calloc larger than the block just
 * freed, or a late one, breaks the run. */
static void callocs_right_after_frees_leave_the_thread_asleep(void **state)
{
	(void)state;
	for (int i = 0; i < HZ_CYCLE_RUN; i++) {
		assert_int_equal(free_of(i % 2 ? 8 * MiB : 6 * MiB), HZ_CYCLE_KEEP);
		calloc_after(6 * MiB, 5000);
	}
	assert_int_equal(free_of(8 * MiB), HZ_CYCLE_AT_ONCE);
	calloc_after(16 * MiB, 5000); /* larger than the block freed */
	assert_int_equal(free_of(8 * MiB), HZ_CYCLE_KEEP);
	for (int i = 0; i < HZ_CYCLE_RUN; i++) {
		assert_int_equal(free_of(16 * MiB), HZ_CYCLE_KEEP);
		calloc_after(6 * MiB, i == 3 ? 2 * HZ_THREAD_WAKE_NS : 5000);
	}
	/* The fourth came late: only four in a row since. */
	assert_int_equal(free_of(16 * MiB), HZ_CYCLE_KEEP);
}

/* The last mmap of a class left on 4 KiB pages is held in the class's row
 * until taken, one per class, the later replacing the earlier; none larger
 * than HZ_GUESS_MAX, and none empty. */
static void the_last_lazy_mmap_of_a_class_is_held_until_taken(void **state)
{
	uintptr_t start;
	size_t len;

	(void)state;
	assert_false(hz_class_take_lazy_mmap(2 * MiB, &start, &len));
	hz_class_keep_lazy_mmap(256 << 10, 0x7f0000041000, 256 << 10); /* a piece */
	hz_class_keep_lazy_mmap(2 * MiB, 0x7f0000200000, 2 * MiB);
	hz_class_keep_lazy_mmap(3 * MiB, 0x7f0000600000, 2 * MiB); /* same class: replaces */
	assert_true(hz_class_take_lazy_mmap(2 * MiB, &start, &len));
	assert_int_equal(start, 0x7f0000600000);
	assert_int_equal(len, 2 * MiB);
	assert_false(hz_class_take_lazy_mmap(3 * MiB, &start, &len)); /* taken */
	assert_true(hz_class_take_lazy_mmap(256 << 10, &start, &len));
	assert_int_equal(start, 0x7f0000041000);
	assert_int_equal(len, 256 << 10);
	hz_class_keep_lazy_mmap(64 * MiB, 0x7f0004000000, 64 * MiB);
	assert_true(hz_class_take_lazy_mmap(64 * MiB, &start, &len));
	assert_int_equal(len, 64 * MiB);
	hz_class_keep_lazy_mmap(128 * MiB, 0x7f0008000000, 66 * MiB); /* past HZ_GUESS_MAX */
	hz_class_keep_lazy_mmap(2 * MiB, 0x7f0000200000, 0);
	assert_false(hz_class_take_lazy_mmap(128 * MiB, &start, &len));
	assert_false(hz_class_take_lazy_mmap(2 * MiB, &start, &len));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(a_class_without_reuse_is_a_short_probe, reset),
		cmocka_unit_test_setup(reuse_warms_the_class_and_sets_the_stay_from_its_time, reset),
		cmocka_unit_test_setup(frees_without_reuse_cool_a_warm_class, reset),
		cmocka_unit_test_setup(a_miss_after_a_block_was_let_go_counts_as_its_reuse_once,
				       reset),
		cmocka_unit_test_setup(a_spare_is_what_stayed_cached_a_whole_stay, reset),
		cmocka_unit_test_setup(dense_evidence_is_per_class_and_replaced_by_the_last_note,
				       reset),
		cmocka_unit_test_setup(samples_grow_apart_while_the_evidence_holds, reset),
		cmocka_unit_test_setup(forgetting_reuse_keeps_the_page_size_evidence, reset),
		cmocka_unit_test_setup(
			the_clean_target_is_eight_of_the_largest_calloc_and_fades_when_met, reset),
		cmocka_unit_test_setup(
			callocs_right_after_frees_leave_the_thread_asleep, reset),
		cmocka_unit_test_setup(the_last_lazy_mmap_of_a_class_is_held_until_taken, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
