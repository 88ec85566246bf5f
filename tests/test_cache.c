/* The cache's table of freed spans (src/cache.c) without a thread, a lock
 * or a system call: pick, take and split, merge, eviction, decay and the
 * shared budget. Spans are only numbers here: the table never touches
 * their memory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cache.h"
#include "classes.h"
#include "stats.h"

#define G HZ_GRANULE
#define BASE ((uintptr_t)1 << 40)
#define NS 1000000000ull
#define MS 1000000ull

static struct hz_cache cache;
static struct hz_cache_budget budget;
static unsigned flushed; /* spans released by a full batch */

static void flush(struct hz_cache_batch *b)
{
	flushed += b->count;
	b->count = 0;
}

/* An empty table, a budget of 1024 granules, decay after 1 s. */
static int fresh(void **state)
{
	(void)state;
	budget = (struct hz_cache_budget){ 1024 * G, 0 };
	flushed = 0;
	hz_cache_init(&cache, NS, &budget, flush);
	return 0;
}

static struct hz_cache_entry entry(size_t first, size_t granules, bool clean, uint64_t t)
{
	struct hz_span s = { hz_range_make(BASE + first * G, granules * G), HZ_BACKING_THP };

	return (struct hz_cache_entry){ .span = s, .idle_since = t, .clean = clean };
}

static void add(struct hz_cache_entry e)
{
	struct hz_cache_batch b = { .count = 0 };

	hz_cache_add(&cache, e, &b);
	assert_int_equal(b.count, 0);
}

static int find(uintptr_t start)
{
	for (unsigned i = 0; i < cache.count; i++)
		if (cache.entries[i].span.range.start == start)
			return (int)i;
	return -1;
}

static void assert_accounted(void)
{
	size_t bytes = 0, clean = 0;

	for (unsigned i = 0; i < cache.count; i++) {
		bytes += hz_span_bytes(&cache.entries[i].span);
		clean += cache.entries[i].clean ? hz_span_bytes(&cache.entries[i].span) : 0;
	}
	assert_int_equal(cache.bytes, bytes);
	assert_int_equal(cache.clean_bytes, clean);
	assert_int_equal(hz_cache_budget_used(&budget), bytes);
}

static void pick_prefers_the_wanted_state_then_the_smallest(void **state)
{
	(void)state;
	add(entry(0, 8, true, 1));
	add(entry(20, 4, false, 1));
	add(entry(40, 6, true, 1));
	add(entry(60, 5, false, 1));
	/* calloc: the smallest clean one, though a dirty one is smaller */
	assert_int_equal(find(BASE + 40 * G), hz_cache_pick(&cache, 3 * G, 0, true, true, NULL));
	/* malloc: the smallest dirty one */
	assert_int_equal(find(BASE + 20 * G), hz_cache_pick(&cache, 3 * G, 0, false, true, NULL));
	/* dirty ones not allowed: the smallest clean one */
	assert_int_equal(find(BASE + 40 * G), hz_cache_pick(&cache, 3 * G, 0, false, false, NULL));
	/* only a clean one is big enough for 7 granules */
	assert_int_equal(find(BASE + 0 * G), hz_cache_pick(&cache, 7 * G, 0, false, true, NULL));
	assert_int_equal(-1, hz_cache_pick(&cache, 9 * G, 0, true, true, NULL));
	assert_accounted();
}

/* The span the pre-zero thread is zeroing: a calloc takes it before a
 * dirty entry, not before a clean one; a malloc only when no entry fits. */
