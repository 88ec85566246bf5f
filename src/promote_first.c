/* The first touches: THP advised on the rest of a range once its first
 * writes are dense. See promote_density.h for the rule.
 *
 * A new lazy block or aligned mmap (promote.c tracks both) is looked at
 * for its first FIRST_TOUCH_NS, ever less often (below). Its 2 MiB pages
 * written so far are judged (hz_promote_front_judge): dense, the pages the
 * program has not reached, above the last page touched and below the
 * first, get MADV_HUGEPAGE, so its next faults there are one huge fault
 * each instead of 512 small ones; sparse, the watch ends and
 * the range is left to the collapse; otherwise the next look decides. */
#include "promote.h"

#include <sys/mman.h>

#include "backing.h"
#include "log.h"
#include "promote_density.h"
#include "promote_impl.h"
#include "prim/prim.h"
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
 * "The first touches looked at less often"). */
#define FIRST_TOUCH_NS HZ_NS_PER_SEC
static uint64_t first_touch_ns = FIRST_TOUCH_NS; /* tests set it */
#define FIRST_TOUCH_TICK_NS (2 * HZ_NS_PER_MS)
/* Until then some range's first touches are watched (ns). */
static uint64_t first_touch_until;

/* THP on [from, to) of s, which the program has not touched yet. */
static void advise_untouched(struct hz_promote_slot *s, uintptr_t from, uintptr_t to)
{
	if (from >= to || !hz_backing_fresh_thp_fast())
		return;
	if (hz_prim_madvise((void *)from, to - from, MADV_HUGEPAGE) != 0)
		return;
	hz_stats_add(promote_advised_bytes, to - from);
	hz_debug("%zu bytes at %p written densely: THP advised on the %zu at %p", s->len,
		 (void *)s->start, to - from, (void *)from);
}

static void look_at_first_touches(struct hz_promote_slot *s, struct hz_promote_budget *b)
{
	uint16_t resident[HZ_PROMOTE_DENSE_MAX];
	size_t n = s->len / HZ_SZ_2M, frontier, first = 0;
	enum hz_front verdict = HZ_FRONT_SPARSE;

	if (n > HZ_PROMOTE_DENSE_MAX)
		n = HZ_PROMOTE_DENSE_MAX; /* the first 8 GiB speak for the rest */
	/* since may be after now: the range was tracked during this pass. */
	if ((b->now > s->since && b->now - s->since > first_touch_ns) ||
	    (s->kind == HZ_PROMOTE_BLOCK && !hz_promote_block_still_ours(s)) ||
	    hz_promote_front(s->start, n, resident, &verdict, &frontier) != 0 ||
	    verdict != HZ_FRONT_WAIT)
		__atomic_store_n(&s->first_touch, false, __ATOMIC_RELAXED);
	if (verdict != HZ_FRONT_DENSE)
		return;
	/* Not evidence for the size class: a block's first pages tell less
	 * than its whole use, which its reuse (prezero_share.c) and its
	 * release (recycle.c) show. A writer may go down as well as up
	 * (ImageMagick fills some images from their end): the pages below the
	 * first one touched are the rest too. */
	while (first < n && resident[first] == 0)
		first++;
	advise_untouched(s, s->start, s->start + first * HZ_SZ_2M);
	advise_untouched(s, s->start + (frontier < n ? frontier * HZ_SZ_2M : s->len),
			 s->start + s->len);
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
		since = __atomic_load_n(&s->since, __ATOMIC_RELAXED);
		if (__atomic_load_n(&s->first_touch, __ATOMIC_RELAXED) && since > youngest)
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
#endif
