/* One budget for every cache of freed memory: the preload's cache of freed
 * blocks (here the recycler called as a library, as tests/library does,
 * over glibc's allocator: over this program's jemalloc, the preload would
 * hand its large requests to a hooked arena and keep no blocks) and
 * the jemalloc extents' dirty pages share HUGEZERO_CACHE_MAX (64 MiB from
 * tests/jemalloc/meson.build), so a process using both holds at most that,
 * not twice. The hooks are called directly, as in hooks_direct.c. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libc_next.h"
#include "util.h"

#define IND 3500

static void the_preloads_cache_and_the_extents_share_one_budget(void **state)
{
	struct hz_jemalloc_stats s;
	bool zero = false, commit = true;
	void *block[3];
	char *e, *keep;

	(void)state;
	/* 48 MiB of freed blocks in the preload's cache */
	for (int i = 0; i < 3; i++) {
		block[i] = hz_preload_malloc(16 * MiB);
		assert_non_null(block[i]);
		memset(block[i], 1, 16 * MiB);
	}
	for (int i = 0; i < 3; i++)
		hz_preload_free(block[i]);
	/* An arena left holding nothing gives its regions back at once: keep
	 * one page of it. */
	keep = hz()->alloc(hz(), NULL, 4096, 4096, &zero, &commit, IND);
	assert_non_null(keep);
	/* 32 MiB more would be 80: the freed extent is purged at once */
	e = hz()->alloc(hz(), NULL, 32 * MiB, 4096, &zero, &commit, IND);
	assert_non_null(e);
	memset(e, 2, 32 * MiB);
	assert_false(hz()->dalloc(hz(), e, 32 * MiB, true, IND));
	assert_int_equal(hz_jemalloc_stats(IND, &s), 0);
	assert_int_equal(s.dirty_bytes, 0);
	/* 8 MiB more is 56: kept dirty for reuse */
	e = hz()->alloc(hz(), NULL, 8 * MiB, 4096, &zero, &commit, IND);
	assert_non_null(e);
	memset(e, 3, 8 * MiB);
	assert_false(hz()->dalloc(hz(), e, 8 * MiB, true, IND));
	assert_int_equal(hz_jemalloc_stats(IND, &s), 0);
	assert_int_equal(s.dirty_bytes, 8 * MiB);
	assert_false(hz()->dalloc(hz(), keep, 4096, true, IND));
}

/* glibc's allocator is the next one: the program's malloc is jemalloc's. */
static void start_over_glibc(void)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	struct hz_next n;

	hz_test_libc_next(&n);
	if (!libc) {
		fprintf(stderr, "libc.so.6: %s\n", dlerror());
		exit(1);
	}
	*(void **)&n.next_malloc = dlsym(libc, "malloc");
	*(void **)&n.next_free = dlsym(libc, "free");
	*(void **)&n.next_calloc = dlsym(libc, "calloc");
	*(void **)&n.next_realloc = dlsym(libc, "realloc");
	*(void **)&n.next_posix_memalign = dlsym(libc, "posix_memalign");
	*(void **)&n.next_aligned_alloc = dlsym(libc, "aligned_alloc");
	*(void **)&n.next_memalign = dlsym(libc, "memalign");
	*(void **)&n.next_valloc = dlsym(libc, "valloc");
	*(void **)&n.next_pvalloc = dlsym(libc, "pvalloc");
	*(void **)&n.next_malloc_usable_size = dlsym(libc, "malloc_usable_size");
	hz_preload_start(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_preloads_cache_and_the_extents_share_one_budget),
	};

	/* A thread of its own, as the programs this stands for have: else
	 * the preload gives cold frees back at once while no pre-zero thread
	 * runs (src/prezero_start.c), and its cache never holds the 48 MiB. */
	hz_test_have_a_thread();
	start_over_glibc();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
