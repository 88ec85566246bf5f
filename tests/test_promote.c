/* Lazy huge pages (src/promote.h), with real THP: a fresh block starts on
 * 4 KiB pages; the pre-zero thread collapses it once written densely
 * (around a 2 MiB page the program's own advice cut), never a sparse one,
 * never a range the program advised MADV_NOHUGEPAGE, and an mmap range
 * unmapped while it is being promoted leaves what is mapped there next
 * alone; and the evidence a range leaves once the program moved on from
 * it. Skips with the reason where THP is not in "madvise"
 * mode or MADV_COLLAPSE is missing (before Linux 6.1). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

#include "../src/check.h" /* not tests/check.h, the CHECK macro */
#include "backing.h"
#include "classes.h"
#include "config.h"
#include "prezero.h"
#include "prezero_impl.h" /* pz_tid: the thread's wakes */
#include "promote.h"
#include "promote_density.h"
#include "promote_share.h"
#include "recycle.h"
#include "stats.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define MiB ((size_t)1 << 20)
/* 30 s: ticks come every 0.1-2 s; on a loaded machine the idle-priority
 * thread waits for a CPU. */
#define WAIT_TENTHS 300

static uint64_t huge_kb(const void *p, size_t len)
{
	return hz_test_smaps_sum((uintptr_t)p, (uintptr_t)p + len, "AnonHugePages:") >> 10;
}

