/* The hooks on a real hugetlb pool. As root the test raises
 * vm.nr_hugepages and puts it back whatever happens: the checks run in a
 * forked child, so even a SIGBUS there cannot leave the pool changed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

/* 96 pages of 2 MiB: one 64 MiB region (32 pages) and room for a second. */
#define POOL_PAGES 96
#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define FREE_PATH "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"

enum { CHILD_OK = 0, CHILD_NOT_HUGETLB = 77 };

static long saved_pages = -1;

static int flags_of(unsigned ind)
{
	return MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
}

#define CHECK(cond, code)                                                          \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "child: %s failed (line %d)\n", #cond, __LINE__); \
			return code;                                               \
		}                                                                  \
	} while (0)

/* In the child: extents of odd sizes come from the pool, reuse after a
 * dirty pattern reads zero, purging part of a huge page leaves its live
 * neighbour intact (no MADV_DONTNEED rounding up), and arena destroy gives
 * every page back to the pool. */
static int child_checks(void)
{
	extent_hooks_t *h = hz_jemalloc_hooks();
	long free_before = read_long(FREE_PATH);
	struct hz_jemalloc_stats s;
	unsigned ind;
	char *a, *b, *z;

	CHECK(hz_jemalloc_create_arena(&ind) == 0, 10);
	CHECK(arena_set_ssize(ind, "dirty_decay_ms", 0) == 0, 11);
	a = mallocx(2 * MiB + 512 * KiB, flags_of(ind));
	b = mallocx(3 * MiB, flags_of(ind));
	CHECK(a && b, 12);
	CHECK(hz_jemalloc_stats(ind, &s) == 0, 13);
	if (s.hugetlb_bytes == 0) {
		fprintf(stderr, "child: regions are not hugetlb (pool used elsewhere?)\n");
		return CHILD_NOT_HUGETLB;
	}
	memset(a, 0x61, 2 * MiB + 512 * KiB);
	memset(b, 0x62, 3 * MiB);
	CHECK(hz_test_smaps_sum((uintptr_t)a, (uintptr_t)a + 1, "Private_Hugetlb:") >= 2 * MiB, 14);
	CHECK(read_long(FREE_PATH) < free_before, 15);

	/* Reuse after a dirty pattern, many sizes. */
	for (int i = 0; i < 200; i++) {
		size_t size = (size_t)(1 + i % 7) * MiB + (size_t)(i % 5) * 4 * KiB;
		char *p = mallocx(size, flags_of(ind) | MALLOCX_ZERO);

		CHECK(p != NULL, 20);
		size = sallocx(p, flags_of(ind));
		CHECK(all_bytes(p, size, 0), 21);
		memset(p, 0xa5, size);
		escape(p);
		dallocx(p, flags_of(ind));
	}
	CHECK(all_bytes(a, 2 * MiB + 512 * KiB, 0x61), 22);
	CHECK(all_bytes(b, 3 * MiB, 0x62), 23);

	/* purge_forced and decommit on part of a huge page (the hooks
	 * directly, on a range jemalloc does not use): the neighbours in the
	 * same huge pages keep their bytes. */
	bool zero = true, commit = true; /* asked for zeroed: it reads zero */

	z = h->alloc(h, NULL, 6 * MiB, 2 * MiB, &zero, &commit, ind);
	CHECK(z != NULL && zero, 30);
	memset(z, 0x7e, 6 * MiB);
	CHECK(!h->purge_forced(h, z, 6 * MiB, 1 * MiB + 4 * KiB, 2 * MiB, ind), 31);
	CHECK(all_bytes(z + 1 * MiB + 4 * KiB, 2 * MiB, 0), 32);
	CHECK(all_bytes(z, 1 * MiB + 4 * KiB, 0x7e), 33);
	CHECK(all_bytes(z + 3 * MiB + 4 * KiB, 3 * MiB - 4 * KiB, 0x7e), 34);
	CHECK(!h->decommit(h, z, 6 * MiB, 5 * MiB, 4 * KiB, ind), 35);
	CHECK(all_bytes(z + 5 * MiB, 4 * KiB, 0) &&
	      all_bytes(z + 5 * MiB + 4 * KiB, MiB - 4 * KiB, 0x7e), 36);
	CHECK(h->purge_lazy(h, z, 6 * MiB, 0, 6 * MiB, ind), 37); /* MADV_FREE: not on hugetlb */
	/* Split at a non-huge-page boundary and give back one side. */
	CHECK(!h->split(h, z, 6 * MiB, 3 * MiB - 4 * KiB, 3 * MiB + 4 * KiB, true, ind), 38);
	CHECK(!h->dalloc(h, z + 3 * MiB - 4 * KiB, 3 * MiB + 4 * KiB, true, ind), 39);
	CHECK(all_bytes(z, 1 * MiB + 4 * KiB, 0x7e), 40);
	CHECK(!h->dalloc(h, z, 3 * MiB - 4 * KiB, true, ind), 41);

	dallocx(a, flags_of(ind));
	dallocx(b, flags_of(ind));
	CHECK(arena_ctl(ind, "destroy") == 0, 50);
	CHECK(hz_jemalloc_stats(ind, &s) == 0 && s.regions == 0, 51);
	CHECK(read_long(FREE_PATH) == free_before, 52);
	return CHILD_OK;
}

static void hooks_serve_and_zero_hugetlb_pages_and_give_the_pool_back(void **state)
{
	pid_t pid;
	int status;

	(void)state;
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
	if (WEXITSTATUS(status) == CHILD_NOT_HUGETLB) {
		print_message("[  SKIP    ] hugetlb pool: another process took the pages\n");
		skip();
	}
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
		cmocka_unit_test_teardown(hooks_serve_and_zero_hugetlb_pages_and_give_the_pool_back,
					  restore_pool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
