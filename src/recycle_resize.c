/* realloc of a block: growth into kept memory first, then the block
 * layer's resize (blocks_resize.c). See hz_recycle_resize in recycle.h. */
#include "recycle.h"

#include "backing.h"
#include "blocks.h"
#include "cache.h"
#include "prezero.h"
#include "recycle_impl.h"
#include "stats.h"

/* A span of the table for a realloc growing block to size bytes: the
 * one right after the block, its tail's bytes (*after true), else one
 * that holds size bytes, a dirty one first (hz_cache_pick), of the
 * block's backing. */
static bool kept_for_growth(const struct hz_span *block, size_t size, struct hz_cache_entry *e,
			    bool *after)
{
	struct hz_cache_batch b = { .count = 0 };
	size_t more = size - hz_span_bytes(block);
	struct hz_cache *c = hz_prezero_enter(&b);
	int i;

	if (!c)
		return false;
	i = hz_cache_find_at(c, block->range.end, block->backing);
	*after = i >= 0 && hz_cache_fits(&c->entries[i].span, more, 0);
	if (!*after) {
		i = hz_cache_pick(c, size, 0, false, true, NULL);
		if (i >= 0 && c->entries[i].span.backing != block->backing)
			i = -1;
	}
	if (i >= 0)
		*e = hz_cache_take(c, (unsigned)i, *after ? more : size, &b);
	hz_prezero_leave();
	hz_prezero_release(&b);
	if (i >= 0 && !hz_blocks_reusable(&e->span)) {
		hz_recycle_give_back_foreign(&e->span);
		return false;
	}
	return i >= 0;
}

/* A realloc that grows a block takes kept memory before fresh memory.
 * First the kept span right after it, which becomes its tail in place: a
 * request served by a larger span put the rest back in the table
 * (hz_cache_take), and growing the block then found those granules
 * claimed, moved it to a fresh place and faulted that in: 615 moves in
 * 2000 cycles of calloc 4 MiB, write, realloc to 8 MiB one time in
 * three, free (bench/RESULTS.md, "a calloc right after a free, and
 * realloc into the kept span"). Else a kept span that holds the new size:
 * the block's pages move onto its front and its tail keeps its pages
 * (with 8 threads, another thread takes the span after the block first).
 * The span's bytes need not be zero: realloc's growth is uninitialised.
 * Only spans of granule pages, as a miss grows one (hz_cache_serve). */
static bool grow_into_kept(void *p, size_t size, void **out)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_cache_entry e;
	struct hz_span block;
	bool after;

	/* Larger than any block: rounded up to granules, the size would wrap
	 * to one a cached span fits (as in hz_recycle_alloc). */
	if (size > HZ_BLOCK_MAX)
		return false;
	hz_blocks_live_span(p, &block);
	if ((block.backing != HZ_BACKING_SMALL && block.backing != HZ_BACKING_THP) ||
	    hz_cache_policy()->cache_max == 0 || !kept_for_growth(&block, size, &e, &after))
		return false;
	if (after && hz_blocks_absorb(p, &e.span) == 0) {
		hz_stats_add(realloc_in_place, 1);
		*out = p;
	} else if (after || hz_blocks_move_into(p, &e.span, out) != 0) {
		/* After it in another region, or no move: the span stays kept. */
		hz_recycle_keep_again(&e.span, e.clean, &b);
		hz_prezero_release(&b);
		return false;
	}
	hz_recycle_note_live_peak();
	return true;
}

int hz_recycle_resize(void *p, size_t size, void **out)
{
	size_t old = hz_blocks_usable(p);

	if (size > old) {
		if (grow_into_kept(p, size, out))
			return 0;
		hz_recycle_stay_within_peak(size - old);
	}
	return hz_blocks_resize(p, size, out);
}
