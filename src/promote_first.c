/* The first touches: THP advised on the rest of a range once its first
 * writes are dense. See promote_density.h for the rule.
 *
 * A new lazy block or aligned mmap (promote.c tracks both) is looked at
 * for its first FIRST_TOUCH_NS, ever less often (below). Its 2 MiB pages
 * written so far are judged (hz_promote_front_judge): dense, the pages the
 * program has not reached, above the last page touched and below the
 * first, get MADV_HUGEPAGE (a program's mapping gets it whole: below), so
 * its next faults there are one huge fault each instead of 512 small
 * ones; sparse, the watch ends and
 * the range is left to the collapse, unless it may be a writer of columns
 * (promote_density.h): a first pass part way keeps it watched, and even
 * counts make it looked at as a new range is, from then on, and collapsed
 * once every page holds more; otherwise the next look decides. */
#include "promote.h"

#include <errno.h>
#include <sys/mman.h>

#include "backing.h"
#include "classes.h"
#include "log.h"
#include "promote_density.h"
#include "promote_impl.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "promote_share.h"
#include "sizes.h"
#include "stats.h"

/* The first touches (promote_density.h): a range is watched for 1 s after
 * it is tracked, every 2 ms at first (the time a writer faulting fresh 4
 * KiB pages here takes to fill half a 2 MiB page), then every half its age
 * (at 6, 9, 13.5, 20 ... ms; about 17 looks in the second), so a writer
 * that starts late is caught within half the time it waited. Every 2 ms for the
 * whole second, the thread's wakes cost a single-threaded program whose
 * writes replace the zero page (xz) its other CPU's TLB flushes: 0.15-0.20
 * s of system time against glibc's 0.10-0.15, as a thread of nothing but
 * 2 ms sleeps did; one that slept 10 s cost nothing (bench/RESULTS.md,
 * "The first touches looked at less often"). A range seen written in
 * strides counts its age, and its second, from the last look that saw it
 * being written: the next column comes within milliseconds, counts that
 * never grow (one field of each record) are not looked at every 2 ms for
 * the rest of the second, and a writer seen late is still collapsed. */
#define FIRST_TOUCH_NS HZ_NS_PER_SEC
static uint64_t first_touch_ns = FIRST_TOUCH_NS; /* tests set it */
#define FIRST_TOUCH_TICK_NS (2 * HZ_NS_PER_MS)
/* Until then some range's first touches are watched (ns). */
static uint64_t first_touch_until;

/* THP on [from, to) of s, or nothing when it is empty. */
static bool advise(uintptr_t from, uintptr_t to)
{
	return from >= to || hz_prim_madvise((void *)from, to - from, MADV_HUGEPAGE) == 0;
}

/* THP where s's pages below first and from frontier on (2 MiB pages),
 * which the program has not touched yet, are: its next faults there are
 * huge. A program's mapping gets it whole, the pages written already
 * too (they are dense: the front's verdict): advice on a part splits the
 * mapping in two, and the kernel's mremap grows a range within one
 * mapping only (EFAULT), so a growable buffer (mmap, write its front,
 * mremap to grow) could no longer grow. A block of ours is only ever
 * moved by the library, which copies what mremap refuses: it keeps its
 * written pages without advice. */
static bool advise_untouched(struct hz_promote_slot *s, size_t first, size_t frontier)
{
	size_t untouched = (first + s->len / HZ_SZ_2M - frontier) * HZ_SZ_2M;
	uintptr_t start = s->start, end = start + s->len;
	bool done;

	if (untouched == 0 || !hz_backing_fresh_thp_fast(untouched))
		return false;
	if (s->kind == HZ_PROMOTE_MMAP)
		done = advise(start, start + __atomic_load_n(&s->map_len, __ATOMIC_RELAXED));
	else
		done = advise(start, start + first * HZ_SZ_2M) &&
		       advise(start + frontier * HZ_SZ_2M, end);
	if (!done)
		return false;
	hz_stats_add(promote_advised_bytes, untouched);
	hz_debug("%zu bytes at %p written densely: THP advised on the %zu untouched", s->len,
		 (void *)start, untouched);
	return true;
}

