/* Getting huge-page memory for a block. See backing.h.
 *
 * Blocks live inside the PROT_NONE reservation (blocks.c); backing a block
 * means mapping read-write memory over its part of the reservation with
 * MAP_FIXED, and releasing means putting the reservation back. */
#include "backing.h"

#include <errno.h>
#include <sys/mman.h>

#include "classes.h"
#include "config.h"
#include "log.h"
#include "prim/memory.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "range.h"
#include "sizes.h"
#include "stats.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static const struct {
	enum hz_os_pool pool;
	enum hz_prim_pages pages;
} pools[] = {
	[HZ_BACKING_HUGETLB1G] = { HZ_OS_POOL_1G, HZ_PAGES_HUGETLB_1G },
	[HZ_BACKING_HUGETLB2M] = { HZ_OS_POOL_2M, HZ_PAGES_HUGETLB_2M },
};

size_t hz_backing_page(enum hz_backing b)
{
	switch (b) {
	case HZ_BACKING_HUGETLB1G: return HZ_SZ_1G;
	case HZ_BACKING_HUGETLB2M:
	case HZ_BACKING_THP: return HZ_SZ_2M;
	default: return HZ_SZ_4K;
	}
}

/* The pool's free, unreserved pages, read now (hz_os_pool_available). */
static int pool_fits(enum hz_backing b, size_t len)
{
	size_t page = hz_backing_page(b);

	return hz_os_pool_available(pools[b].pool) >= (len + page - 1) / page;
}

/* THP is usable unless the system mode is "never" (or unreadable). Read
 * once, by hz_os(): the library never changes sysfs and administrators
 * rarely do while programs run. */
static int thp_enabled(void)
{
	return hz_os_thp_on(hz_os()->thp.mode);
}

/* prctl(PR_SET_THP_DISABLE) gives the process 4 KiB pages everywhere, yet
 * MADV_HUGEPAGE still succeeds (Linux 6.18; tests/resources/thp_disabled.c),
 * so ask for the flag itself. Bit 1 (PR_THP_DISABLE_EXCEPT_ADVISED) keeps
 * THP for MADV_HUGEPAGE regions, which ours are. Not cached: a program may
 * set it at any time, and a prctl costs little next to mapping a block. */
static int thp_disabled_here(void)
{
	int flags = hz_prim_thp_disable_flags();

	return flags > 0 && (flags & 1) && !(flags & 2);
}

int hz_backing_thp_usable(void)
{
	return thp_enabled() && !thp_disabled_here();
}

bool hz_backing_thp_allowed(void)
{
	return hz_backing_first() <= HZ_BACKING_THP && hz_backing_thp_usable();
}

/* auto never picks hugetlb. hugetlb memory differs from what glibc gives
 * in ways a program can see: a private hugetlb block shared with a fork
 * child copies on write from the pool, and when the pool is short the
 * kernel sends SIGBUS (to the child, or unmaps the page from it when the
 * parent writes first); MADV_DONTNEED, mprotect and munmap work only in
 * whole huge pages (EINVAL on a 4 KiB range); the hugetlb cgroup charges
 * at fault time (Kubernetes sets hugetlb.<size>.max = 0 for every pod
 * that requests no huge pages). So hugetlb is used only when asked for
 * (HUGEZERO_BACKING=hugetlb2m or hugetlb1g); README, "Containers". */
enum hz_backing hz_backing_first(void)
{
	switch (hz_config()->backing) {
	case HZ_BACKING_OPT_NONE:
		return HZ_BACKING_SMALL;
	case HZ_BACKING_OPT_HUGETLB2M:
		return HZ_BACKING_HUGETLB2M;
	case HZ_BACKING_OPT_HUGETLB1G:
		return HZ_BACKING_HUGETLB1G;
	case HZ_BACKING_OPT_THP:
	case HZ_BACKING_OPT_AUTO:
	default:
		return HZ_BACKING_THP;
	}
}

/* The hugetlb cgroup, found again at most every HZ_OS_CGROUP_FIND_NS; one
 * thread at a time updates the copy, others find their own. */
static int find_hugetlb_cgroup(struct hz_os_cgroup *out)
{
	static struct hz_os_cgroup cg;
	static uint64_t found_at;
	static int busy, found;
	uint64_t now = hz_prim_now_ns();
	int ret = 0;

	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return hz_os_cgroup_find("hugetlb", out);
	if (found_at == 0 || now - found_at >= HZ_OS_CGROUP_FIND_NS) {
		found = hz_os_cgroup_find("hugetlb", &cg) == 0;
		found_at = now;
	}
	if (found)
		*out = cg;
	else
		ret = -ENOENT;
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	return ret;
}

