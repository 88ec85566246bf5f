/* The hugetlb pool shrunk while the program runs (root: vm.nr_hugepages,
 * restored whatever happens). Blocks already mapped keep their pages (the
 * kernel turns pages in use into surplus pages and keeps reserved ones), a
 * block mapped but never touched was reserved at mmap time (hugezero never
 * maps hugetlb MAP_NORESERVE) and can be written without SIGBUS, freed
 * blocks in the recycler's cache keep serving, and new blocks fall back to
 * THP, with every byte where it was written. */
#include "harness.h"

#include <string.h>
#include <unistd.h>

#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define POOL_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB"
#define FREE_PATH POOL_DIR "/free_hugepages"
#define RESV_PATH POOL_DIR "/resv_hugepages"
/* 16 pages, 32 MiB: three 8 MiB blocks and room to spare. */
#define POOL_RAISE 16
#define BLOCK (8 * MiB)
#define BLOCK_PAGES 4L /* 2 MiB pages per block */
#define SLOTS 4
#define ROUNDS 24

/* ---- inside the scenario ---- */

static bool is_hugetlb(const void *p)
{
	return res_page_size(p) == 2 * MiB;
}

static long pool_left(void)
{
	return res_read_long(FREE_PATH) - res_read_long(RESV_PATH);
}

static void intact(const char *p, size_t len, unsigned seed, const char *what)
{
	size_t off = hz_test_check(p, len, seed);

	CHECK(off == len, "%s changed at offset %zu", what, off);
}

struct slot {
	char *p;
	size_t len;
	unsigned seed;
};

/* After the shrink: allocate, write and free in a pattern that mixes
 * cached hugetlb blocks with new THP ones; every calloc reads zero and
 * every live block keeps its bytes. */
static void keep_going(void)
{
	struct slot s[SLOTS] = { { 0 } };

	for (unsigned round = 0; round < ROUNDS; round++) {
		struct slot *x = &s[round % SLOTS];

		free(x->p);
		x->len = (2 + (round * 7) % 23) * MiB;
		x->seed = 100 + round;
		if (round % 2) {
			x->p = calloc(1, x->len);
			CHECK(x->p && hz_test_first_nonzero(x->p, x->len) == x->len,
			      "round %u: calloc(%zu) failed or not zero", round, x->len);
		} else {
			x->p = malloc(x->len);
			CHECK(x->p, "round %u: malloc(%zu) failed", round, x->len);
		}
		hz_test_fill(x->p, x->len, x->seed);
		for (int i = 0; i < SLOTS; i++)
			if (s[i].p)
				intact(s[i].p, s[i].len, s[i].seed, "a live block");
	}
	for (int i = 0; i < SLOTS; i++)
		free(s[i].p);
}