static void *map_aligned(size_t len)
{
	char *raw = mmap(NULL, len + 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	uintptr_t at;

	assert_true(raw != MAP_FAILED);
	at = ((uintptr_t)raw + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1);
	if (at > (uintptr_t)raw)
		munmap(raw, at - (uintptr_t)raw);
	munmap((void *)(at + len), (uintptr_t)raw + len + 2 * MiB - (at + len));
	return (void *)at;
}

static void need_promotion(void)
{
	char *p;
	int ret;

	if (!hz_promote_enabled() || hz_prezero_mode() != HZ_PREZERO_OPT_THREAD) {
		print_message("[  SKIP    ] no promotion here (THP not in madvise mode, disabled by "
			      "prctl, or the pre-zero thread off)\n");
		skip();
	}
	p = map_aligned(2 * MiB);
	memset(p, 1, 2 * MiB);
	ret = madvise(p, 2 * MiB, MADV_COLLAPSE);
	if (ret != 0) {
		print_message("[  SKIP    ] MADV_COLLAPSE fails here (%s; Linux 6.1+)\n", strerror(errno));
		munmap(p, 2 * MiB);
		skip();
	}
	/* qemu-user accepts the advice and gives the emulated program no
	 * huge page its smaps would show. */
	ret = huge_kb(p, 2 * MiB) < 2048;
	munmap(p, 2 * MiB);
	if (ret) {
		print_message("[  SKIP    ] MADV_COLLAPSE succeeds here but smaps shows no huge page "
			      "(an emulator)\n");
		skip();
	}
}

/* Wait until p's huge pages reach want KiB (true) or the wait ends. */
/* The first touches are watched as long as a test takes. */
#define FIRST_TOUCHES_ALL_TEST (3600 * 1000000000ull)

static bool wait_huge(const void *p, size_t len, uint64_t want)
{
	for (int i = 0; i < WAIT_TENTHS; i++) {
		if (huge_kb(p, len) >= want)
			return true;
		hz_promote_test_kick();
		usleep(100000);
	}
	return false;
}

/* Wait until the promoter has collapsed at least want bytes more than
 * before (true) or the wait ends. Counted, not read from smaps: smaps
 * tells a VMA's huge pages, and a block shares its VMA with others. */
static bool wait_collapsed(uint64_t before, uint64_t want)
{
	for (int i = 0; i < WAIT_TENTHS; i++) {
		if (hz_stats.promote_collapsed_bytes >= before + want)
			return true;
		hz_promote_test_kick();
		usleep(100000);
	}
	return false;
}

/* The same for the bytes advised THP at first dense writes: a range's
 * advice may come in two looks, and another range's is no sign of it. */
static bool wait_advised(uint64_t before, uint64_t want)
{
	for (int i = 0; i < WAIT_TENTHS; i++) {
		if (hz_stats.promote_advised_bytes >= before + want)
			return true;
		usleep(100000);
	}
	return false;
}

/* Wait until the range at p is seen written in strides (true) or the
 * wait ends. */
static bool wait_seen_strided(const void *p)
{
	for (int i = 0; i < 10 * WAIT_TENTHS; i++) {
		if (hz_promote_test_seen_strided((uintptr_t)p))
			return true;
		usleep(10000);
	}
	return false;
}

static void settle(void)
{
	for (int i = 0; i < 10; i++) { /* a few ticks */
		hz_promote_test_kick();
		usleep(100000);
	}
}

/* The collapsed bytes once no collapse is in flight: an earlier test's
 * free may have found the promoter inside a collapse of its block, and a
 * forget waits for that only 2 ms (promote.c), so the count can still grow
 * after the free. Stable over 300 ms, within 10 s. */
static uint64_t collapsed_at_rest(void)
{
	uint64_t seen = hz_stats.promote_collapsed_bytes;

	for (int i = 0, stable = 0; i < 100 && stable < 3; i++) {
		usleep(100000);
		stable = hz_stats.promote_collapsed_bytes == seen ? stable + 1 : 0;
		seen = hz_stats.promote_collapsed_bytes;
	}
	return seen;
}

/* The rule on first touches (promote_density.h), page counts per 2 MiB. */
static void first_touches_are_judged_dense_sparse_or_not_yet(void **state)
{
	static const struct {
		uint16_t resident[6];
		enum hz_front want;
		size_t frontier;
	} cases[] = {
		{ { 0, 0, 0, 0, 0, 0 }, HZ_FRONT_WAIT, 0 },
		{ { 200, 0, 0, 0, 0, 0 }, HZ_FRONT_WAIT, 1 },       /* no page whole yet */
		{ { 512, 512, 200, 0, 0, 0 }, HZ_FRONT_DENSE, 3 },  /* one writer */
		{ { 512, 100, 0, 300, 0, 0 }, HZ_FRONT_DENSE, 4 },  /* two writers */
		{ { 490, 0, 0, 0, 0, 0 }, HZ_FRONT_DENSE, 1 },      /* 22 missing: whole */
		{ { 512, 512, 512, 512, 512, 512 }, HZ_FRONT_DENSE, 6 },
		{ { 10, 10, 10, 10, 0, 0 }, HZ_FRONT_SPARSE, 4 },   /* random updates */
		{ { 512, 10, 10, 10, 0, 0 }, HZ_FRONT_SPARSE, 4 },
		{ { 512, 512, 512, 10, 10, 10 }, HZ_FRONT_WAIT, 6 }, /* as many whole as not */
		{ { 470, 10, 0, 0, 0, 0 }, HZ_FRONT_WAIT, 2 },      /* 42 missing: not whole */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t frontier = 99;

		assert_int_equal(hz_promote_front_judge(cases[i].resident, 6, &frontier),
				 cases[i].want);
		assert_int_equal(frontier, cases[i].frontier);
	}
}

/* The rule on a strided writer (promote_density.h): even counts in the
 * touched pages but for the HZ_FRONT_EDGES least, at least
 * HZ_SPARSE_PAGES each. */
static void even_counts_tell_a_strided_writer(void **state)
{
	static const struct {
		uint16_t resident[6];
		enum hz_front even;
		uint16_t level;
	} cases[] = {
		{ { 75, 75, 74, 75, 75, 74 }, HZ_FRONT_DENSE, 75 }, /* a row's pixel in each page */
		{ { 75, 75, 75, 57, 0, 0 }, HZ_FRONT_DENSE, 75 }, /* mid-pass: edges left out */
		{ { 150, 150, 75, 75, 75, 75 }, HZ_FRONT_SPARSE, 75 }, /* a later pass */
		{ { 80, 75, 75, 75, 75, 75 }, HZ_FRONT_DENSE, 75 }, /* within 1 + 75/16 */
		{ { 81, 75, 75, 75, 75, 75 }, HZ_FRONT_SPARSE, 75 },
		{ { 80, 75, 60, 90, 70, 75 }, HZ_FRONT_SPARSE, 75 }, /* random updates */
		{ { 2, 2, 2, 2, 2, 2 }, HZ_FRONT_SPARSE, 2 }, /* stacks a page deep */
		{ { 31, 31, 31, 31, 31, 31 }, HZ_FRONT_SPARSE, 31 },
		{ { 75, 75, 10, 0, 0, 0 }, HZ_FRONT_WAIT, 75 }, /* a first pass, early */
		{ { 75, 75, 0, 0, 0, 0 }, HZ_FRONT_WAIT, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint16_t level = 99;

		assert_int_equal(hz_promote_front_strided(cases[i].resident, 6, &level),
				 cases[i].even);
		assert_int_equal(level, cases[i].level);
	}
	/* Over all pages, untouched ones too: the level a pass must raise. */
	assert_int_equal(hz_promote_front_level(cases[1].resident, 6, false), 57);
	assert_int_equal(hz_promote_front_level(cases[2].resident, 6, false), 75);
}

/* A range the program has moved on from (hz_promote_used), on real memory
 * on 4 KiB pages: dense where units are written whole but for the one the
 * program stopped in; sparse where touched otherwise; no evidence while
 * untouched or once unmapped. A range under 2 MiB is one unit. */
static void a_range_moved_on_from_is_judged_by_the_units_it_touched(void **state)
{
	char *p = map_aligned(8 * MiB), *piece = p + 6 * MiB;
	uintptr_t at = (uintptr_t)p;
	uint16_t counts[4];

	(void)state;
	assert_int_equal(madvise(p, 8 * MiB, MADV_NOHUGEPAGE), 0);
	assert_int_equal(hz_promote_used(at, 6 * MiB, counts, 4), HZ_FRONT_WAIT);
	memset(p, 1, 3 * MiB); /* one unit whole, the next half */
	assert_int_equal(hz_promote_used(at, 6 * MiB, counts, 4), HZ_FRONT_DENSE);
	p[5 * MiB] = 1; /* a second unit in part */
	assert_int_equal(hz_promote_used(at, 6 * MiB, counts, 4), HZ_FRONT_SPARSE);

	for (size_t off = 0; off < MiB; off += 64 * 1024)
		piece[off] = 1;
	assert_int_equal(hz_promote_used((uintptr_t)piece, MiB, counts, 4), HZ_FRONT_SPARSE);
	memset(piece, 1, MiB - 100 * 1024); /* 25 pages missing, 16 allowed */
	assert_int_equal(hz_promote_used((uintptr_t)piece, MiB, counts, 4), HZ_FRONT_SPARSE);
	memset(piece, 1, MiB - 60 * 1024); /* 15 missing */
	assert_int_equal(hz_promote_used((uintptr_t)piece, MiB, counts, 4), HZ_FRONT_DENSE);

	assert_int_equal(munmap(p, 8 * MiB), 0);
	assert_int_equal(hz_promote_used(at, 6 * MiB, counts, 4), HZ_FRONT_WAIT);
}

static void sparse_block_stays_on_4k_pages(void **state)
{
	size_t len = 64 * MiB;
	uint64_t advised = hz_stats.promote_advised_bytes;
	char *p;

	(void)state;
	need_promotion();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	for (size_t off = 0; off < len; off += 4 * MiB)
		p[off] = 1;
	settle();
	assert_int_equal(huge_kb(p, len), 0);
	assert_int_equal(hz_stats.promote_advised_bytes, advised);
	hz_recycle_free(p);
}

/* Tests of the first touches: the kept blocks released, so that the next
 * block is fresh and tracked at once, and the ledger's evidence
 * forgotten: an earlier test's dense block that the thread cleared before
 * the drain marks its class dense, and the next block of that size would
 * take THP at once, unwatched. */
static void first_touches_test_begin(void)
{
	need_promotion();
	hz_recycle_drain();
	hz_classes_test_reset();
}

/* A fresh block whose first 4 MiB are written densely gets THP advice on
 * the rest before the program gets there: its later writes fault huge
 * pages. */
static void first_dense_writes_get_the_rest_of_a_fresh_block_thp(void **state)
{
	size_t len = 64 * MiB, head = 4 * MiB;
	uint64_t advised = hz_stats.promote_advised_bytes, up_front = hz_stats.thp_up_front;
	char *p;

	(void)state;
	first_touches_test_begin();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	assert_int_equal(hz_stats.thp_up_front, up_front); /* lazy, not THP at once */
	memset(p, 6, head);
	assert_true(wait_advised(advised, len - head - 2 * MiB));
	memset(p + head, 7, len - head);
	assert_true(huge_kb(p, len) >= (len - head - 2 * MiB) >> 10);
	for (size_t i = 0; i < len; i += 4096)
		assert_int_equal(p[i], i < head ? 6 : 7);
	hz_recycle_free(p);
}

/* The same for a writer going down from the block's end (ImageMagick
 * fills some images so): the pages below it get THP. */
static void first_dense_writes_from_the_end_get_the_pages_below_thp(void **state)
{
	size_t len = 64 * MiB, tail = 4 * MiB;
	uint64_t advised = hz_stats.promote_advised_bytes, up_front = hz_stats.thp_up_front;
	char *p;

	(void)state;
	first_touches_test_begin();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	assert_int_equal(hz_stats.thp_up_front, up_front); /* lazy, not THP at once */
	for (size_t off = len; off > len - tail; off -= 4096)
		p[off - 4096] = 6;
	assert_true(wait_advised(advised, len - tail - 2 * MiB));
	for (size_t off = len - tail; off > 0; off -= 4096)
		p[off - 4096] = 7;
	assert_true(huge_kb(p, len) >= (len - tail - 2 * MiB) >> 10);
	for (size_t i = 0; i < len; i += 4096)
		assert_int_equal(p[i], i < len - tail ? 7 : 6);
	hz_recycle_free(p);
}

/* Write page column k of a block in rows of ROW_LEN: one 4 KiB page of
 * each row, as a writer of an image's columns does. */
#define ROW_LEN (32 * 1024)
static void write_column(char *p, size_t len, size_t k, char value)
{
	for (size_t row = 0; row < len; row += ROW_LEN)
		p[row + k * 4096] = value;
}

/* A fresh block written column by column: its first touches look sparse,
 * but even (64 pages in each 2 MiB); once a second column raises every
 * page, the block is collapsed, before the program has written the rest. */
static void a_block_written_in_columns_is_collapsed_once_it_grows(void **state)
{
	size_t len = 32 * MiB;
	uint64_t before = hz_stats.promote_collapsed_bytes;
	char *p;

	(void)state;
	first_touches_test_begin();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	write_column(p, len, 0, 1);
	assert_true(wait_seen_strided(p));
	assert_int_equal(hz_stats.promote_collapsed_bytes, before);
	write_column(p, len, 1, 2);
	assert_true(wait_collapsed(before, len));
	assert_true(huge_kb(p, len) >= len >> 10);
	for (size_t k = 2; k < ROW_LEN / 4096; k++)
		write_column(p, len, k, (char)(k + 1));
	for (size_t off = 0; off < len; off += 4096)
		assert_int_equal(p[off], (char)((off % ROW_LEN) / 4096 + 1));
	hz_recycle_free(p);
}

/* Even counts that do not grow (a field of each record written once), or
 * that grow a page at a time (a block of 1 MiB stacks each a page or two
 * deep): no collapse. */
static void even_writes_that_stay_few_are_never_collapsed(void **state)
{
	size_t len = 24 * MiB; /* not the class above */
	uint64_t before = hz_stats.promote_collapsed_bytes;
	char *p, *q;

	(void)state;
	first_touches_test_begin();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&q), 0);
	write_column(p, len, 0, 1);
	for (size_t off = 0; off < len; off += MiB)
		q[off + MiB - 4096] = 1;
	usleep(100000);
	for (size_t off = 0; off < len; off += MiB)
		q[off + MiB - 8192] = 1;
	usleep(300000);
	assert_int_equal(huge_kb(p, len), 0);
	assert_int_equal(huge_kb(q, len), 0);
	assert_int_equal(hz_stats.promote_collapsed_bytes, before);
	hz_recycle_free(p);
	hz_recycle_free(q);
	hz_recycle_drain();
}

