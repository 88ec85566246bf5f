/* RLIMIT_AS, for real. No root needed: a process may lower its own limit.
 *
 * hugezero reserves no address space at start-up: regions of 1 GiB (or
 * what one block needs) are reserved as blocks need them, together at most
 * half of RLIMIT_AS as it is when a region is made. Set before start-up,
 * the limit caps the regions (glibc serves beyond), and even a tight one
 * (2 GiB) leaves room for a region placed without alignment slack, so
 * start-up is silent and blocks are served. Lowered at run time through
 * setrlimit (interposed), hugezero first drops its cached blocks and gives
 * back every region without a live block when the new limit would not leave
 * it room; live blocks keep their region. Below what the process maps,
 * every new mapping fails, hugezero's included (Linux 6.18: may_expand_vm
 * refuses even a change of zero pages then), as under glibc; free keeps
 * errno, and nothing leaves a hole in a region. */
#include "harness.h"

#include <malloc.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static rlim_t limit_for_child;

/* Between fork and exec: lower the soft limit only, so that the scenario
 * can raise it back. */
static void set_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_AS, &rl) != 0)
		_exit(124);
	rl.rlim_cur = limit_for_child;
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		_exit(124);
}

static void lower_now(uint64_t bytes)
{
	struct rlimit rl;

	CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit");
	rl.rlim_cur = bytes;
	CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit(%llu): %s",
	      (unsigned long long)bytes, strerror(errno));
}

static void raise_again(void)
{
	struct rlimit rl;

	CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit");
	rl.rlim_cur = rl.rlim_max;
	CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
}

static bool in_range(const void *p, uintptr_t start, size_t len)
{
	return (uintptr_t)p >= start && (uintptr_t)p < start + len;
}

/* Touch one byte per 64 MiB and the last one: proves the range is mapped
 * and writable without spending the memory. */
static void touch_sparse(char *p, size_t len)
{
	for (size_t off = 0; off < len; off += 64 * MiB)
		p[off] = 1;
	p[len - 1] = 1;
	for (size_t off = 0; off < len; off += 64 * MiB)
		CHECK(p[off] == 1, "byte %zu", off);
}

/* Every byte of [start, start + len) belongs to some mapping: a failed
 * call left no hole the kernel could hand to someone else. */
static void no_hole(uintptr_t start, size_t len)
{
	uintptr_t at = start, lo, hi;
	char perms[5];

	while (at < start + len) {
		CHECK(res_mapping_at(at, &lo, &hi, perms) == 0,
		      "hole in the reservation at %#lx", (unsigned long)at);
		at = hi;
	}
}

/* The region of a block that is not larger than 1 GiB. */
static uintptr_t region_of(const void *p)
{
	return (uintptr_t)p & ~(uintptr_t)(GiB - 1);
}

/* ---- scenarios ---- */

/* RLIMIT_AS of 8 GiB: the regions hold at most 4 GiB. A 3 GiB block gets
 * a region of its own; 2 GiB more would pass the cap, so glibc serves it;
 * a request neither can hold fails with ENOMEM. */
static int before_caps_regions(void)
{
	char *p = malloc(3 * GiB), *q;

	CHECK(res_is_block(p) && (uintptr_t)p % GiB == 0, "3 GiB not a block on 1 GiB: %p",
	      (void *)p);
	touch_sparse(p, 3 * GiB);
	q = malloc(2 * GiB);
	CHECK(q != NULL && !in_range(q, (uintptr_t)p, 4 * GiB),
	      "2 GiB more did not come from glibc: %p", (void *)q);
	touch_sparse(q, 2 * GiB);
	errno = 0;
	CHECK(res_keep(malloc(4 * GiB)) == NULL && errno == ENOMEM, "4 GiB: errno %d", errno);
	errno = 4242;
	free(q);
	free(p);
	CHECK(errno == 4242, "free changed errno to %d", errno);
	q = malloc(100);
	CHECK(q != NULL, "small malloc after the failures");
	free(q);
	return 0;
}

/* RLIMIT_AS of 2 GiB: no room for a 1 GiB region mapped with 1 GiB more
 * to align it, but room for one placed on a 1 GiB boundary directly: every
 * large entry point is served by hugezero, and 3 GiB fails. */
