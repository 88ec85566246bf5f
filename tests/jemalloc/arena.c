/* hugezero's hooks under Debian's jemalloc 5.3: what jemalloc really calls,
 * and what a program sees. Every allocation passes MALLOCX_TCACHE_NONE, as
 * the header asks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"
#include "../util.h"

static int flags_of(unsigned ind)
{
	return MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
}

static struct hz_jemalloc_stats stats_of(unsigned ind)
{
	struct hz_jemalloc_stats s;

	assert_int_equal(hz_jemalloc_stats(ind, &s), 0);
	return s;
}

/* jemalloc's large extents carry one extra page (cache-oblivious offset):
 * the extent of p is [base, base + usize + pad). */
static uintptr_t extent_base(const void *p)
{
	return (uintptr_t)p & ~(uintptr_t)(4 * KiB - 1);
}

/* ---- recording: what jemalloc calls, with which sub-ranges ---- */

struct shrink_case {
	uintptr_t base; /* the extent's start */
	size_t head;    /* the extent's size after the shrink */
	char *p;
};

/* mallocx(8 MiB) written with 0x5a, shrunk to 4 MiB in place, then
 * arena.<i>.purge: returns where the split fell. */
static struct shrink_case shrink_and_purge(unsigned ind)
{
	struct shrink_case c;
	const struct rec_call *split = NULL;

	c.p = mallocx(8 * MiB, flags_of(ind));
	assert_non_null(c.p);
	memset(c.p, 0x5a, 8 * MiB);
	c.base = extent_base(c.p);
	rec.count = 0;
	assert_int_equal(xallocx(c.p, 4 * MiB, 0, flags_of(ind)), 4 * MiB);
	for (unsigned i = 0; i < rec.count; i++)
		if (rec.call[i].op == OP_SPLIT && rec.call[i].addr == c.base)
			split = &rec.call[i];
	assert_non_null(split);
	assert_false(split->result);
	assert_int_equal(split->a + split->b, split->size);
	assert_int_equal(split->b, 4 * MiB); /* the trail: exactly what was cut */
	c.head = split->a;
	assert_int_equal(arena_ctl(ind, "purge"), 0);
	return c;
}