/* The pre-zero thread's voluntary context switches: its sleeps, so its
 * wakes. */
static long thread_wakes(void)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status",
		 __atomic_load_n(&pz_tid, __ATOMIC_ACQUIRE));
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	assert_true(n >= 0);
	return n;
}

/* A writer of one column that stops: once its range is seen even, it is
 * looked at less and less often, as a young range is, not every 2 ms
 * for the rest of its first second (a wake costs a single-threaded
 * program TLB flushes, promote_first.c). */
static void even_writes_that_stop_are_looked_at_ever_less_often(void **state)
{
	size_t len = 32 * MiB;
	long before;
	char *p;

	(void)state;
	first_touches_test_begin();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	write_column(p, len, 0, 1);
	assert_true(wait_seen_strided(p));
	before = thread_wakes();
	usleep(400000); /* 200 looks at 2 ms; about 12 at half the age */
	assert_true(thread_wakes() - before < 60);
	assert_int_equal(huge_kb(p, len), 0);
	hz_recycle_free(p);
	hz_recycle_drain();
}

static void densely_written_block_is_collapsed_within_a_bounded_wait(void **state)
{
	size_t len = 32 * MiB;
	uint64_t before = hz_stats.promote_collapsed_bytes;
	char *p;

	(void)state;
	need_promotion();
	/* Not watched at its first touches: their advice would give the rest
	 * huge pages at fault, and the collapse is the question here. */
	hz_promote_test_first_touch_ns(0);
	hz_recycle_drain(); /* fresh, not a kept block of an earlier test */
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	/* Fresh: 4 KiB pages at first touch. */
	memset(p, 5, len);
	assert_true(huge_kb(p, len) < len >> 10);
	assert_true(wait_huge(p, len, len >> 10));
	for (size_t i = 0; i < len; i += 4096)
		assert_int_equal(p[i], 5); /* contents kept */
	assert_true(hz_stats.promote_collapsed_bytes > before);
	hz_recycle_free(p);
	hz_promote_test_first_touch_ns(FIRST_TOUCHES_ALL_TEST);
}