static int tight_limit_still_served(void)
{
	char *p = malloc(64 * MiB), *c = calloc(1, 64 * MiB), *m;
	void *q;

	CHECK(p && res_is_block(p), "malloc: %p", (void *)p);
	CHECK(c && res_is_block(c), "calloc: %p", (void *)c);
	CHECK(hz_test_first_nonzero(c, 64 * MiB) == 64 * MiB, "calloc not zero");
	hz_test_fill(p, 64 * MiB, 1);
	m = realloc(p, 128 * MiB);
	CHECK(m && hz_test_check(m, 64 * MiB, 1) == 64 * MiB, "realloc lost data");
	p = m;
	CHECK(posix_memalign(&q, 2 * MiB, 16 * MiB) == 0 && (uintptr_t)q % (2 * MiB) == 0,
	      "posix_memalign");
	hz_test_fill(q, 16 * MiB, 2);
	m = mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	hz_test_fill(m, 16 * MiB, 3);
	errno = 0;
	CHECK(res_keep(malloc(3 * GiB)) == NULL && errno == ENOMEM, "3 GiB: errno %d", errno);
	CHECK(hz_test_check(q, 16 * MiB, 2) == 16 * MiB && hz_test_check(m, 16 * MiB, 3) == 16 * MiB,
	      "contents");
	munmap(m, 16 * MiB);
	errno = 4242;
	free(p);
	free(c);
	free(q);
	CHECK(errno == 4242, "free changed errno to %d", errno);
	return 0;
}

/* Nothing is reserved before the first block. Lowered to 768 MiB above
 * what the process would map without its region, once its only block is
 * freed (cached): the cache is dropped and the region given back, so
 * 512 MiB of new address space fits; blocks come from glibc while no
 * region fits the limit, and from hugezero again once it is raised. */
static int lowered_gives_back_unused(void)
{
	uint64_t before = res_address_space(), use;
	char *a, *m;

	CHECK(before < GiB, "%llu bytes mapped before the first block",
	      (unsigned long long)before);
	a = malloc(64 * MiB);
	CHECK(res_is_block(a), "first block: %p", (void *)a);
	CHECK(res_address_space() >= before + GiB, "no 1 GiB region");
	hz_test_fill(a, 64 * MiB, 1);
	free(a); /* into the cache */
	use = res_address_space();
	lower_now(use - GiB + 768 * MiB);
	CHECK(res_address_space() + GiB <= use,
	      "the region was not given back: %llu bytes mapped, %llu before",
	      (unsigned long long)res_address_space(), (unsigned long long)use);
	m = mmap(NULL, 512 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED, "512 MiB mmap after the region went back: %s", strerror(errno));
	touch_sparse(m, 512 * MiB);
	munmap(m, 512 * MiB);
	a = calloc(1, 64 * MiB);
	CHECK(a && !res_is_block(a) && hz_test_first_nonzero(a, 64 * MiB) == 64 * MiB,
	      "calloc with no room for a region: %p", (void *)a);
	free(a);
	raise_again();
	a = calloc(1, 64 * MiB);
	CHECK(res_is_block(a) && hz_test_first_nonzero(a, 64 * MiB) == 64 * MiB,
	      "no block once the limit is raised: %p", (void *)a);
	free(a);
	return 0;
}

/* Lowered to 256 MiB above what the process maps while a block is live:
 * its region stays and serves blocks that fit in it (no new address
 * space), growing one in place too, while 512 MiB of new address space
 * elsewhere is refused. The process starts under a loose RLIMIT_AS, as
 * a service's LimitAS= sets one: a region made under a limit is packed
 * from its start (blocks.c), so 960 MiB of it stay one run after the
 * first block; without a limit its first block lies at a random granule
 * of its lower half, and the runs on both sides may both be shorter. */
static int lowered_above_use(void)
{
	char *a, *big, *m;
	uint64_t use;

	lower_now(res_address_space() + 64 * GiB);
	a = malloc(64 * MiB);
	use = res_address_space();

	CHECK(res_is_block(a), "first block: %p", (void *)a);
	lower_now(use + 256 * MiB);
	big = malloc(512 * MiB);
	CHECK(res_is_block(big) && region_of(big) == region_of(a),
	      "512 MiB block not served from the region held: %p", (void *)big);
	touch_sparse(big, 512 * MiB);
	m = realloc(big, 896 * MiB);
	CHECK(res_is_block(m) && region_of(m) == region_of(a), "realloc to 896 MiB failed");
	big = m;
	touch_sparse(big, 896 * MiB);
	errno = 0;
	CHECK(mmap(NULL, 512 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0) == MAP_FAILED && errno == ENOMEM, "512 MiB mmap: errno %d", errno);
	m = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED && (uintptr_t)m % (2 * MiB) == 0, "64 MiB mmap: %s",
	      strerror(errno));
	touch_sparse(m, 64 * MiB);
	CHECK(res_address_space() <= use + 256 * MiB, "the limit did not hold");
	munmap(m, 64 * MiB);
	errno = 4242;
	free(big);
	free(a);
	CHECK(errno == 4242, "free changed errno to %d", errno);
	return 0;
}