/* Whether the hugetlb cgroup allows len more bytes of b's pages (fault and
 * reservation limits, every ancestor): read now, limits change. No cgroup
 * with the controller: allowed. */
static bool cgroup_allows(enum hz_backing b, size_t len)
{
	struct hz_os_cgroup cg;
	uint64_t room;

	if (find_hugetlb_cgroup(&cg) != 0)
		return true;
	hz_os_hugetlb_room(&cg, hz_backing_page(b), &room); /* a failed read: 0 */
	return room >= len;
}

/* hugetlb is never mapped MAP_NORESERVE, and every page is faulted in at
 * map time (hz_prim_commit_populated): an empty pool or a cgroup limit
 * fails here, as an mmap or populate error, never later as a SIGBUS in the
 * program. Checking pool and cgroup first only saves the failed attempt. */
static int map_hugetlb(enum hz_backing b, uintptr_t start, size_t len)
{
	int ret;

	if (!pool_fits(b, len)) {
		hz_stats_fallback(HZ_FB_POOL_EMPTY);
		return -ENOMEM;
	}
	if (!cgroup_allows(b, len)) {
		hz_stats_fallback(HZ_FB_HUGETLB_FAILED);
		hz_debug("the hugetlb cgroup allows fewer than %zu bytes of %s; falling back", len,
			 hz_backing_name(b));
		return -ENOMEM;
	}
	ret = hz_prim_commit_populated(start, len, pools[b].pages);
	if (ret != 0) {
		hz_stats_fallback(HZ_FB_HUGETLB_FAILED);
		hz_debug("hugetlb %s mapping of %zu bytes failed (%d); falling back",
			 hz_backing_name(b), len, ret);
	}
	return ret;
}

/* ---- fresh THP on hosts that take free memory back ----
 *
 * On virtual machines whose host reclaims free guest memory (free page
 * reporting, ballooning), a fresh 2 MiB page must be backed by the host
 * again on first touch, and can fault at 0.2-1 GB/s, where one freed
 * shortly before faults at 10-20 (bench/RESULTS.md). So before a fresh
 * block gets huge pages at first touch (BACKING=thp, LAZY_THP=0, jemalloc's
 * extents, a size class used densely before, or the rest of a range whose
 * first writes were dense), a scratch 2 MiB page is faulted and timed
 * against 4 KiB pages faulted as a program faults them, a write to each;
 * when THP is slower the block gets 4 KiB pages for good
 * (MADV_NOHUGEPAGE; the promoter tracks only lazy blocks). One verdict
 * serves the fresh memory decided on after it, up to HZ_GUESS_MAX
 * (classes.h), the most a guess may cost (bench/RESULTS.md, "Fewer
 * thresholds": a sample of each large block's own first 2 MiB measured no
 * better). By demand, not by time: a guest's kernel hands out the huge
 * pages freed last first, still backed, and those the host took back
 * (free page reporting) after them. On the Xeon AMX VM the first page of a
 * program's run faulted at 4.8 GB/s and the next hundreds at 0.35, where
 * 4 KiB pages fault at 0.9-1.0: a verdict kept for 10 s gave CPython's
 * arenas 400 MiB of huge pages and 0.8 s more system time than glibc
 * (bench/RESULTS.md, "The fresh-THP verdict by demand").
 *
 * Written, not populated: MADV_POPULATE_WRITE faults 4 KiB pages in one
 * call, without the trap each of a program's faults takes. On the Zen 5
 * VM (Linux 6.18, page table isolation on) it faulted them at 4-6 GB/s,
 * where writing them ran at 0.3 (14 us a page), so a huge page the host
 * had to back again (0.2-0.6 GB/s) was judged slow while it was still
 * faster than the 4 KiB faults it saved: sort's buffer stayed on 4 KiB
 * pages in a third of its runs (bench/RESULTS.md, "Fresh 4 KiB pages are
 * timed as a program faults them").
 *
 * A scratch page is the head of the guest's free list, and so are the
 * first few of a program's: on the Xeon AMX VM scratch pages faulted at
 * 3-8 GB/s, and so did the first 2-16 MiB of a 700 MiB buffer advised THP,
 * the rest at 0.35, where 4 KiB pages faulted at 2-3 all along (likely
 * because free page reporting gives the host free memory back only in
 * pieces of 2 MiB or more: a huge page must come from those, a small one
 * mostly from smaller pieces still backed). So the program's own huge
 * pages are timed too, one each time some are advised: the first page of a
 * window of pieces, of an mmap or of a block given THP at map time on its
 * class's evidence, faulted as the program would fault it first, the
 * newest 2 MiB of glibc's heap advised (preload/heap.c), and the pages just
 * ahead of a writer whose block's rest was advised (promote_first.c).
 * One slower than 4 KiB pages makes the verdict slow for the rest of the
 * process (hz_backing_time_fresh_page). */