static int shrink_mid_run(void)
{
	const char *base = getenv("HZ_RES_POOL_BASE");
	char *a = malloc(BLOCK), *b = malloc(BLOCK), *d = malloc(BLOCK), *c, *e, *e2;
	long left;

	CHECK(base != NULL, "HZ_RES_POOL_BASE not set");
	CHECK(is_hugetlb(a) && is_hugetlb(b) && is_hugetlb(d), "blocks not from the pool");
	hz_test_fill(a, BLOCK, 1);
	hz_test_fill(b, BLOCK, 2);
	free(b); /* into the cache, with its pages */
	CHECK(res_write_long(NR_PATH, atol(base)) == 0, "shrinking the pool: %s", strerror(errno));
	left = pool_left();
	if (left < BLOCK_PAGES)
		fprintf(stderr, "pool emptied\n");
	else
		fprintf(stderr, "pool still has %ld free pages: raised by someone else\n", left);
	/* d was reserved when mapped: its first touch now cannot SIGBUS. */
	hz_test_fill(d, BLOCK, 4);
	intact(a, BLOCK, 1, "block a");
	intact(d, BLOCK, 4, "block d");
	/* The cached block kept its pool pages: the only one that fits, it
	 * serves this calloc, zeroed. */
	c = calloc(1, BLOCK);
	CHECK(c && hz_test_first_nonzero(c, BLOCK) == BLOCK, "calloc failed or not zero");
	CHECK(is_hugetlb(c), "the cached pool block did not serve: %p", (void *)c);
	hz_test_fill(c, BLOCK, 6);
	/* Nothing cached left: a fresh block, which the pool cannot hold. */
	e = malloc(BLOCK);
	CHECK(e != NULL, "malloc after the shrink failed");
	CHECK(left >= BLOCK_PAGES || !is_hugetlb(e), "hugetlb block from an empty pool");
	hz_test_fill(e, BLOCK, 5);
	keep_going();
	/* Growing a pool block when the pool is empty: the new part gets THP,
	 * the old part keeps its pages and bytes. */
	e2 = realloc(a, 3 * BLOCK);
	CHECK(e2 != NULL, "realloc failed");
	a = e2;
	intact(a, BLOCK, 1, "block a after realloc");
	hz_test_fill(a, 3 * BLOCK, 7);
	intact(a, 3 * BLOCK, 7, "block a grown");
	intact(c, BLOCK, 6, "block c");
	intact(d, BLOCK, 4, "block d");
	intact(e, BLOCK, 5, "block e");
	free(a);
	free(c);
	free(d);
	free(e);
	return 0;
}

static const struct scenario scenarios[] = {
	{ "shrink_mid_run", shrink_mid_run },
	{ NULL, NULL },
};

/* ---- the test ---- */

static void hugetlb_pool_shrunk_mid_run_falls_back_without_sigbus(void **state)
{
	static char base_env[64];
	/* hugetlb is used only when asked for (auto is THP). */
	const char *const env[] = { "HUGEZERO_THP_CHECK=0", "HUGEZERO_BACKING=hugetlb2m", base_env,
				    NULL };
	struct child c;
	long saved;

	(void)state;
	res_require_preload();
	if (geteuid() != 0)
		RES_SKIP("hugetlb pool shrink: needs root to set %s\n", NR_PATH);
	if (access(POOL_DIR, F_OK) != 0)
		RES_SKIP("hugetlb pool shrink: the kernel has no 2 MiB hugetlb pool\n");
	saved = res_read_long(NR_PATH);
	assert_true(saved >= 0);
	assert_int_equal(res_sysctl_set(NR_PATH, saved + POOL_RAISE), 0);
	if (res_read_long(FREE_PATH) - res_read_long(RESV_PATH) < 3 * BLOCK_PAGES)
		RES_SKIP("hugetlb pool shrink: the kernel found only %ld free 2 MiB pages "
			 "(memory fragmented)\n", res_read_long(FREE_PATH));
	snprintf(base_env, sizeof(base_env), "HZ_RES_POOL_BASE=%ld", saved);
	res_spawn("shrink_mid_run", NULL, env, &c);
	res_sysctl_restore(); /* at once: the teardown is the safety net */
	res_expect_success(&c);
	assert_int_equal(res_read_long(NR_PATH), saved);
	assert_true(res_stat(&c, "blocks.hugetlb2m.count") >= 3);
	if (strstr(c.err, "pool emptied")) {
		assert_true(res_stat(&c, "fallbacks.hugetlb_pool_short") >= 1);
		assert_true(res_stat(&c, "blocks.thp.count") >= 1);
	} else {
		print_message("note: %s", c.err);
	}
	res_child_free(&c);
}

static int restore_pool(void **state)
{
	(void)state;
	res_sysctl_restore();
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(hugetlb_pool_shrunk_mid_run_falls_back_without_sigbus,
					  restore_pool),
	};
	int ret = res_scenario_main(argc, argv, scenarios);

	if (ret >= 0)
		return ret;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
