/* What a request may cost the cache: before the program gets memory, the
 * cached blocks that a memory cgroup could not hold beside it, or that
 * would take the process past its own peak, are given back
 * (cache_policy.c holds the limits; this file acts on them). */
#include "recycle_impl.h"

#include "blocks.h"
#include "cache.h"
#include "prezero.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "stats.h"
#include "times.h"

static void add_resident(void *ctx, struct hz_range run, bool resident)
{
	if (resident)
		*(size_t *)ctx += hz_range_len(run);
}

/* Before the program gets size bytes (a fresh block, or span from the
 * cache, which need not be resident: the pre-zero thread may have dropped
 * it, a program may never have written it), the cached blocks the memory
 * cgroup cannot hold beside what it will charge go first
 * (cache_policy.c): its faults must never meet a limit our cache filled. */
void hz_recycle_make_room(size_t size, const struct hz_span *reused)
{
	struct hz_cache_batch b = { .count = 0 };
	size_t excess = hz_cache_budget_excess(size, false), resident = 0;
	uint64_t deadline = 0;
	struct hz_cache *c;

	/* The thread gives a span back within a unit's clear (a few ms on a
	 * free core); a starved one may hold it longer, and the caller then
	 * goes on rather than stall (the thread's own tick drops what no
	 * longer fits). */
	if (excess > 0)
		deadline = hz_prim_now_ns() + hz_prezero_patience_ns(hz_cache_policy()->unit);
	/* Tight: count what the reused span holds already (mincore). */
	if (excess > 0 && reused != NULL &&
	    hz_prim_residency(reused->range.start, hz_span_bytes(reused), add_resident, &resident) == 0)
		excess = hz_cache_budget_excess(size - (resident < size ? resident : size), true);
	/* Rounds: what is dropped may not have been resident, and the thread
	 * may hold the table or the last span. Going on would fault the block
	 * in over a cache the cgroup cannot hold beside it, and the kernel
	 * kills at the limit; so the caller waits for the thread instead (the
	 * sleep gives it the CPU: it runs at idle priority), until the
	 * deadline, only under a limit. */
	while (excess > 0 && hz_prim_now_ns() < deadline) {
		size_t before, dropped;
		struct hz_span held;

		c = hz_prezero_enter(&b);
		if (c == NULL) { /* the thread is in its turn at the table */
			hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
			continue;
		}
		before = c->bytes;
		hz_cache_shrink(c, before > excess ? before - excess : 0, &b);
		dropped = before - c->bytes;
		if (dropped > 0) {
			hz_prezero_leave();
		} else if (hz_prezero_claim(&held, &before) == 0) { /* leaves the guard */
			/* The table is empty: the pre-zero thread holds the rest. */
			hz_cache_batch_put(c, &b, &held);
			dropped = hz_span_bytes(&held);
		}
		hz_prezero_release(&b);
		if (dropped == 0) { /* the thread is finishing a span: collected next round */
			hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
			continue; /* the cgroup is read again only after a drop (25-90 us) */
		}
		excess = hz_cache_budget_excess(size - (resident < size ? resident : size), true);
	}
	hz_prezero_release(&b);
}

/* Before fresh bytes are faulted in: the cached blocks that would take the
 * process past its own peak go first, oldest first (cache_policy.c). The
 * pre-zero thread holding the table or a span: they stay, this once. */
void hz_recycle_stay_within_peak(size_t fresh)
{
	struct hz_cache_batch b = { .count = 0 };
	size_t blocks, live, excess, before;
	struct hz_cache *c;

	if (!hz_cache_policy()->adapt || hz_cache_policy()->cache_max == 0)
		return;
	hz_blocks_live_totals(&blocks, &live);
	excess = hz_cache_peak_excess(fresh, live);
	if (excess == 0 || !(c = hz_prezero_enter(&b)))
		return;
	before = c->bytes;
	hz_cache_shrink(c, before > excess ? before - excess : 0, &b);
	hz_stats_add(cache_peak_bytes, before - c->bytes);
	hz_prezero_leave();
	hz_prezero_release(&b);
}

/* A request served by a cached span: a smaller one grows by fresh bytes;
 * a hit adds only to the live blocks, which the peak counts. */
void hz_recycle_served_within_peak(const struct hz_span *span, size_t size)
{
	size_t blocks, live, have = hz_span_bytes(span);

	if (have < size) {
		hz_recycle_stay_within_peak(size - have);
		return;
	}
	if (!hz_cache_policy()->adapt)
		return;
	hz_blocks_live_totals(&blocks, &live);
	hz_cache_peak_note(live + have);
}

/* Live blocks grew from cached memory (a realloc): the peak counts them. */
void hz_recycle_note_live_peak(void)
{
	size_t blocks, live;

	if (!hz_cache_policy()->adapt)
		return;
	hz_blocks_live_totals(&blocks, &live);
	hz_cache_peak_note(live);
}
