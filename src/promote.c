/* Lazy huge pages: the promoter. See promote.h.
 *
 * The tracker is a fixed table of ranges, each with an atomic word: state
 * (free, claimed while being filled, live, busy while the promoter works on
 * it), a "dead" bit and a generation that every claim bumps, so a
 * compare-and-swap on the word never acts on a slot reused meanwhile.
 * Program threads claim slots (track) and free them (forget); the promoter
 * (the pre-zero thread) alone turns live into busy and back. Nobody holds a
 * lock: the one wait is a forget that finds the promoter inside a collapse
 * of the range being unmapped, a futex sleep until the promoter is out.
 *
 * Density. A range is split into at most SEG_MAX segments of whole 2 MiB
 * pages (one 2 MiB page each for ranges up to 512 MiB). A segment is
 * collapsed only when every 2 MiB page in it is dense (promote_density.h).
 * A segment collapsed is marked and never looked at again.
 *
 * The first touches of a new range are watched by promote_first.c, on the
 * same slots (promote_impl.h).
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
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>

#include "backing.h"
#include "blocks.h"
#include "classes.h"
#include "config.h"
#include "log.h"
#include "promote_density.h"
#include "promote_impl.h"
#include "promote_share.h"
#include "prim/memory.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "sizes.h"
#include "stats.h"

/* 2 MiB pages per segment at most (8 GiB), as many as one density call
 * takes: larger ranges (above 2 TiB) are not tracked. */
#define SEG_HP_MAX HZ_PROMOTE_DENSE_MAX
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

struct hz_promote_slot hz_promote_slots[SLOTS];
static int tracked_any;
/* mmap ranges tracked, and bounds holding every one ever tracked: forget
 * returns after two loads for the program's other munmaps. */
static int mmap_count;
static uintptr_t mmap_lo = UINTPTR_MAX, mmap_hi;
static uint64_t next_tick, interval = INTERVAL_MIN_NS;
static unsigned rr; /* the promoter's next slot */

bool hz_promote_enabled(void)
{
	return hz_config()->lazy_thp && hz_os()->thp.mode == HZ_THP_MADVISE &&
	       hz_backing_thp_usable();
}

/* A block range the promoter finished with is the evidence for its size
 * class (the ledger, classes.h): dense when collapsed whole. */
static void note_class(const struct hz_promote_slot *s)
{
	hz_class_note_dense(s->class_len, s->whole);
}

static uint32_t load_word(struct hz_promote_slot *s)
{
	return __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
}

