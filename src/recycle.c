/* Recycling of large blocks: the entry points. See recycle.h.
 *
 * They compose the cache's table (cache.h: which span serves a request),
 * the guard and the pre-zero thread (prezero.h: who may use the table, the
 * span being zeroed, a calloc's clear shared with the thread) and the
 * blocks (blocks.h: fresh blocks, releasing). System calls (releasing
 * spans, zeroing) happen outside the guard. When the guard is refused (the
 * pre-zero thread was preempted in its turn at the table), a request is
 * served as if the cache were empty, or full for a free. What a request
 * may cost the cache is recycle_limits.c's, realloc's growth into kept
 * memory recycle_resize.c's. */
#include "recycle.h"

#include <errno.h>

#include "backing.h"
#include "blocks.h"
#include "cache.h"
#include "classes.h"
#include "cycle.h"
#include "log.h"
#include "prezero.h"
#include "prim/prim.h"
#include "recycle_impl.h"
#include "stats.h"
#include "zero.h"

/* A span that is not plain memory of ours any more (hz_blocks_reusable;
 * a hole hz_zero_choose found) is released, never handed out or zeroed. */
void hz_recycle_give_back_foreign(const struct hz_span *span)
{
	hz_blocks_mark_foreign(span->range.start, hz_span_bytes(span));
	hz_stats_add(cache_released_bytes, hz_span_bytes(span));
	hz_blocks_release_span(span);
}

/* The bytes of a span's dirty start that a calloc of size bytes zeroes:
 * those it asked for, not the whole block, whose rest reads as malloc's
 * would. A request of 4 MiB + 4 KiB gets a 6 MiB block; clearing all of
 * it, a cycle of that calloc took 1.32x glibc's time, whose calloc clears
 * the request rounded up to 16 bytes (bench/RESULTS.md, "calloc clears
 * what it asked for"). Whole 4 KiB pages for stores; whole pages of the
 * span's backing for a drop, which would split a huge page it ended in. */
static size_t asked_dirty(const struct hz_span *span, size_t size, size_t dirty,
			  enum hz_zero_method m)
{
	size_t page = m == HZ_ZERO_DROP ? hz_backing_page(span->backing) : HZ_SZ_4K;
	size_t asked = hz_align_up(size, page);

	return asked < dirty ? asked : dirty;
}

/* Zero the dirty start of a span for a calloc of size bytes. -EAGAIN: the
 * span went to the pre-zero thread (it was late with its share of the
 * clear); -EFAULT: it had a hole, and was released. */
static int zero_dirty(struct hz_span *span, size_t size, size_t dirty)
{
	uint64_t t0 = hz_prim_now_ns();
	enum hz_zero_method m;
	size_t written, len = asked_dirty(span, size, dirty, HZ_ZERO_CLEAR);

	if (hz_zero_choose(span->range.start, len, hz_span_zero_how(span), &m) != 0) {
		hz_recycle_give_back_foreign(span);
		return -EFAULT;
	}
	len = asked_dirty(span, size, dirty, m);
	if (hz_prezero_zero_for_calloc(span, len, m, &written) != 0)
		return -EAGAIN;
	hz_stats_add(cleared_bytes, written);
	hz_stats_add(clear_ns, hz_prim_now_ns() - t0);
	hz_prezero_adapt_backing(span, m);
	return 0;
}

/* A span taken from the table goes back into it, clean or not; what it
 * pushes out, the caller releases with b. */
void hz_recycle_keep_again(const struct hz_span *span, bool clean, struct hz_cache_batch *b)
{
	struct hz_cache_entry e = { .span = *span, .clean = clean, .idle_since = hz_prim_now_ns() };
	struct hz_cache *c = hz_prezero_enter(b);

	if (!c) { /* the thread is in its turn at the table */
		hz_stats_add(cache_released_bytes, hz_span_bytes(span));
		hz_blocks_release_span(span);
		return;
	}
	hz_cache_add(c, e, b);
	hz_prezero_leave();
}

/* A claimed span larger than the request keeps what it needs, from its
 * start; the rest goes back to the table, clean when the thread, which
 * zeroes from the end down, got past it. Before, a malloc after two
 * adjacent frees (merged in the table) missed while the thread zeroed
 * them: a fresh block, which above vm.max_map_count could not be mapped. */
static void put_back_rest(struct hz_span *span, size_t *dirty, size_t size,
			  struct hz_cache_batch *b)
{
	struct hz_span rest;
	bool clean;

	if (!hz_cache_trim(span, size, &rest))
		return;
	if (!hz_blocks_reusable(&rest)) { /* the caller releases its part too */
		hz_recycle_give_back_foreign(&rest);
		return;
	}
	clean = *dirty <= hz_span_bytes(span); /* span is the part kept now */
	if (!clean)
		*dirty = hz_span_bytes(span);
	hz_recycle_keep_again(&rest, clean, b);
}

