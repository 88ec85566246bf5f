/* Lazy huge pages: the collapse of dense ranges, the promoter's pass on
 * the pre-zero thread over the table promote.c keeps. See promote.h.
 *
 * Density. A range is split into at most SEG_MAX segments of whole 2 MiB
 * pages (one 2 MiB page each for ranges up to 512 MiB). A segment is
 * collapsed only when every 2 MiB page in it is dense (promote_density.h).
 * A segment collapsed is marked and never looked at again.
 *
 * Limits. mincore reads only page tables; MADV_COLLAPSE allocates a huge
 * page (on this kind of VM a fresh one faults at about 1 GB/s), copies 2
 * MiB and holds the process's mmap lock for writing while it swaps the
 * page tables, which stalls the program's own faults. So a tick scans and
 * collapses within TICK_BUDGET_NS, collapses within the CPU share
 * (promote_share.h), and the interval between ticks doubles, up to
 * INTERVAL_MAX_NS, after a collapse that failed for want of memory or
 * because the pages were busy, after a slow one, and (no later than a
 * range too young for the last tick has waited the delay) after a tick
 * that found nothing to do; a new range or a clean tick of collapses
 * resets it.
 *
 * Age and share. A collapse pays only for memory the program goes on
 * using, and residency does not show use. A range is looked at only once it
 * has been tracked HUGEZERO_COLLAPSE_DELAY_MS (10 s, as jemalloc's
 * hpa_hugify_delay_ms): in bench/run-apps twelve programs that run for
 * seconds never repaid a collapse, and sort, zstd, gcc, ld and ImageMagick
 * lost 3-9% to them. Collapses then take at most HUGEZERO_COLLAPSE_CPU
 * percent of the program's CPU time (promote_share.h). */
#include "promote.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "classes.h"
#include "config.h"
#include "log.h"
#include "promote_density.h"
#include "promote_impl.h"
#include "promote_share.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "sizes.h"
#include "stats.h"

/* 20 ms of scanning and collapsing per tick (mincore reads 1 GiB in about
 * 1 ms). A collapse that alone takes a tick's budget of CPU (2 MiB at 100
 * MB/s) met reclaim or compaction: the promoter backs off. On a VM whose
 * host backs fresh memory lazily a collapse costs 5-7 ms of CPU (the new
 * huge page is fresh memory, 0.3-0.4 GB/s measured on a 4 GiB table), so
 * a bar of 8 ms backed off after most collapses and the table was 10-15%
 * huge after 6 s; with 30 ms, 15-22%. 20 ms and 30 ms did as well on a
 * 1 GiB block filled late (bench/RESULTS.md, "The fresh-THP check, the
 * first touches and two thresholds fewer"). */
#define TICK_BUDGET_NS 20000000ull
#define INTERVAL_MIN_NS 100000000ull   /* 100 ms */
/* 2 s at most between ticks. When nothing was dense: a range old enough
 * whose pages fill in later is collapsed within 2 s of being dense (1 s
 * measured; 5.6 s with 8 s, bench/RESULTS.md, "Six thresholds fewer").
 * After failures too: a range gives up after FAILURES_MAX of them
 * whatever the interval, so a longer one (8 s before) only spread the
 * same attempts out. */
#define INTERVAL_MAX_NS 2000000000ull
/* A range whose collapses failed this often is left on 4 KiB pages. A
 * transient failure (no memory, pages busy) ends the tick and backs off.
 * EINVAL refuses one 2 MiB page, not the range: a page that a VMA boundary
 * cuts. numpy advises MADV_HUGEPAGE on every large array from its
 * pointer's next page on, which splits the block's VMA inside its first
 * 2 MiB: that page is refused, the next ones collapse (measured on the
 * Zen 4 VM, 2026-12-01); so the promoter goes on to the next page. */
#define FAILURES_MAX 8

static uint64_t next_tick, interval = INTERVAL_MIN_NS;
static unsigned rr; /* the promoter's next slot */

/* A block range the promoter finished with is the evidence for its size
 * class (the ledger, classes.h): dense when collapsed whole. */
static void note_class(const struct hz_promote_slot *s)
{
	hz_class_note_dense(s->class_len, s->whole);
}

/* The range is given up: it stays on 4 KiB pages. */
static void give_up(struct hz_promote_slot *s, int err)
{
	__atomic_store_n(&s->done, true, __ATOMIC_RELAXED);
	if (s->kind == HZ_PROMOTE_BLOCK)
		note_class(s);
	hz_stats_add(promote_left_4k, 1);
	hz_debug("MADV_COLLAPSE of %zu bytes at %p refused (%d): left on 4 KiB pages", s->len,
		 (void *)s->start, err);
}

