/* The preload's next-allocator table before and during start-up: the
 * bootstrap arena that serves start-up's own requests (dlsym allocates),
 * and realloc of its pointers. These paths are reached only inside
 * hugezero's start-up, so they are driven here directly: each test runs in
 * a process of its own (the table and the start-up state are per
 * process), with the library never started. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "preload/preload.h"

/* A request the 64 KiB arena cannot hold fails, and leaves it as it was:
 * the next small one is served, past the earlier ones. */
static void bootstrap_refused_huge_requests_leave_the_arena_usable(void **state)
{
	static const size_t huge[] = { 1 << 20, SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 1, SIZE_MAX - 7 };
	unsigned char *first, *next;

	(void)state;
	/* Never started: the table is the bootstrap allocator. */
	first = hz_next.next_malloc(100);
	assert_non_null(first);
	assert_true(hz_boot_owns(first));
	memset(first, 0xa5, 100);
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++)
		assert_null(hz_next.next_malloc(huge[i]));
	next = hz_next.next_malloc(100);
	assert_non_null(next);
	assert_true(hz_boot_owns(next));
	assert_true(next >= first + 100 || next + 100 <= first);
	for (int i = 0; i < 100; i++)
		assert_int_equal(first[i], 0xa5);
}

static int next_realloc_calls;

static void *next_realloc_counted(void *p, size_t size)
{
	next_realloc_calls++;
	return realloc(p, size);
}

/* dlsym's first allocations come from the arena; start-up then installs
 * the real table and goes on (the exec work, the reservation), and a
 * realloc made meanwhile of an arena pointer must stay away from the real
 * realloc, which does not know the pointer (glibc aborts). */
static void realloc_of_a_bootstrap_pointer_during_start_up_copies_it(void **state)
{
	struct hz_next real = {
		.next_malloc = malloc, .next_free = free, .next_calloc = calloc,
		.next_realloc = next_realloc_counted,
	};
	unsigned char *boot, *moved;

	(void)state;
	assert_int_equal(hz_preload_begin(), HZ_START_RESOLVE);
	boot = hz_next.next_malloc(64);
	assert_non_null(boot);
	memset(boot, 0x5a, 64);
	hz_next = real; /* what hz_preload_start does before the rest */
	moved = hz_preload_realloc(boot, 200);
	assert_int_equal(next_realloc_calls, 0);
	assert_non_null(moved);
	assert_false(hz_boot_owns(moved));
	for (int i = 0; i < 64; i++)
		assert_int_equal(moved[i], 0x5a);
	free(moved);
}

/* One process per test: start-up state is per process. */
static void in_child(void (*fn)(void **))
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		const struct CMUnitTest one[] = { { "child", fn, NULL, NULL, NULL } };

		_exit(cmocka_run_group_tests(one, NULL, NULL) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void bootstrap_refused(void **state)
{
	(void)state;
	in_child(bootstrap_refused_huge_requests_leave_the_arena_usable);
}

static void bootstrap_realloc(void **state)
{
	(void)state;
	in_child(realloc_of_a_bootstrap_pointer_during_start_up_copies_it);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bootstrap_refused),
		cmocka_unit_test(bootstrap_realloc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
