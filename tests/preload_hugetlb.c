/* hugetlb backing under the preload, with a real pool: as root the test sets
 * vm.nr_hugepages, and puts it back whatever happens (the checks run in a
 * child, so even a SIGBUS there cannot leave the pool changed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

#define POOL_PAGES 8 /* 16 MiB of 2 MiB pages */
#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define FREE_PATH "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
#define RESV_PATH "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages"

static long saved_pages = -1;

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* kB of a field in the smaps entry of the mapping holding p. */
static unsigned long smaps_kb(const void *p, const char *field)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], perms[8];
	unsigned long lo, hi, kb = 0;
	int in = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
			if (in)
				break;
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		} else if (in && strncmp(line, field, strlen(field)) == 0) {
			kb = strtoul(line + strlen(field), NULL, 10);
		}
	}
	fclose(f);
	return kb;
}

/* In the child: two blocks fit the pool, the third falls back to THP, and
 * every byte of all three can be written (no SIGBUS). */
static int child_checks(void)
{
	size_t len = 8 * MiB;
	char *a = malloc(len), *b = malloc(len), *c;
	/* Someone else may have raised the pool meanwhile: then it is not
	 * empty and the third block may rightly come from it too. */
	long left = read_long(FREE_PATH) - read_long(RESV_PATH);

	c = malloc(len);
	if (!a || !b || !c)
		return 10;
	memset(a, 1, len);
	memset(b, 2, len);
	memset(c, 3, len);
	if (smaps_kb(a, "Private_Hugetlb:") < 8192)
		return 11;
	if (smaps_kb(b, "Private_Hugetlb:") < 8192)
		return 12;
	if (left < 4 && smaps_kb(c, "Private_Hugetlb:") != 0)
		return 13; /* the pool was empty: must not be hugetlb */
	if (a[len - 1] != 1 || b[0] != 2 || c[len / 2] != 3)
		return 14;
	free(a);
	free(b);
	free(c);
	return 0;
}

static void pool_blocks_then_fallback_to_thp_without_sigbus(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	if (getenv("LD_PRELOAD") == NULL || strstr(getenv("LD_PRELOAD"), "hugezero") == NULL)
		fail_msg("run this test under libhugezero-preload.so");
	if (geteuid() != 0) {
		print_message("[  SKIP    ] hugetlb pool: needs root to set %s\n", NR_PATH);
		skip();
	}
	saved_pages = read_long(NR_PATH);
	assert_true(saved_pages >= 0);
	assert_int_equal(write_long(NR_PATH, saved_pages + POOL_PAGES), 0);
	if (read_long(FREE_PATH) < POOL_PAGES) {
		print_message("[  SKIP    ] hugetlb pool: the kernel found only %ld free "
			      "2 MiB pages (memory fragmented)\n", read_long(FREE_PATH));
		skip();
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_checks());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status))
		fail_msg("child died with signal %d", WTERMSIG(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int restore_pool(void **state)
{
	(void)state;
	if (saved_pages >= 0 && write_long(NR_PATH, saved_pages) != 0)
		fprintf(stderr, "could not restore %s to %ld\n", NR_PATH, saved_pages);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(pool_blocks_then_fallback_to_thp_without_sigbus,
					  restore_pool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