/* Lowered below what the process maps: the cached block is dropped first
 * (its memory is not kept behind the program's back), and then no mapping
 * can change, hugezero's MAP_FIXED inside its regions included: a calloc
 * fails with ENOMEM as under glibc, live blocks keep their contents. */
static int lowered_below_use(void)
{
	char *a = malloc(64 * MiB), *b = malloc(64 * MiB), *c, *r;
	/* Above HUGEZERO_CACHE_MAX (1 GiB): free releases it at once. */
	char *d = malloc(GiB + 2 * MiB);
	uintptr_t d_at, b_region;

	CHECK(res_is_block(a) && res_is_block(b) && res_is_block(d), "blocks");
	hz_test_fill(a, 64 * MiB, 1);
	hz_test_fill(b, 64 * MiB, 2);
	free(a); /* into the cache */
	lower_now(res_address_space() / 2);
	errno = 0;
	c = calloc(1, 64 * MiB);
	CHECK(res_keep(c) == NULL && errno == ENOMEM, "calloc: %p, errno %d", (void *)c, errno);
	errno = 0;
	CHECK(res_keep(malloc(128 * MiB)) == NULL && errno == ENOMEM, "malloc: errno %d", errno);
	errno = 0;
	r = realloc(b, 256 * MiB);
	CHECK(r == NULL && errno == ENOMEM, "realloc grow: errno %d", errno);
	CHECK(hz_test_check(b, 64 * MiB, 2) == 64 * MiB, "block changed by a failed realloc");
	r = realloc(b, 32 * MiB);
	CHECK(r != NULL && hz_test_check(r, 32 * MiB, 2) == 32 * MiB, "realloc shrink");
	b = r;
	errno = 0;
	CHECK(mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0) == MAP_FAILED && errno == ENOMEM, "mmap: errno %d", errno);
	errno = 4242;
	d_at = (uintptr_t)d; /* d is indeterminate after free */
	free(d); /* cannot map its range back: drops the memory instead */
	CHECK(errno == 4242, "free changed errno to %d", errno);
	no_hole(region_of(b), GiB);
	no_hole(d_at, 2 * GiB);
	raise_again();
	r = malloc(128 * MiB);
	CHECK(res_is_block(r), "no block once the limit is raised: %p", (void *)r);
	hz_test_fill(r, 128 * MiB, 4);
	CHECK(hz_test_check(r, 128 * MiB, 4) == 128 * MiB && hz_test_check(b, 32 * MiB, 2) == 32 * MiB,
	      "contents");
	b_region = region_of(b); /* b is indeterminate after free */
	free(r);
	free(b);
	no_hole(b_region, GiB);
	return 0;
}

/* Limited to exactly what it maps, the process cannot create the pre-zero
 * thread (its stack is a new mapping): calloc zeroes reused blocks itself. */
static int prezero_thread_cannot_start(void)
{
	char *a = malloc(64 * MiB), *c;

	CHECK(res_is_block(a), "block: %p", (void *)a);
	hz_test_fill(a, 64 * MiB, 1);
	lower_now(res_address_space());
	free(a); /* the first free starts the thread */
	c = calloc(1, 64 * MiB);
	CHECK(c != NULL && hz_test_first_nonzero(c, 64 * MiB) == 64 * MiB,
	      "calloc of the reused block failed or is not zero");
	free(c);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "before_caps_regions", before_caps_regions },
	{ "tight_limit_still_served", tight_limit_still_served },
	{ "lowered_gives_back_unused", lowered_gives_back_unused },
	{ "lowered_above_use", lowered_above_use },
	{ "lowered_below_use", lowered_below_use },
	{ "prezero_thread_cannot_start", prezero_thread_cannot_start },
	{ NULL, NULL },
};

/* ---- the tests ---- */

/* THP blocks (an administrator's hugetlb pool would hold real memory) and
 * no fresh-THP timing, which would touch 2 MiB of each block. */
#define BASE_ENV "HUGEZERO_BACKING=thp", "HUGEZERO_THP_CHECK=0"