/* numpy advises MADV_HUGEPAGE on each large array from its pointer's next
 * page on, which cuts the block's VMA inside its first 2 MiB page: that
 * page is refused (EINVAL), the rest of the block is collapsed, and the
 * range counts as left on 4 KiB pages in part. */
static void page_cut_by_the_programs_advice_leaves_the_rest_collapsed(void **state)
{
	/* A size class of its own: a class collapsed whole gives its next
	 * fresh block THP at once, which the promoter then leaves alone. */
	size_t len = 12 * MiB;
	uint64_t before, left = hz_stats.promote_left_4k;
	char *p;

	(void)state;
	need_promotion();
	hz_recycle_drain(); /* a fresh block, tracked */
	before = collapsed_at_rest();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	/* As numpy does: the advice first, then the writes (the other way
	 * round, the promoter may collapse the block before the cut). */
	assert_int_equal(madvise(p + 4096, len - 4096, MADV_HUGEPAGE), 0);
	memset(p, 6, len);
	assert_true(wait_collapsed(before, len - 2 * MiB));
	for (size_t i = 0; i < len; i += 4096)
		assert_int_equal(p[i], 6); /* contents kept */
	for (int i = 0; i < WAIT_TENTHS && hz_stats.promote_left_4k == left; i++) {
		hz_promote_test_kick();
		usleep(100000);
	}
	assert_true(hz_stats.promote_left_4k > left);
	hz_recycle_free(p);
}