static void shrink_splits_and_dalloc_takes_the_trail(void **state)
{
	unsigned ind;
	struct shrink_case c;
	const struct rec_call *d;
	char *q;

	(void)state;
	rec_reset();
	ind = new_arena(&recording_hooks);
	c = shrink_and_purge(ind);
	d = rec_find(OP_DALLOC, c.base + c.head, 4 * MiB);
	assert_non_null(d);
	assert_false(d->result); /* hugezero took it back */
	assert_int_equal(rec_count(OP_PURGE_FORCED) + rec_count(OP_DECOMMIT), 0);
	assert_true(all_bytes(c.p, 4 * MiB, 0x5a));
	/* The arena keeps working, and the trail comes back zeroed. */
	q = mallocx(4 * MiB - 4 * KiB, flags_of(ind) | MALLOCX_ZERO);
	assert_non_null(q);
	assert_true(all_bytes(q, 4 * MiB - 4 * KiB, 0));
	dallocx(q, flags_of(ind));
	dallocx(c.p, flags_of(ind));
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* With dalloc refused (as jemalloc's harness does), jemalloc decommits the
 * trail through our hook, then commits and merges it when growing back. */
static void growing_back_commits_and_merges_a_decommitted_trail(void **state)
{
	unsigned ind;
	struct shrink_case c;
	const struct rec_call *call;

	(void)state;
	rec_reset();
	rec.opt_out[OP_DALLOC] = true;
	ind = new_arena(&recording_hooks);
	c = shrink_and_purge(ind);
	assert_non_null(rec_find(OP_DALLOC, c.base + c.head, 4 * MiB));
	call = rec_find(OP_DECOMMIT, c.base + c.head, 4 * MiB);
	assert_non_null(call);
	assert_false(call->result);
	rec.count = 0;
	assert_int_equal(xallocx(c.p, 8 * MiB, 0, flags_of(ind)), 8 * MiB);
	call = rec_find(OP_COMMIT, c.base + c.head, 4 * MiB);
	assert_non_null(call);
	assert_false(call->result);
	assert_true(rec_count(OP_MERGE) >= 1);
	for (unsigned i = 0; i < rec.count; i++)
		if (rec.call[i].op == OP_MERGE)
			assert_false(rec.call[i].result);
	/* Decommit zeroed what was cut; what stayed kept its bytes. */
	assert_true(all_bytes(c.p, c.base + c.head - (uintptr_t)c.p, 0x5a));
	assert_true(all_bytes((char *)(c.base + c.head), 4 * MiB, 0));
	dallocx(c.p, flags_of(ind));
	rec.opt_out[OP_DALLOC] = false;
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* With dalloc and decommit refused, jemalloc purges the trail (a range
 * with partial huge pages) through purge_forced, trusts it to be zero, and
 * merges it back on growth. */
static void purge_forced_zeroes_the_trail_jemalloc_then_reuses(void **state)
{
	unsigned ind;
	struct shrink_case c;
	const struct rec_call *call;

	(void)state;
	rec_reset();
	rec.opt_out[OP_DALLOC] = true;
	rec.opt_out[OP_DECOMMIT] = true;
	ind = new_arena(&recording_hooks);
	c = shrink_and_purge(ind);
	call = rec_find(OP_PURGE_FORCED, c.base + c.head, 4 * MiB);
	assert_non_null(call);
	assert_false(call->result);
	rec.count = 0;
	assert_int_equal(xallocx(c.p, 8 * MiB, 0, flags_of(ind)), 8 * MiB);
	assert_true(rec_count(OP_MERGE) >= 1);
	assert_int_equal(rec_count(OP_COMMIT), 0); /* it never stopped being committed */
	assert_true(all_bytes(c.p, c.base + c.head - (uintptr_t)c.p, 0x5a));
	assert_true(all_bytes((char *)(c.base + c.head), 4 * MiB, 0));
	dallocx(c.p, flags_of(ind));
	rec.opt_out[OP_DALLOC] = rec.opt_out[OP_DECOMMIT] = false;
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* Dirty extents decaying to muzzy go through purge_lazy (time-based decay
 * with muzzy_decay_ms > 0): it frees the whole huge pages of the sub-range,
 * or opts out when there is none, and the arena keeps working. */
static void decay_to_muzzy_calls_purge_lazy_on_the_trail(void **state)
{
	unsigned ind;
	struct shrink_case c;
	const struct rec_call *call = NULL;
	char *q;

	(void)state;
	rec_reset();
	ind = new_arena(&recording_hooks);
	assert_int_equal(arena_set_ssize(ind, "muzzy_decay_ms", 10000), 0);
	assert_int_equal(arena_set_ssize(ind, "dirty_decay_ms", 1), 0);
	c.p = mallocx(8 * MiB, flags_of(ind));
	assert_non_null(c.p);
	memset(c.p, 0x5a, 8 * MiB);
	c.base = extent_base(c.p);
	rec.count = 0;
	assert_int_equal(xallocx(c.p, 4 * MiB, 0, flags_of(ind)), 4 * MiB);
	/* Decay is epoch-based: give it a few epochs (up to 2 s). */
	for (int k = 0; k < 100 && !call; k++) {
		usleep(20000);
		assert_int_equal(arena_ctl(ind, "decay"), 0);
		for (unsigned i = 0; i < rec.count; i++)
			if (rec.call[i].op == OP_PURGE_LAZY)
				call = &rec.call[i];
	}
	assert_non_null(call);
	assert_true(call->addr + call->a >= c.base + 4 * MiB);
	assert_true(call->addr + call->a + call->b <= c.base + 8 * MiB + 4 * KiB);
	q = mallocx(3 * MiB, flags_of(ind) | MALLOCX_ZERO);
	assert_non_null(q);
	assert_true(all_bytes(q, 3 * MiB, 0));
	assert_true(all_bytes(c.p, 4 * MiB, 0x5a));
	dallocx(q, flags_of(ind));
	dallocx(c.p, flags_of(ind));
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* ---- what programs see ---- */

#define SLOTS 16

struct slot {
	unsigned char *p;
	size_t size;
	unsigned char fill;
};

/* Sizes from 4 KiB to 24 MiB, most of them odd multiples of pages. */
static size_t pick_size(struct hz_test_rng *r)
{
	uint64_t x = hz_test_rng_next(r);

	switch (x % 8) {
	case 0: return 16 * KiB + (x >> 8) % (256 * KiB);
	case 1: case 2: case 3: return 2 * MiB + (x >> 8) % (6 * MiB);
	case 4: case 5: return 6 * MiB + (x >> 8) % (6 * MiB);
	case 6: return 12 * MiB + (x >> 8) % (12 * MiB);
	default: return 4 * KiB + (x >> 8) % (2 * MiB);
	}
}

/* Random mallocx / dallocx / xallocx on one arena: every MALLOCX_ZERO
 * allocation reads zero although everything freed was filled with a
 * pattern first, and every live allocation keeps its own pattern. */
static void churn(unsigned ind, uint64_t seed, unsigned ops, unsigned *zero_checked)
{
	struct slot s[SLOTS] = { { NULL, 0, 0 } };
	struct hz_test_rng r = { seed };
	int flags = flags_of(ind);

	for (unsigned op = 0; op < ops; op++) {
		struct slot *t = &s[hz_test_rng_next(&r) % SLOTS];

		if (t->p) {
			size_t bad = first_not(t->p, t->size, t->fill);

			if (bad != t->size)
				fail_msg("allocation %p lost its pattern at byte %zu", (void *)t->p, bad);
			if (hz_test_rng_next(&r) % 4 == 0) {
				/* shrink in place: the cut part goes back dirty */
				size_t to = t->size / 2 > 4 * KiB ? t->size / 2 : t->size;

				t->size = xallocx(t->p, to, 0, flags);
				memset(t->p, t->fill, t->size);
				continue;
			}
			memset(t->p, 0xa5, t->size); /* the dirty pattern */
			escape(t->p);
			dallocx(t->p, flags);
			t->p = NULL;
			continue;
		}
		t->size = pick_size(&r);
		bool zero = hz_test_rng_next(&r) % 2 == 0;
		t->p = mallocx(t->size, flags | (zero ? MALLOCX_ZERO : 0));
		assert_non_null(t->p);
		t->size = sallocx(t->p, flags);
		if (zero) {
			size_t bad = first_not(t->p, t->size, 0);

			if (bad != t->size)
				fail_msg("MALLOCX_ZERO of %zu bytes at %p: byte %zu is %#x", t->size,
					 (void *)t->p, bad, t->p[bad]);
			__atomic_add_fetch(zero_checked, 1, __ATOMIC_RELAXED);
		}
		t->fill = (unsigned char)(1 + hz_test_rng_next(&r) % 250);
		memset(t->p, t->fill, t->size);
	}
	for (int i = 0; i < SLOTS; i++)
		if (s[i].p)
			dallocx(s[i].p, flags);
}

static void mallocx_zero_after_heavy_reuse_reads_zero(void **state)
{
	unsigned ind, checked = 0;

	(void)state;
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	/* Extents of every size come back to hugezero at once. */
	assert_int_equal(arena_set_ssize(ind, "dirty_decay_ms", 0), 0);
	churn(ind, 0x9e3779b97f4a7c15ull, 2000, &checked);
	assert_true(checked > 300);
	if (frees_stay_dirty())
		assert_true(stats_of(ind).dirty_bytes > 0); /* reuse really happened */
	/* And with jemalloc's own dirty cache in between (default decay). */
	assert_int_equal(arena_set_ssize(ind, "dirty_decay_ms", 10000), 0);
	churn(ind, 12345, 800, &checked);
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

struct worker {
	unsigned ind;
	uint64_t seed;
	unsigned checked;
};

static void *work(void *arg)
{
	struct worker *w = arg;

	churn(w->ind, w->seed, 800, &w->checked);
	return NULL;
}

static void four_threads_share_one_hooked_arena(void **state)
{
	struct worker w[4];
	pthread_t t[4];
	unsigned ind;

	(void)state;
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	assert_int_equal(arena_set_ssize(ind, "dirty_decay_ms", 0), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ ind, 1000003u * (uint64_t)(i + 1), 0 };
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_true(w[i].checked > 50);
	}
	assert_int_equal(stats_of(ind).active_bytes >= 2 * MiB, 1); /* the arena's metadata */
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
	assert_int_equal(stats_of(ind).regions, 0);
}

/* fork while other threads work on the hooked arena: the child can still
 * allocate from it (jemalloc's fork handlers and the hooks' own child
 * handler leave both usable), and zeroed memory is zero there too. */
static void forked_child_uses_the_hooked_arena(void **state)
{
	struct worker w[2];
	pthread_t t[2];
	unsigned ind;

	(void)state;
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){ ind, 77u * (uint64_t)(i + 1), 0 };
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int k = 0; k < 5; k++) {
		int status;
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0) {
			for (int i = 0; i < 20; i++) {
				char *p = mallocx(3 * MiB + 4 * KiB * (size_t)i,
						  flags_of(ind) | MALLOCX_ZERO);

				if (!p || !all_bytes(p, 3 * MiB, 0))
					_exit(1);
				memset(p, 0x77, 3 * MiB);
				dallocx(p, flags_of(ind));
			}
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

static void arena_destroy_returns_all_memory(void **state)
{
	enum { N = 12 };
	struct hz_jemalloc_stats before, during;
	unsigned ind;
	char *p[N];

	(void)state;
	assert_int_equal(hz_jemalloc_stats(HZ_JEMALLOC_ALL_ARENAS, &before), 0);
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	for (int i = 0; i < N; i++) {
		p[i] = mallocx((size_t)(i + 1) * 3 * MiB / 2, flags_of(ind));
		assert_non_null(p[i]);
		memset(p[i], i, (size_t)(i + 1) * 3 * MiB / 2);
	}
	for (int i = 0; i < N; i += 3)
		dallocx(p[i], flags_of(ind)); /* some freed, most still live */
	during = stats_of(ind);
	assert_true(during.regions >= 1);
	assert_true(during.active_bytes > 50 * MiB);
	assert_true(hz_test_smaps_sum(extent_base(p[N - 1]), extent_base(p[N - 1]) + 1, "Rss:") > 0);
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
	/* Every page is unmapped, memory and address space (mincore is a bare
	 * system call: nothing can have mapped there since). */
	for (int i = 0; i < N; i++) {
		unsigned char vec[1];

		if (mincore((void *)extent_base(p[i]), 4 * KiB, vec) != -1 || errno != ENOMEM)
			fail_msg("%p is still mapped after arena.%u.destroy", (void *)p[i], ind);
	}
	assert_int_equal(stats_of(ind).regions, 0);
	assert_int_equal(stats_of(ind).mapped_bytes, 0);
	struct hz_jemalloc_stats after;

	assert_int_equal(hz_jemalloc_stats(HZ_JEMALLOC_ALL_ARENAS, &after), 0);
	assert_int_equal(after.mapped_bytes, before.mapped_bytes);
}

static void mallocx_alignment_up_to_1g(void **state)
{
	unsigned ind;

	(void)state;
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	for (size_t align = 4 * KiB; align <= GiB; align *= 2) {
		const size_t sizes[] = { 64 * KiB, 2 * MiB + 4 * KiB, 3 * align / 2 };

		for (int k = 0; k < 3; k++) {
			int flags = flags_of(ind) | MALLOCX_ALIGN(align);
			char *p = mallocx(sizes[k], flags | MALLOCX_ZERO);

			assert_non_null(p);
			assert_int_equal((uintptr_t)p % align, 0);
			assert_int_equal(p[0] | p[sizes[k] - 1], 0);
			p[0] = 1;
			p[sizes[k] - 1] = 1;
			dallocx(p, flags);
		}
	}
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* Extents of odd sizes written in full sit on transparent huge pages: the
 * regions are 2 MiB aligned and MADV_HUGEPAGE'd, so every 2 MiB of them
 * faults in as one huge page. */
static void extents_sit_on_transparent_huge_pages(void **state)
{
	const size_t sizes[] = { 2 * MiB + 512 * KiB, 3 * MiB, 5 * MiB + 4 * KiB, 64 * MiB };
	unsigned ind;
	char *p[4];
	size_t rss, huge;
	struct hz_jemalloc_stats s;

	(void)state;
	if (!thp_usable() || !huge_pages_allowed()) {
		print_message("[  SKIP    ] THP: transparent_hugepage/enabled is [never], "
			      "or HUGEZERO_BACKING=none\n");
		skip();
	}
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	for (int i = 0; i < 4; i++) {
		p[i] = mallocx(sizes[i], flags_of(ind));
		assert_non_null(p[i]);
		memset(p[i], 0x42, sizes[i]);
	}
	s = stats_of(ind);
	if (s.hugetlb_bytes == s.mapped_bytes) {
		print_message("[  SKIP    ] THP: the hugetlb pool served every region\n");
		goto out;
	}
	assert_int_equal(s.thp_bytes, s.mapped_bytes);
	/* One span over all four: smaps entries are counted once each. */
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	for (int i = 0; i < 4; i++) {
		lo = extent_base(p[i]) < lo ? extent_base(p[i]) : lo;
		hi = (uintptr_t)p[i] + sizes[i] > hi ? (uintptr_t)p[i] + sizes[i] : hi;
	}
	rss = hz_test_smaps_sum(lo, hi, "Rss:");
	huge = hz_test_smaps_sum(lo, hi, "AnonHugePages:");
	assert_true(rss >= 2 * MiB + 512 * KiB + 3 * MiB + 5 * MiB + 64 * MiB);
	print_message("THP: %zu of %zu KiB resident in the extents' mappings are huge pages\n",
		      huge / KiB, rss / KiB);
	/* >= 90%: the only 4 KiB pages are jemalloc's metadata, written
	 * before the regions held anything else. */
	assert_true(huge * 10 >= rss * 9);
out:
	for (int i = 0; i < 4; i++)
		dallocx(p[i], flags_of(ind));
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* An optional argument selects tests by name (a cmocka glob). */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shrink_splits_and_dalloc_takes_the_trail),
		cmocka_unit_test(growing_back_commits_and_merges_a_decommitted_trail),
		cmocka_unit_test(purge_forced_zeroes_the_trail_jemalloc_then_reuses),
		cmocka_unit_test(decay_to_muzzy_calls_purge_lazy_on_the_trail),
		cmocka_unit_test(mallocx_zero_after_heavy_reuse_reads_zero),
		cmocka_unit_test(four_threads_share_one_hooked_arena),
		cmocka_unit_test(forked_child_uses_the_hooked_arena),
		cmocka_unit_test(arena_destroy_returns_all_memory),
		cmocka_unit_test(mallocx_alignment_up_to_1g),
		cmocka_unit_test(extents_sit_on_transparent_huge_pages),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
