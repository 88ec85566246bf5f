/* Every clearing kernel this CPU runs, through hz_clear with every hint kind
 * and through hz_clear_with, against the reference (all bytes zero, guard
 * bytes untouched). Kernels the CPU lacks are skipped with their reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <hugezero.h>

#define GUARD 4096
#define GUARD_BYTE 0xa5
#define MAX_MISALIGN 64

static const size_t lengths[] = {
	0, 1, 63, 64, 65, 4095, 4096, 4097, 65535, 65536, 65537,
	2u << 20, (8u << 20) + 13,
};

enum hint_kind { HINT_NULL, HINT_START, HINT_MIDDLE, HINT_LAST, HINT_PAST_END,
		 HINT_FAR, HINT_KINDS };

static const char *hint_at(char *dst, size_t len, enum hint_kind kind)
{
	switch (kind) {
	case HINT_START: return dst;
	case HINT_MIDDLE: return dst + len / 2;
	case HINT_LAST: return len ? dst + len - 1 : dst;
	case HINT_PAST_END: return dst + len;
	case HINT_FAR: return dst - (64u << 20);
	default: return NULL;
	}
}

static const unsigned char zero_page[4096];

static int all_zero(const unsigned char *p, size_t len)
{
	while (len > 0) {
		size_t n = len < sizeof(zero_page) ? len : sizeof(zero_page);

		if (memcmp(p, zero_page, n) != 0)
			return 0;
		p += n;
		len -= n;
	}
	return 1;
}

static int all_guard(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != GUARD_BYTE)
			return 0;
	return 1;
}

/* Fill the whole buffer with the guard pattern, clear [dst, dst+len) with
 * clear_fn, check the range is zero and both guards are intact. */
static void check_one(unsigned char *buf, size_t mis, size_t len, int hint_kind,
		      const char *kernel)
{
	unsigned char *dst = buf + GUARD + mis;

	memset(buf, GUARD_BYTE, GUARD + mis + len + GUARD);
	if (hint_kind < 0)
		assert_int_equal(hz_clear_with(kernel, dst, len), 0);
	else
		hz_clear(dst, len, hint_at((char *)dst, len, (enum hint_kind)hint_kind));
	if (!all_zero(dst, len) || !all_guard(buf, GUARD + mis) ||
	    !all_guard(dst + len, GUARD))
		fail_msg("kernel %s, len %zu, misalign %zu, hint kind %d: %s",
			 kernel, len, mis, hint_kind,
			 all_zero(dst, len) ? "guard bytes changed" : "range not zero");
}

static void kernel_clears_exact_range(void **state)
{
	unsigned index = (unsigned)(uintptr_t)*state;
	const char *name = hz_clear_kernel_name(index);
	const char *why = NULL;
	unsigned char *buf;

	if (!hz_clear_kernel_supported(index, &why)) {
		print_message("[  SKIP    ] kernel %s: %s\n", name, why);
		skip();
	}
	buf = malloc(GUARD + MAX_MISALIGN + (8u << 20) + 13 + GUARD);
	assert_non_null(buf);
	assert_int_equal(hz_clear_set_kernel(name), 0);
	assert_string_equal(hz_clear_kernel_for(1), name);
	for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
		for (size_t mis = 0; mis < MAX_MISALIGN; mis++)
			for (int h = -1; h < HINT_KINDS; h++)
				check_one(buf, mis, lengths[l], h, name);
	assert_int_equal(hz_clear_set_kernel("auto"), 0);
	free(buf);
}

static void auto_policy_clears_exact_range(void **state)
{
	unsigned char *buf = malloc(GUARD + MAX_MISALIGN + (8u << 20) + 13 + GUARD);

	(void)state;
	assert_non_null(buf);
	assert_int_equal(hz_clear_set_kernel(NULL), 0);
	for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
		for (size_t mis = 0; mis < MAX_MISALIGN; mis++)
			for (int h = 0; h < HINT_KINDS; h++)
				check_one(buf, mis, lengths[l], h, "auto");
	free(buf);
}

static void set_kernel_rejects_unknown_and_unsupported(void **state)
{
	(void)state;
	assert_int_equal(hz_clear_set_kernel("no_such_kernel"), EINVAL);
	assert_int_equal(hz_clear_with("no_such_kernel", NULL, 0), EINVAL);
	for (unsigned i = 0; i < hz_clear_kernel_count(); i++) {
		if (!hz_clear_kernel_supported(i, NULL)) {
			char byte = 1;

			assert_int_equal(hz_clear_set_kernel(hz_clear_kernel_name(i)), ENOTSUP);
			assert_int_equal(hz_clear_with(hz_clear_kernel_name(i), &byte, 1), ENOTSUP);
			assert_int_equal(byte, 1);
		}
	}
	assert_int_equal(hz_clear_set_kernel("auto"), 0);
}

static void kernel_list_is_consistent(void **state)
{
	unsigned n = hz_clear_kernel_count();
	const char *why = NULL;

	(void)state;
	assert_true(n >= 2);
	assert_null(hz_clear_kernel_name(n));
	assert_int_equal(hz_clear_kernel_supported(n, &why), 0);
	assert_string_equal(why, "no such kernel");
	/* memset is always first and always runs. */
	assert_string_equal(hz_clear_kernel_name(0), "memset");
	assert_int_equal(hz_clear_kernel_supported(0, &why), 1);
	assert_null(why);
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			assert_string_not_equal(hz_clear_kernel_name(i), hz_clear_kernel_name(j));
}

int main(void)
{
	unsigned n = hz_clear_kernel_count();
	struct CMUnitTest *tests = calloc(n + 3, sizeof(*tests));
	char (*names)[96] = calloc(n, sizeof(*names));

	if (!tests || !names)
		return 1;
	for (unsigned i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "kernel_%s_clears_exact_range",
			 hz_clear_kernel_name(i));
		tests[i] = (struct CMUnitTest){ .name = names[i],
			.test_func = kernel_clears_exact_range,
			.initial_state = (void *)(uintptr_t)i };
	}
	tests[n] = (struct CMUnitTest)cmocka_unit_test(auto_policy_clears_exact_range);
	tests[n + 1] = (struct CMUnitTest)cmocka_unit_test(set_kernel_rejects_unknown_and_unsupported);
	tests[n + 2] = (struct CMUnitTest)cmocka_unit_test(kernel_list_is_consistent);
	return _cmocka_run_group_tests("clear", tests, n + 3, NULL, NULL);
}
