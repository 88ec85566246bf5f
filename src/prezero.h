/* The pre-zero thread. */
#ifndef HZ_PREZERO_H
#define HZ_PREZERO_H

/* ---- test hooks (the test core only) ---- */

/* Where a test can hold the pre-zero thread, as if the scheduler had
 * preempted it there (it runs at idle priority, so that can last seconds). */
enum hz_prezero_point {
	HZ_PREZERO_AT_SECTION, /* inside its use of the cache's table */
	HZ_PREZERO_AT_UNIT,    /* between two units of the span it zeroes */
	HZ_PREZERO_AT_CHUNK,   /* inside a chunk of a calloc's clear it shares */
	HZ_PREZERO_AT_SLEEP,   /* about to sleep until woken */
};

#ifdef HZ_TEST_CORE
/* Called by the thread at each point when set. */
extern void (*hz_prezero_test_hook)(enum hz_prezero_point point);
#define HZ_PREZERO_HOOK(point)                                                        \
	do {                                                                          \
		void (*hook_)(enum hz_prezero_point) =                                \
			__atomic_load_n(&hz_prezero_test_hook, __ATOMIC_ACQUIRE);     \
		if (hook_)                                                            \
			hook_(point);                                                 \
	} while (0)
#else
#define HZ_PREZERO_HOOK(point) ((void)0)
#endif

#endif /* HZ_PREZERO_H */