static bool cas_word(struct hz_promote_slot *s, uint32_t *old, uint32_t new_word)
{
	return __atomic_compare_exchange_n(&s->word, old, new_word, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

static bool overlaps(const struct hz_promote_slot *s, uintptr_t start, uintptr_t end)
{
	uintptr_t a = __atomic_load_n(&s->start, __ATOMIC_RELAXED);
	size_t n = __atomic_load_n(&s->len, __ATOMIC_RELAXED);

	return a < end && start < a + n;
}

/* What a slot's end must know, read while it is still ours: once free,
 * another thread may claim and refill it. */
struct ending {
	uint8_t kind;
	bool done, whole;
	size_t class_len;
};

static struct ending ending_of(const struct hz_promote_slot *s)
{
	return (struct ending){ __atomic_load_n(&s->kind, __ATOMIC_RELAXED),
				__atomic_load_n(&s->done, __ATOMIC_RELAXED),
				__atomic_load_n(&s->whole, __ATOMIC_RELAXED),
				__atomic_load_n(&s->class_len, __ATOMIC_RELAXED) };
}

/* The slot ended (free, generation kept: the next claim bumps it). */
static void slot_freed(struct ending e)
{
	if (e.kind == HZ_PROMOTE_MMAP)
		__atomic_sub_fetch(&mmap_count, 1, __ATOMIC_RELAXED);
	else if (e.done)
		hz_class_note_dense(e.class_len, e.whole);
}

/* Free a live slot, or tell the promoter working on it to free it (dead).
 * Returns true when the promoter holds it (*w then has the dead word). */
static bool end_slot(struct hz_promote_slot *s, uint32_t *w)
{
	for (;;) {
		uint32_t st = *w & ST_MASK;

		if (st == ST_LIVE) {
			struct ending e = ending_of(s);

			if (cas_word(s, w, *w & ~(ST_MASK | ST_DEAD))) {
				slot_freed(e);
				return false;
			}
		} else if (st == ST_BUSY) {
			if (*w & ST_DEAD)
				return true;
			if (cas_word(s, w, *w | ST_DEAD)) {
				*w |= ST_DEAD;
				return true;
			}
		} else {
			return false; /* freed meanwhile */
		}
	}
}

/* The slot's word as the futex the promoter wakes a forget on. */
static int *futex_of(struct hz_promote_slot *s)
{
	return (int *)(void *)&s->word;
}

/* A forget waits for a collapse in flight to end, at most
 * HZ_THREAD_STUCK_NS. MADV_COLLAPSE acts on whatever is mapped at its
 * address when the kernel gets there, so a munmap let through early lets
 * it collapse the program's next mapping at that address: with a 2 ms
 * limit (one 2 MiB collapse took 0.1-2 ms on one VM, up to 6 ms on
 * another), a sparse mapping of four written bytes got a 2 MiB page
 * (test_promote). The forget sleeps, so the promoter at idle priority gets
 * the CPU, and the promoter wakes it. */
static void wait_promoter(struct hz_promote_slot *s, uint32_t dead)
{
	uint64_t deadline = hz_prim_now_ns() + HZ_THREAD_STUCK_NS, now;

	while (load_word(s) == dead) {
		now = hz_prim_now_ns();
		if (now >= deadline) {
			hz_debug("forgetting %p while the promoter is in it: not waiting longer",
				 (void *)s->start);
			return;
		}
		hz_prim_futex_wait(futex_of(s), (int)dead, deadline - now);
	}
}

static void forget_kind(uintptr_t start, uintptr_t end, uint8_t kind, bool wait)
{
	for (unsigned i = 0; i < SLOTS; i++) {
		struct hz_promote_slot *s = &hz_promote_slots[i];
		uint32_t w = load_word(s);

		if ((w & ST_MASK) < ST_LIVE ||
		    __atomic_load_n(&s->kind, __ATOMIC_RELAXED) != kind || !overlaps(s, start, end))
			continue;
		if (end_slot(s, &w) && wait)
			wait_promoter(s, w);
	}
}

void hz_promote_forget(uintptr_t start, size_t len)
{
	uintptr_t end = len > UINTPTR_MAX - start ? UINTPTR_MAX : start + len;

	if (__atomic_load_n(&mmap_count, __ATOMIC_ACQUIRE) == 0 ||
	    end <= __atomic_load_n(&mmap_lo, __ATOMIC_RELAXED) ||
	    start >= __atomic_load_n(&mmap_hi, __ATOMIC_RELAXED))
		return;
	forget_kind(start, end, HZ_PROMOTE_MMAP, true);
}

void hz_promote_leave(uintptr_t start, size_t len)
{
	uintptr_t end = len > UINTPTR_MAX - start ? UINTPTR_MAX : start + len;

	hz_promote_forget(start, len);
	if (hz_blocks_owns((const void *)start))
		forget_kind(start, end, HZ_PROMOTE_BLOCK, true);
}

static struct hz_promote_slot *claim_slot(void)
{
	for (unsigned i = 0; i < SLOTS; i++) {
		uint32_t w = load_word(&hz_promote_slots[i]);

		if ((w & ST_MASK) == ST_FREE &&
		    cas_word(&hz_promote_slots[i], &w, ((w & ~(ST_MASK | ST_DEAD)) + GEN_ONE) | ST_CLAIMED))
			return &hz_promote_slots[i];
	}
	return NULL;
}

/* Table full: a block range the promoter is finished with makes room,
 * else the next live block range in turn (one that was released and
 * mapped elsewhere never ends by itself: its granules are mapped again
 * only at a fresh block's address). mmap ranges end only by forget. */
static struct hz_promote_slot *evict_block(void)
{
	static unsigned next;

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned n = 0; n < SLOTS; n++) {
			unsigned i = pass ? __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) % SLOTS : n;
			struct hz_promote_slot *s = &hz_promote_slots[i];
			uint32_t w = load_word(s);

			if ((w & ST_MASK) == ST_LIVE &&
			    __atomic_load_n(&s->kind, __ATOMIC_RELAXED) == HZ_PROMOTE_BLOCK &&
			    (pass || __atomic_load_n(&s->done, __ATOMIC_RELAXED)) && !end_slot(s, &w))
				return claim_slot();
		}
	}
	return NULL;
}

