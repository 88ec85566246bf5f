/* The system-call layer keeps errno: prim.h promises that its functions
 * return -errno and never change errno, which lets malloc, free and calloc
 * make system calls that fail (a refused madvise, a trim at
 * vm.max_map_count) and still succeed with the program's errno intact.
 * Every call here fails for real, in the kernel; errno must still hold the
 * sentinel afterwards. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "prim/prim.h"

#define PAGE ((size_t)4096)
/* No call of prim sets errno to this. */
#define SENTINEL EDOM

static void *scratch(void)
{
	void *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

/* The calls made through prim's SYSCALL macro, each failing with EINVAL or
 * EBADF. */
static void failing_calls_keep_errno(void **state)
{
	char *p = scratch();
	unsigned char vec[2];
	char buf[8];
	int ret;

	(void)state;
	errno = SENTINEL;
	assert_int_equal(hz_prim_munmap(p + 1, PAGE), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	ret = hz_prim_madvise(p, PAGE, 12345);
	if (ret == 0) /* qemu-user takes advice as a hint it may ignore */
		print_message("note: unknown madvise advice accepted here (an emulator?)\n");
	else
		assert_int_equal(ret, -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_mprotect(p + 1, PAGE, PROT_READ), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_mincore(p + 1, PAGE, vec), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_close(-1), -EBADF);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_read(-1, buf, sizeof(buf)), -EBADF);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_write_all(-1, buf, sizeof(buf)), -EBADF);
	assert_int_equal(errno, SENTINEL);
	assert_true(hz_prim_read_file("/nonexistent/hugezero", buf, sizeof(buf)) < 0);
	assert_int_equal(errno, SENTINEL);
	munmap(p, 2 * PAGE);
}

/* The calls that keep errno by hand (mmap and mremap return an address). */
static void failing_mappings_keep_errno(void **state)
{
	char *p = scratch();
	void *out;

	(void)state;
	errno = SENTINEL;
	assert_int_equal(hz_prim_mmap(p + 1, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				      -1, 0, &out), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_mremap(p + 1, PAGE, 2 * PAGE, 0, NULL, &out), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	munmap(p, 2 * PAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(failing_calls_keep_errno),
		cmocka_unit_test(failing_mappings_keep_errno),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