/* When this thread's last free that the ledger saw returned to the
 * program (ns; 0: none): a calloc's time "at once" after a free is the
 * program's own time between the two (cycle.c). */
static __thread uint64_t free_returned_ns;

/* Inside the guard: the request's one event for the ledger, served as
 * hz_cache_look chose (i; zeroing: the thread's span, when i is
 * HZ_CACHE_ZEROING). */
static void tell_ledger(const struct hz_cache *c, size_t size, bool zero, uint64_t now, int i,
			const struct hz_span *zeroing)
{
	struct hz_class_request r = {
		.size = size, .now = now, .zero = zero, .adapt = c->adapt,
		.hit = i != -1, .decay_ns = c->decay_ns,
	};
	struct hz_class_answer a;

	r.after_free_ns = free_returned_ns != 0 && now >= free_returned_ns ? now - free_returned_ns
									   : UINT64_MAX;
	/* A claimed span's time since its free is the thread's to know. */
	if (i >= 0) {
		r.idle_since = c->entries[i].idle_since;
		r.start = c->entries[i].span.range.start;
	} else if (i == HZ_CACHE_ZEROING) {
		r.start = zeroing->range.start;
	}
	a = hz_classes_request(&r);
	if (a.reuse_missed)
		hz_stats_add(cache_reuse_missed, 1);
}

/* A span for the request from the table, or the one the thread is zeroing,
 * with the pre-zero mode as it stood at the request; at a miss, the largest
 * smaller span, to grow. The table is visited twice, the look and the
 * serve, with the ledger told in between. Returns 0 with the span and its
 * dirty bytes from the start, or -ENOENT: none, or the guard was refused. */
static int from_cache(size_t size, size_t align, bool zero, enum hz_prezero_opt mode,
		      struct hz_cache_batch *b, struct hz_span *span, size_t *dirty)
{
	struct hz_cache_want w = {
		.size = size, .align = align, .want_clean = zero,
		.dirty_allowed = !zero || mode != HZ_PREZERO_OPT_OFF,
	};
	bool may_claim = true, told = false;
	struct hz_cache_entry e;
	struct hz_span zeroing;
	struct hz_cache *c;
	int i;

	for (;;) {
		uint64_t now;

		c = hz_prezero_enter(b);
		if (!c)
			return -ENOENT;
		now = hz_prim_now_ns();
		/* The span the thread is zeroing is a candidate too (numpy's
		 * malloc after each free missed while the thread zeroed that
		 * very block), until a claim of it was too slow. */
		w.zeroing = may_claim && hz_prezero_zeroing(&zeroing) ? &zeroing : NULL;
		i = hz_cache_look(c, now, &w, b);
		if (!told)
			tell_ledger(c, size, zero, now, i, &zeroing);
		told = true;
		if (i != HZ_CACHE_ZEROING)
			break;
		if (hz_prezero_claim(span, dirty) == 0) { /* leaves the guard */
			put_back_rest(span, dirty, size, b);
			return 0;
		}
		may_claim = false; /* too slow: another block */
	}
	/* A miss: a smaller span may be its front (hz_recycle_alloc). */
	if (!hz_cache_serve(c, i, &w, b, &e)) {
		hz_prezero_leave();
		return -ENOENT;
	}
	hz_prezero_leave();
	*span = e.span;
	*dirty = e.clean ? 0 : hz_span_bytes(span);
	return 0;
}

static void watch_block(uintptr_t start, size_t len)
{
	hz_prezero_watch(start, len, HZ_PROMOTE_BLOCK);
}

/* What the lower mechanisms report goes up to those that act on it: a
 * block started on 4 KiB pages to the promoter (through the thread that
 * runs it), a hole found while zeroing to the foreign marks. Installed
 * before the first block is mapped; the stores are the same every time,
 * so a race between two first requests is harmless. */
static void wire_reports(void)
{
	static int wired;

	if (__atomic_load_n(&wired, __ATOMIC_ACQUIRE))
		return;
	hz_backing_on_lazy(watch_block);
	hz_zero_on_hole(hz_blocks_mark_foreign);
	__atomic_store_n(&wired, 1, __ATOMIC_RELEASE);
}

/* A miss served by a smaller kept span, revived at *out: it becomes the
 * front of the block, its pages kept, and only the rest is fresh. Kept
 * beside a fresh block, it would hold memory the program's next request
 * may never fit: data frames whose arrays come in many sizes (pandas)
 * peaked at 1.13x glibc's memory, 1.03x since (bench/RESULTS.md, "A miss
 * grows a smaller kept block"). Growing moves page tables (mremap), as
 * realloc does; when it cannot, the span goes back to the table and the
 * block is fresh. */