/* Collapse 2 MiB page at a of s. Returns false when the range or the tick
 * is to stop. */
static bool collapse_one(struct hz_promote_slot *s, uintptr_t a, struct hz_promote_budget *b)
{
	uint64_t t0 = hz_prim_now_ns(), cpu0 = hz_prim_thread_cpu_ns(), ns, cpu;
	int ret = hz_prim_collapse(a, HZ_SZ_2M);

	ns = hz_prim_now_ns() - t0;
	cpu = hz_prim_thread_cpu_ns() - cpu0;
	hz_stats_add(promote_ns, cpu);
	hz_promote_share_spend(cpu);
	if (hz_promote_share_left_ns() == 0)
		b->stop = true;
	if (ret == 0) {
		hz_stats_add(promote_collapsed_bytes, HZ_SZ_2M);
		b->worked = true;
		/* CPU time, not wall: at idle priority on a busy machine the
		 * thread waits for a CPU far longer than it collapses. */
		if (cpu > TICK_BUDGET_NS)
			b->stop = b->backoff = true;
		if (t0 + ns >= b->until)
			b->stop = true;
		return !b->stop;
	}
	hz_stats_add(promote_failed, 1);
	if (++s->failures >= FAILURES_MAX) {
		give_up(s, ret);
		return false;
	}
	if (ret == -EAGAIN || ret == -ENOMEM || ret == -EBUSY) {
		b->stop = b->backoff = true;
		return false;
	}
	if (ret == -EINVAL) {
		s->refused++;
		return true; /* this page stays on 4 KiB pages; on to the next */
	}
	give_up(s, ret);
	return false;
}

/* Whether the tick may scan on. A scan the time cuts short goes on from
 * the next slot at the next tick (rr), after the back-off of a tick that
 * collapsed nothing, as with a byte limit: coming back soon instead would
 * keep the promoter scanning a program's large sparse ranges, each tick
 * its whole budget. */
static bool within_budget(const struct hz_promote_budget *b)
{
	return hz_prim_now_ns() < b->until;
}

/* Collapse s's n 2 MiB pages at seg from s->resume on. Returns whether
 * all were: false when the range or the tick is to stop. */
static bool collapse_pages(struct hz_promote_slot *s, uintptr_t seg, size_t n,
			   struct hz_promote_budget *b)
{
	for (; s->resume < n; s->resume++) {
		if (__atomic_load_n(&s->word, __ATOMIC_ACQUIRE) & ST_DEAD)
			return false;
		if (!collapse_one(s, seg + (uintptr_t)s->resume * HZ_SZ_2M, b)) {
			if (!s->done && !b->backoff)
				s->resume++; /* budget spent after a success */
			return false;
		}
	}
	return true;
}

/* Collapse dense segment i of s, n 2 MiB pages at seg. Returns false when
 * the range or the tick is to stop. MADV_COLLAPSE refuses MADV_NOHUGEPAGE
 * memory, so a block whose advice was taken back has it lifted while its
 * pages are collapsed: being dense, they hold page tables, and none of
 * the program's faults there can take a huge page meanwhile. */
static bool collapse_segment(struct hz_promote_slot *s, uint32_t i, uintptr_t seg, size_t n,
			     struct hz_promote_budget *b)
{
	bool all;

	if (s->taken_back)
		hz_prim_madvise((void *)seg, n * HZ_SZ_2M, MADV_HUGEPAGE);
	all = collapse_pages(s, seg, n, b);
	if (s->taken_back)
		hz_prim_madvise((void *)seg, n * HZ_SZ_2M, MADV_NOHUGEPAGE);
	if (!all)
		return false;
	s->seg_done[i / 64] |= 1ull << (i % 64);
	s->resume = 0;
	return within_budget(b);
}

/* Segment i of s: collapse it if dense. Returns false when the range or
 * the tick is to stop. */
