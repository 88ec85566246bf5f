/* Putting the reservation back into a hole never replaces a mapping that
 * another thread made there meanwhile (src/prim/memory.c). Two holes open
 * in hugezero's reservation: a block moved by a plain mremap (kernels
 * without MREMAP_DONTUNMAP), and a block whose mapping failed on a kernel
 * that unmaps the range before failing (every kernel before 6.12, and 6.18
 * still for a hugetlb mapping the pool cannot back). The put-back hook
 * (src/prim/fault.h) maps a page into the hole right before the put-back,
 * as another thread's mmap could: the page must survive with its contents,
 * its granules stay claimed and unused, and the metadata stays consistent.
 * Each test runs in a child process (harness.h). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "blocks.h"
#include "check.h"
#include "harness.h"
#include "prim/memory.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define PAGE ((size_t)4096)
#define BLOCK (4 * MiB)
/* The other mapping goes 1 MiB into the hole. */
#define OTHER_AT MiB

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "put_back.c:%d: failed: %s\n", __LINE__, #cond); \
			return CHILD_BROKEN;                                           \
		}                                                                      \
	} while (0)

static uintptr_t hole;         /* where the put-back was about to go */
static unsigned char *other;   /* what the hook mapped there */

static void map_other(uintptr_t start, size_t len)
{
	(void)len;
	hole = start;
	other = mmap((void *)(start + OTHER_AT), PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (other != MAP_FAILED)
		memset(other, 0x5a, PAGE);
}

/* A failed mmap over a range may have unmapped it (see above). */
static void unmap_then_map_other(uintptr_t start, size_t len)
{
	munmap((void *)start, len);
	map_other(start, len);
}

static bool other_intact(void)
{
	if (other == MAP_FAILED || other != (unsigned char *)hole + OTHER_AT)
		return false;
	for (size_t i = 0; i < PAGE; i++)
		if (other[i] != 0x5a)
			return false;
	return true;
}

static bool overlaps_hole(const void *p, size_t len)
{
	return (uintptr_t)p < hole + BLOCK && hole < (uintptr_t)p + len;
}

static int fail_once(enum hz_prim_call call, int error, long arg)
{
	struct hz_prim_fault_rule rule = { call, 1, error, false, true, arg };

	return hz_prim_fault_arm(&rule);
}

static void start_thp(void)
{
	static const char *const env[] = { "HUGEZERO_BACKING=thp", NULL };

	scenario_env(env);
	fault_start();
}

static void run(int (*fn)(void *), const char *what)
{
	int status = child_run(fn, NULL, what);

	if (status == CHILD_SKIPPED)
		skip();
	assert_int_equal(status, CHILD_OK);
}

/* realloc grows a with b right after it, so a moves; MREMAP_DONTUNMAP
 * refused (EINVAL) takes the plain move that leaves a hole. */
static int moved_block_child(void *arg)
{
	struct hz_blocks_census c;
	unsigned char *a, *b, *q;
	int slot;

	(void)arg;
	start_thp();
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&a) == 0);
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&b) == 0);
	if (b != a + BLOCK) {
		printf("[  SKIP    ] the second block is not right after the first\n");
		return CHILD_SKIPPED;
	}
	memset(a, 0x11, BLOCK);
	slot = fail_once(HZ_CALL_MREMAP, EINVAL,
			 MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP);
	hz_prim_fault_put_back_hook = map_other;
	CHECK(hz_blocks_resize(a, 2 * BLOCK, (void **)&q) == 0);
	hz_prim_fault_put_back_hook = NULL;
	hz_prim_fault_disarm();
	CHECK(hz_prim_fault_fired(slot) == 1 && q != a && hole == (uintptr_t)a);
	CHECK(other_intact());
	CHECK(hz_prim_holes_taken() == 1);
	CHECK(q[0] == 0x11 && memcmp(q, q + 1, BLOCK - 1) == 0);
	/* q, b and the old granules of a, kept claimed. */
	CHECK(hz_blocks_check(&c) == 0 && c.live_blocks == 2);
	CHECK(c.claimed_granules * HZ_GRANULE == 2 * BLOCK + BLOCK + BLOCK);
	hz_blocks_free(q);
	hz_blocks_free(b);
	CHECK(hz_blocks_check(&c) == 0 && c.claimed_granules * HZ_GRANULE == BLOCK);
	/* First fit would give a's old place: never again. */
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&a) == 0 && !overlaps_hole(a, BLOCK));
	memset(a, 0x22, BLOCK);
	hz_blocks_free(a);
	CHECK(other_intact());
	return CHILD_OK;
}

static void moved_block_hole_keeps_a_mapping_made_there(void **state)
{
	(void)state;
	run(moved_block_child, "realloc moving a block by a plain mremap");
}

/* The first mapping of a block fails (the commit over the reservation);
 * the kernel unmapped the range first. */
static int failed_commit_child(void *arg)
{
	struct hz_blocks_census c;
	unsigned char *p;
	int slot;

	(void)arg;
	start_thp();
	slot = fail_once(HZ_CALL_MMAP, ENOMEM, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED);
	hz_prim_fault_put_back_hook = unmap_then_map_other;
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&p) == -ENOMEM);
	hz_prim_fault_put_back_hook = NULL;
	hz_prim_fault_disarm();
	CHECK(hz_prim_fault_fired(slot) == 1 && hole != 0);
	CHECK(other_intact());
	CHECK(hz_prim_holes_taken() == 1);
	CHECK(hz_blocks_check(&c) == 0 && c.live_blocks == 0);
	CHECK(c.claimed_granules * HZ_GRANULE == BLOCK);
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&p) == 0 && !overlaps_hole(p, BLOCK));
	memset(p, 0x33, BLOCK);
	hz_blocks_free(p);
	CHECK(other_intact());
	return CHILD_OK;
}

static void failed_commit_hole_keeps_a_mapping_made_there(void **state)
{
	(void)state;
	run(failed_commit_child, "a block's mapping failing after unmapping its range");
}

/* The common case on Linux 6.12 and later (vm.max_map_count, the commit
 * charge): the failed mmap kept the reservation. Nothing is lost: the granules go back
 * and the next block takes the same place. */
static int intact_child(void *arg)
{
	struct hz_blocks_census c;
	unsigned char *p;
	uintptr_t first;
	int slot;

	(void)arg;
	start_thp();
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&p) == 0);
	first = (uintptr_t)p;
	hz_blocks_free(p);
	slot = fail_once(HZ_CALL_MMAP, ENOMEM, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED);
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&p) == -ENOMEM);
	hz_prim_fault_disarm();
	CHECK(hz_prim_fault_fired(slot) == 1 && hz_prim_holes_taken() == 0);
	CHECK(hz_blocks_check(&c) == 0 && c.claimed_granules == 0);
	CHECK(hz_blocks_alloc(BLOCK, HZ_GRANULE, (void **)&p) == 0 && (uintptr_t)p == first);
	hz_blocks_free(p);
	return CHILD_OK;
}

static void failed_commit_over_an_intact_reservation_loses_nothing(void **state)
{
	(void)state;
	run(intact_child, "a block's mapping failing with the reservation kept");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(moved_block_hole_keeps_a_mapping_made_there),
		cmocka_unit_test(failed_commit_hole_keeps_a_mapping_made_there),
		cmocka_unit_test(failed_commit_over_an_intact_reservation_loses_nothing),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
