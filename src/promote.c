/* Lazy huge pages: the table of tracked ranges. See promote.h.
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
 * The first touches of a new range are watched by promote_first.c, and
 * dense ranges collapsed by promote_collapse.c, on the same slots
 * (promote_impl.h). */
#include "promote.h"

#include <limits.h>
#include <pthread.h>

#include "backing.h"
#include "blocks.h"
#include "classes.h"
#include "config.h"
#include "log.h"
#include "promote_density.h"
#include "promote_impl.h"
#include "promote_share.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "sizes.h"
#include "stats.h"

/* 2 MiB pages per segment at most (8 GiB), as many as one density call
 * takes: larger ranges (above 2 TiB) are not tracked. */
#define SEG_HP_MAX HZ_PROMOTE_DENSE_MAX

struct hz_promote_slot hz_promote_slots[SLOTS];
static int tracked_any;
/* mmap ranges tracked, and bounds holding every one ever tracked: forget
 * returns after two loads for the program's other munmaps. */
static int mmap_count;
static uintptr_t mmap_lo = UINTPTR_MAX, mmap_hi;

bool hz_promote_enabled(void)
{
	return hz_config()->lazy_thp && hz_os()->thp.mode == HZ_THP_MADVISE &&
	       hz_backing_thp_usable();
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
	hz_promote_collapse_soon();
	hz_promote_watch_from(s->since);
	hz_stats_add(promote_tracked, 1);
	return true;
}

bool hz_promote_block_still_ours(const struct hz_promote_slot *s)
{
	struct hz_span span = { hz_range_make(s->start, s->len), HZ_BACKING_THP };

	return hz_blocks_owns((void *)s->start) && hz_blocks_owns((void *)(s->start + s->len - 1)) &&
	       hz_blocks_reusable(&span);
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

uint64_t hz_promote_tick(uint64_t now)
{
	uint64_t first_touch_in, collapse_in;

	if (!__atomic_load_n(&tracked_any, __ATOMIC_ACQUIRE))
		return UINT64_MAX;
	pthread_once(&atfork_once, register_atfork);
	first_touch_in = hz_promote_first_touch_pass(now);
	collapse_in = hz_promote_collapse_pass(now);
	return first_touch_in < collapse_in ? first_touch_in : collapse_in;
}