static void rlimit_before_startup_caps_regions_at_half(void **state)
{
	static const char *const env[] = { BASE_ENV, NULL };
	struct child c;

	(void)state;
	res_require_preload();
	limit_for_child = 8 * GiB;
	res_spawn("before_caps_regions", set_limit, env, &c);
	res_expect_success(&c);
	assert_true(res_stat(&c, "fallbacks.reservation_full") >= 1);
	assert_int_equal(res_stat(&c, "large_requests"), 1);
	res_child_free(&c);
}

static void rlimit_2g_before_startup_silent_and_served(void **state)
{
	static const char *const env[] = { BASE_ENV, NULL };
	struct child c;

	(void)state;
	res_require_preload();
	limit_for_child = 2 * GiB;
	res_spawn("tight_limit_still_served", set_limit, env, &c);
	res_expect_success(&c);
	if (strstr(c.err, "hugezero") != NULL)
		fail_msg("hugezero said something under a 2 GiB limit; stderr:\n%s", c.err);
	assert_true(res_stat(&c, "large_requests") >= 3);
	res_child_free(&c);
}

static void rlimit_lowered_gives_back_cache_and_unused_regions(void **state)
{
	static const char *const env[] = { BASE_ENV, "HUGEZERO_VERBOSE=2", NULL };
	struct child c;

	(void)state;
	res_require_preload();
	res_spawn("lowered_gives_back_unused", NULL, env, &c);
	res_expect_success(&c);
	if (strstr(c.err, "gave back 1024 MiB of address space") == NULL)
		fail_msg("setrlimit did not give the region back; stderr:\n%s", c.err);
	assert_true(res_stat(&c, "fallbacks.reservation_full") >= 1);
	res_child_free(&c);
}

static void rlimit_lowered_after_startup_region_held_still_serves(void **state)
{
	static const char *const env[] = { BASE_ENV, NULL };
	struct child c;

	(void)state;
	res_require_preload();
	res_spawn("lowered_above_use", NULL, env, &c);
	res_expect_success(&c);
	assert_true(res_stat(&c, "blocks.thp.bytes") >= 512 * MiB);
	assert_int_equal(res_stat(&c, "fallbacks.map_failed"), 0);
	res_child_free(&c);
}

static void rlimit_below_use_fails_enomem_keeps_blocks_and_errno(void **state)
{
	static const char *const env[] = { BASE_ENV, "HUGEZERO_RESERVE=8G",
					   "HUGEZERO_VERBOSE=2", NULL };
	struct child c;

	(void)state;
	res_require_preload();
	res_spawn("lowered_below_use", NULL, env, &c);
	res_expect_success(&c);
	/* free really met the refusal (and dropped the memory instead). */
	if (strstr(c.err, "could not return") == NULL)
		fail_msg("free's release did not fail; stderr:\n%s", c.err);
	/* The cache was dropped before the limit fell. */
	if (strstr(c.err, "RLIMIT_AS lowered to") == NULL)
		fail_msg("setrlimit did not shrink hugezero first; stderr:\n%s", c.err);
	/* calloc, malloc and realloc's new block each tried a fresh mapping. */
	assert_true(res_stat(&c, "fallbacks.map_failed") >= 3);
	assert_int_equal(res_stat(&c, "cache_hits"), 0);
	res_child_free(&c);
}

static void rlimit_no_room_for_prezero_thread_calloc_zeroes(void **state)
{
	static const char *const env[] = { BASE_ENV, "HUGEZERO_VERBOSE=1", NULL };
	struct child c;

	(void)state;
	res_require_preload();
	res_spawn("prezero_thread_cannot_start", NULL, env, &c);
	res_expect_success(&c);
	if (strstr(c.err, "could not start the pre-zero thread") == NULL)
		fail_msg("the thread started anyway?; stderr:\n%s", c.err);
	assert_int_equal(res_stat(&c, "prezeroed_bytes"), 0);
	assert_true(res_stat(&c, "cleared_bytes") > 0);
	res_child_free(&c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rlimit_before_startup_caps_regions_at_half),
		cmocka_unit_test(rlimit_2g_before_startup_silent_and_served),
		cmocka_unit_test(rlimit_lowered_gives_back_cache_and_unused_regions),
		cmocka_unit_test(rlimit_lowered_after_startup_region_held_still_serves),
		cmocka_unit_test(rlimit_below_use_fails_enomem_keeps_blocks_and_errno),
		cmocka_unit_test(rlimit_no_room_for_prezero_thread_calloc_zeroes),
	};
	int ret = res_scenario_main(argc, argv, scenarios);

	if (ret >= 0)
		return ret;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