/* ---- the writer's own huge pages, timed ----
 *
 * The advice above trusted a scratch page's speed, and the guest hands
 * out a program's first huge pages as it does a scratch page, from those
 * freed last, still backed by the host, and the rest maybe not
 * (backing_fresh.c): on the Xeon AMX VM sort's 1 GiB buffer, advised,
 * faulted its first few huge pages at 4-8 GB/s and the rest at 0.35, where
 * 4 KiB pages fault at 2-3, and sort spent 2.1 s in the kernel against
 * glibc's 0.45.
 * So in an advised block the thread faults the page after the writer's
 * next one itself (MADV_POPULATE_WRITE), timed on its own CPU clock, and
 * again once the writer has filled the page behind the one faulted, or
 * passed it, going up or down: one page faulted ahead of the writer at a
 * time, which the writer, judged dense, was about to fault. The first
 * page slower than 4 KiB pages takes the advice back (MADV_NOHUGEPAGE: the
 * pages made huge stay so, the rest fault 4 KiB pages, collapsed later as
 * any lazy block's are: promote_collapse.c) and makes fresh memory 4 KiB
 * pages for the rest of the process (hz_backing_time_fresh_page). For the
 * watch's second only; blocks only: a program's mapping may be registered
 * with userfaultfd, whose handler a fault there would wait for. */

/* Page i moved k pages the way s's writer goes, or n when that leaves
 * [0, n). */
static size_t onward(const struct hz_promote_slot *s, size_t i, size_t k, size_t n)
{
	if (s->ahead_down)
		return i >= k ? i - k : n;
	return i + k < n ? i + k : n;
}

/* Fault s's 2 MiB page i of n ahead of the writer and time it (above).
 * Returns whether to go on: false when no page is left to time (i is n),
 * it was touched already or could not be faulted, or it was slow. */
static bool time_ahead(struct hz_promote_slot *s, size_t n, size_t i)
{
	int fast;

	if (i >= n)
		return false;
	fast = hz_backing_time_fresh_page(s->start + i * HZ_SZ_2M);
	if (fast < 0)
		return false;
	s->ahead = (uint32_t)i + 1;
	if (fast)
		return true;
	hz_prim_madvise((void *)s->start, s->len, MADV_NOHUGEPAGE);
	s->taken_back = true;
	hz_stats_fallback(HZ_FB_THP_SLOW);
	hz_debug("%zu bytes at %p: its own huge pages fault slower than 4 KiB pages, "
		 "THP advice taken back", s->len, (void *)s->start);
	return false;
}

/* A block just advised, whose pages first to frontier were touched: the
 * page after the writer's next is timed, above the frontier, or below the
 * first page for a writer going down (nothing left above it). */
static bool start_timing(struct hz_promote_slot *s, size_t n, size_t first, size_t frontier)
{
	s->ahead_down = frontier + 1 >= n && first >= 2;
	return time_ahead(s, n, s->ahead_down ? first - 2 : frontier + 1);
}

/* An advised block being timed: once the writer has filled the page
 * behind the one faulted ahead, or passed it, the page after its next is
 * timed. */
static bool follow_writer(struct hz_promote_slot *s, const uint16_t *resident, size_t n)
{
	size_t ahead = s->ahead - 1, edge = ahead, next;
	/* Behind it: the page after the frontier has one below, the page
	 * below the first one touched one above. */
	size_t behind = s->ahead_down ? ahead + 1 : ahead - 1;

	/* To the writer's first gap only: a second writer may fill the block
	 * from its other end (sort's line table). */
	while ((next = onward(s, edge, 1, n)) < n && resident[next] != 0)
		edge = next;
	if (edge == ahead && !hz_promote_page_whole(resident[behind]))
		return true; /* the writer has not reached it */
	return time_ahead(s, n, onward(s, edge, 2, n));
}