static void program_nohugepage_range_is_never_collapsed(void **state)
{
	size_t len = 8 * MiB;
	uint64_t left = hz_stats.promote_left_4k;
	char *p;

	(void)state;
	need_promotion();
	p = map_aligned(len);
	assert_int_equal(madvise(p, len, MADV_NOHUGEPAGE), 0);
	memset(p, 3, len);
	hz_prezero_watch((uintptr_t)p, len, HZ_PROMOTE_MMAP);
	for (int i = 0; i < 50 && hz_stats.promote_left_4k == left; i++) {
		hz_promote_test_kick();
		usleep(100000);
	}
	assert_int_equal(huge_kb(p, len), 0);
	assert_true(hz_stats.promote_left_4k > left); /* refused, and left on 4 KiB pages */
	hz_promote_forget((uintptr_t)p, len);
	munmap(p, len);
}

/* What spin_cpu adds up, so that the loop is not optimised away. */
static volatile uint64_t spin_sink;

/* Burn about ms of this thread's CPU time. */
static void spin_cpu(unsigned ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			spin_sink += (uint64_t)i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* HUGEZERO_COLLAPSE_CPU=1: a dense block waits while the program uses no
 * CPU (the ticks are counted as waits), and is collapsed, at least in
 * part, once the program's threads have used 3 s (30 ms of share; one
 * collapse takes 0.2-7 ms). */
