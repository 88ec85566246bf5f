/* A jemalloc program under libhugezero-preload.so that also uses a hooked
 * arena: the preload serves its large malloc()s, the hooks its arena, and
 * each pointer goes back to the allocator that made it, even through
 * free(), realloc() and malloc_usable_size(), which jemalloc allows on
 * mallocx() pointers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

static void hooked_pointers_survive_the_preloads_free_and_realloc(void **state)
{
	const char *preload = getenv("LD_PRELOAD");
	int flags;
	unsigned ind;
	char *p, *q, *big;

	(void)state;
	if (!preload || !strstr(preload, "hugezero"))
		fail_msg("run this test under libhugezero-preload.so");
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
	big = malloc(8 * MiB); /* the preload's */
	assert_non_null(big);
	memset(big, 3, 8 * MiB);
	for (int i = 0; i < 20; i++) {
		p = mallocx(6 * MiB + 4 * KiB, flags | MALLOCX_ZERO);
		assert_non_null(p);
		assert_true(all_bytes(p, 6 * MiB + 4 * KiB, 0));
		memset(p, 0x5a, 6 * MiB + 4 * KiB);
		assert_true(malloc_usable_size(p) >= 6 * MiB + 4 * KiB);
		q = realloc(p, 9 * MiB); /* jemalloc's realloc, not the preload's */
		assert_non_null(q);
		assert_true(all_bytes(q, 6 * MiB + 4 * KiB, 0x5a));
		free(q);
	}
	assert_true(all_bytes(big, 8 * MiB, 3));
	free(big);
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* Whether p lies in an arena that carries hugezero's hooks ("arenas.lookup"
 * gives its arena, "arena.<i>.extent_hooks" that arena's hooks). */
static bool hooked(void *p)
{
	unsigned ind;
	size_t len = sizeof(ind);
	extent_hooks_t *hooks = NULL;
	char name[64];

	if (mallctl("arenas.lookup", &ind, &len, &p, sizeof(p)) != 0)
		return false;
	snprintf(name, sizeof(name), "arena.%u.extent_hooks", ind);
	len = sizeof(hooks);
	return mallctl(name, &hooks, &len, NULL, 0) == 0 && hooks == hz_jemalloc_hooks();
}

/* Every large entry point of the preload, in a jemalloc program: the
 * pointer is jemalloc's (sallocx, xallocx, rallocx, sdallocx, dallocx and
 * free work on it), from an arena with hugezero's hooks. */
static void *large_entry_points_are_jemallocs_and_hooked(void *arg)
{
	size_t n;
	char *p = malloc(5 * MiB), *q, *a = NULL;

	(void)arg;
	assert_non_null(p);
	memset(p, 0x11, 5 * MiB);
	assert_true(sallocx(p, 0) >= 5 * MiB);
	assert_true(hooked(p));
	n = xallocx(p, 7 * MiB, 0, 0);
	assert_int_equal(n, sallocx(p, 0));
	q = calloc(3, 2 * MiB);
	assert_non_null(q);
	assert_true(hooked(q));
	assert_true(all_bytes(q, 6 * MiB, 0));
	assert_int_equal(malloc_usable_size(q), sallocx(q, 0));
	q = realloc(q, 11 * MiB);
	assert_non_null(q);
	assert_true(hooked(q));
	assert_true(all_bytes(q, 6 * MiB, 0));
	q = rallocx(q, 4 * MiB, 0);
	assert_non_null(q);
	assert_int_equal(posix_memalign((void **)&a, 2 * MiB, 3 * MiB), 0);
	assert_int_equal((uintptr_t)a % (2 * MiB), 0);
	assert_true(hooked(a));
	assert_true(sallocx(a, 0) >= 3 * MiB);
	assert_true(all_bytes(p, 5 * MiB, 0x11));
	sdallocx(a, 3 * MiB, 0);
	/* The rest of the aligned family, routed with posix_memalign
	 * (malloc.c): each pointer hooked, aligned and freed by jemalloc. */
	for (int i = 0; i < 4; i++) {
		size_t size = i == 0 ? 4 * MiB : 3 * MiB + 1;

		a = i == 0 ? aligned_alloc(4 * MiB, size)
		    : i == 1 ? memalign(4 * MiB, size)
		    : i == 2 ? valloc(size)
			     : pvalloc(size);
		assert_non_null(a);
		assert_int_equal((uintptr_t)a % (i < 2 ? 4 * MiB : 4 * KiB), 0);
		assert_true(hooked(a));
		assert_true(sallocx(a, 0) >= size);
		free(a);
	}
	dallocx(q, 0);
	free(p);
	/* Small requests stay on jemalloc's own arenas. */
	p = malloc(100);
	assert_non_null(p);
	assert_false(hooked(p));
	free(p);
	return NULL;
}

static void large_requests_come_from_the_hooks_on_every_thread_and_after_fork(void **state)
{
	pthread_t t[4];

	large_entry_points_are_jemallocs_and_hooked(NULL);
	pid_t pid;
	int status;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL,
						large_entry_points_are_jemallocs_and_hooked, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		large_entry_points_are_jemallocs_and_hooked(NULL);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hooked_pointers_survive_the_preloads_free_and_realloc),
		cmocka_unit_test(large_requests_come_from_the_hooks_on_every_thread_and_after_fork),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
