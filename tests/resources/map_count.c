/* vm.max_map_count reached, for real: the scenario splits one mapping into
 * alternating page permissions until the kernel refuses, then exercises
 * large malloc, calloc, posix_memalign, realloc, free and mmap through the
 * preload.
 *
 * The kernel's rules (Linux 6.18, measured by these tests): at exactly
 * max_map_count mappings, a mapping that splits another in three (a block in
 * the middle of a free stretch of the reservation) fails, but one new
 * mapping is still allowed; above the limit every mmap fails, including
 * hugezero's MAP_FIXED inside its own reservation and the PROT_NONE mapping
 * free uses to give a block back. MADV_DONTNEED and mincore never need a
 * new mapping, so cached blocks keep working.
 *
 * As root the limit is lowered to LOWERED_LIMIT for the test (faster to
 * reach) and put back whatever happens; otherwise the scenario fills the
 * limit the system has, when that takes well under a second. */
#include "harness.h"

#include <malloc.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAP_COUNT_PATH "/proc/sys/vm/max_map_count"
/* 16384: over a hundred times what any process on the CI machine holds
 * (meson, 136), so lowering it for a second harms no one; reached in about
 * 40 ms. */
#define LOWERED_LIMIT 16384
/* Filling a larger limit (distributions raise it to 1048576) would take
 * seconds and hundreds of MB of kernel memory: skipped unless root. */
#define FILL_MAX 262144
#define PAGE ((size_t)4096)
/* The region the first block makes (1 GiB on a 1 GiB boundary, the blocks
 * of these scenarios fit in it): "inside it" is inside the GiB the first
 * block lies in (it starts at a random granule of it, blocks_region.c). */
#define REGION GiB

/* ---- inside a scenario ---- */

struct filler {
	char *base;   /* pages split into alternating permissions */
	size_t pages;
	void *extra[64]; /* single pages mapped past the limit */
	int extra_count;
	long limit;
};

static long read_limit(void)
{
	long limit = res_read_long(MAP_COUNT_PATH);

	CHECK(limit > 0, "cannot read %s", MAP_COUNT_PATH);
	return limit;
}

/* Split until mprotect fails: then the count is the limit exactly (one
 * split of a three-way pair may succeed alone, never more). */