static void pick_weighs_the_span_being_zeroed(void **state)
{
	struct hz_span zeroing = entry(80, 4, false, 1).span;

	(void)state;
	add(entry(20, 4, false, 1));
	assert_int_equal(HZ_CACHE_ZEROING, hz_cache_pick(&cache, 3 * G, 0, true, true, &zeroing));
	assert_int_equal(find(BASE + 20 * G), hz_cache_pick(&cache, 3 * G, 0, false, true, &zeroing));
	/* too small for the request, or not aligned: never */
	assert_int_equal(find(BASE + 20 * G), hz_cache_pick(&cache, 3 * G, 0, true, true,
							     &(struct hz_span){ hz_range_make(BASE + 80 * G, 2 * G),
										HZ_BACKING_THP }));
	assert_int_equal(-1, hz_cache_pick(&cache, 3 * G, 32 * G, false, true, &zeroing));
	add(entry(40, 4, true, 1));
	assert_int_equal(find(BASE + 40 * G), hz_cache_pick(&cache, 3 * G, 0, true, true, &zeroing));
	/* a malloc too large for every entry takes it */
	assert_int_equal(HZ_CACHE_ZEROING, hz_cache_pick(&cache, 3 * G, 16 * G, false, true, &zeroing));
}

static void pick_needs_the_size_in_whole_pages_and_the_alignment(void **state)
{
	(void)state;
	add(entry(1, 2, false, 1)); /* starts 2 MiB past a 4 MiB boundary */
	add(entry(8, 2, false, 1)); /* 16 MiB: 4 MiB aligned */
	/* a byte over two granules needs three: neither fits */
	assert_int_equal(-1, hz_cache_pick(&cache, 2 * G + 1, 0, false, true, NULL));
	assert_int_equal(find(BASE + 8 * G), hz_cache_pick(&cache, 2 * G, 4 * G, false, true, NULL));
	/* 1 GiB pages: a request rounds up to whole 1 GiB pages */
	assert_int_equal(hz_cache_granules_for(G + 1, HZ_BACKING_HUGETLB1G), HZ_SZ_1G / G);
	assert_int_equal(hz_cache_granules_for(G + 1, HZ_BACKING_THP), 2);
	/* Sizes no block can have, whose rounding would wrap, fit nothing. */
	assert_int_equal(-1, hz_cache_pick(&cache, SIZE_MAX, 0, false, true, NULL));
	assert_int_equal(-1, hz_cache_pick(&cache, SIZE_MAX - G + 2, 0, false, true, NULL));
}

/* A request's look decays first; its serve at a miss takes the largest
 * span too small, whole, to grow: only a clean one when dirty ones are not
 * allowed, none for an alignment above a granule. */
static void serve_at_a_miss_takes_the_largest_smaller_span(void **state)
{
	struct hz_cache_want w = { .size = 9 * G, .dirty_allowed = false };
	struct hz_cache_batch b = { .count = 0 };
	struct hz_cache_entry e;

	(void)state;
	add(entry(0, 2, true, 1));
	add(entry(20, 6, false, 1));
	add(entry(40, 4, true, 1));
	add(entry(60, 8, true, 0)); /* idle 1 s at NS: decays at the look */
	assert_int_equal(-1, hz_cache_look(&cache, NS, &w, &b));
	assert_int_equal(b.count, 1);
	assert_int_equal(b.spans[0].range.start, BASE + 60 * G);
	w.align = 2 * G;
	assert_false(hz_cache_serve(&cache, -1, &w, &b, &e));
	w.align = G;
	assert_true(hz_cache_serve(&cache, -1, &w, &b, &e));
	assert_int_equal(e.span.range.start, BASE + 40 * G);
	assert_int_equal(hz_span_granules(&e.span), 4);
	w.dirty_allowed = true;
	assert_true(hz_cache_serve(&cache, -1, &w, &b, &e));
	assert_int_equal(e.span.range.start, BASE + 20 * G);
	/* a hit: the entry the look chose, its wasteful rest kept */
	w.size = G;
	assert_true(hz_cache_serve(&cache, hz_cache_look(&cache, NS, &w, &b), &w, &b, &e));
	assert_int_equal(e.span.range.start, BASE);
	assert_int_equal(hz_span_granules(&e.span), 1);
	assert_int_equal(cache.count, 1);
	assert_int_equal(cache.entries[0].span.range.start, BASE + G);
	assert_accounted();
}