static bool do_segment(struct hz_promote_slot *s, uint32_t i, struct hz_promote_budget *b)
{
	uintptr_t seg = s->start + (uintptr_t)i * s->seg_hp * HZ_SZ_2M;
	size_t hp_total = s->len / HZ_SZ_2M;
	size_t n = hp_total - (size_t)i * s->seg_hp < s->seg_hp ? hp_total - (size_t)i * s->seg_hp
								 : s->seg_hp;
	bool yes;

	if (hz_promote_dense(seg, n, &yes) != 0) {
		if (s->kind == HZ_PROMOTE_MMAP)
			give_up(s, -ENOMEM); /* unmapped behind our back */
		return false;
	}
	if (!yes) {
		s->resume = 0;
		return within_budget(b);
	}
	return collapse_segment(s, i, seg, n, b);
}

static void work_on(struct hz_promote_slot *s, struct hz_promote_budget *b)
{
	uint32_t k;

	if (s->since > b->born_by) { /* too young: due once it has waited the delay */
		if (s->since - b->born_by < b->ripe_in)
			b->ripe_in = s->since - b->born_by;
		return;
	}
	if (s->kind == HZ_PROMOTE_BLOCK && !hz_promote_block_still_ours(s))
		return;
	for (k = 0; k < s->nseg; k++) {
		uint32_t i = (s->cursor + k) % s->nseg;

		if (s->seg_done[i / 64] & (1ull << (i % 64)))
			continue;
		if (!do_segment(s, i, b)) {
			s->cursor = s->resume ? i : (i + 1) % s->nseg;
			break;
		}
	}
	for (k = 0; k < s->nseg; k++)
		if (!(s->seg_done[k / 64] & (1ull << (k % 64))))
			return;
	/* Every segment dense, refused pages too. One refused page is a VMA
	 * cut (numpy's advice, above); a range refused more is no evidence
	 * that its class's blocks get huge pages. */
	__atomic_store_n(&s->whole, s->refused <= 1, __ATOMIC_RELAXED);
	if (s->refused > 0)
		hz_stats_add(promote_left_4k, 1);
	__atomic_store_n(&s->done, true, __ATOMIC_RELAXED);
	if (s->kind == HZ_PROMOTE_BLOCK)
		note_class(s);
}

static uint64_t min_ns(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a < b ? a : b;

	return m < c ? m : c;
}

/* Collapse what is dense, within the tick's budget, when a tick is due.
 * Returns the ns until the next one is due. */
uint64_t hz_promote_collapse_pass(uint64_t now)
{
	uint64_t delay = hz_config()->collapse_delay_ms * HZ_NS_PER_MS;
	struct hz_promote_budget b = { .until = now + TICK_BUDGET_NS,
				       .born_by = now > delay ? now - delay : 0,
				       .ripe_in = UINT64_MAX };
	uint64_t due = __atomic_load_n(&next_tick, __ATOMIC_RELAXED);

	if (now < due)
		return due - now;
	if (!hz_promote_enabled()) {
		__atomic_store_n(&next_tick, now + INTERVAL_MAX_NS, __ATOMIC_RELAXED);
		return INTERVAL_MAX_NS;
	}
	if (due == 0)
		interval = INTERVAL_MIN_NS; /* a new range */
	if (hz_promote_share_left_ns() == 0) {
		hz_stats_add(promote_share_waits, 1);
		interval = hz_promote_share_wait_ns(INTERVAL_MIN_NS, INTERVAL_MAX_NS);
		__atomic_store_n(&next_tick, now + interval, __ATOMIC_RELAXED);
		return interval;
	}
	for (unsigned n = 0; n < SLOTS && !b.stop && within_budget(&b); n++)
		hz_promote_visit(&hz_promote_slots[rr++ % SLOTS], work_on, &b);
	if (b.backoff)
		interval = interval * 2 > INTERVAL_MAX_NS ? INTERVAL_MAX_NS : interval * 2;
	else if (!b.worked) /* nothing dense: back off, but be there when a range ripens */
		interval = min_ns(interval * 2, INTERVAL_MAX_NS,
				  b.ripe_in > INTERVAL_MIN_NS ? b.ripe_in : INTERVAL_MIN_NS);
	else if (b.stop)
		interval = INTERVAL_MIN_NS / 4; /* more is dense: come back soon */
	else
		interval = INTERVAL_MIN_NS;
	now = hz_prim_now_ns();
	__atomic_store_n(&next_tick, now + interval, __ATOMIC_RELAXED);
	return interval;
}

void hz_promote_collapse_soon(void)
{
	__atomic_store_n(&next_tick, 0, __ATOMIC_RELAXED);
}

#ifdef HZ_TEST_CORE
void hz_promote_test_kick(void)
{
	hz_promote_collapse_soon();
}
#endif