static void fill_to_limit(struct filler *f)
{
	f->limit = read_limit();
	f->pages = (size_t)f->limit + 64;
	f->base = mmap(NULL, f->pages * PAGE, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CHECK(f->base != MAP_FAILED, "mmap of the filler: %s", strerror(errno));
	for (size_t i = 1; i < f->pages; i += 2)
		if (mprotect(f->base + i * PAGE, PAGE, PROT_NONE) != 0)
			break;
	CHECK(errno == ENOMEM, "mprotect stopped with %s", strerror(errno));
	CHECK(res_map_count() == f->limit, "%ld mappings at a limit of %ld",
	      res_map_count(), f->limit);
}

/* At the limit the kernel still allows one new mapping; after it, none.
 * Alternate permissions so that the pages do not merge with each other. */
static void go_over_limit(struct filler *f)
{
	void *p = NULL;

	while (f->extra_count < 64) {
		p = mmap(NULL, PAGE, f->extra_count % 2 ? PROT_NONE : PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			break;
		f->extra[f->extra_count++] = p;
	}
	CHECK(p == MAP_FAILED && errno == ENOMEM, "mmap past the limit did not fail");
	CHECK(res_map_count() > f->limit, "%ld mappings at a limit of %ld",
	      res_map_count(), f->limit);
}

static void unfill(struct filler *f)
{
	for (int i = 0; i < f->extra_count; i++)
		munmap(f->extra[i], PAGE);
	munmap(f->base, f->pages * PAGE);
	CHECK(res_map_count() < f->limit - 64, "unmapping the filler left %ld mappings",
	      res_map_count());
}

/* A freed block's range is still hugezero's: PROT_NONE reservation, or
 * read-write without pages where freed ranges stay mapped (blocks.c,
 * hz_blocks_drop_memory), never a hole. */
static bool kept(uintptr_t addr)
{
	uintptr_t lo, hi;
	char perms[5];

	return res_mapping_at(addr, &lo, &hi, perms) == 0 &&
	       (strcmp(perms, "---p") == 0 ||
		(strcmp(perms, "rw-p") == 0 && res_resident((void *)addr, 2 * MiB) == 0));
}

/* Whether p lies in the region of first, the first block. */
static bool in_region(const void *p, const void *first)
{
	uintptr_t start = (uintptr_t)first & ~((uintptr_t)REGION - 1);

	return (uintptr_t)p >= start && (uintptr_t)p < start + REGION;
}

static char *block(size_t len, unsigned seed)
{
	char *p = malloc(len);

	CHECK(res_is_block(p), "malloc(%zu) not served by hugezero: %p", len, (void *)p);
	hz_test_fill(p, len, seed);
	return p;
}

static void intact(const char *p, size_t len, unsigned seed, const char *what)
{
	size_t off = hz_test_check(p, len, seed);

	CHECK(off == len, "%s changed at offset %zu", what, off);
}

/* Exactly at the limit, a block in the middle of a free stretch of the
 * reservation needs a three-way split and fails; the request goes to glibc,
 * whose new mapping the kernel still allows. */
static int split_fails_glibc_serves(void)
{
	struct filler f = { 0 };
	char *a, *b, *c;
	void *p;

	/* a on a 4 MiB boundary, so that the aligned first fit below lies in
	 * the middle of the hole whatever the region's origin (blocks are
	 * placed from a random granule of it, blocks_region.c). */
	CHECK(posix_memalign(&p, 4 * MiB, 6 * MiB) == 0 && res_is_block(p), "posix_memalign");
	a = p;
	hz_test_fill(a, 6 * MiB, 1);
	b = block(8 * MiB, 2);
	c = block(8 * MiB, 3);

	CHECK(b == a + 6 * MiB && c == b + 8 * MiB, "blocks not first-fit: %p %p %p",
	      (void *)a, (void *)b, (void *)c);
	uintptr_t hole = (uintptr_t)res_keep(b);

	free(b); /* the cache is off: its range goes back to the reservation */
	CHECK(kept(hole), "freed block not kept in the region");
	fill_to_limit(&f);
	/* First fit at 4 MiB alignment: [8, 12) MiB, inside the hole [6, 14). */
	CHECK(posix_memalign(&p, 4 * MiB, 4 * MiB) == 0, "posix_memalign failed");
	CHECK(!in_region(p, a), "served inside the region: %p", p);
	CHECK((uintptr_t)p % (4 * MiB) == 0, "misaligned: %p", p);
	hz_test_fill(p, 4 * MiB, 4);
	intact(p, 4 * MiB, 4, "glibc's block");
	/* The failed mapping left the reservation whole. */
	CHECK(kept((uintptr_t)a + 8 * MiB), "hole in the reservation after a failure");
	free(p);
	unfill(&f);
	CHECK(posix_memalign(&p, 4 * MiB, 4 * MiB) == 0 && in_region(p, a),
	      "hugezero does not serve again below the limit: %p", p);
	hz_test_fill(p, 4 * MiB, 5);
	intact(p, 4 * MiB, 5, "block after the limit");
	intact(a, 6 * MiB, 1, "block a");
	intact(c, 8 * MiB, 3, "block c");
	free(p);
	free(a);
	free(c);
	return 0;
}

/* Above the limit nothing new can be mapped, by hugezero or glibc: every
 * request that needs memory fails with ENOMEM and leaves the program's
 * blocks alone, and free keeps errno although it cannot give the range
 * back (it drops the memory instead). */
static int over_limit_requests_fail(void)
{
	struct filler f = { 0 };
	char *a = block(8 * MiB, 1), *b = block(16 * MiB, 2), *d = block(8 * MiB, 3);
	void *q = (void *)&f, *r;
	/* The same addresses, hidden from gcc's use-after-free analysis: the
	 * test looks at what free and realloc did to them. */
	void *b_seen = res_keep(b), *d_seen = res_keep(d);

	fill_to_limit(&f);
	go_over_limit(&f);
	errno = 0;
	CHECK(res_keep(malloc(32 * MiB)) == NULL && errno == ENOMEM, "malloc: errno %d", errno);
	errno = 0;
	CHECK(res_keep(calloc(1, 32 * MiB)) == NULL && errno == ENOMEM, "calloc: errno %d", errno);
	CHECK(posix_memalign(&q, 2 * MiB, 32 * MiB) == ENOMEM && q == (void *)&f,
	      "posix_memalign did not fail cleanly");
	errno = 0;
	r = realloc(a, 64 * MiB);
	CHECK(r == NULL && errno == ENOMEM, "realloc grow: errno %d", errno);
	intact(a, 8 * MiB, 1, "block after a failed realloc");
	/* Shrinking cannot give the tail back either: the block stays whole. */
	r = realloc(b, 8 * MiB);
	CHECK(r == b_seen && malloc_usable_size(r) >= 16 * MiB, "realloc shrink moved: %p", r);
	b = r;
	intact(b, 8 * MiB, 2, "block after shrinking");
	errno = 0;
	CHECK(mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0) == MAP_FAILED && errno == ENOMEM, "mmap: errno %d", errno);
	/* free cannot map the range back to the reservation: it drops the
	 * memory and keeps the range out of use (blocks.c, release). */
	errno = 4242;
	free(d);
	CHECK(errno == 4242, "free changed errno to %d", errno);
	CHECK(res_resident(d_seen, 8 * MiB) == 0, "the freed block kept %zu bytes resident",
	      res_resident(d_seen, 8 * MiB));
	errno = 4243;
	free(b);
	CHECK(errno == 4243, "free changed errno to %d", errno);
	unfill(&f);
	r = res_keep(malloc(32 * MiB));
	CHECK(in_region(r, a) && res_is_block(r), "no block below the limit: %p", r);
	hz_test_fill(r, 32 * MiB, 6);
	intact(r, 32 * MiB, 6, "block after the limit");
	intact(a, 8 * MiB, 1, "block a");
	free(r);
	free(a);
	return 0;
}

/* Cached blocks need no new mapping: above the limit they still serve,
 * calloc still reads zero, and free (into the cache) keeps errno. Both
 * sizes are reused once below the limit, so their blocks are kept as a
 * class that shows reuse (cache.c), not as probes, which the miss of the
 * 64 MiB malloc drops. No pre-zero thread (the test's environment): a
 * takeover of the span it zeroes is given up when the thread, at idle
 * priority, is late, and the request then needs a fresh mapping. */
static int over_limit_cache_serves(void)
{
	struct filler f = { 0 };
	char *a = block(8 * MiB, 1), *b = block(16 * MiB, 2), *c, *d;

	free(b);
	b = block(16 * MiB, 2);
	free(a);
	a = block(8 * MiB, 1);
	free(a); /* into the cache */
	fill_to_limit(&f);
	go_over_limit(&f);
	c = calloc(1, 8 * MiB);
	CHECK(c != NULL, "calloc of a cached size failed above the limit");
	CHECK(hz_test_first_nonzero(c, 8 * MiB) == 8 * MiB, "calloc'd block not zero");
	hz_test_fill(c, 8 * MiB, 3);
	errno = 4242;
	free(c);
	free(b);
	CHECK(errno == 4242, "free changed errno to %d", errno);
	errno = 0;
	CHECK(res_keep(malloc(64 * MiB)) == NULL && errno == ENOMEM,
	      "malloc larger than the cache: errno %d", errno);
	d = malloc(16 * MiB);
	CHECK(d != NULL, "malloc of a cached size failed above the limit");
	hz_test_fill(d, 16 * MiB, 4);
	intact(d, 16 * MiB, 4, "block from the cache");
	free(d);
	unfill(&f);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "split_fails_glibc_serves", split_fails_glibc_serves },
	{ "over_limit_requests_fail", over_limit_requests_fail },
	{ "over_limit_cache_serves", over_limit_cache_serves },
	{ NULL, NULL },
};

