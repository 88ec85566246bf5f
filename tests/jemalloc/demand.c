/* The demand window of the jemalloc hooks (src/jemalloc/demand.h) on a
 * clock of the test's own: the dirty bytes kept are the recent peak less
 * what is held, the peak lasts one to two half-windows, and a window with
 * no event leaves no peak behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "jemalloc/demand.h"

#define MiB ((size_t)1 << 20)
#define MS 1000000ull
#define WINDOW (1000 * MS) /* HUGEZERO_DECAY_MS's default */

static void room_is_the_peak_less_what_is_held(void **state)
{
	struct hz_demand d = { 0 };
	uint64_t t = 5000 * MS;

	(void)state;
	hz_demand_handed_out(&d, 40 * MiB, t, WINDOW);
	assert_int_equal(hz_demand_room(&d), 0);
	hz_demand_handed_out(&d, 24 * MiB, t + MS, WINDOW);
	hz_demand_given_back(&d, 40 * MiB, t + 2 * MS, WINDOW);
	assert_int_equal(hz_demand_room(&d), 40 * MiB);
	hz_demand_handed_out(&d, 16 * MiB, t + 3 * MS, WINDOW);
	assert_int_equal(hz_demand_room(&d), 24 * MiB);
	/* Giving back more than is held (a foreign extent) holds nothing. */
	hz_demand_given_back(&d, 1024 * MiB, t + 4 * MS, WINDOW);
	assert_int_equal(d.active, 0);
	assert_int_equal(hz_demand_room(&d), 64 * MiB);
}

/* A peak lasts the rest of its half-window and the next one: with events
 * every 100 ms, a 64 MiB peak at 0 ms is room until the half-window after
 * the one it was in ends. */
static void a_peak_lasts_one_to_two_half_windows(void **state)
{
	struct hz_demand d = { 0 };
	uint64_t t = 5000 * MS;

	(void)state;
	hz_demand_handed_out(&d, 64 * MiB, t, WINDOW); /* starts a half-window at t */
	hz_demand_given_back(&d, 60 * MiB, t + 100 * MS, WINDOW);
	assert_int_equal(hz_demand_room(&d), 60 * MiB);
	for (uint64_t ms = 200; ms < 1000; ms += 100) {
		hz_demand_handed_out(&d, 0, t + ms * MS, WINDOW);
		assert_int_equal(hz_demand_room(&d), 60 * MiB);
	}
	/* At 1000 ms the half-window from 500 ms (peak 4 MiB) ends: the
	 * 64 MiB of the one before is gone. */
	hz_demand_handed_out(&d, 0, t + 1000 * MS, WINDOW);
	assert_int_equal(hz_demand_room(&d), 0);
}

static void a_quiet_window_leaves_no_peak(void **state)
{
	struct hz_demand d = { 0 };
	uint64_t t = 5000 * MS;

	(void)state;
	hz_demand_handed_out(&d, 64 * MiB, t, WINDOW);
	hz_demand_given_back(&d, 64 * MiB, t + MS, WINDOW);
	assert_int_equal(hz_demand_room(&d), 64 * MiB);
	/* The next event a whole window later: nothing recent to keep for. */
	hz_demand_handed_out(&d, 4 * MiB, t + MS + WINDOW, WINDOW);
	assert_int_equal(hz_demand_room(&d), 0);
}

/* HUGEZERO_DECAY_MS=0: no window, so nothing is kept. */
static void no_window_keeps_nothing(void **state)
{
	struct hz_demand d = { 0 };

	(void)state;
	hz_demand_handed_out(&d, 64 * MiB, 7 * MS, 0);
	hz_demand_given_back(&d, 32 * MiB, 7 * MS, 0);
	assert_int_equal(hz_demand_room(&d), 0);
}

/* A time from before the half-window began (another thread's clock read
 * earlier) counts in the current half-window. */
static void an_earlier_time_stays_in_the_half_window(void **state)
{
	struct hz_demand d = { 0 };
	uint64_t t = 5000 * MS;

	(void)state;
	hz_demand_handed_out(&d, 64 * MiB, t, WINDOW);
	hz_demand_given_back(&d, 64 * MiB, t - MS, WINDOW);
	assert_int_equal(d.since, t);
	assert_int_equal(hz_demand_room(&d), 64 * MiB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(room_is_the_peak_less_what_is_held),
		cmocka_unit_test(a_peak_lasts_one_to_two_half_windows),
		cmocka_unit_test(a_quiet_window_leaves_no_peak),
		cmocka_unit_test(no_window_keeps_nothing),
		cmocka_unit_test(an_earlier_time_stays_in_the_half_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
