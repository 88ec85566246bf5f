/* Failures with a documented outcome, made at the prim layer: free keeps
 * errno when giving memory back fails; kernels without MADV_POPULATE_WRITE,
 * MADV_COLLAPSE, PR_SET_VMA naming or cachestat degrade as the README and
 * the code say; and the error paths fixed after the fault walk found them
 * (realloc falls back to the next allocator, a failed trim of an aligned
 * mmap leaves nothing behind). Each test runs in a child process: options,
 * probes and the reservation are per process. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "backing.h"
#include "blocks.h"
#include "blocks_region.h"
#include "check.h"
#include "exec/exec.h"
#include "harness.h"
#include "preload/limits.h"
#include "prim/features.h"
#include "recycle.h"
#include "stats.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define PAGE ((size_t)4096)

#define CHECK(cond)                                                                 \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "degrade.c:%d: failed: %s\n", __LINE__, #cond); \
			return CHILD_BROKEN;                                        \
		}                                                                   \
	} while (0)

static int arm(enum hz_prim_call call, unsigned long nth, int error, bool every,
	       bool match_arg, long arg)
{
	struct hz_prim_fault_rule rule = { call, nth, error, every, match_arg, arg };

	return hz_prim_fault_arm(&rule);
}

/* Start hugezero in this child with the common options plus extra. */
static void start(const char *const *extra)
{
	scenario_env(extra);
	fault_start();
}

static void run(int (*fn)(void *), void *arg, const char *what)
{
	int status = child_run(fn, arg, what);

	if (status == CHILD_SKIPPED)
		skip();
	assert_int_equal(status, CHILD_OK);
}

static size_t resident(const void *p, size_t len)
{
	static unsigned char vec[64 << 20 >> 12];
	size_t bytes = 0;

	if (len > sizeof(vec) * PAGE || mincore((void *)p, len, vec) != 0)
		return 0;
	for (size_t i = 0; i < (len + PAGE - 1) / PAGE; i++)
		bytes += (vec[i] & 1) * PAGE;
	return bytes;
}

static bool all_zero(const unsigned char *p, size_t len)
{
	return p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
}

/* ---- free and errno ---- */

/* Giving memory back fails in every way it can: the mmap that returns a
 * block to the reservation, the MADV_DONTNEED fallback, munmap, and the
 * debug message saying so (HUGEZERO_VERBOSE=2). */
static void fail_every_release(int slots[4])
{
	slots[0] = arm(HZ_CALL_MMAP, 1, ENOMEM, true, false, 0);
	slots[1] = arm(HZ_CALL_MADVISE, 1, ENOMEM, true, false, 0);
	slots[2] = arm(HZ_CALL_MUNMAP, 1, ENOMEM, true, false, 0);
	slots[3] = arm(HZ_CALL_WRITE, 1, EPIPE, true, false, 0);
}

static int free_keeps_errno_child(void *arg)
{
	const char *const *env = arg;
	struct hz_blocks_census bc;
	struct hz_recycle_census rc;
	unsigned char *a, *b, *c;
	int slots[4];

	start(env);
	a = hz_preload_malloc(3 * MiB);
	b = hz_preload_malloc(3 * MiB);
	c = hz_preload_malloc(3 * MiB);
	CHECK(a && b && c && hz_blocks_owns(a) && hz_blocks_owns(b) && hz_blocks_owns(c));
	memset(a, 1, 3 * MiB);
	memset(b, 2, 3 * MiB);
	memset(c, 3, 3 * MiB);
	/* With a 4 MiB cache, a is cached and b's free evicts it; with no
	 * cache, each free releases its own block. */
	hz_preload_free(a);
	fail_every_release(slots);
	errno = EDOM;
	hz_preload_free(b);
	CHECK(errno == EDOM);
	/* hz_recycle_free promises the same without the preload's help. */
	errno = ERANGE;
	hz_recycle_free(c);
	CHECK(errno == ERANGE);
	/* The failures did happen, on the release and its fallback. */
	CHECK(hz_prim_fault_fired(slots[0]) > 0 && hz_prim_fault_fired(slots[1]) > 0);
	hz_prim_fault_disarm();
	/* What could not be given back stays claimed, nothing else. */
	CHECK(hz_blocks_check(&bc) == 0 && hz_recycle_check(&rc, NULL, NULL) == 0);
	CHECK(bc.live_blocks == 0 && bc.claimed_granules > 0);
	CHECK(bc.claimed_granules * HZ_GRANULE == rc.cached_bytes + 2 * 4 * MiB);
	return CHILD_OK;
}

