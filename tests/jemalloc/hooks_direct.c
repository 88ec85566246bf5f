/* hugezero's extent hooks called directly, as jemalloc would call them, on
 * made-up arena indices (3000 and up: jemalloc never gets that far here), so
 * each test sees exactly the calls it makes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <fcntl.h>

#include "prim/pagemap.h"
#include "util.h"

static struct hz_jemalloc_stats stats_of(unsigned ind)
{
	struct hz_jemalloc_stats s;

	assert_int_equal(hz_jemalloc_stats(ind, &s), 0);
	return s;
}

/* alloc as jemalloc's exact-size path calls it (*commit true on entry);
 * *zero on entry asks for zeroed memory (NULL: not asked). */
static char *alloc_at(unsigned ind, void *want, size_t size, size_t align, bool *zero)
{
	bool z = zero != NULL && *zero, c = true;
	char *p = hz()->alloc(hz(), want, size, align, &z, &c, ind);

	if (p)
		assert_true(c);
	if (zero)
		*zero = z;
	return p;
}

static char *alloc_ok(unsigned ind, size_t size, size_t align)
{
	bool zero = true; /* asked for: it must read zero */
	char *p = alloc_at(ind, NULL, size, align, &zero);

	assert_non_null(p);
	assert_true(zero);
	assert_true(all_bytes(p, size, 0));
	assert_int_equal((uintptr_t)p % align, 0);
	return p;
}

static void dalloc_ok(unsigned ind, void *p, size_t size)
{
	assert_false(hz()->dalloc(hz(), p, size, true, ind));
}

static bool overlap(const char *a, size_t la, const char *b, size_t lb)
{
	return a < b + lb && b < a + la;
}

static void odd_sizes_are_carved_page_granular_from_one_huge_page_region(void **state)
{
	const unsigned ind = 3001;
	const size_t sizes[] = { 2 * MiB, 2 * MiB + 512 * KiB, 3 * MiB, 4 * KiB,
				 3 * MiB + 4 * KiB, 5 * MiB };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	char *p[N];
	struct hz_jemalloc_stats s;

	(void)state;
	for (int i = 0; i < N; i++) {
		p[i] = alloc_ok(ind, sizes[i], 4 * KiB);
		assert_true(all_bytes(p[i], sizes[i], 0));
		memset(p[i], 0x11 * (i + 1), sizes[i]);
		for (int j = 0; j < i; j++)
			assert_false(overlap(p[i], sizes[i], p[j], sizes[j]));
	}
	s = stats_of(ind);
	assert_int_equal(s.regions, 1); /* all of it fits the first 64 MiB region */
	assert_true(s.mapped_bytes >= 64 * MiB);
	assert_int_equal(s.active_bytes, 2 * MiB + 512 * KiB + 2 * MiB + 3 * MiB +
					     4 * KiB + 3 * MiB + 4 * KiB + 5 * MiB);
	if (thp_usable() && huge_pages_allowed())
		assert_int_equal(s.thp_bytes + s.hugetlb_bytes, s.mapped_bytes);
	for (int i = 0; i < N; i++) {
		assert_true(all_bytes(p[i], sizes[i], (unsigned char)(0x11 * (i + 1))));
		dalloc_ok(ind, p[i], sizes[i]);
	}
	/* The arena holds nothing any more: its region went back. */
	assert_int_equal(stats_of(ind).regions, 0);
}

/* jemalloc's retained growth (*commit false on entry) is refused, so that
 * jemalloc asks for the exact size instead (see src/jemalloc/hooks.c). */
/* Whether the hooks can tell the pages of an extent that hold data from
 * those that read zero: PAGEMAP_SCAN works here (Linux 6.7, /proc
 * mounted). Elsewhere every page given back counts as dirty. */
