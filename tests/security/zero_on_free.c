/* Freed large blocks do not leak their contents, under
 * libhugezero-preload.so:
 *  - HZ_EXPECT_SECRET=gone (HUGEZERO_ZERO_ON_FREE=1): a block whose memory
 *    held a secret reads zero as soon as free() returns, although hugezero
 *    keeps it mapped in its cache, and no copy of the secret is left
 *    anywhere in the process's anonymous memory.
 *  - HZ_EXPECT_SECRET=kept (HUGEZERO_PREZERO=off, no ZERO_ON_FREE): the
 *    same reads find the secret, which shows that the reads see the freed
 *    memory, so the first case can fail.
 *  - Always: every later calloc reads zero, and a block shrunk in place
 *    gives its tail back to the kernel.
 * Reading a block after free() is undefined for a program; here it is the
 * point, and goes through /proc/self/mem, which cannot crash. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <cmocka.h>

#include "secret.h"
#include "../util.h"

static const size_t sizes[] = { 2 * MiB, 2 * MiB + 1, 6 * MiB + 4 * KiB, 64 * MiB,
				 200 * MiB };
#define SIZE_COUNT (sizeof(sizes) / sizeof(sizes[0]))
/* 8: every word (dense: the block is cleared); 256 KiB: a few pages, under
 * half of them resident (sparse: the block's pages are dropped). */
static const size_t strides[] = { 8, 256 * KiB };

static bool expect_gone;

static void *(*volatile do_malloc)(size_t) = malloc;

/* A large block full of the secret, freed; what its range holds after. */
static struct found freed_block(size_t size, size_t stride)
{
	unsigned char *p = do_malloc(size);
	/* The range is scanned after free, when p's value is indeterminate:
	 * its address is kept as an integer. */
	uintptr_t at = (uintptr_t)p;
	struct found f = { 0, 0, 0 };
	size_t usable;

	assert_non_null(p);
	assert_int_equal(at % (2 * MiB), 0); /* hugezero's */
	usable = malloc_usable_size(p);
	secret_fill(p, usable, stride);
	free(p);
	secret_scan(at, usable, &f);
	assert_int_equal(f.unreadable, 0); /* still mapped: in the cache */
	return f;
}

static void freed_blocks_read_zero_at_once(void **state)
{
	(void)state;
	for (size_t i = 0; i < SIZE_COUNT; i++) {
		for (size_t k = 0; k < 2; k++) {
			struct found f = freed_block(sizes[i], strides[k]);

			if (f.nonzero)
				fail_msg("%zu-byte block (secret every %zu bytes): %zu non-zero "
					 "bytes, %zu secret words right after free",
					 sizes[i], strides[k], f.nonzero, f.secrets);
		}
	}
}

static void freed_blocks_keep_secret_without_zero_on_free(void **state)
{
	(void)state;
	for (size_t i = 0; i < SIZE_COUNT; i++) {
		for (size_t k = 0; k < 2; k++) {
			struct found f = freed_block(sizes[i], strides[k]);

			if (f.secrets == 0)
				fail_msg("%zu-byte block (secret every %zu bytes): secret not "
					 "seen after free: the scan is blind", sizes[i], strides[k]);
		}
	}
}

/* realloc to a small size moves the data to the C library and frees the
 * block through the same path as free(). */
static void realloc_to_small_size_frees_like_free(void **state)
{
	unsigned char *p = do_malloc(8 * MiB), *q;
	uintptr_t at = (uintptr_t)p; /* p is indeterminate after the realloc */
	struct found f = { 0, 0, 0 };

	(void)state;
	assert_non_null(p);
	memset(p, 0x11, 4 * KiB); /* the part copied: not the secret */
	secret_fill(p + 4 * KiB, 8 * MiB - 4 * KiB, 8);
	q = realloc(p, 1000);
	assert_non_null(q);
	assert_int_not_equal((uintptr_t)q, at);
	secret_scan(at, 8 * MiB, &f);
	free(q);
	if (expect_gone)
		assert_int_equal(f.nonzero, 0);
	else
		assert_true(f.secrets > 0);
}