static void free_keeps_errno_when_releasing_fails(void **state)
{
	static const char *const no_cache[] = { "HUGEZERO_CACHE_MAX=0", "HUGEZERO_VERBOSE=2", NULL };
	static const char *const evicting[] = { "HUGEZERO_CACHE_MAX=4M", "HUGEZERO_VERBOSE=2", NULL };

	(void)state;
	run(free_keeps_errno_child, (void *)no_cache, "free with no cache");
	run(free_keeps_errno_child, (void *)evicting, "free evicting from the cache");
}

/* ---- MADV_POPULATE_WRITE (Linux 5.14) ---- */

struct populate_result {
	size_t resident;
	uint64_t thp_slow;
	bool zero;
};

static int populate_child(void *arg)
{
	static const char *const env[] = { "HUGEZERO_POPULATE=1", "HUGEZERO_BACKING=thp", NULL };
	struct populate_result *out = arg;
	unsigned char *p;
	int slot;

	start(env);
	slot = arm(HZ_CALL_MADVISE, 1, EINVAL, true, true, MADV_POPULATE_WRITE);
	CHECK(!hz_feature_populate_write());
	p = hz_preload_calloc(1, 16 * MiB);
	CHECK(p && hz_blocks_owns(p));
	/* The advice was tried and refused: the block was populated some
	 * other way, or not at all. */
	CHECK(hz_prim_fault_fired(slot) > 0);
	out->resident = resident(p, 16 * MiB);
	out->zero = all_zero(p, 16 * MiB);
	hz_preload_free(p);
	return CHILD_OK;
}

/* Without the advice, HUGEZERO_POPULATE writes one byte per page instead
 * (src/backing.c, populate: "Kernels before 5.14"), so the block is still
 * faulted in at once, and reads zero. */
static void populate_without_madv_populate_write_touches_every_page(void **state)
{
	struct populate_result *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(r != MAP_FAILED);
	run(populate_child, r, "populate without MADV_POPULATE_WRITE");
	printf("# 16 MiB block populated by touching: %zu KiB resident\n", r->resident >> 10);
	assert_true(r->zero);
	/* One write per 2 MiB page at least: all 8 huge pages, or one 4 KiB
	 * page per huge page where THP could not be had. */
	assert_true(r->resident >= 8 * PAGE);
	munmap(r, sizeof(*r));
}

static int thp_check_child(void *arg)
{
	/* The check times blocks that get THP at first touch: BACKING=thp
	 * (auto starts them on 4 KiB pages, src/promote.h). */
	static const char *const env[] = { "HUGEZERO_BACKING=thp", NULL };
	uint64_t *slow = arg;
	uint64_t thp_before;
	unsigned char *p;
	int slot;

	start(env);
	slot = arm(HZ_CALL_MADVISE, 1, EINVAL, true, true, MADV_POPULATE_WRITE);
	thp_before = hz_stats.blocks[HZ_BACKING_THP];
	/* A fresh THP block gets the THP speed check, which times
	 * MADV_POPULATE_WRITE of a scratch huge page. */
	p = hz_preload_malloc(32 * MiB);
	CHECK(p && hz_blocks_owns(p));
	CHECK(hz_prim_fault_fired(slot) > 0);
	if (hz_stats.blocks[HZ_BACKING_THP] == thp_before) {
		printf("[  SKIP    ] THP unavailable here, the speed check never runs\n");
		return CHILD_SKIPPED;
	}
	*slow = hz_stats.fallbacks[HZ_FB_THP_SLOW];
	memset(p, 7, 32 * MiB);
	hz_preload_free(p);
	return CHILD_OK;
}