/* ---- the tests ---- */

/* THP only (an administrator's hugetlb pool would change which calls are
 * made), no timing-dependent page-size switch, a small reservation. */
#define BASE_ENV "HUGEZERO_BACKING=thp", "HUGEZERO_THP_CHECK=0", "HUGEZERO_RESERVE=4G"

static void prepare_limit(void)
{
	long limit = res_read_long(MAP_COUNT_PATH);

	res_require_preload();
	if (limit < 0)
		RES_SKIP("vm.max_map_count: cannot read %s\n", MAP_COUNT_PATH);
	if (geteuid() == 0 && limit > LOWERED_LIMIT) {
		assert_int_equal(res_sysctl_set(MAP_COUNT_PATH, LOWERED_LIMIT), 0);
		return;
	}
	if (limit > FILL_MAX)
		RES_SKIP("vm.max_map_count is %ld: reaching it takes too long without root "
			 "(to lower it)\n", limit);
}

static int restore_limit(void **state)
{
	(void)state;
	res_sysctl_restore();
	return 0;
}

static void run(const char *name, const char *const *env, struct child *c)
{
	prepare_limit();
	res_spawn(name, NULL, env, c);
	res_sysctl_restore(); /* at once: the teardown is the safety net */
	res_expect_success(c);
}