static void collapses_wait_for_the_programs_cpu_share(void **state)
{
	size_t len = 32 * MiB;
	uint64_t waits = hz_stats.promote_share_waits, before;
	char *p;

	(void)state;
	need_promotion();
	hz_promote_share_reset(); /* the earlier tests' collapses */
	setenv("HUGEZERO_COLLAPSE_CPU", "0", 1);
	hz_options_reload();
	hz_recycle_drain(); /* fresh, and lazy: the earlier tests' dense */
	hz_class_note_dense(len, false); /* blocks of its size are forgotten */
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	memset(p, 7, len);
	before = collapsed_at_rest(); /* CPU 0: nothing new */
	settle();
	assert_int_equal(hz_stats.promote_collapsed_bytes, before);
	assert_true(hz_stats.promote_share_waits > waits);
	setenv("HUGEZERO_COLLAPSE_CPU", "1", 1);
	hz_options_reload();
	spin_cpu(3000);
	assert_true(wait_collapsed(before, 2 * MiB));
	hz_recycle_free(p);
	setenv("HUGEZERO_COLLAPSE_CPU", "100", 1);
	hz_options_reload();
}

/* HUGEZERO_COLLAPSE_DELAY_MS=60000: a dense block tracked just now is left
 * alone; with the delay at 0 it is collapsed. */
static void young_ranges_wait_for_the_delay(void **state)
{
	size_t len = 16 * MiB;
	uint64_t before;
	char *p;

	(void)state;
	need_promotion();
	setenv("HUGEZERO_COLLAPSE_DELAY_MS", "60000", 1);
	hz_options_reload();
	hz_recycle_drain(); /* a fresh block: none collapsed before */
	before = collapsed_at_rest();
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	memset(p, 4, len);
	settle();
	assert_int_equal(hz_stats.promote_collapsed_bytes, before);
	setenv("HUGEZERO_COLLAPSE_DELAY_MS", "0", 1);
	hz_options_reload();
	assert_true(wait_collapsed(before, len));
	hz_recycle_free(p);
}