/* Collapse s's 2 MiB pages from its start while what they add to the RSS
 * stays within HZ_GUESS_MAX (classes.h), the most a guess may cost: a
 * page collapsed already adds nothing. Not held to the collapse's CPU
 * share (promote_share.h), which is for memory the program may no longer
 * use: these collapses take the faults of pages it is writing now off its
 * path. The time is counted in the share all the same. Returns false when
 * a page was busy (the program faulting in it): the next look goes on. */
static bool collapse_strided(struct hz_promote_slot *s, const uint16_t *resident, size_t n)
{
	size_t added = 0, collapsed = 0;
	int ret = 0;

	if (!hz_backing_fresh_thp_fast(n * HZ_SZ_2M))
		return true;
	for (size_t i = 0; i < n && !(__atomic_load_n(&s->word, __ATOMIC_ACQUIRE) & ST_DEAD); i++) {
		uint64_t cpu = hz_prim_thread_cpu_ns();

		added += (HZ_SZ_2M / HZ_SZ_4K - resident[i]) * HZ_SZ_4K;
		if (added > HZ_GUESS_MAX)
			break;
		if (resident[i] == HZ_SZ_2M / HZ_SZ_4K)
			continue;
		ret = hz_prim_collapse(s->start + i * HZ_SZ_2M, HZ_SZ_2M);
		cpu = hz_prim_thread_cpu_ns() - cpu;
		hz_stats_add(promote_ns, cpu);
		hz_promote_share_spend(cpu);
		if (ret == 0) {
			hz_stats_add(promote_collapsed_bytes, HZ_SZ_2M);
			collapsed += HZ_SZ_2M;
		} else if (ret != -EINVAL) { /* EINVAL: a VMA boundary cuts this page */
			break;
		}
	}
	hz_debug("%zu bytes at %p written in strides: %zu bytes collapsed", s->len,
		 (void *)s->start, collapsed);
	return ret != -EAGAIN && ret != -EBUSY;
}

/* When s's first touches count from: its tracking, or the last look that
 * saw it written in strides. Atomic: the pass reads it outside a visit. */
static uint64_t watched_since(const struct hz_promote_slot *s)
{
	return __atomic_load_n(&s->strided_level, __ATOMIC_RELAXED) != 0
		       ? __atomic_load_n(&s->strided_since, __ATOMIC_RELAXED)
		       : __atomic_load_n(&s->since, __ATOMIC_RELAXED);
}

/* s was seen being written in strides now: its looks and its watch count
 * from now. */
static void seen_striding(struct hz_promote_slot *s, uint64_t now)
{
	__atomic_store_n(&s->strided_since, now, __ATOMIC_RELAXED);
	hz_promote_watch_from(now);
}

/* A range whose first touches look sparse: whether it may be a strided
 * writer to watch on (promote_density.h), collapsed once every page grew.
 * It is seen being written when seen even, and when a page was busy under
 * the program's fault. */
static bool watch_strided(struct hz_promote_slot *s, const uint16_t *resident, size_t n,
			  uint64_t now)
{
	uint16_t level;

	if (s->strided_level == 0) {
		enum hz_front even = hz_promote_front_strided(resident, n, &level);

		if (even == HZ_FRONT_DENSE) {
			seen_striding(s, now);
			__atomic_store_n(&s->strided_level, level, __ATOMIC_RELAXED);
		}
		return even != HZ_FRONT_SPARSE;
	}
	if (hz_promote_front_level(resident, n, false) <= s->strided_level)
		return true; /* not grown yet, or mid-pass */
	if (collapse_strided(s, resident, n))
		return false;
	seen_striding(s, now);
	return true;
}