static void bound_mmaps(uintptr_t start, uintptr_t end)
{
	uintptr_t lo = __atomic_load_n(&mmap_lo, __ATOMIC_RELAXED);
	uintptr_t hi = __atomic_load_n(&mmap_hi, __ATOMIC_RELAXED);

	while (start < lo && !__atomic_compare_exchange_n(&mmap_lo, &lo, start, false,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	while (end > hi && !__atomic_compare_exchange_n(&mmap_hi, &hi, end, false,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

bool hz_promote_track(uintptr_t start, size_t len, enum hz_promote_kind kind)
{
	size_t hp = len / HZ_SZ_2M;
	uint32_t seg_hp = (uint32_t)((hp + SEG_MAX - 1) / SEG_MAX);
	struct hz_promote_slot *s;

	if (start % HZ_SZ_2M || hp == 0)
		return false;
	if (kind == HZ_PROMOTE_BLOCK) /* its granules were mapped again */
		forget_kind(start, start + len, HZ_PROMOTE_BLOCK, false);
	s = hp <= (size_t)SEG_MAX * SEG_HP_MAX ? claim_slot() : NULL;
	if (!s && hp <= (size_t)SEG_MAX * SEG_HP_MAX)
		s = evict_block();
	if (!s) {
		hz_stats_add(promote_left_4k, 1);
		return false;
	}
	/* Atomic: a forget or an eviction may read a slot it saw live a
	 * moment ago; its CAS on the word then fails on the new generation. */
	__atomic_store_n(&s->kind, (uint8_t)kind, __ATOMIC_RELAXED);
	__atomic_store_n(&s->done, false, __ATOMIC_RELAXED);
	__atomic_store_n(&s->whole, false, __ATOMIC_RELAXED);
	s->failures = s->refused = 0;
	__atomic_store_n(&s->strided_level, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->strided_since, 0, __ATOMIC_RELAXED);
	s->ahead = 0;
	s->ahead_down = false;
	s->taken_back = false;
	__atomic_store_n(&s->first_touch, true, __ATOMIC_RELAXED);
	__atomic_store_n(&s->start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&s->len, hp * HZ_SZ_2M, __ATOMIC_RELAXED);
	__atomic_store_n(&s->class_len, hz_align_up(len, HZ_SZ_2M), __ATOMIC_RELAXED);
	__atomic_store_n(&s->map_len, len, __ATOMIC_RELAXED);
	s->seg_hp = seg_hp;
	/* Atomic: the first-touch pass reads it outside its visit. */
	__atomic_store_n(&s->since, hz_prim_now_ns(), __ATOMIC_RELAXED);
	s->nseg = (uint32_t)((hp + seg_hp - 1) / seg_hp);
	s->cursor = s->resume = 0;
	for (unsigned i = 0; i < SEG_MAX / 64; i++)
		s->seg_done[i] = 0;
	if (kind == HZ_PROMOTE_MMAP) {
		bound_mmaps(start, start + hp * HZ_SZ_2M);
		__atomic_add_fetch(&mmap_count, 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&s->word, (load_word(s) & ~ST_MASK) | ST_LIVE, __ATOMIC_RELEASE);
	__atomic_store_n(&tracked_any, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&next_tick, 0, __ATOMIC_RELAXED);
	hz_promote_watch_from(s->since);
	hz_stats_add(promote_tracked, 1);
	return true;
}

/* ---- the promoter (the pre-zero thread) ---- */


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
		if (load_word(s) & ST_DEAD)
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

bool hz_promote_block_still_ours(const struct hz_promote_slot *s)
{
	struct hz_span span = { hz_range_make(s->start, s->len), HZ_BACKING_THP };

	return hz_blocks_owns((void *)s->start) && hz_blocks_owns((void *)(s->start + s->len - 1)) &&
	       hz_blocks_reusable(&span);
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

/* Run work on s, live and not done, holding it busy: a forget meanwhile
 * marks it dead and waits (wait_promoter), so nothing work does lands on
 * what the program maps there next. */
void hz_promote_visit(struct hz_promote_slot *s, hz_promote_work_fn *work,
		      struct hz_promote_budget *b)
{
	uint32_t w = load_word(s);
	struct ending e;

	if ((w & ST_MASK) != ST_LIVE || __atomic_load_n(&s->done, __ATOMIC_RELAXED) ||
	    !cas_word(s, &w, (w & ~ST_MASK) | ST_BUSY))
		return;
	work(s, b);
	e = ending_of(s);
	w = load_word(s);
	for (;;) {
		uint32_t to = w & ST_DEAD ? w & ~(ST_MASK | ST_DEAD) : (w & ~ST_MASK) | ST_LIVE;

		if (cas_word(s, &w, to))
			break;
	}
	if (w & ST_DEAD) { /* a forget may be waiting (wait_promoter) */
		slot_freed(e);
		hz_prim_futex_wake(futex_of(s), INT_MAX);
	}
}

/* The child of a fork has no promoter: what it held is live again. */
static void fork_child(void)
{
	for (unsigned i = 0; i < SLOTS; i++) {
		uint32_t w = hz_promote_slots[i].word;

		if ((w & ST_MASK) != ST_BUSY)
			continue;
		hz_promote_slots[i].word = w & ST_DEAD ? w & ~(ST_MASK | ST_DEAD) : (w & ~ST_MASK) | ST_LIVE;
		if (w & ST_DEAD)
			slot_freed(ending_of(&hz_promote_slots[i]));
	}
	hz_promote_share_reset();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void)
{
	/* From the pre-zero thread, never inside a malloc. */
	pthread_atfork(NULL, NULL, fork_child);
}

static uint64_t min_ns(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a < b ? a : b;

	return m < c ? m : c;
}

/* Collapse what is dense, within the tick's budget, when a tick is due.
 * Returns the ns until the next one is due. */
static uint64_t collapse_pass(uint64_t now)
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

uint64_t hz_promote_tick(uint64_t now)
{
	uint64_t first_touch_in, collapse_in;

	if (!__atomic_load_n(&tracked_any, __ATOMIC_ACQUIRE))
		return UINT64_MAX;
	pthread_once(&atfork_once, register_atfork);
	first_touch_in = hz_promote_first_touch_pass(now);
	collapse_in = collapse_pass(now);
	return first_touch_in < collapse_in ? first_touch_in : collapse_in;
}

#ifdef HZ_TEST_CORE
void hz_promote_test_kick(void)
{
	__atomic_store_n(&next_tick, 0, __ATOMIC_RELAXED);
}
#endif