static void shrunk_block_tail_is_gone(void **state)
{
	unsigned char *p = do_malloc(64 * MiB), *q;
	struct found f = { 0, 0, 0 };

	(void)state;
	assert_non_null(p);
	secret_fill(p, 64 * MiB, 8);
	q = realloc(p, 8 * MiB);
	assert_ptr_equal(q, p); /* shrunk in place */
	secret_scan((uintptr_t)q + 8 * MiB, 56 * MiB, &f);
	assert_int_equal(f.secrets, 0);
	assert_int_equal(f.nonzero, 0);
	free(q);
}

static void no_copy_of_secret_left_in_process(void **state)
{
	size_t scanned, found;

	(void)state;
	found = secret_scan_process(&scanned);
	print_message("scanned %zu MiB of anonymous memory: %zu secret words\n",
		      scanned >> 20, found);
	assert_true(scanned > 0);
	assert_int_equal(found, 0);
}

static void secret_still_in_process_without_zero_on_free(void **state)
{
	size_t scanned, found;

	(void)state;
	found = secret_scan_process(&scanned);
	print_message("scanned %zu MiB of anonymous memory: %zu secret words\n",
		      scanned >> 20, found);
	assert_true(found > 0);
}

/* Index of the first non-zero byte of p[0, n), or n (p is 16-byte aligned). */
static size_t first_nonzero(const unsigned char *p, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		if (*(const uint64_t *)(const void *)(p + i))
			break;
	for (; i < n; i++)
		if (p[i])
			return i;
	return n;
}

static void calloc_after_free_reads_zero(void **state)
{
	(void)state;
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < SIZE_COUNT; i++) {
			unsigned char *p = do_malloc(sizes[i]), *q;
			size_t n = sizes[SIZE_COUNT - 1 - i], k;

			assert_non_null(p);
			secret_fill(p, sizes[i], round == 1 ? 256 * KiB : 8);
			free(p);
			q = calloc(1, n);
			assert_non_null(q);
			k = first_nonzero(q, n);
			if (k < n)
				fail_msg("calloc(%zu) byte %zu is %#x", n, k, q[k]);
			free(q);
		}
	}
}

int main(void)
{
	const struct CMUnitTest gone[] = {
		cmocka_unit_test(freed_blocks_read_zero_at_once),
		cmocka_unit_test(realloc_to_small_size_frees_like_free),
		cmocka_unit_test(shrunk_block_tail_is_gone),
		cmocka_unit_test(no_copy_of_secret_left_in_process),
		cmocka_unit_test(calloc_after_free_reads_zero),
	};
	const struct CMUnitTest kept[] = {
		cmocka_unit_test(freed_blocks_keep_secret_without_zero_on_free),
		cmocka_unit_test(realloc_to_small_size_frees_like_free),
		cmocka_unit_test(shrunk_block_tail_is_gone),
		cmocka_unit_test(secret_still_in_process_without_zero_on_free),
		cmocka_unit_test(calloc_after_free_reads_zero),
	};
	const struct CMUnitTest any[] = {
		cmocka_unit_test(shrunk_block_tail_is_gone),
		cmocka_unit_test(calloc_after_free_reads_zero),
	};
	const char *expect = getenv("HZ_EXPECT_SECRET");

	secret_init();
	if (mem_fd < 0) {
		fprintf(stderr, "cannot open /proc/self/mem: %s\n", strerror(errno));
		return 1;
	}
	if (expect && strcmp(expect, "gone") == 0) {
		expect_gone = true;
		return cmocka_run_group_tests_name("secret gone at free", gone, NULL, NULL);
	}
	if (expect && strcmp(expect, "kept") == 0)
		return cmocka_run_group_tests_name("secret kept (control)", kept, NULL, NULL);
	return cmocka_run_group_tests_name("calloc after free", any, NULL, NULL);
}