static void look_at_first_touches(struct hz_promote_slot *s, struct hz_promote_budget *b)
{
	uint16_t resident[HZ_PROMOTE_DENSE_MAX];
	size_t n = s->len / HZ_SZ_2M, frontier, first = 0;
	enum hz_front verdict = HZ_FRONT_SPARSE;
	uint64_t since = watched_since(s);

	if (n > HZ_PROMOTE_DENSE_MAX)
		n = HZ_PROMOTE_DENSE_MAX; /* the first 8 GiB speak for the rest */
	/* since may be after now: the range was tracked during this pass. */
	if ((b->now > since && b->now - since > first_touch_ns) ||
	    (s->kind == HZ_PROMOTE_BLOCK && !hz_promote_block_still_ours(s)) ||
	    hz_promote_front(s->start, n, resident, &verdict, &frontier) != 0 ||
	    (s->ahead != 0 && !follow_writer(s, resident, n)) ||
	    (s->ahead == 0 && (verdict == HZ_FRONT_SPARSE || s->strided_level != 0) &&
	     !watch_strided(s, resident, n, b->now)) ||
	    (s->ahead == 0 && verdict == HZ_FRONT_DENSE))
		__atomic_store_n(&s->first_touch, false, __ATOMIC_RELAXED);
	if (s->ahead != 0 || verdict != HZ_FRONT_DENSE)
		return;
	/* Not evidence for the size class: a block's first pages tell less
	 * than its whole use, which its reuse (prezero_share.c) and its
	 * release (recycle.c) show. A writer may go down as well as up
	 * (ImageMagick fills some images from their end): the pages below the
	 * first one touched are the rest too. */
	while (first < n && resident[first] == 0)
		first++;
	if (advise_untouched(s, first, frontier < n ? frontier : s->len / HZ_SZ_2M) &&
	    s->kind == HZ_PROMOTE_BLOCK && start_timing(s, n, first, frontier))
		__atomic_store_n(&s->first_touch, true, __ATOMIC_RELAXED);
}

uint64_t hz_promote_first_touch_pass(uint64_t now)
{
	struct hz_promote_budget b = { .now = now };
	uint64_t youngest = 0, age;

	if (now >= __atomic_load_n(&first_touch_until, __ATOMIC_RELAXED))
		return UINT64_MAX;
	if (!hz_promote_enabled()) {
		__atomic_store_n(&first_touch_until, 0, __ATOMIC_RELAXED);
		return UINT64_MAX;
	}
	/* Only the watched: holding a slot busy makes a forget of it wait. */
	for (unsigned i = 0; i < SLOTS; i++) {
		struct hz_promote_slot *s = &hz_promote_slots[i];
		uint64_t since;

		if (!__atomic_load_n(&s->first_touch, __ATOMIC_RELAXED))
			continue;
		hz_promote_visit(s, look_at_first_touches, &b);
		/* Out of the visit: a program thread may be tracking a new
		 * range in the slot. An old time wakes the thread early, a 0
		 * (not stored yet) not at all: the tracker wakes it then. */
		since = watched_since(s);
		if (!__atomic_load_n(&s->first_touch, __ATOMIC_RELAXED))
			continue;
		if (since > youngest)
			youngest = since;
	}
	if (youngest == 0) /* none watched: until the next range is tracked */
		return UINT64_MAX;
	age = now > youngest ? now - youngest : 0;
	return age / 2 > FIRST_TOUCH_TICK_NS ? age / 2 : FIRST_TOUCH_TICK_NS;
}

void hz_promote_watch_from(uint64_t since)
{
	__atomic_store_n(&first_touch_until, since + first_touch_ns, __ATOMIC_RELAXED);
}

#ifdef HZ_TEST_CORE
void hz_promote_test_first_touch_ns(uint64_t ns)
{
	first_touch_ns = ns;
}

bool hz_promote_test_seen_strided(uintptr_t start)
{
	for (unsigned i = 0; i < SLOTS; i++) {
		const struct hz_promote_slot *s = &hz_promote_slots[i];

		if (__atomic_load_n(&s->start, __ATOMIC_RELAXED) == start &&
		    __atomic_load_n(&s->first_touch, __ATOMIC_RELAXED) &&
		    __atomic_load_n(&s->strided_level, __ATOMIC_RELAXED) != 0)
			return true;
	}
	return false;
}
#endif