/* The program unmaps a tracked range (through hz_promote_forget, as the
 * preload's munmap does) at random points of its promotion, and maps a
 * sparse range of its own at the same place: that one is never collapsed,
 * and nothing crashes. */
static void range_unmapped_during_promotion_is_left_alone(void **state)
{
	size_t len = 16 * MiB;
	unsigned raced = 0;

	(void)state;
	need_promotion();
	for (unsigned round = 0; round < 40; round++) {
		char *p = map_aligned(len), *q;

		memset(p, 9, len);
		hz_prezero_watch((uintptr_t)p, len, HZ_PROMOTE_MMAP);
		hz_promote_test_kick();
		usleep((round % 8) * 25000);
		raced += huge_kb(p, len) > 0 && huge_kb(p, len) < len >> 10;
		hz_promote_forget((uintptr_t)p, len);
		munmap(p, len);
		q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		assert_true(q == p);
		for (size_t off = 0; off < len; off += 4 * MiB)
			q[off] = 1;
		usleep(50000);
		assert_int_equal(huge_kb(q, len), 0);
		munmap(q, len);
	}
	print_message("# %u of 40 rounds unmapped a range partly collapsed\n", raced);
}

/* Whether all of [p, p + len) is resident. */
static bool resident(const void *p, size_t len)
{
	unsigned char vec[512];

	assert_true(len / 4096 <= sizeof(vec));
	assert_int_equal(mincore((void *)p, len, vec), 0);
	for (size_t i = 0; i < len / 4096; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

/* HUGEZERO_THP_CHECK on, the verdict from the program's own pages alone
 * (not the machine's scratch page), none seen slow yet, each timed one
 * ns_more slower, and a fresh block next. */
static void own_pages_test_begin(uint64_t ns_more)
{
	first_touches_test_begin();
	setenv("HUGEZERO_THP_CHECK", "1", 1);
	hz_options_reload();
	hz_backing_test_own_pages(true, ns_more);
}

static void own_pages_test_end(void)
{
	hz_backing_test_own_pages(false, 0);
	setenv("HUGEZERO_THP_CHECK", "0", 1);
	hz_options_reload();
}

/* A block written from its end (ImageMagick fills some images so) and
 * advised THP below: the page after the writer's next one down is faulted
 * and timed, zero, and no page below it. The page's own verdict is the
 * machine's: it decides nothing here. */
static void own_huge_pages_are_timed_below_a_writer_going_down(void **state)
{
	size_t len = 64 * MiB, tail = 4 * MiB;
	uint64_t advised = hz_stats.promote_advised_bytes;
	char *p, *timed;
	bool seen = false;

	(void)state;
	own_pages_test_begin(0);
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	memset(p + len - tail, 5, tail);
	assert_true(wait_advised(advised, len - tail - 2 * MiB));
	timed = p + len - tail - 4 * MiB;
	for (int i = 0; i < WAIT_TENTHS && !seen; i++) {
		seen = resident(timed, 2 * MiB);
		if (!seen)
			usleep(100000);
	}
	assert_true(seen);
	for (size_t i = 0; i < 2 * MiB; i += 4096)
		assert_int_equal(timed[i], 0);
	assert_false(resident(timed - 2 * MiB, 4096));
	assert_false(resident(timed + 2 * MiB, 4096));
	hz_recycle_free(p);
	own_pages_test_end();
}

/* Once a block's first dense writes got it THP advice, the promoter
 * faults and times the writer's own huge pages ahead of it
 * (promote_first.c). With each taking 10 s more, as on a host that backs
 * fresh huge pages slowly, the page after the writer's next is faulted
 * without the program writing it, the advice is taken back (the rest of
 * the block faults 4 KiB pages), a slow fresh THP is counted, and fresh
 * THP is slow for the rest of the process. */
static void own_huge_pages_found_slow_take_the_advice_back(void **state)
{
	size_t len = 64 * MiB, head = 4 * MiB;
	uint64_t advised = hz_stats.promote_advised_bytes;
	uint64_t slow = hz_stats.fallbacks[HZ_FB_THP_SLOW], before, collapsed, kb;
	char *p;

	(void)state;
	own_pages_test_begin(10 * (uint64_t)1000000000);
	before = hz_stats.promote_collapsed_bytes;
	assert_int_equal(hz_recycle_alloc(len, 0, false, (void **)&p), 0);
	memset(p, 6, head);
	assert_true(wait_advised(advised, len - head - 2 * MiB));
	for (int i = 0; i < WAIT_TENTHS && hz_stats.fallbacks[HZ_FB_THP_SLOW] == slow; i++)
		usleep(100000);
	assert_int_equal(hz_stats.fallbacks[HZ_FB_THP_SLOW], slow + 1);
	assert_false(hz_backing_fresh_thp_fast(2 * MiB));
	/* The page after the frontier's: faulted ahead, and zero. */
	assert_true(resident(p + head + 2 * MiB, 2 * MiB));
	for (size_t i = head; i < head + 4 * MiB; i += 4096)
		assert_int_equal(p[i], 0);
	collapsed = hz_stats.promote_collapsed_bytes;
	memset(p + head, 7, len - head);
	/* Huge: the page faulted ahead, and what the promoter collapsed since
	 * the block was taken (read after: a collapse is counted once done). */
	kb = huge_kb(p, len);
	assert_true(kb <= (2 * MiB + hz_stats.promote_collapsed_bytes - before) >> 10);
	/* The rest, dense, is still collapsed: the advice is lifted for it. */
	assert_true(wait_collapsed(collapsed, 8 * MiB));
	for (size_t i = 0; i < len; i += 4096)
		assert_int_equal(p[i], i < head ? 6 : 7);
	hz_recycle_free(p);
	own_pages_test_end();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_touches_are_judged_dense_sparse_or_not_yet),
		cmocka_unit_test(even_counts_tell_a_strided_writer),
		cmocka_unit_test(a_range_moved_on_from_is_judged_by_the_units_it_touched),
		cmocka_unit_test(sparse_block_stays_on_4k_pages),
		cmocka_unit_test(first_dense_writes_get_the_rest_of_a_fresh_block_thp),
		cmocka_unit_test(first_dense_writes_from_the_end_get_the_pages_below_thp),
		cmocka_unit_test(densely_written_block_is_collapsed_within_a_bounded_wait),
		cmocka_unit_test(page_cut_by_the_programs_advice_leaves_the_rest_collapsed),
		cmocka_unit_test(program_nohugepage_range_is_never_collapsed),
		cmocka_unit_test(range_unmapped_during_promotion_is_left_alone),
		cmocka_unit_test(collapses_wait_for_the_programs_cpu_share),
		cmocka_unit_test(young_ranges_wait_for_the_delay),
		/* Last: the evidence their blocks leave would give the size
		 * classes above THP at first touch. */
		cmocka_unit_test(a_block_written_in_columns_is_collapsed_once_it_grows),
		cmocka_unit_test(even_writes_that_stay_few_are_never_collapsed),
		cmocka_unit_test(even_writes_that_stop_are_looked_at_ever_less_often),
		cmocka_unit_test(own_huge_pages_are_timed_below_a_writer_going_down),
		cmocka_unit_test(own_huge_pages_found_slow_take_the_advice_back),
	};

	/* The other tests time the promoter, not its delay or its share of a
	 * test's CPU. */
	setenv("HUGEZERO_COLLAPSE_CPU", "100", 1);
	setenv("HUGEZERO_COLLAPSE_DELAY_MS", "0", 1);
	/* Nor whether fresh THP faults fast here, but for the last test: a
	 * block advised at its first touches would have its advice taken
	 * back where the program's own huge pages fault slowly, and then
	 * the verdict would be slow for every test after. */
	setenv("HUGEZERO_THP_CHECK", "0", 1);
	hz_promote_test_first_touch_ns(FIRST_TOUCHES_ALL_TEST);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
