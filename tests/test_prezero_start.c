/* When the pre-zero thread starts (src/prezero_start.c), in a program with
 * no thread of its own: a cold free starts none and goes back at once (the
 * next request of its size is a miss, as under glibc); that miss shows the
 * size is reused, so the next free is kept and starts the thread, and the
 * request after it is a hit. The order matters: the process is
 * single-threaded only until the thread starts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <unistd.h>
#include <cmocka.h>

#include "prezero.h"
#include "prezero_impl.h"
#include "promote.h"
#include "recycle.h"
#include "stats.h"

#define LEN ((size_t)8 << 20)

static void *dirty_block(void)
{
	void *p;

	assert_int_equal(hz_recycle_alloc(LEN, 0, false, &p), 0);
	memset(p, 3, LEN);
	return p;
}

static bool thread_started(void)
{
	return __atomic_load_n(&pz_thread_started, __ATOMIC_ACQUIRE) != 0;
}

/* Until its first sleep: a request that finds the thread in its turn at
 * the table longer than the guard waits is served fresh by design
 * (prezero.c), and a new thread's first turn under qemu-user, which
 * translates its code then, can take that long. */
static void wait_thread_asleep(void)
{
	for (int i = 0; i < 5000 && !__atomic_load_n(&pz_sleeping, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	assert_true(__atomic_load_n(&pz_sleeping, __ATOMIC_ACQUIRE));
}

static void single_threaded_program_learns_reuse_before_starting_the_thread(void **state)
{
	uint64_t misses, hits;

	(void)state;
	if (!__libc_single_threaded || hz_prezero_mode() != HZ_PREZERO_OPT_THREAD) {
		print_message("[  SKIP    ] not single-threaded, or HUGEZERO_PREZERO is not thread\n");
		skip();
	}
	hz_recycle_free(dirty_block());
	assert_false(thread_started());
	assert_true(__libc_single_threaded);
	misses = hz_stats.cache_misses;
	hz_recycle_free(dirty_block()); /* a miss: the first block went back */
	assert_int_equal(hz_stats.cache_misses, misses + 1);
	assert_true(thread_started()); /* the size is reused: kept, for the thread */
	wait_thread_asleep();
	hits = hz_stats.cache_hits;
	hz_recycle_free(dirty_block());
	assert_int_equal(hz_stats.cache_hits, hits + 1);
}

/* A fresh block whose first touches are to be watched wakes the sleeping
 * thread: at its next tick, a quarter second on, a sequential writer has
 * long faulted the block in on 4 KiB pages (ImageMagick's pixel caches
 * waited 47-137 ms for their first look). */
static void watched_block_wakes_the_sleeping_thread(void **state)
{
	const size_t len = (size_t)32 << 20;
	uint64_t tracked = hz_stats.promote_tracked;
	int seq;
	void *p;

	(void)state;
	if (!thread_started() || !hz_promote_enabled()) {
		print_message("[  SKIP    ] no pre-zero thread, or lazy huge pages are off here "
			      "(THP mode not madvise, or HUGEZERO_LAZY_THP=0)\n");
		skip();
	}
	wait_thread_asleep();
	seq = __atomic_load_n(&pz_wake_seq, __ATOMIC_ACQUIRE);
	assert_int_equal(hz_recycle_alloc(len, 0, false, &p), 0);
	assert_int_equal(hz_stats.promote_tracked, tracked + 1); /* fresh and lazy */
	assert_int_not_equal(__atomic_load_n(&pz_wake_seq, __ATOMIC_ACQUIRE), seq);
	hz_recycle_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(single_threaded_program_learns_reuse_before_starting_the_thread),
		cmocka_unit_test(watched_block_wakes_the_sleeping_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
