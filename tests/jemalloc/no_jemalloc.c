/* libhugezero.so in a program without jemalloc: linking the library must
 * not bring jemalloc in (it would replace malloc), and creating an arena
 * says so instead of crashing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dlfcn.h>
#include <errno.h>
#include <cmocka.h>

#include <hugezero/jemalloc.h>

static void library_does_not_bring_jemalloc(void **state)
{
	(void)state;
	assert_null(dlsym(RTLD_DEFAULT, "mallctl"));
	assert_null(dlsym(RTLD_DEFAULT, "mallocx"));
}

static void create_arena_without_jemalloc_returns_enosys(void **state)
{
	unsigned ind = 12345;

	(void)state;
	assert_int_equal(hz_jemalloc_create_arena(&ind), ENOSYS);
	assert_int_equal(ind, 12345);
	assert_int_equal(hz_jemalloc_create_arena(NULL), EINVAL);
	assert_int_equal(hz_jemalloc_stats(0, NULL), EINVAL);
}

/* The hooks themselves need no jemalloc. */
static void hooks_work_without_jemalloc(void **state)
{
	extent_hooks_t *h = hz_jemalloc_hooks();
	bool zero = false, commit = true;
	struct hz_jemalloc_stats s;
	char *p;

	(void)state;
	assert_non_null(h);
	p = h->alloc(h, NULL, 2 << 20, 4096, &zero, &commit, 7);
	assert_non_null(p);
	assert_true(zero && commit);
	p[0] = 1;
	assert_false(h->dalloc(h, p, 2 << 20, true, 7));
	assert_int_equal(hz_jemalloc_stats(7, &s), 0);
	assert_int_equal(s.regions, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(library_does_not_bring_jemalloc),
		cmocka_unit_test(create_arena_without_jemalloc_returns_enosys),
		cmocka_unit_test(hooks_work_without_jemalloc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