static void map_limit_split_failure_falls_back_to_glibc(void **state)
{
	static const char *const env[] = { BASE_ENV, "HUGEZERO_CACHE_MAX=0", NULL };
	struct child c;

	(void)state;
	run("split_fails_glibc_serves", env, &c);
	assert_true(res_stat(&c, "fallbacks.map_failed") >= 1);
	res_child_free(&c);
}

static void map_limit_exceeded_requests_fail_enomem_free_keeps_errno(void **state)
{
	static const char *const env[] = { BASE_ENV, "HUGEZERO_CACHE_MAX=0",
					   "HUGEZERO_VERBOSE=2", NULL };
	struct child c;

	(void)state;
	run("over_limit_requests_fail", env, &c);
	/* free really met the refusal (and dropped the memory instead). */
	if (strstr(c.err, "could not return") == NULL)
		fail_msg("free's release did not fail; stderr:\n%s", c.err);
	/* malloc, calloc, posix_memalign and realloc's new block each tried. */
	assert_true(res_stat(&c, "fallbacks.map_failed") >= 4);
	res_child_free(&c);
}

static void map_limit_exceeded_cached_blocks_still_serve(void **state)
{
	static const char *const env[] = { BASE_ENV, "HUGEZERO_PREZERO=sync", NULL };
	struct child c;

	(void)state;
	run("over_limit_cache_serves", env, &c);
	assert_true(res_stat(&c, "cache_hits") >= 4);
	assert_true(res_stat(&c, "fallbacks.map_failed") >= 1);
	res_child_free(&c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(map_limit_split_failure_falls_back_to_glibc,
					  restore_limit),
		cmocka_unit_test_teardown(map_limit_exceeded_requests_fail_enomem_free_keeps_errno,
					  restore_limit),
		cmocka_unit_test_teardown(map_limit_exceeded_cached_blocks_still_serve,
					  restore_limit),
	};
	int ret = res_scenario_main(argc, argv, scenarios);

	if (ret >= 0)
		return ret;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
