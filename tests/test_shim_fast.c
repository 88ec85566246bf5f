/* The shim's fast path (src/preload/shim_abi.h) follows the library's
 * threshold: the one start-up publishes and every one hz_options_reload
 * makes. The shim (src/preload/shim*.c) and the test core are linked into
 * this one program, which then interposes the C library's malloc as the
 * preload does, and can reload the options, which a preloaded program
 * cannot reach. meson runs it with HUGEZERO_THRESHOLD=256K. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "blocks.h"
#include "options.h"
#include "preload/preload.h"

#define KIB ((size_t)1 << 10)

static void set_threshold(const char *value)
{
	assert_int_equal(setenv("HUGEZERO_THRESHOLD", value, 1), 0);
	hz_options_reload();
}

/* Every small entry point of the shim serves size from the next
 * allocator, every large one from a block, around the threshold t. */
static void expect_threshold(size_t t)
{
	void *p, *q;

	p = malloc(t - 1);
	q = malloc(t);
	assert_non_null(p);
	assert_non_null(q);
	assert_false(hz_blocks_owns(p));
	assert_true(hz_blocks_owns(q));
	free(p);
	free(q);
	p = calloc(1, t - 1);
	q = calloc(t / 16, 16);
	assert_false(hz_blocks_owns(p));
	assert_true(hz_blocks_owns(q));
	free(p);
	free(q);
	assert_int_equal(posix_memalign(&p, 64, t - 1), 0);
	assert_int_equal(posix_memalign(&q, 64, t), 0);
	assert_false(hz_blocks_owns(p));
	assert_true(hz_blocks_owns(q));
	free(p);
	free(q);
	p = aligned_alloc(4096, t - 4096);
	q = memalign(4096, t);
	assert_false(hz_blocks_owns(p));
	assert_true(hz_blocks_owns(q));
	free(p);
	free(q);
	p = valloc(t - 1);
	q = pvalloc(t - 1); /* rounded up to whole pages: t */
	assert_false(hz_blocks_owns(p));
	assert_true(hz_blocks_owns(q));
	free(p);
	free(q);
}

static void start_up_publishes_the_threshold_to_the_shim(void **state)
{
	(void)state;
	if (!hz_preload_active)
		skip(); /* the block tables could not be set up: said on stderr */
	expect_threshold(256 * KIB);
}

static void reload_publishes_each_new_threshold_to_the_shim(void **state)
{
	static const char *const values[] = { "1M", "64K", "4M", "256K" };
	static const size_t bytes[] = { 1024 * KIB, 64 * KIB, 4096 * KIB, 256 * KIB };

	(void)state;
	if (!hz_preload_active)
		skip();
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		set_threshold(values[i]);
		expect_threshold(bytes[i]);
	}
}

/* realloc crosses the threshold both ways and keeps the bytes; a small
 * one stays the next allocator's, a bad alignment is still EINVAL and an
 * overflowing calloc ENOMEM. */
static void realloc_and_errors_keep_their_behaviour(void **state)
{
	/* volatile: the compiler would refuse the overflowing constant, and
	 * clang drops an allocation only compared with NULL (as succeeding). */
	volatile size_t half = SIZE_MAX / 2;
	void *(*volatile calloc_fn)(size_t, size_t) = calloc;
	void *(*volatile reallocarray_fn)(void *, size_t, size_t) = reallocarray;
	unsigned char *p;
	void *q = NULL;

	(void)state;
	if (!hz_preload_active)
		skip();
	p = malloc(100);
	assert_non_null(p);
	memset(p, 0x5a, 100);
	p = realloc(p, 200);
	assert_false(hz_blocks_owns(p));
	p = realloc(p, 512 * KIB);
	assert_true(hz_blocks_owns(p));
	assert_true(malloc_usable_size(p) >= 512 * KIB);
	p = realloc(p, 50);
	assert_false(hz_blocks_owns(p));
	for (int i = 0; i < 50; i++)
		assert_int_equal(p[i], 0x5a);
	free(p);
	assert_int_equal(posix_memalign(&q, 24, 64), EINVAL);
	errno = 0;
	assert_null(calloc_fn(half, 4));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(reallocarray_fn(NULL, half, 4));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(malloc_usable_size(NULL), 0);
	free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(start_up_publishes_the_threshold_to_the_shim),
		cmocka_unit_test(reload_publishes_each_new_threshold_to_the_shim),
		cmocka_unit_test(realloc_and_errors_keep_their_behaviour),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