static void take_splits_off_only_a_wasteful_remainder(void **state)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_cache_entry e;

	(void)state;
	add(entry(0, 10, true, 1));
	/* 10 granules for 9: 11% more, kept whole */
	e = hz_cache_take(&cache, 0, 9 * G, &b);
	assert_int_equal(hz_span_granules(&e.span), 10);
	assert_int_equal(cache.count, 0);
	add(e);
	/* 10 granules for 8: 25% more, the last 2 go back, still clean */
	e = hz_cache_take(&cache, 0, 8 * G, &b);
	assert_int_equal(e.span.range.start, BASE);
	assert_int_equal(hz_span_granules(&e.span), 8);
	assert_true(e.clean);
	assert_int_equal(cache.count, 1);
	assert_int_equal(cache.entries[0].span.range.start, BASE + 8 * G);
	assert_int_equal(hz_span_granules(&cache.entries[0].span), 2);
	assert_true(cache.entries[0].clean);
	assert_int_equal(b.count, 0);
	assert_accounted();
}

static void add_merges_neighbours_of_one_backing_and_state(void **state)
{
	struct hz_cache_entry other = entry(4, 2, true, 1);

	(void)state;
	add(entry(0, 2, true, 5));
	add(entry(4, 2, true, 7));
	add(entry(2, 2, true, 6)); /* fills the gap: one span of 6 granules */
	assert_int_equal(cache.count, 1);
	assert_int_equal(cache.entries[0].span.range.start, BASE);
	assert_int_equal(hz_span_granules(&cache.entries[0].span), 6);
	assert_int_equal(cache.entries[0].idle_since, 7); /* the newest part's */
	add(entry(6, 2, false, 1)); /* dirty: not merged with clean */
	other.span.range = hz_range_make(BASE + 8 * G, hz_span_bytes(&other.span));
	other.span.backing = HZ_BACKING_SMALL; /* another backing: not merged */
	add(other);
	assert_int_equal(cache.count, 3);
	assert_accounted();
}

static void add_evicts_the_oldest_over_the_budget(void **state)
{
	struct hz_cache_batch b = { .count = 0 };

	(void)state;
	budget.max = 10 * G;
	add(entry(0, 4, false, 30));
	add(entry(10, 4, false, 10)); /* the oldest */
	hz_cache_add(&cache, entry(20, 4, true, 40), &b);
	assert_int_equal(b.count, 1);
	assert_int_equal(b.spans[0].range.start, BASE + 10 * G);
	assert_int_equal(cache.count, 2);
	assert_true(find(BASE + 20 * G) >= 0);
	assert_accounted();
}

static void add_gives_the_span_back_when_another_cache_holds_the_budget(void **state)
{
	struct hz_cache_batch b = { .count = 0 };

	(void)state;
	budget.max = 10 * G;
	add(entry(0, 2, false, 1));
	hz_cache_budget_charge(&budget, 7 * G, 0); /* the jemalloc extents' */
	hz_cache_add(&cache, entry(10, 2, false, 2), &b);
	/* the table's own span was evicted first, then the new one fits */
	assert_int_equal(b.count, 1);
	assert_int_equal(b.spans[0].range.start, BASE);
	assert_int_equal(cache.count, 1);
	b.count = 0;
	hz_cache_budget_charge(&budget, G, 0);
	hz_cache_add(&cache, entry(20, 3, false, 3), &b);
	/* 8 granules held elsewhere: the table empties and still cannot hold 3 */
	assert_int_equal(b.count, 2);
	assert_int_equal(b.spans[1].range.start, BASE + 20 * G);
	assert_int_equal(cache.count, 0);
	assert_int_equal(hz_cache_budget_used(&budget), 8 * G);
}

