/* hz_lock counts a wait for a lock another thread holds (src/lock.h), and
 * nothing when the lock is free. */
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "lock.h"
#include "stats.h"

static struct hz_lock lock = HZ_LOCK_INIT;
static int arrived;

static uint64_t counter(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static void *taker(void *arg)
{
	(void)arg;
	__atomic_store_n(&arrived, 1, __ATOMIC_SEQ_CST);
	hz_lock(&lock);
	hz_unlock(&lock);
	return NULL;
}

static void a_free_lock_counts_no_wait(void **state)
{
	uint64_t waits = counter(&hz_stats.lock_waits);

	(void)state;
	for (int i = 0; i < 1000; i++) {
		hz_lock(&lock);
		assert_true(hz_lock_held_here(&lock));
		hz_unlock(&lock);
	}
	assert_int_equal(counter(&hz_stats.lock_waits), waits);
}

/* The taker reaches hz_lock while this thread holds the lock for 20 ms. A
 * taker preempted for all of those 20 ms between its flag and its try
 * finds the lock free and waits for nothing: then the round is tried again. */
static void a_held_lock_counts_one_wait_and_its_time(void **state)
{
	const struct timespec hold = { 0, 20 * 1000 * 1000 };

	(void)state;
	for (int round = 0; round < 5; round++) {
		uint64_t waits = counter(&hz_stats.lock_waits), ns = counter(&hz_stats.lock_wait_ns);
		pthread_t t;

		hz_lock(&lock);
		__atomic_store_n(&arrived, 0, __ATOMIC_SEQ_CST);
		assert_int_equal(pthread_create(&t, NULL, taker, NULL), 0);
		while (!__atomic_load_n(&arrived, __ATOMIC_SEQ_CST))
			sched_yield();
		nanosleep(&hold, NULL);
		hz_unlock(&lock);
		assert_int_equal(pthread_join(t, NULL), 0);
		if (counter(&hz_stats.lock_waits) == waits)
			continue;
		assert_int_equal(counter(&hz_stats.lock_waits), waits + 1);
		assert_true(counter(&hz_stats.lock_wait_ns) > ns);
		return;
	}
	fail_msg("no wait counted in 5 rounds of a lock held 20 ms");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_free_lock_counts_no_wait),
		cmocka_unit_test(a_held_lock_counts_one_wait_and_its_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