/* 64 faults: about 1 ms here, and the trap's cost is steady. */
#define SMALL_SAMPLE (64 * HZ_SZ_4K)

/* A scratch mapping of len bytes with this advice, or NULL. */
static char *scratch(size_t len, int advice)
{
	void *mem;

	if (hz_prim_map_aligned(len, HZ_SZ_2M, 0, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, HZ_TRIM_OR_FAIL, &mem) != 0)
		return NULL;
	hz_prim_madvise(mem, len, advice);
	return mem;
}

/* Samples are timed on the calling thread's CPU clock, as the program's
 * own pages are (hz_backing_time_fresh_page): on the wall clock a sample
 * the scheduler preempted reads slow. On the Xeon AMX VM, with a test
 * suite running beside, 4 of 20 samples of 4 KiB faults read 0.22-0.50
 * GB/s on the wall clock and 2.6-3.6 on the thread's, and a 4 KiB rate
 * that low lets a slow huge page pass. The host's time to back a page
 * counts on both (the guest's CPU waits for it). The wall clock where the
 * thread's cannot be read. */
static uint64_t sample_ns(void)
{
	uint64_t ns = hz_prim_thread_cpu_ns();

	return ns ? ns : hz_prim_now_ns();
}

static double rate(size_t bytes, uint64_t t0)
{
	uint64_t ns = sample_ns() - t0;

	return (double)bytes / (double)(ns ? ns : 1);
}

/* Bytes per nanosecond of faulting a scratch 2 MiB huge page. */
static double huge_page_rate(void)
{
	char *mem = scratch(HZ_SZ_2M, MADV_HUGEPAGE);
	uint64_t t0 = sample_ns();
	double r = -1;

	if (!mem)
		return -1;
	if (hz_prim_madvise(mem, HZ_SZ_2M, MADV_POPULATE_WRITE) == 0)
		r = rate(HZ_SZ_2M, t0);
	hz_prim_munmap(mem, HZ_SZ_2M);
	return r;
}

/* The same for 4 KiB pages, each written once; measured once: the cost of
 * a fault's trap is the machine's. */
static double small_page_rate(void)
{
	static double measured;
	double r;
	char *mem;
	uint64_t t0;

	__atomic_load(&measured, &r, __ATOMIC_RELAXED);
	if (r != 0)
		return r;
	mem = scratch(SMALL_SAMPLE, MADV_NOHUGEPAGE);
	if (!mem)
		return -1;
	t0 = sample_ns();
	for (size_t off = 0; off < SMALL_SAMPLE; off += HZ_SZ_4K)
		((volatile char *)mem)[off] = 1;
	r = rate(SMALL_SAMPLE, t0);
	hz_prim_munmap(mem, SMALL_SAMPLE);
	__atomic_store(&measured, &r, __ATOMIC_RELAXED);
	return r;
}

/* A measure's rate, or the last one's when that was slower. A measure's
 * scratch page is likely the next one's too, which the guest then hands
 * out still backed: on the Xeon AMX VM measures alternated between 4-8
 * and 0.3 GB/s while a program's own fresh huge pages faulted at 0.3. */
static double slower_of_last_two(double now)
{
	static double last = -1;
	double was = last;

	last = now;
	return was >= 0 && now >= 0 && was < now ? was : now;
}

/* Whether fresh THP is timed: HUGEZERO_THP_CHECK on, and HUGEZERO_POPULATE
 * off (populated memory is faulted off the program's path, and is dense by
 * construction). */
static bool checked(void)
{
	return hz_config()->thp_check && !hz_config()->populate;
}