static bool data_is_told_apart(void)
{
	char *page = mmap(NULL, 4 * KiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct hz_prim_page_region vec[1];
	struct hz_pm_scan_arg arg = { .size = sizeof(arg), .start = (uintptr_t)page,
				      .end = (uintptr_t)page + 4 * KiB, .vec = (uintptr_t)vec,
				      .vec_len = 1, .category_anyof_mask = HZ_PAGE_IS_PRESENT,
				      .return_mask = HZ_PAGE_IS_PRESENT };
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	bool works;

	assert_true(page != MAP_FAILED);
	page[0] = 1;
	works = fd >= 0 && ioctl(fd, HZ_PAGEMAP_SCAN, &arg) == 1;
	if (fd >= 0)
		close(fd);
	munmap(page, 4 * KiB);
	if (!works)
		print_message("[  SKIP    ] PAGEMAP_SCAN is not available: every page given "
			      "back counts as dirty\n");
	return works;
}

/* Freed extents stay dirty long enough for a test's next step: never with
 * a decay shorter than a second, whose window of demand (extents.c) a
 * stalled machine outlasts. */
static bool frees_stay_dirty_a_while(void)
{
	const char *decay = getenv("HUGEZERO_DECAY_MS");

	return frees_stay_dirty() && (decay == NULL || atol(decay) >= 1000);
}

/* An extent given back counts as dirty only where it holds data: pages
 * never written read zero, need no zeroing and cost no memory. Here one
 * byte of 8 MiB was written: one page of 4 KiB, or one huge page, is
 * dirty (on b9e4f2a's hooks, all 8 MiB). */
static void only_written_pages_come_back_dirty(void **state)
{
	const unsigned ind = 3020;
	char *keep = alloc_ok(ind, 4 * KiB, 4 * KiB); /* keeps the region */
	char *p = alloc_at(ind, NULL, 8 * MiB, 2 * MiB, NULL); /* not read: reads fault too */
	size_t dirty;

	(void)state;
	assert_non_null(p);
	if (!data_is_told_apart()) {
		dalloc_ok(ind, p, 8 * MiB);
		dalloc_ok(ind, keep, 4 * KiB);
		skip();
	}
	p[3 * MiB] = 1;
	dalloc_ok(ind, p, 8 * MiB);
	dirty = stats_of(ind).dirty_bytes;
	assert_true(dirty <= 2 * MiB);
	p = alloc_ok(ind, 8 * MiB, 2 * MiB); /* reads zero (alloc_ok) */
	dalloc_ok(ind, p, 8 * MiB);
	dalloc_ok(ind, keep, 4 * KiB);
}

/* A new extent goes where freed pages still hold data, which it reuses,
 * rather than onto fresh pages at a lower address, whose faults would
 * leave the dirty ones idle. First in the group: the hooks keep dirty
 * pages only within the demand they saw, in the density of what was given
 * back (jemalloc/extents.c), which earlier tests would change. */
static void new_extents_reuse_dirty_pages_first(void **state)
{
	const unsigned ind = 3021;
	char *clean = alloc_at(ind, NULL, 4 * MiB, 2 * MiB, NULL); /* never touched */
	char *used = alloc_at(ind, NULL, 8 * MiB, 2 * MiB, NULL);
	char *keep = alloc_ok(ind, 4 * KiB, 4 * KiB);
	char *p;

	(void)state;
	assert_non_null(clean);
	assert_non_null(used);
	assert_true(clean < used);
	memset(used, 7, 8 * MiB);
	dalloc_ok(ind, used, 8 * MiB);
	dalloc_ok(ind, clean, 4 * MiB);
	if (!frees_stay_dirty()) {
		assert_int_equal(stats_of(ind).dirty_bytes, 0);
	} else if (frees_stay_dirty_a_while() && data_is_told_apart()) {
		assert_int_equal(stats_of(ind).dirty_bytes, 8 * MiB);
		p = alloc_ok(ind, 4 * MiB, 2 * MiB);
		assert_ptr_equal(p, used);
		dalloc_ok(ind, p, 4 * MiB);
	}
	dalloc_ok(ind, keep, 4 * KiB);
}

static void growth_requests_are_refused(void **state)
{
	bool zero = false, commit = false;

	(void)state;
	assert_null(hz()->alloc(hz(), NULL, 10 * MiB, 4 * KiB, &zero, &commit, 3002));
	assert_int_equal(stats_of(3002).regions, 0);
}

static void alignment_is_honoured_up_to_1g(void **state)
{
	const unsigned ind = 3003;

	(void)state;
	for (size_t align = 4 * KiB; align <= GiB; align *= 4) {
		size_t size = align < 2 * MiB ? 2 * MiB + 4 * KiB : align;
		char *p = alloc_ok(ind, size, align);

		p[0] = 1;
		p[size - 1] = 2;
		dalloc_ok(ind, p, size);
	}
	/* 1 GiB exactly, and a small extent with 1 GiB alignment. */
	char *big = alloc_ok(ind, 4 * KiB, GiB);
	char *small = alloc_ok(ind, 8 * KiB, 2 * MiB);

	assert_int_equal((uintptr_t)big % GiB, 0);
	dalloc_ok(ind, big, 4 * KiB);
	dalloc_ok(ind, small, 8 * KiB);
	assert_int_equal(stats_of(ind).regions, 0);
}

static void new_addr_gets_exactly_that_address_or_null(void **state)
{
	const unsigned ind = 3004;
	char *p = alloc_ok(ind, 8 * MiB, 4 * KiB), *q;

	(void)state;
	/* Split off [p + 2 MiB, p + 4 MiB) and give it back. */
	assert_false(hz()->split(hz(), p, 8 * MiB, 2 * MiB, 6 * MiB, true, ind));
	assert_false(hz()->split(hz(), p + 2 * MiB, 6 * MiB, 2 * MiB, 4 * MiB, true, ind));
	dalloc_ok(ind, p + 2 * MiB, 2 * MiB);
	q = alloc_at(ind, p + 2 * MiB, 2 * MiB, 4 * KiB, NULL);
	assert_ptr_equal(q, p + 2 * MiB);
	/* Taken now, partly taken, misaligned for the request, and not ours. */
	assert_null(alloc_at(ind, p + 2 * MiB, 2 * MiB, 4 * KiB, NULL));
	dalloc_ok(ind, q, 2 * MiB);
	assert_null(alloc_at(ind, p + 1 * MiB, 2 * MiB, 4 * KiB, NULL));
	assert_null(alloc_at(ind, p + 2 * MiB + 4 * KiB, 4 * KiB, 2 * MiB, NULL));
	static char not_ours[8192] __attribute__((aligned(4096)));
	assert_null(alloc_at(ind, not_ours, 4 * KiB, 4 * KiB, NULL));
	/* Another arena cannot take this arena's pages. */
	assert_null(alloc_at(ind + 100, p + 2 * MiB, 2 * MiB, 4 * KiB, NULL));
	dalloc_ok(ind, p, 2 * MiB);
	dalloc_ok(ind, p + 4 * MiB, 4 * MiB);
	assert_int_equal(stats_of(ind).regions, 0);
}

static void dalloc_takes_back_sub_ranges_after_splits(void **state)
{
	const unsigned ind = 3005;
	char *p = alloc_ok(ind, 10 * MiB, 4 * KiB);
	struct hz_jemalloc_stats s;

	(void)state;
	memset(p, 0x5a, 10 * MiB);
	assert_false(hz()->split(hz(), p, 10 * MiB, 3 * MiB + 4 * KiB,
				 7 * MiB - 4 * KiB, true, ind));
	dalloc_ok(ind, p + 3 * MiB + 4 * KiB, 7 * MiB - 4 * KiB);
	s = stats_of(ind);
	assert_int_equal(s.active_bytes, 3 * MiB + 4 * KiB);
	if (frees_stay_dirty())
		assert_int_equal(s.dirty_bytes, 7 * MiB - 4 * KiB);
	/* The head is untouched by giving back the tail. */
	assert_true(all_bytes(p, 3 * MiB + 4 * KiB, 0x5a));
	dalloc_ok(ind, p, 3 * MiB + 4 * KiB);
	assert_int_equal(stats_of(ind).regions, 0);
}

/* The promise jemalloc relies on: *zero is true only when it is, and
 * always when asked for. An extent not asked for zeroed is handed out over
 * dirty pages as they are (jemalloc zeroes what it needs itself). */
static void reused_extent_reads_zero_after_a_dirty_pattern(void **state)
{
	const unsigned ind = 3006;
	char *keep = alloc_ok(ind, 4 * KiB, 4 * KiB); /* keeps the region */
	const size_t sizes[] = { 6 * MiB + 8 * KiB, 64 * KiB, 2 * MiB + 12 * KiB,
				 33 * MiB, 4 * KiB };
	unsigned handed_dirty = 0;

	(void)state;
	for (int round = 0; round < 20; round++) {
		size_t size = sizes[round % 5];
		bool asked = round % 2 == 0, zero = asked;
		char *p = alloc_at(ind, NULL, size, 4 * KiB, &zero);

		assert_non_null(p);
		if (asked)
			assert_true(zero);
		if (zero) /* else jemalloc would zero it itself */
			assert_int_equal(first_not(p, size, 0), size);
		else
			handed_dirty++;
		memset(p, 0xa5, size);
		/* Written sparsely too: the zeroing must not skip any page. */
		for (size_t off = 4 * KiB - 1; off < size; off += 3 * 4 * KiB)
			p[off] = 0x3c;
		escape(p);
		dalloc_ok(ind, p, size);
	}
	if (frees_stay_dirty()) {
		assert_true(stats_of(ind).dirty_bytes > 0);
		assert_true(handed_dirty > 0);
	}
	dalloc_ok(ind, keep, 4 * KiB);
}

static void purge_forced_zeroes_a_range_with_partial_huge_pages(void **state)
{
	const unsigned ind = 3007;
	char *p = alloc_ok(ind, 8 * MiB, 2 * MiB);
	const size_t off = 1 * MiB + 4 * KiB, len = 5 * MiB;

	(void)state;
	memset(p, 0x77, 8 * MiB);
	assert_false(hz()->purge_forced(hz(), p, 8 * MiB, off, len, ind));
	assert_true(all_bytes(p + off, len, 0));
	assert_true(all_bytes(p, off, 0x77));
	assert_true(all_bytes(p + off + len, 8 * MiB - off - len, 0x77));
	/* Whole huge pages only: still writable and zero-filled. */
	memset(p, 0x12, 8 * MiB);
	assert_false(hz()->purge_forced(hz(), p, 8 * MiB, 2 * MiB, 4 * MiB, ind));
	assert_true(all_bytes(p + 2 * MiB, 4 * MiB, 0));
	assert_true(all_bytes(p, 2 * MiB, 0x12));
	assert_true(all_bytes(p + 6 * MiB, 2 * MiB, 0x12));
	dalloc_ok(ind, p, 8 * MiB);
}

static void decommit_zeroes_and_commit_succeeds(void **state)
{
	const unsigned ind = 3008;
	char *p = alloc_ok(ind, 6 * MiB, 4 * KiB);

	(void)state;
	memset(p, 0x66, 6 * MiB);
	assert_false(hz()->decommit(hz(), p, 6 * MiB, 4 * KiB, 5 * MiB, ind));
	assert_false(hz()->commit(hz(), p, 6 * MiB, 4 * KiB, 5 * MiB, ind));
	assert_true(all_bytes(p + 4 * KiB, 5 * MiB, 0));
	assert_true(all_bytes(p, 4 * KiB, 0x66));
	assert_true(all_bytes(p + 5 * MiB + 4 * KiB, MiB - 4 * KiB, 0x66));
	dalloc_ok(ind, p, 6 * MiB);
}

static void purge_lazy_frees_whole_huge_pages_or_opts_out(void **state)
{
	const unsigned ind = 3009;
	char *p = alloc_ok(ind, 8 * MiB, 2 * MiB);
	struct hz_jemalloc_stats s;

	(void)state;
	memset(p, 0x44, 8 * MiB);
	s = stats_of(ind);
	if (s.thp_bytes == s.mapped_bytes) {
		/* No whole huge page inside: nothing to free, so opt out. */
		assert_true(hz()->purge_lazy(hz(), p, 8 * MiB, 4 * KiB, MiB, ind));
		assert_true(all_bytes(p, 8 * MiB, 0x44));
	} else {
		print_message("[  SKIP    ] partial purge_lazy: regions are not THP here\n");
	}
	assert_false(hz()->purge_lazy(hz(), p, 8 * MiB, 0, 8 * MiB, ind));
	/* Lazily freed memory stays usable. */
	memset(p, 0x45, 8 * MiB);
	assert_true(all_bytes(p, 8 * MiB, 0x45));
	dalloc_ok(ind, p, 8 * MiB);
}

static void split_succeeds_and_merge_stays_within_a_region(void **state)
{
	const unsigned ind = 3010;
	char *a = alloc_ok(ind, 64 * MiB, 2 * MiB); /* fills the first region */
	char *b = alloc_ok(ind, 64 * MiB, 2 * MiB); /* so this is a second one */

	(void)state;
	assert_int_equal(stats_of(ind).regions, 2);
	/* Any split inside a region, at any page. */
	assert_false(hz()->split(hz(), a, 64 * MiB, 4 * KiB, 64 * MiB - 4 * KiB, true, ind));
	assert_false(hz()->split(hz(), a + 4 * KiB, 64 * MiB - 4 * KiB, 3 * MiB + 4 * KiB,
				 61 * MiB - 8 * KiB, true, ind));
	assert_false(hz()->merge(hz(), a, 4 * KiB, a + 4 * KiB, 3 * MiB + 4 * KiB, true, ind));
	/* Across regions, adjacent or not, merging is refused. */
	if (a + 64 * MiB == b)
		print_message("regions are adjacent: %p %p\n", (void *)a, (void *)b);
	assert_true(hz()->merge(hz(), a, 64 * MiB, b, 64 * MiB, true, ind));
	assert_true(hz()->merge(hz(), b, 64 * MiB, a, 64 * MiB, true, ind));
	/* A range running out of its region cannot be split. */
	assert_true(hz()->split(hz(), b + 32 * MiB, 64 * MiB, 16 * MiB, 48 * MiB, true, ind));
	dalloc_ok(ind, a, 64 * MiB);
	dalloc_ok(ind, b, 64 * MiB);
	assert_int_equal(stats_of(ind).regions, 0);
}

static void foreign_ranges_get_jemalloc_defaults_or_an_opt_out(void **state)
{
	const size_t len = 4 * MiB;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char vec[1];

	(void)state;
	assert_true(m != MAP_FAILED);
	memset(m, 0x33, len);
	assert_true(hz()->dalloc(hz(), m, len, true, 3011));      /* retain it */
	assert_false(hz()->split(hz(), m, len, MiB, 3 * MiB, true, 3011));
	assert_false(hz()->merge(hz(), m, MiB, m + MiB, 3 * MiB, true, 3011));
	assert_true(hz()->commit(hz(), m, len, 0, len, 3011));
	assert_true(hz()->decommit(hz(), m, len, 0, len, 3011));
	assert_false(hz()->purge_forced(hz(), m, len, MiB, MiB, 3011));
	assert_true(all_bytes(m + MiB, MiB, 0));
	assert_true(all_bytes(m, MiB, 0x33));
	assert_false(hz()->purge_lazy(hz(), m, len, 2 * MiB, MiB, 3011));
	hz()->destroy(hz(), m, len, true, 3011);
	assert_int_equal(mincore(m, 4096, vec), -1); /* unmapped, as jemalloc would */
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(stats_of(3011).regions, 0);
}

static void hooks_keep_errno(void **state)
{
	const unsigned ind = 3012;
	bool zero = false, commit = true;
	char *p;

	(void)state;
	errno = 4242;
	p = hz()->alloc(hz(), NULL, 6 * MiB, 4 * KiB, &zero, &commit, ind);
	assert_non_null(p);
	assert_int_equal(errno, 4242);
	hz()->split(hz(), p, 6 * MiB, 2 * MiB, 4 * MiB, true, ind);
	hz()->purge_forced(hz(), p, 2 * MiB, 0, 2 * MiB, ind);
	hz()->purge_lazy(hz(), p, 2 * MiB, 0, 2 * MiB, ind);
	hz()->decommit(hz(), p, 2 * MiB, 0, 2 * MiB, ind);
	hz()->commit(hz(), p, 2 * MiB, 0, 2 * MiB, ind);
	hz()->merge(hz(), p, 2 * MiB, p + 2 * MiB, 4 * MiB, true, ind);
	assert_int_equal(errno, 4242);
	assert_null(hz()->alloc(hz(), NULL, 3 * KiB, 4 * KiB, &zero, &commit, ind));
	assert_int_equal(errno, 4242);
	hz()->dalloc(hz(), p, 6 * MiB, true, ind);
	assert_int_equal(errno, 4242);
}

static void destroy_releases_the_region(void **state)
{
	const unsigned ind = 3013;
	char *p = alloc_ok(ind, 3 * MiB, 4 * KiB);
	unsigned char vec[1];

	(void)state;
	memset(p, 1, 3 * MiB);
	hz()->destroy(hz(), p, 3 * MiB, true, ind);
	/* Unmapped (memory and address space), before anything can map there. */
	assert_int_equal(mincore(p, 4 * KiB, vec), -1);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(stats_of(ind).regions, 0);
}

static void double_dalloc_stops_the_program(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *p = alloc_ok(3014, 2 * MiB, 4 * KiB), *keep = alloc_ok(3014, 4 * KiB, 4 * KiB);

		(void)keep;
		freopen("/dev/null", "w", stderr);
		hz()->dalloc(hz(), p, 2 * MiB, true, 3014);
		hz()->dalloc(hz(), p, 2 * MiB, true, 3014);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

/* An optional argument selects tests by name (a cmocka glob). */
/* HUGEZERO_DECAY_MS (set by the decay variants in meson.build): dirty pages
 * idle that long are purged and an empty region is unmapped, at the next
 * hook call. */
static void idle_dirty_pages_and_empty_regions_decay(void **state)
{
	const unsigned ind = 3015;
	const char *decay = getenv("HUGEZERO_DECAY_MS");
	char *keep, *big, *dirty;
	unsigned char vec[1];
	long ms;

	(void)state;
	ms = decay ? atol(decay) : -1;
	if (ms < 0 || ms > 1000) {
		print_message("[  SKIP    ] decay: runs with HUGEZERO_DECAY_MS <= 1000 "
			      "(jemalloc_hooks_direct_decay*)\n");
		skip();
	}
	big = alloc_ok(ind, 64 * MiB, 2 * MiB);  /* fills a region */
	keep = alloc_ok(ind, 4 * KiB, 4 * KiB);  /* a second one, kept */
	dirty = alloc_ok(ind, 8 * MiB, 2 * MiB); /* in the second one */
	assert_int_equal(stats_of(ind).regions, 2);
	memset(big, 1, 64 * MiB);
	memset(dirty, 2, 8 * MiB);
	dalloc_ok(ind, big, 64 * MiB);
	dalloc_ok(ind, dirty, 8 * MiB);
	if (frees_stay_dirty() && ms > 200)
		assert_int_equal(stats_of(ind).dirty_bytes, 72 * MiB);
	usleep((useconds_t)(ms + 250) * 1000);
	/* Any hook call runs the decay: one on another arena. */
	dalloc_ok(3016, alloc_ok(3016, 4 * KiB, 4 * KiB), 4 * KiB);
	assert_int_equal(stats_of(ind).regions, 1);
	assert_int_equal(stats_of(ind).dirty_bytes, 0);
	assert_int_equal(mincore(big, 4 * KiB, vec), -1); /* unmapped */
	/* The purged pages (whole huge pages) are not resident any more. */
	for (size_t off = 0; off < 8 * MiB; off += MiB) {
		assert_int_equal(mincore(dirty + off, 4 * KiB, vec), 0);
		assert_int_equal(vec[0] & 1, 0);
	}
	dalloc_ok(ind, keep, 4 * KiB);
	assert_int_equal(stats_of(ind).regions, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(new_extents_reuse_dirty_pages_first),
		cmocka_unit_test(only_written_pages_come_back_dirty),
		cmocka_unit_test(odd_sizes_are_carved_page_granular_from_one_huge_page_region),
		cmocka_unit_test(growth_requests_are_refused),
		cmocka_unit_test(alignment_is_honoured_up_to_1g),
		cmocka_unit_test(new_addr_gets_exactly_that_address_or_null),
		cmocka_unit_test(dalloc_takes_back_sub_ranges_after_splits),
		cmocka_unit_test(reused_extent_reads_zero_after_a_dirty_pattern),
		cmocka_unit_test(purge_forced_zeroes_a_range_with_partial_huge_pages),
		cmocka_unit_test(decommit_zeroes_and_commit_succeeds),
		cmocka_unit_test(purge_lazy_frees_whole_huge_pages_or_opts_out),
		cmocka_unit_test(split_succeeds_and_merge_stays_within_a_region),
		cmocka_unit_test(foreign_ranges_get_jemalloc_defaults_or_an_opt_out),
		cmocka_unit_test(hooks_keep_errno),
		cmocka_unit_test(destroy_releases_the_region),
		cmocka_unit_test(double_dalloc_stops_the_program),
		cmocka_unit_test(idle_dirty_pages_and_empty_regions_decay),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