static int grow_kept(size_t size, size_t align, void **out)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_span span;
	void *kept = *out;

	hz_debug("a request of %zu bytes grows a kept block of %zu at %p", size,
		 hz_blocks_usable(kept), kept);
	if (hz_blocks_grow(kept, size, out) == 0) {
		hz_stats_add(cache_grown, 1);
		return 0;
	}
	/* No room to grow (vm.max_map_count, RLIMIT_DATA): the span is kept
	 * for a request it fits, and the block is fresh if it can be. */
	hz_blocks_retire(kept, &span);
	hz_recycle_keep_again(&span, false, &b);
	hz_prezero_release(&b);
	return hz_blocks_alloc(size, align, out);
}

int hz_recycle_alloc(size_t size, size_t align, bool zero, void **out)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_span span;
	size_t dirty = 0;
	bool grows;
	int ret;

	wire_reports();
	/* Larger than any block: nothing can serve it, and rounding it up to
	 * granules (hz_cache_granules_for) would wrap around to a small size
	 * that a cached span fits (malloc(SIZE_MAX) returned 0 bytes). */
	if (size > HZ_BLOCK_MAX)
		return -ENOMEM;
	if (hz_cache_policy()->cache_max == 0)
		return hz_blocks_alloc(size, align, out);
	/* The table, the reuse policy and the cycle count a request in the
	 * size class of the block it gets, whole granules, as they count its
	 * free: a 3 MiB request gets a 4 MiB block, and counted in the 2-4
	 * MiB class its misses never met that block's frees in the 4-8 MiB
	 * one, so every free was given back (a 3 MiB calloc + write + free
	 * cycle faulted a fresh block each time, 8x glibc's time). */
	ret = from_cache(hz_align_up(size, HZ_GRANULE), align, zero, hz_prezero_mode(), &b, &span,
			 &dirty);
	hz_prezero_release(&b);
	if (ret != 0) {
		hz_stats_add(cache_misses, 1);
		hz_recycle_stay_within_peak(size);
		hz_recycle_make_room(size, NULL);
		return hz_blocks_alloc(size, align, out); /* fresh: zero */
	}
	/* Cached spans are never foreign, but the mark may have come while
	 * one was cached (mlockall(MCL_CURRENT) locks those too). */
	if (!hz_blocks_reusable(&span)) {
		hz_recycle_give_back_foreign(&span);
		return hz_blocks_alloc(size, align, out);
	}
	grows = hz_span_bytes(&span) < size; /* a smaller span, to grow */
	if (grows)
		hz_stats_add(cache_misses, 1);
	else
		hz_stats_add(cache_hits, 1);
	hz_recycle_served_within_peak(&span, size);
	hz_recycle_make_room(size, &span);
	if (zero && dirty > 0 && zero_dirty(&span, size, dirty) != 0)
		return hz_blocks_alloc(size, align, out);
	/* Zeroing marks a span in which a hole appeared meanwhile (zero.c). */
	if (zero && dirty > 0 && !hz_blocks_reusable(&span)) {
		hz_recycle_give_back_foreign(&span);
		return hz_blocks_alloc(size, align, out);
	}
	hz_blocks_revive(&span);
	*out = (void *)span.range.start;
	return grows ? grow_kept(size, align, out) : 0;
}

/* HUGEZERO_ZERO_ON_FREE: the span is zeroed before it enters the table.
 * false: it had a hole, or one appeared meanwhile, and was released. */
static bool zero_at_free(const struct hz_span *span)
{
	enum hz_zero_how how = hz_span_zero_how(span);
	enum hz_zero_method m;

	if (hz_zero_choose(span->range.start, hz_span_bytes(span), how, &m) != 0) {
		hz_recycle_give_back_foreign(span);
		return false;
	}
	hz_zero_with(span->range.start, hz_span_bytes(span), 0, m, how);
	if (!hz_blocks_reusable(span)) {
		hz_blocks_release_span(span);
		return false;
	}
	return true;
}

/* A block released at its free (its class shows no reuse yet, or it is
 * too large to keep on trial) still tells how it was used: densely, the
 * next fresh block of its size may take huge pages at first touch
 * (backing.c), where on a VM a 4 KiB fault costs 10-19 us. One residency
 * pass (mincore, microseconds per 64 MiB), for 4 KiB-page blocks only:
 * mincore cannot tell a sparse use of huge pages from a dense one. (Under
 * MALLOC_PERTURB_ the preload fills every freed block first, so each reads
 * dense: a debugging setting, whose RSS is the whole block anyway.) */