/* The fresh-THP speed check cannot time anything without the advice: the
 * block keeps THP (src/backing.c, hz_backing_fresh_thp_fast), never
 * counted slow. */
static void thp_speed_check_without_madv_populate_write_keeps_thp(void **state)
{
	uint64_t *slow = mmap(NULL, sizeof(*slow), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(slow != MAP_FAILED);
	*slow = UINT64_MAX;
	run(thp_check_child, slow, "THP check without MADV_POPULATE_WRITE");
	assert_int_equal(*slow, 0);
	munmap(slow, sizeof(*slow));
}

/* The fresh-THP verdict holds for the next 64 MiB of fresh memory
 * decided on (HZ_GUESS_MAX), then is measured again: each measure
 * populates a scratch huge page, which a rule that never fires counts. */
static int thp_verdict_child(void *arg)
{
	unsigned long seen;
	int slot;

	(void)arg;
	start(NULL);
	slot = arm(HZ_CALL_MADVISE, ~0UL, EINVAL, false, true, MADV_POPULATE_WRITE);
	CHECK(slot >= 0);
	(void)hz_backing_fresh_thp_fast(2 * MiB); /* the first verdict */
	seen = hz_prim_fault_seen(slot);
	CHECK(seen >= 1);
	for (int i = 1; i < 32; i++) /* 64 MiB decided on in all */
		(void)hz_backing_fresh_thp_fast(2 * MiB);
	CHECK(hz_prim_fault_seen(slot) == seen);
	(void)hz_backing_fresh_thp_fast(2 * MiB); /* past 64 MiB */
	CHECK(hz_prim_fault_seen(slot) == seen + 1);
	(void)hz_backing_fresh_thp_fast(128 * MiB); /* past it at once */
	CHECK(hz_prim_fault_seen(slot) == seen + 2);
	(void)hz_backing_fresh_thp_fast(2 * MiB); /* the last verdict was for 128 MiB */
	CHECK(hz_prim_fault_seen(slot) == seen + 3);
	return CHILD_OK;
}

static void thp_verdict_holds_for_64_mib_decided_on(void **state)
{
	(void)state;
	run(thp_verdict_child, NULL, "the fresh-THP verdict by demand");
}

/* A huge page of the program's own, timed where the library advises THP
 * (hz_backing_time_fresh_page): a fault that fails times nothing, and so
 * does a page the program has begun to write (its fault would fill in 4
 * KiB pages); one slower than 4 KiB pages (10 s more, as on a slow host)
 * makes fresh THP slow for the rest of the process, and no scratch page
 * is measured again. */
static int own_page_child(void *arg)
{
	uintptr_t raw, page;
	int slot;

	(void)arg;
	start(NULL);
	raw = (uintptr_t)mmap(NULL, 6 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
	CHECK(raw != (uintptr_t)MAP_FAILED);
	page = (raw + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1);
	((volatile char *)page)[2 * MiB + 8192] = 1; /* before the advice: 4 KiB */
	CHECK(madvise((void *)page, 4 * MiB, MADV_HUGEPAGE) == 0);
	CHECK(hz_backing_time_fresh_page(page + 2 * MiB) == -1);
	CHECK(resident((void *)(page + 2 * MiB), 2 * MiB) == PAGE);
	slot = arm(HZ_CALL_MADVISE, 1, EINVAL, false, true, MADV_POPULATE_WRITE);
	CHECK(slot >= 0);
	CHECK(hz_backing_time_fresh_page(page) == -1);
	CHECK(resident((void *)page, 2 * MiB) == 0);
	hz_backing_test_own_pages(false, 10 * (uint64_t)1000000000);
	CHECK(hz_backing_time_fresh_page(page) == 0);
	CHECK(resident((void *)page, 2 * MiB) == 2 * MiB && *(char *)page == 0);
	slot = arm(HZ_CALL_MADVISE, ~0UL, EINVAL, false, true, MADV_POPULATE_WRITE);
	CHECK(slot >= 0);
	CHECK(!hz_backing_fresh_thp_fast(2 * MiB));
	CHECK(!hz_backing_fresh_thp_fast(128 * MiB)); /* past 64 MiB: no new measure */
	CHECK(hz_prim_fault_seen(slot) == 0);
	return CHILD_OK;
}

static void own_slow_huge_page_makes_fresh_thp_slow_for_good(void **state)
{
	(void)state;
	run(own_page_child, NULL, "a slow huge page of the program's own");
}

/* ---- MADV_COLLAPSE (Linux 6.1; files need CONFIG_READ_ONLY_THP_FOR_FS) ---- */

/* A 4 MiB file mapped read-only at a 2 MiB boundary, offset 0: text as
 * advise sees it. */
static void *map_text(size_t len)
{
	char path[] = "/tmp/hugezero-fault-XXXXXX";
	int fd = mkstemp(path);
	unsigned char *raw, *at;
	static unsigned char chunk[64 << 10];

	if (fd < 0)
		return NULL;
	unlink(path);
	memset(chunk, 0x90, sizeof(chunk));
	for (size_t off = 0; off < len; off += sizeof(chunk))
		if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			return NULL;
	raw = mmap(NULL, len + 2 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	at = (unsigned char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	at = mmap(at, len, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
	close(fd);
	return at == MAP_FAILED ? NULL : at;
}

static int collapse_child(void *arg)
{
	struct hz_exec_stats st;
	struct hz_exec_segment seg;
	unsigned char *text;
	int slot;

	(void)arg;
	start(NULL);
	text = map_text(4 * MiB);
	CHECK(text != NULL);
	memset(&seg, 0, sizeof(seg));
	seg.map = hz_range_make((uintptr_t)text, 4 * MiB);
	seg.file_len = 4 * MiB;
	seg.name = "text";
	seg.readable = true;
	slot = arm(HZ_CALL_MADVISE, 1, EINVAL, true, true, MADV_COLLAPSE);
	CHECK(!hz_feature_collapse());
	CHECK(hz_prim_fault_seen(slot) == 1);
	CHECK(hz_exec_collapse_state() == -1);
	hz_exec_advise_segment(&seg, -1);
	hz_exec_stats_get(&st);
	if (st.advised_bytes == 0) {
		printf("[  SKIP    ] MADV_HUGEPAGE refused on a file mapping here\n");
		return CHILD_SKIPPED;
	}
	/* Probed once on the segment, refused: off for the process. */
	CHECK(hz_prim_fault_seen(slot) == 2);
	CHECK(hz_exec_collapse_state() == 0);
	hz_exec_advise_segment(&seg, -1);
	hz_exec_stats_get(&st);
	CHECK(hz_prim_fault_seen(slot) == 2);
	CHECK(st.collapsed_bytes == 0 && st.advised_bytes == 8 * MiB);
	/* The text is still the file's. */
	CHECK(text[0] == 0x90 && text[4 * MiB - 1] == 0x90);
	return CHILD_OK;
}

/* README: "MADV_COLLAPSE on 2 MiB-aligned interiors, probed once: kernels
 * without CONFIG_READ_ONLY_THP_FOR_FS refuse it for files with EINVAL, and
 * it is not tried again"; MADV_HUGEPAGE is applied all the same. */
static void madv_collapse_refused_is_probed_once_then_not_tried(void **state)
{
	(void)state;
	run(collapse_child, NULL, "advise without MADV_COLLAPSE");
}

/* ---- PR_SET_VMA_ANON_NAME (5.17 with CONFIG_ANON_VMA_NAME) ---- */

/* Whether /proc/self/maps has what somewhere it is not the start of
 * except. */
static bool maps_mention_but(const char *what, const char *except)
{
	static char buf[1 << 18];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t used = 0;
	ssize_t n;

	if (fd < 0)
		return false;
	while (used + 1 < sizeof(buf) && (n = read(fd, buf + used, sizeof(buf) - 1 - used)) > 0)
		used += (size_t)n;
	close(fd);
	buf[used] = '\0';
	for (const char *p = strstr(buf, what); p; p = strstr(p + 1, what))
		if (strncmp(p, except, strlen(except)) != 0)
			return true;
	return false;
}

static int naming_child(void *arg)
{
	unsigned char *p, *q;
	int slot;

	(void)arg;
	start(NULL);
	slot = arm(HZ_CALL_PRCTL, 1, EINVAL, true, false, 0);
	CHECK(!hz_feature_anon_name());
	p = hz_preload_calloc(1, 5 * MiB);
	q = hz_preload_malloc(700 * KiB);
	CHECK(p && q && hz_blocks_owns(p) && hz_blocks_owns(q));
	CHECK(all_zero(p, 5 * MiB));
	memset(p, 1, 5 * MiB);
	memset(q, 2, 700 * KiB);
	/* Naming was asked for, refused, and nothing else changed. */
	CHECK(hz_prim_fault_fired(slot) >= 2);
	/* The stats page is named at start-up, before the fault is armed. */
	CHECK(!maps_mention_but("[anon:hugezero", "[anon:hugezero-stats]"));
	hz_preload_free(p);
	hz_preload_free(q);
	return CHILD_OK;
}

/* README: kernels without CONFIG_ANON_VMA_NAME cannot name the mappings;
 * nothing else depends on it. */
static void anon_naming_refused_changes_only_the_names(void **state)
{
	(void)state;
	run(naming_child, NULL, "allocation without PR_SET_VMA");
}

/* ---- cachestat (Linux 6.5) ---- */

static int cachestat_child(void *arg)
{
	static unsigned char chunk[64 << 10];
	char path[] = "/tmp/hugezero-fault-XXXXXX";
	uint64_t cached = 0;
	int fd, slot;

	(void)arg;
	start(NULL);
	fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	memset(chunk, 0x5a, sizeof(chunk));
	for (int i = 0; i < 16; i++)
		CHECK(write(fd, chunk, sizeof(chunk)) == (ssize_t)sizeof(chunk));
	slot = arm(HZ_CALL_CACHESTAT, 1, ENOSYS, true, false, 0);
	CHECK(!hz_feature_cachestat());
	/* Just written: all 1 MiB is in the page cache, and mincore says so. */
	CHECK(hz_exec_cached_bytes(fd, 0, 1 * MiB, &cached) == 0);
	CHECK(cached == 1 * MiB);
	CHECK(hz_exec_cached_bytes(fd, 64 * KiB, 128 * KiB, &cached) == 0);
	CHECK(cached == 128 * KiB);
	/* The probe and the first call asked cachestat; the second did not. */
	CHECK(hz_prim_fault_seen(slot) == 2);
	close(fd);
	return CHILD_OK;
}

/* README: page cache residency is "checked with cachestat(2), mincore(2)
 * on older kernels"; src/exec/prewarm.c: after one ENOSYS, mincore from
 * then on. */
static void cachestat_absent_falls_back_to_mincore_for_good(void **state)
{
	(void)state;
	run(cachestat_child, NULL, "page cache residency without cachestat");
}

/* ---- error paths fixed after the walk ---- */

static int realloc_child(void *arg)
{
	static const char *const env[] = { "HUGEZERO_RESERVE=1G", NULL };
	struct hz_blocks_census bc;
	unsigned char *p, *q;
	int slots[2];

	(void)arg;
	start(env);
	/* Beyond the whole reservation: glibc gets it. */
	p = hz_preload_malloc(4 * MiB);
	CHECK(p && hz_blocks_owns(p));
	memset(p, 0x11, 4 * MiB);
	q = hz_preload_realloc(p, 3 * GiB / 2);
	CHECK(q && !hz_blocks_owns(q));
	CHECK(q[0] == 0x11 && memcmp(q, q + 1, 4 * MiB - 1) == 0);
	hz_preload_free(q);
	/* Growing fails in place, by moving and by copying. */
	p = hz_preload_malloc(4 * MiB);
	CHECK(p && hz_blocks_owns(p));
	memset(p, 0x22, 4 * MiB);
	slots[0] = arm(HZ_CALL_MMAP, 1, ENOMEM, true, false, 0);
	slots[1] = arm(HZ_CALL_MREMAP, 1, ENOMEM, true, false, 0);
	q = hz_preload_realloc(p, 64 * MiB);
	CHECK(hz_prim_fault_fired(slots[0]) > 0);
	hz_prim_fault_disarm();
	CHECK(q && !hz_blocks_owns(q));
	CHECK(q[0] == 0x22 && memcmp(q, q + 1, 4 * MiB - 1) == 0);
	hz_preload_free(q);
	/* The old blocks went back to hugezero's cache. */
	CHECK(hz_blocks_check(&bc) == 0 && bc.live_blocks == 0);
	return CHILD_OK;
}

/* A region when the 1 GiB of alignment slack cannot be had (a tight
 * RLIMIT_AS): the first reserve (the over-map) fails, the slack-free
 * placement serves. Then RLIMIT_AS lowered with every munmap refused: the
 * region stops being ours all the same (never used again), and the next
 * block grows a new one. */
static int region_child(void *arg)
{
	const struct rlimit low = { 64 * MiB, RLIM_INFINITY };
	struct hz_blocks_census bc;
	struct hz_range held;
	unsigned char *p;
	uintptr_t first;
	int slot;

	(void)arg;
	start(NULL);
	CHECK(hz_blocks_held() == 0);
	slot = arm(HZ_CALL_MMAP, 1, ENOMEM, false, true, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
	p = hz_preload_malloc(4 * MiB);
	CHECK(hz_prim_fault_fired(slot) == 1);
	hz_prim_fault_disarm();
	CHECK(p && hz_blocks_owns(p) && hz_blocks_held() == GiB);
	/* On a 1 GiB boundary; the block inside it where the kernel's
	 * randomisation puts it (blocks_region.c, origin_of). */
	CHECK(hz_blocks_region(0, &held) && held.start % GiB == 0 &&
	      (uintptr_t)p >= held.start && (uintptr_t)p + 4 * MiB <= held.end);
	memset(p, 0x33, 4 * MiB);
	first = (uintptr_t)p;
	hz_preload_free(p); /* cached */
	slot = arm(HZ_CALL_MUNMAP, 1, EINVAL, true, false, 0);
	hz_preload_setrlimit(RLIMIT_AS, &low);
	CHECK(hz_prim_fault_fired(slot) > 0);
	hz_prim_fault_disarm();
	CHECK(hz_blocks_held() == 0 && !hz_blocks_owns((void *)first));
	CHECK(hz_blocks_check(&bc) == 0 && bc.claimed_granules == 0);
	p = hz_preload_calloc(1, 4 * MiB);
	CHECK(p && hz_blocks_owns(p) && (uintptr_t)p != first && p[0] == 0);
	hz_preload_free(p);
	CHECK(hz_blocks_check(&bc) == 0 && bc.live_blocks == 0);
	return CHILD_OK;
}

static void region_growth_without_slack_and_give_back_with_munmap_refused(void **state)
{
	(void)state;
	run(region_child, NULL, "region growth and give-back under faults");
}

/* Two regions side by side (the second is placed right under the first):
 * blocks freed on both sides of the boundary are adjacent in address but
 * must not merge in the cache, or a later hand-out would cross regions. */
static int boundary_child(void *arg)
{
	static const char *const env[] = { "HUGEZERO_BACKING=thp", NULL };
	struct hz_recycle_census rc;
	struct hz_blocks_census bc;
	unsigned char *x, *y, *z, *w, *q;

	(void)arg;
	start(env);
	hz_region_origin_off = true; /* x at the first region's start */
	x = hz_preload_malloc(8 * MiB);
	y = hz_preload_malloc(GiB - 8 * MiB);
	z = hz_preload_malloc(GiB - 8 * MiB);
	w = hz_preload_malloc(8 * MiB);
	CHECK(x && y && z && w && hz_blocks_owns(x) && hz_blocks_owns(w));
	if (z + GiB != x || w + 8 * MiB != x) {
		printf("[  SKIP    ] the second region is not right under the first (%p, %p)\n",
		       (void *)z, (void *)x);
		return CHILD_SKIPPED;
	}
	hz_preload_free(w);
	hz_preload_free(x);
	CHECK(hz_recycle_check(&rc, NULL, NULL) == 0);
	q = hz_preload_malloc(16 * MiB);
	CHECK(q && hz_blocks_owns(q));
	memset(q, 0x44, 16 * MiB);
	hz_preload_free(q);
	hz_preload_free(y);
	hz_preload_free(z);
	CHECK(hz_blocks_check(&bc) == 0 && bc.live_blocks == 0);
	return CHILD_OK;
}

static void spans_on_both_sides_of_a_region_boundary_never_merge(void **state)
{
	(void)state;
	run(boundary_child, NULL, "spans on both sides of a region boundary");
}

/* large_alloc's promise, "we are never worse than [the next allocator]",
 * holds for realloc too: when the reservation cannot hold the new size,
 * the block moves to glibc instead of realloc failing. */
static void realloc_falls_back_to_next_allocator_when_reservation_cannot_grow(void **state)
{
	(void)state;
	run(realloc_child, NULL, "realloc beyond the reservation");
}

struct trim {
	unsigned long nth; /* which munmap fails */
	size_t len;
};

static int trim_child(void *arg)
{
	const struct trim *t = arg;
	struct footprint before, after;
	unsigned char *m;
	int slot;

	start(NULL);
	footprint_take(&before);
	slot = arm(HZ_CALL_MUNMAP, t->nth, ENOMEM, false, false, 0);
	m = hz_preload_mmap(NULL, t->len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	if (hz_prim_fault_fired(slot) == 0) {
		printf("[  SKIP    ] mmap of %zu bytes made fewer than %lu trims\n", t->len, t->nth);
		return CHILD_SKIPPED;
	}
	hz_prim_fault_disarm();
	memset(m, 1, t->len);
	CHECK(hz_preload_munmap(m, t->len) == 0);
	footprint_take(&after);
	CHECK(after.outside_bytes == before.outside_bytes);
	return CHILD_OK;
}

/* A failed trim (vm.max_map_count) used to leave the unused head or tail
 * of the over-sized mapping behind for good. Linux 6.7+ places anonymous
 * mappings whose length is a multiple of 2 MiB on a 2 MiB boundary: then
 * only the tail is trimmed; 4 KiB more, and both ends are. */
static void aligned_mmap_failed_trim_leaves_nothing_mapped(void **state)
{
	static const struct trim cases[] = {
		{ 1, 8 * MiB }, { 1, 8 * MiB + PAGE }, { 2, 8 * MiB + PAGE },
	};
	static const char *const names[] = {
		"mmap with its first trim failing", "unaligned mmap with its head trim failing",
		"unaligned mmap with its tail trim failing",
	};

	(void)state;
	for (int i = 0; i < 3; i++)
		run(trim_child, (void *)&cases[i], names[i]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(free_keeps_errno_when_releasing_fails),
		cmocka_unit_test(populate_without_madv_populate_write_touches_every_page),
		cmocka_unit_test(thp_speed_check_without_madv_populate_write_keeps_thp),
		cmocka_unit_test(thp_verdict_holds_for_64_mib_decided_on),
		cmocka_unit_test(own_slow_huge_page_makes_fresh_thp_slow_for_good),
		cmocka_unit_test(madv_collapse_refused_is_probed_once_then_not_tried),
		cmocka_unit_test(anon_naming_refused_changes_only_the_names),
		cmocka_unit_test(cachestat_absent_falls_back_to_mincore_for_good),
		cmocka_unit_test(realloc_falls_back_to_next_allocator_when_reservation_cannot_grow),
		cmocka_unit_test(region_growth_without_slack_and_give_back_with_munmap_refused),
		cmocka_unit_test(spans_on_both_sides_of_a_region_boundary_never_merge),
		cmocka_unit_test(aligned_mmap_failed_trim_leaves_nothing_mapped),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