static void decay_releases_idle_spans_a_batch_at_a_time(void **state)
{
	struct hz_cache_batch b = { .count = 0 };

	(void)state;
	for (size_t i = 0; i < 10; i++)
		add(entry(i * 4, 2, i % 2, 1)); /* idle since 1 ns */
	add(entry(100, 2, false, NS + 1));
	/* 1 ns short for the old ones, and the new one is from after now */
	hz_cache_decay(&cache, NS, &b);
	assert_int_equal(b.count, 0);
	hz_cache_decay(&cache, NS + 1, &b);
	assert_int_equal(b.count, HZ_CACHE_BATCH);
	assert_int_equal(cache.count, 11 - HZ_CACHE_BATCH);
	b.count = 0;
	hz_cache_decay(&cache, NS + 1, &b);
	assert_int_equal(b.count, 2);
	assert_int_equal(cache.count, 1);
	assert_int_equal(cache.entries[0].span.range.start, BASE + 100 * G);
	assert_int_equal(hz_cache_next_decay(&cache), 2 * NS + 1);
	b.count = 0;
	hz_cache_decay(&cache, 2 * NS + 1, &b);
	assert_int_equal(hz_cache_next_decay(&cache), UINT64_MAX); /* empty */
	assert_accounted();
}

static void a_full_table_evicts_and_flushes_a_full_batch(void **state)
{
	struct hz_cache_batch b = { .count = 0 };

	(void)state;
	budget.max = (size_t)1 << 46;
	for (size_t i = 0; i < HZ_CACHE_ENTRIES + HZ_CACHE_BATCH + 3; i++)
		hz_cache_add(&cache, entry(i * 2, 1, false, i), &b); /* never adjacent */
	assert_int_equal(cache.count, HZ_CACHE_ENTRIES);
	/* the oldest went first: the batch and what it flushed */
	assert_int_equal(flushed + b.count, HZ_CACHE_BATCH + 3);
	assert_int_equal(flushed, HZ_CACHE_BATCH);
	assert_int_equal(b.spans[0].range.start, BASE + 2 * HZ_CACHE_BATCH * G);
	assert_int_equal(-1, find(BASE));
	assert_accounted();
}

static void first_dirty_skips_lazy_spans_and_remove_keeps_the_counts(void **state)
{
	struct hz_cache_entry e, lazy;

	(void)state;
	add(entry(0, 2, true, 1));
	assert_int_equal(-1, hz_cache_first_dirty(&cache));
	lazy = entry(20, 1, false, 1);
	lazy.lazy = true; /* lazily freed: clearing it would make it resident */
	add(lazy);
	assert_int_equal(-1, hz_cache_first_dirty(&cache));
	add(entry(10, 3, false, 1));
	assert_int_equal(find(BASE + 10 * G), hz_cache_first_dirty(&cache));
	e = hz_cache_remove(&cache, (unsigned)hz_cache_first_dirty(&cache));
	assert_int_equal(hz_span_granules(&e.span), 3);
	assert_false(e.clean);
	assert_int_equal(cache.count, 2);
	assert_accounted();
}

/* ---- stays from observed reuse (hz_cache_adapt) ---- */

/* An adaptive table, a budget of 2 GiB, decay after 5 s. */
static int adaptive(void **state)
{
	(void)state;
	budget = (struct hz_cache_budget){ 1024 * G, 0 };
	flushed = 0;
	hz_cache_init(&cache, 5 * NS, &budget, flush);
	hz_cache_adapt(&cache, true);
	hz_stats = (struct hz_stats){ 0 };
	return 0;
}

/* A program's free of e into the table; returns the spans given back. */
static unsigned put(struct hz_cache_entry e)
{
	struct hz_cache_batch b = { .count = 0 };

	hz_classes_free(hz_span_bytes(&e.span), e.span.range.start, e.idle_since, cache.adapt);
	hz_cache_add(&cache, e, &b);
	return b.count;
}

static void miss(size_t granules, uint64_t now)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_class_request r = { .size = granules * G, .now = now, .adapt = cache.adapt,
				      .decay_ns = cache.decay_ns };

	if (hz_classes_request(&r).reuse_missed)
		hz_stats_add(cache_reuse_missed, 1);
	hz_cache_missed(&cache, &b);
	flushed += b.count;
}

/* A request of the size of entry i served by it at now. */
static void hit(unsigned i, uint64_t now)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_cache_entry e = cache.entries[i];
	struct hz_class_request r = { .size = hz_span_bytes(&e.span), .now = now, .adapt = cache.adapt,
				      .hit = true, .idle_since = e.idle_since,
				      .decay_ns = cache.decay_ns };

	hz_classes_request(&r);
	assert_int_equal(b.count, 0);
	hz_cache_remove(&cache, i);
}