static void note_use_of_released(const struct hz_cache_batch *b, const struct hz_span *freed)
{
	enum hz_zero_method m;

	if (b->count == 0 || b->spans[b->count - 1].range.start != freed->range.start ||
	    freed->backing != HZ_BACKING_SMALL || !hz_zero_residency_trusted())
		return;
	if (hz_zero_choose(freed->range.start, hz_span_bytes(freed), HZ_ZERO_ANY, &m) == 0 &&
	    m != HZ_ZERO_CLEAR_PART)
		hz_class_note_dense(hz_span_bytes(freed), m == HZ_ZERO_CLEAR);
}

void hz_recycle_free(void *p)
{
	const struct hz_cache_policy *policy = hz_cache_policy();
	struct hz_cache_batch b = { .count = 0 };
	struct hz_cache_entry e = { .clean = false };
	bool thread = hz_prezero_mode() == HZ_PREZERO_OPT_THREAD, wake;
	struct hz_class_kept kept;
	struct hz_cache *c;

	hz_blocks_retire(p, &e.span);
	/* A foreign block (blocks.h) goes back reset, as glibc's munmap would
	 * drop what the program did to it. */
	if (hz_span_bytes(&e.span) > policy->cache_max || !hz_blocks_reusable(&e.span)) {
		hz_blocks_release_span(&e.span);
		return;
	}
	if (policy->zero_on_free) {
		if (!zero_at_free(&e.span))
			return;
		e.clean = true;
	}
	e.idle_since = hz_prim_now_ns();
	hz_cache_budget_refresh(hz_span_bytes(&e.span));
	c = hz_prezero_enter(&b);
	if (!c) {
		hz_blocks_release_span(&e.span);
		return;
	}
	/* The decay judges the table by the ledger as it stood before this
	 * free: the free's count can turn its class warm or cold. */
	hz_cache_decay(c, e.idle_since, &b);
	kept = hz_classes_free(hz_span_bytes(&e.span), e.span.range.start, hz_prim_now_ns(),
			       c->adapt);
	/* A cold free goes back at once while no thread would give it back
	 * in time (hz_prezero_holds_probes); one of a class that shows reuse
	 * is kept, and the thread starts for it (prezero_start.c). */
	hz_cache_add(c, e, &b);
	hz_prezero_leave();
	note_use_of_released(&b, &e.span);
	hz_prezero_release(&b);
	wake = thread && !e.clean && (kept.warm || hz_prezero_welcome());
	if (wake && kept.cycle == HZ_CYCLE_AT_ONCE) { /* its calloc comes first */
		hz_stats_add(wakes_skipped, 1);
		wake = false;
	}
	if (wake)
		hz_prezero_wake();
	else
		hz_prezero_poke();
	free_returned_ns = hz_prim_now_ns();
}

size_t hz_recycle_drop(void)
{
	size_t dropped = 0;
	bool more = true;

	while (more) {
		struct hz_cache_batch b = { .count = 0 };
		struct hz_cache *c = hz_prezero_enter(&b);

		if (!c)
			return dropped;
		while (c->count > 0 && b.count < HZ_CACHE_BATCH) {
			struct hz_cache_entry e = hz_cache_remove(c, c->count - 1);

			dropped += hz_span_bytes(&e.span);
			hz_cache_batch_put(c, &b, &e.span);
		}
		more = c->count > 0;
		hz_prezero_leave();
		hz_prezero_release(&b);
	}
	return dropped;
}

/* The span the pre-zero thread is zeroing, taken from it and released:
 * left alone, the thread puts it back in the table when it is done. */
static size_t drop_held(void)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_cache *c = hz_prezero_enter(&b);
	struct hz_span held;
	size_t dirty, dropped = 0;

	if (!c)
		return 0;
	if (hz_prezero_claim(&held, &dirty) == 0) { /* leaves the guard either way */
		hz_cache_batch_put(c, &b, &held);
		dropped = hz_span_bytes(&held);
	}
	hz_prezero_release(&b);
	return dropped;
}

/* The table, the thread's span, then the table again: a span the thread
 * finished just as it was claimed is back in the table by then. A loop
 * until nothing is left would chase a program that frees meanwhile. */
size_t hz_recycle_trim(void)
{
	size_t dropped = hz_recycle_drop();

	dropped += drop_held();
	return dropped + hz_recycle_drop();
}

void hz_recycle_fork_prepare(void)
{
	hz_prezero_fork_prepare();
}

void hz_recycle_fork_parent(void)
{
	hz_prezero_fork_parent();
}

void hz_recycle_fork_child(void)
{
	hz_cache_policy_fork_child();
	hz_prezero_fork_child();
}
