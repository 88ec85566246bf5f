/* Fresh THP on hosts that take free memory back: whether a fresh huge
 * page faults at least as fast as 4 KiB pages here. See backing.h.
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
#include "backing.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "classes.h"
#include "config.h"
#include "log.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "range.h"
#include "sizes.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

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