/* The program's own fresh huge pages were seen fault slower than 4 KiB
 * pages (own_page_fast). For good: no fresh memory is advised after, so
 * none is seen faster. */
static bool own_pages_slow;

/* Whether a fresh huge page of the program's own, faulted in ns, was at
 * least as fast as 4 KiB pages; if not, fresh THP is slow from now on. */
static bool own_page_fast(uint64_t ns)
{
	double r = (double)HZ_SZ_2M / (double)(ns ? ns : 1);
	double small = small_page_rate();

	hz_debug("a fresh huge page of the program's faulted at %.2f GB/s, 4 KiB pages at %.2f",
		 r, small);
	if (small < 0 || r >= small)
		return true;
	__atomic_store_n(&own_pages_slow, true, __ATOMIC_RELAXED);
	return false;
}

/* Added to each page's time: tests make the host slow with it. */
static uint64_t fresh_page_extra_ns;

static void note_resident(void *ctx, struct hz_range run, bool resident)
{
	(void)run;
	*(bool *)ctx |= resident;
}

/* Whether no 4 KiB page of the 2 MiB page at page is resident: a fault
 * that fills in the rest of one would time 4 KiB faults. */
static bool untouched(uintptr_t page)
{
	bool any = false;

	return hz_prim_residency(page, HZ_SZ_2M, note_resident, &any) == 0 && !any;
}

/* Whether this thread took no fault since it had taken faults_before: a
 * populate that found its page faulted in already, by the program's write
 * between the look (untouched) and the populate. On the Xeon AMX VM such a
 * page read 163 GB/s, which timed nothing. */
static bool faulted_nothing(uint64_t faults_before)
{
	return faults_before != UINT64_MAX && hz_prim_thread_minor_faults() == faults_before;
}

int hz_backing_time_fresh_page(uintptr_t page)
{
	uint64_t ns, faults;

	if (!checked() || !untouched(page))
		return -1;
	faults = hz_prim_thread_minor_faults();
	ns = hz_prim_thread_cpu_ns();
	if (hz_prim_madvise((void *)page, HZ_SZ_2M, MADV_POPULATE_WRITE) != 0)
		return -1;
	ns = hz_prim_thread_cpu_ns() - ns;
	if (faulted_nothing(faults))
		return -1;
	return own_page_fast(ns + fresh_page_extra_ns);
}

#ifdef HZ_TEST_CORE
static bool own_pages_only;

void hz_backing_test_own_pages(bool alone, uint64_t ns)
{
	fresh_page_extra_ns = ns;
	own_pages_only = alone;
	__atomic_store_n(&own_pages_slow, false, __ATOMIC_RELAXED);
}
#endif

/* What hz_backing_fresh_thp_fast's count holds before the first verdict. */
#define UNMEASURED UINT64_MAX

