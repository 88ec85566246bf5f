/* A jemalloc program under libhugezero-preload.so that also uses a hooked
 * arena: the preload serves its large malloc()s, the hooks its arena, and
 * each pointer goes back to the allocator that made it, even through
 * free(), realloc() and malloc_usable_size(), which jemalloc allows on
 * mallocx() pointers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <malloc.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hooked_pointers_survive_the_preloads_free_and_realloc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