static void one_shot_block_larger_than_the_probe_room_goes_back_at_its_free(void **state)
{
	(void)state;
	/* 256 MiB, its size never seen: glibc would unmap it */
	assert_int_equal(put(entry(0, 128, false, 1)), 1);
	assert_int_equal(cache.count, 0);
	assert_int_equal(hz_stats.cache_no_reuse, 1);
	assert_int_equal(hz_stats.cache_no_reuse_bytes, 128 * G);
	assert_accounted();
}

static void first_small_free_is_a_probe_kept_one_second(void **state)
{
	struct hz_cache_batch b = { .count = 0 };

	(void)state;
	assert_int_equal(put(entry(0, 16, false, NS)), 0); /* 32 MiB */
	assert_true(cache.entries[0].probe);
	assert_int_equal(cache.probe_bytes, 16 * G);
	/* The pre-zero thread wakes for it then (prezero.c). */
	assert_int_equal(hz_cache_next_decay(&cache), 2 * NS);
	hz_cache_decay(&cache, 2 * NS - 1, &b);
	assert_int_equal(b.count, 0);
	hz_cache_decay(&cache, 2 * NS, &b); /* 1 s, not the 5 s decay */
	assert_int_equal(b.count, 1);
	assert_int_equal(hz_stats.cache_no_reuse, 1);
	assert_int_equal(cache.probe_bytes, 0);
	assert_accounted();
}

static void probes_share_64_mib_the_oldest_going_first(void **state)
{
	(void)state;
	assert_int_equal(put(entry(0, 16, false, 1)), 0);
	assert_int_equal(put(entry(20, 16, false, 2)), 0);
	assert_int_equal(put(entry(40, 16, false, 3)), 1); /* 96 MiB of probes */
	assert_int_equal(cache.count, 2);
	assert_int_equal(-1, find(BASE));
	assert_int_equal(cache.probe_bytes, 32 * G);
	assert_accounted();
}

static void a_miss_drops_every_probe(void **state)
{
	(void)state;
	put(entry(0, 4, false, 1));
	put(entry(10, 8, true, 2));
	miss(32, 3); /* 64 MiB: neither fits, and its fresh block comes beside them */
	assert_int_equal(flushed, 2);
	assert_int_equal(cache.count, 0);
	assert_int_equal(hz_stats.cache_no_reuse, 2);
	assert_accounted();
}

static void cycling_class_turns_warm_and_stays_8_times_its_reuse_time(void **state)
{
	struct hz_cache_batch b = { .count = 0 };
	uint64_t t = NS;

	(void)state;
	/* 32 MiB freed and reused 100 ms later, three times */
	for (int round = 0; round < 3; round++, t += 200 * MS) {
		assert_int_equal(put(entry(0, 16, false, t)), 0);
		hit(0, t + 100 * MS);
	}
	put(entry(0, 16, false, t));
	assert_false(cache.entries[0].probe);
	assert_int_equal(cache.entries[0].stay_ns, 800 * MS);
	assert_int_equal(cache.probe_bytes, 0);
	/* a miss of another size leaves it: it is not a probe */
	miss(64, t + 1);
	assert_int_equal(cache.count, 1);
	hz_cache_decay(&cache, t + 800 * MS - 1, &b);
	assert_int_equal(b.count, 0);
	hz_cache_decay(&cache, t + 800 * MS, &b);
	assert_int_equal(b.count, 1);
	assert_int_equal(hz_stats.cache_no_reuse, 0);
	assert_accounted();
}

static void warm_stay_is_at_least_250_ms_and_at_most_the_decay(void **state)
{
	(void)state;
	put(entry(0, 16, false, NS));
	hit(0, NS + 1000); /* 1 us */
	put(entry(0, 16, false, 2 * NS));
	assert_int_equal(cache.entries[0].stay_ns, 250 * MS);
	hit(0, 12 * NS); /* 10 s: the average goes to 2.5 s, 8 times is 20 */
	put(entry(0, 16, false, 13 * NS));
	assert_int_equal(cache.entries[0].stay_ns, 5 * NS);
}