bool hz_backing_fresh_thp_fast(size_t len)
{
	static uint64_t asked = UNMEASURED; /* bytes decided on since the last measure */
	static int fast;
	static pid_t measuring; /* the process measuring now, or 0 */
	uint64_t seen = __atomic_load_n(&asked, __ATOMIC_RELAXED);
	pid_t me, other = 0;
	double thp, small = 0;

	if (!checked())
		return true;
	if (__atomic_load_n(&own_pages_slow, __ATOMIC_RELAXED))
		return false;
#ifdef HZ_TEST_CORE
	if (own_pages_only)
		return true;
#endif
	if (seen <= HZ_GUESS_MAX && __atomic_add_fetch(&asked, len, __ATOMIC_RELAXED) <= HZ_GUESS_MAX)
		return __atomic_load_n(&fast, __ATOMIC_RELAXED);
	/* One measure at a time: a second caller (the pre-zero thread and a
	 * program thread at once) takes the last verdict, or trusts THP
	 * before the first, and never waits: it may be a signal handler's
	 * mmap. The scratch pages of two measures are then never written at
	 * once, and each measure happens after the last (acquire, release).
	 * A fork child takes over a measure its parent's thread left. */
	me = hz_prim_getpid();
	if (!__atomic_compare_exchange_n(&measuring, &other, me, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED) &&
	    (other == me || !__atomic_compare_exchange_n(&measuring, &other, me, false,
							 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
		return seen == UNMEASURED || __atomic_load_n(&fast, __ATOMIC_RELAXED);
	thp = slower_of_last_two(huge_page_rate());
	if (thp >= 0)
		small = small_page_rate();
	/* What cannot be timed (no MADV_POPULATE_WRITE before Linux 5.14)
	 * is trusted, as with HUGEZERO_THP_CHECK=0. */
	__atomic_store_n(&fast, thp < 0 || small < 0 || thp >= small, __ATOMIC_RELAXED);
	__atomic_store_n(&asked, len, __ATOMIC_RELAXED);
	__atomic_store_n(&measuring, 0, __ATOMIC_RELEASE);
	hz_debug("fresh THP faulted at %.2f GB/s, 4 KiB pages at %.2f", thp, small);
	return __atomic_load_n(&fast, __ATOMIC_RELAXED);
}

/* ---- lazy huge pages (the promoter: promote.h) ----
 *
 * With the auto backing and THP in "madvise" mode, a fresh block gets no
 * advice: 4 KiB pages at first touch, as glibc's memory gets, and the
 * promoter collapses the 2 MiB ranges the program makes dense. Measured
 * here (issue "real programs"): THP at first touch gave xz's sparse match
 * finder 104 MB of RSS against glibc's 44, and on this VM a fresh huge
 * page faults 3-4 times slower than 4 KiB pages, which made zstd --long=31
 * and cc1 slower than under glibc. HUGEZERO_BACKING=thp, HUGEZERO_POPULATE
 * (dense by construction) and LAZY_THP=0 keep THP at first touch, and so
 * do the extents of a jemalloc arena a program makes with the library's
 * hooks (the preload's own arena starts lazy too: jemalloc/extents.h).
 *
 * A lazy block counts as 4 KiB pages (its backing, the stats, its name
 * in /proc/PID/maps), which it is until collapsed, so its first dense
 * reuse advises THP (prezero_share.c, hz_prezero_adapt_backing).
 *
 * Evidence: a block of a size class whose last block was collapsed whole,
 * or whose last recycled block was dense (cleared, not dropped), or whose
 * last block released at its free was (recycle.c), gets
 * MADV_HUGEPAGE at once, when fresh THP faults at least as fast as 4 KiB
 * pages here (hz_backing_fresh_thp_fast, above): the
 * next one is likely dense too, and its faults then cost nothing extra (on
 * the Zen 5 VM a fresh 4 KiB page faults at 0.42 GB/s and a huge page
 * freed shortly before at 15). The evidence is used once: that block is
 * not tracked (mincore cannot tell a sparse use of huge pages from a dense
 * one), and the next block of the class starts lazy again unless a dense
 * reuse noted the class since. */

/* Whether a fresh block starts on 4 KiB pages (above). */
static bool starts_lazy(void)
{
	const struct hz_config *c = hz_config();

	return c->lazy_thp && c->backing == HZ_BACKING_OPT_AUTO && !c->populate &&
	       hz_os()->thp.mode == HZ_THP_MADVISE;
}

bool hz_backing_lazy(void)
{
	return hz_backing_first() == HZ_BACKING_THP && hz_backing_thp_usable() && starts_lazy();
}

static void (*lazy_watcher)(uintptr_t start, size_t len);

void hz_backing_on_lazy(void (*watch)(uintptr_t start, size_t len))
{
	__atomic_store_n(&lazy_watcher, watch, __ATOMIC_RELEASE);
}

/* A lazy block: no advice (or THP at once, on evidence), tracked for the
 * promoter when it runs. */
static int map_lazy(uintptr_t start, size_t len, const struct hz_lazy_block *lazy,
		    enum hz_backing *got)
{
	bool up_front = hz_class_dense(lazy->block_len) && hz_backing_fresh_thp_fast(len);
	bool advised;
	int ret = hz_prim_commit(start, len, up_front ? HZ_PAGES_THP : HZ_PAGES_DEFAULT, &advised);

	if (ret != 0)
		return ret;
	*got = up_front ? HZ_BACKING_THP : HZ_BACKING_SMALL;
	if (up_front) {
		/* Its first page, which the program writes first: timed (above). */
		if (start % HZ_SZ_2M == 0 && len >= HZ_SZ_2M)
			(void)hz_backing_time_fresh_page(start);
		hz_class_note_dense(lazy->block_len, false); /* used once */
		hz_stats_add(thp_up_front, 1);
	} else {
		void (*watch)(uintptr_t, size_t) = __atomic_load_n(&lazy_watcher, __ATOMIC_ACQUIRE);

		if (watch)
			watch(start, lazy->used < len ? lazy->used : len);
	}
	return 0;
}

/* Map 4 KiB or THP memory. Returns the backing actually obtained. */
static int map_small_or_thp(uintptr_t start, size_t len, enum hz_backing want,
			    const struct hz_lazy_block *lazy, enum hz_backing *got)
{
	/* Under THP "always", 4 KiB is asked for explicitly (SMALL). */
	enum hz_prim_pages pages = HZ_PAGES_SMALL;
	bool usable = want == HZ_BACKING_THP && hz_backing_thp_usable();
	bool advised, slow = false;
	int ret;

	if (usable && lazy != NULL && lazy->used > 0 && starts_lazy())
		return map_lazy(start, len, lazy, got);
	if (usable)
		slow = !hz_backing_fresh_thp_fast(len);
	if (want == HZ_BACKING_THP && !slow)
		pages = usable ? HZ_PAGES_THP : HZ_PAGES_DEFAULT;
	ret = hz_prim_commit(start, len, pages, &advised);
	if (ret != 0)
		return ret;
	*got = pages == HZ_PAGES_THP && advised ? HZ_BACKING_THP : HZ_BACKING_SMALL;
	if (slow)
		hz_stats_fallback(HZ_FB_THP_SLOW);
	else if (want == HZ_BACKING_THP && *got != HZ_BACKING_THP)
		hz_stats_fallback(HZ_FB_THP_UNAVAILABLE);
	return 0;
}

static void populate(uintptr_t start, size_t len, enum hz_backing b)
{
	size_t step = hz_backing_page(b);

	if (hz_prim_madvise((void *)start, len, MADV_POPULATE_WRITE) != -EINVAL)
		return;
	/* Kernels before 5.14: one write per page. The memory is fresh, so
	 * writing zero changes nothing but residency. */
	for (size_t off = 0; off < len; off += step)
		*(volatile char *)(start + off) = 0;
}

void hz_backing_name_mapping(uintptr_t start, size_t len, enum hz_backing b)
{
	static const char *const names[HZ_BACKING_COUNT] = {
		[HZ_BACKING_THP] = "hugezero-thp",
		[HZ_BACKING_SMALL] = "hugezero-4k",
	};

	/* hugetlb mappings cannot be named; /proc/PID/smaps shows them as
	 * Private_Hugetlb inside our range. */
	if (names[b])
		hz_prim_name_mapping((void *)start, len, names[b]);
}

/* The kernel checks RLIMIT_DATA when a mapping adds private writable
 * memory, but counts a MAP_FIXED mapping net of what it replaces: a block
 * mapped over the PROT_NONE reservation adds nothing by that count (and
 * the program's next mmap fails instead). So the limit is checked here,
 * as the kernel would for glibc's mmap of the same block: a refused block
 * goes to the next allocator, which meets the kernel's check. */
int hz_backing_map(uintptr_t start, size_t len, enum hz_backing want,
		   const struct hz_lazy_block *lazy, enum hz_backing *got)
{
	int ret = -ENOMEM;

	if (!hz_prim_data_fits(len))
		return -ENOMEM;

	for (enum hz_backing b = want; b < HZ_BACKING_COUNT; b++) {
		if (b <= HZ_BACKING_HUGETLB2M) {
			if ((start | len) & (hz_backing_page(b) - 1))
				continue;
			ret = map_hugetlb(b, start, len);
			if (ret == -EEXIST)
				break; /* the range is not ours any more */
			if (ret != 0)
				continue;
			*got = b;
		} else {
			ret = map_small_or_thp(start, len, b, lazy, got);
			if (ret != 0)
				break;
		}
		hz_stats_add(blocks[*got], 1);
		hz_stats_add(bytes[*got], len);
		hz_backing_name_mapping(start, len, *got);
		if (hz_config()->populate)
			populate(start, len, *got);
		return 0;
	}
	return ret;
}

static const char *const backing_names[HZ_BACKING_COUNT] = {
	[HZ_BACKING_HUGETLB1G] = "hugetlb1g",
	[HZ_BACKING_HUGETLB2M] = "hugetlb2m",
	[HZ_BACKING_THP] = "thp",
	[HZ_BACKING_SMALL] = "4k",
};

const char *hz_backing_name(enum hz_backing b)
{
	return (unsigned)b < HZ_BACKING_COUNT ? backing_names[b] : "?";
}