static void miss_soon_after_a_released_free_keeps_the_next_one(void **state)
{
	(void)state;
	assert_int_equal(put(entry(0, 128, false, NS)), 1); /* given back */
	miss(128, NS + 50 * MS);
	assert_int_equal(hz_stats.cache_reuse_missed, 1);
	assert_int_equal(put(entry(0, 128, false, 2 * NS)), 0); /* kept now */
	assert_false(cache.entries[0].probe);
	assert_int_equal(cache.entries[0].stay_ns, 400 * MS);
	/* once per block given back: with none given back, no evidence */
	miss(128, 2 * NS + 1);
	assert_int_equal(hz_stats.cache_reuse_missed, 1);
}

static void a_batch_freed_then_allocated_again_is_kept_the_next_time(void **state)
{
	(void)state;
	/* four 256 MiB buffers freed, then four asked for again */
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(put(entry(i * 200, 128, false, NS)), 1);
	for (size_t i = 0; i < 4; i++)
		miss(128, NS + 10 * MS);
	assert_int_equal(hz_stats.cache_reuse_missed, 4);
	miss(128, NS + 10 * MS); /* a fifth: nothing was given back for it */
	assert_int_equal(hz_stats.cache_reuse_missed, 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(put(entry(i * 200, 128, false, 2 * NS)), 0);
	assert_int_equal(cache.count, 4);
	assert_int_equal(cache.probe_bytes, 0);
	assert_accounted();
}

static void miss_long_after_the_free_is_no_reuse(void **state)
{
	(void)state;
	assert_int_equal(put(entry(0, 128, false, NS)), 1);
	miss(128, 6 * NS); /* after the 5 s decay: glibc's munmap cost nothing */
	assert_int_equal(hz_stats.cache_reuse_missed, 0);
	assert_int_equal(put(entry(0, 128, false, 7 * NS)), 1);
}

static void mixed_warm_class_kept_beside_one_shot_sizes(void **state)
{
	uint64_t t = NS;

	(void)state;
	for (int round = 0; round < 4; round++, t += 10 * MS) {
		put(entry(0, 16, false, t)); /* 32 MiB, cycled */
		hit(0, t + MS);
	}
	/* one-shot sizes around it: 1 GiB, 512 MiB, given back at free */
	assert_int_equal(put(entry(100, 512, false, t)), 1);
	assert_int_equal(put(entry(700, 256, false, t)), 1);
	assert_int_equal(put(entry(0, 16, false, t)), 0);
	assert_int_equal(put(entry(20, 16, false, t)), 0);
	assert_int_equal(cache.count, 2);
	assert_int_equal(cache.probe_bytes, 0);
	assert_int_equal(hz_stats.cache_no_reuse, 2);
	/* a class freed often and rarely hit turns cold again: 4 hits in
	 * 17 frees */
	assert_false(cache.entries[cache.count - 1].probe);
	for (int round = 0; round < 11; round++)
		put(entry(40 + (size_t)round * 20, 16, false, t + 1));
	assert_true(cache.entries[cache.count - 1].probe);
	assert_accounted();
}

static void a_spare_no_request_took_for_a_whole_stay_goes_though_it_rotates(void **state)
{
	struct hz_cache_batch b = { .count = 0 };

	(void)state;
	put(entry(0, 16, false, NS));
	hit(0, NS + 1000); /* warm */
	put(entry(0, 16, false, 2 * NS));
	put(entry(20, 16, false, 2 * NS));
	hz_cache_decay(&cache, 2 * NS, &b); /* two cached: the low mark starts */
	/* each is taken and freed again: neither idles 250 ms, but one of the
	 * two was never needed */
	hit((unsigned)find(BASE + 20 * G), 2 * NS + 1000);
	put(entry(20, 16, false, 2 * NS + 2000));
	hit((unsigned)find(BASE), 2 * NS + 3000);
	put(entry(0, 16, false, 2 * NS + 4000));
	assert_int_equal(cache.entries[find(BASE)].stay_ns, 250 * MS);
	hz_cache_decay(&cache, 2 * NS + 250 * MS - 1, &b);
	assert_int_equal(b.count, 0);
	hz_cache_decay(&cache, 2 * NS + 250 * MS, &b); /* neither idle 250 ms */
	assert_int_equal(b.count, 1);
	assert_int_equal(b.spans[0].range.start, BASE + 20 * G); /* the older */
	assert_int_equal(cache.count, 1);
	/* the one left is needed: no trim in the next stay */
	hit(0, 2 * NS + 250 * MS + 1000);
	put(entry(0, 16, false, 2 * NS + 250 * MS + 2000));
	b.count = 0;
	hz_cache_decay(&cache, 2 * NS + 500 * MS, &b);
	assert_int_equal(b.count, 0);
	assert_accounted();
}

static void without_adapt_every_free_stays_the_decay(void **state)
{
	(void)state;
	hz_cache_adapt(&cache, false);
	assert_int_equal(put(entry(0, 512, false, 1)), 0);
	assert_false(cache.entries[0].probe);
	assert_int_equal(cache.entries[0].stay_ns, 5 * NS);
	miss(1024, 2);
	assert_int_equal(cache.count, 1);
	assert_int_equal(hz_stats.cache_no_reuse, 0);
	/* The ledger counted neither: its reuse evidence is for adapt. */
	assert_int_equal(hz_class_of(512 * G)->reuse.frees, 0);
	assert_int_equal(hz_class_of(1024 * G)->reuse.misses, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(pick_prefers_the_wanted_state_then_the_smallest, fresh),
		cmocka_unit_test_setup(pick_weighs_the_span_being_zeroed, fresh),
		cmocka_unit_test_setup(pick_needs_the_size_in_whole_pages_and_the_alignment, fresh),
		cmocka_unit_test_setup(serve_at_a_miss_takes_the_largest_smaller_span, fresh),
		cmocka_unit_test_setup(take_splits_off_only_a_wasteful_remainder, fresh),
		cmocka_unit_test_setup(add_merges_neighbours_of_one_backing_and_state, fresh),
		cmocka_unit_test_setup(add_evicts_the_oldest_over_the_budget, fresh),
		cmocka_unit_test_setup(add_gives_the_span_back_when_another_cache_holds_the_budget,
				       fresh),
		cmocka_unit_test_setup(decay_releases_idle_spans_a_batch_at_a_time, fresh),
		cmocka_unit_test_setup(a_full_table_evicts_and_flushes_a_full_batch, fresh),
		cmocka_unit_test_setup(first_dirty_skips_lazy_spans_and_remove_keeps_the_counts, fresh),
		cmocka_unit_test_setup(one_shot_block_larger_than_the_probe_room_goes_back_at_its_free,
				       adaptive),
		cmocka_unit_test_setup(first_small_free_is_a_probe_kept_one_second, adaptive),
		cmocka_unit_test_setup(probes_share_64_mib_the_oldest_going_first, adaptive),
		cmocka_unit_test_setup(a_miss_drops_every_probe, adaptive),
		cmocka_unit_test_setup(cycling_class_turns_warm_and_stays_8_times_its_reuse_time,
				       adaptive),
		cmocka_unit_test_setup(warm_stay_is_at_least_250_ms_and_at_most_the_decay, adaptive),
		cmocka_unit_test_setup(miss_soon_after_a_released_free_keeps_the_next_one, adaptive),
		cmocka_unit_test_setup(a_batch_freed_then_allocated_again_is_kept_the_next_time,
				       adaptive),
		cmocka_unit_test_setup(miss_long_after_the_free_is_no_reuse, adaptive),
		cmocka_unit_test_setup(mixed_warm_class_kept_beside_one_shot_sizes, adaptive),
		cmocka_unit_test_setup(
			a_spare_no_request_took_for_a_whole_stay_goes_though_it_rotates, adaptive),
		cmocka_unit_test_setup(without_adapt_every_free_stays_the_decay, adaptive),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
