/* The table of freed spans. See cache.h.
 *
 * A small array scanned whole: a request looks for the smallest fitting
 * span, and 1024 entries of 32 bytes are 32 KiB, a few microseconds to
 * scan. Adjacent spans of one backing and state are merged, so a program
 * that frees many neighbours keeps few entries. */
#include "cache.h"

#include "classes.h"
#include "range.h"
#include "sizes.h"
#include "stats.h"

/* Stays come from the size-class ledger (classes.h): a block of a class
 * that shows reuse stays a few of its reuse times; one that shows none yet
 * is a probe, kept briefly. Probes share a small room here: a block larger
 * than it is released at its free, as glibc would, and a miss drops every
 * probe (none could serve it, and its fresh block faults in beside them).
 * The room is HZ_GUESS_MAX (classes.h): the cost in RSS of a one-shot
 * program is at most that over glibc's, and only until its next large
 * request or the probe's stay. */

/* Set e's stay and probe from its class. */
static void choose_stay(struct hz_cache *c, struct hz_cache_entry *e)
{
	e->probe = false;
	e->stay_ns = c->decay_ns;
	if (c->adapt)
		e->stay_ns = hz_class_stay(hz_span_bytes(&e->span), c->decay_ns, &e->probe);
}

void hz_cache_adapt(struct hz_cache *c, bool on)
{
	c->adapt = on;
}

void hz_cache_init(struct hz_cache *c, uint64_t decay_ns, struct hz_cache_budget *budget,
		   void (*flush)(struct hz_cache_batch *b))
{
	c->count = 0;
	c->bytes = 0;
	c->clean_bytes = 0;
	c->decay_ns = decay_ns;
	c->budget = budget;
	c->flush = flush;
	c->adapt = false;
	c->probe_bytes = 0;
	c->hold_probes = NULL;
	hz_classes_forget_reuse();
}

void hz_cache_batch_put(const struct hz_cache *c, struct hz_cache_batch *b,
			const struct hz_span *s)
{
	if (b->count == HZ_CACHE_BATCH)
		c->flush(b);
	b->spans[b->count++] = *s;
}

static void account(struct hz_cache *c, const struct hz_cache_entry *e, bool add)
{
	size_t bytes = hz_span_bytes(&e->span);

	hz_class_cached(bytes, add);
	if (add) {
		c->bytes += bytes;
		c->clean_bytes += e->clean ? bytes : 0;
		c->probe_bytes += e->probe ? bytes : 0;
		hz_cache_budget_charge(c->budget, bytes, 0);
	} else {
		c->bytes -= bytes;
		c->clean_bytes -= e->clean ? bytes : 0;
		c->probe_bytes -= e->probe ? bytes : 0;
		hz_cache_budget_charge(c->budget, 0, bytes);
	}
}

struct hz_cache_entry hz_cache_remove(struct hz_cache *c, unsigned i)
{
	struct hz_cache_entry e = c->entries[i];

	account(c, &e, false);
	c->entries[i] = c->entries[--c->count];
	return e;
}

/* Put a span that leaves the table unused into b: a miss of its class
 * soon after is a reuse it would have served; a probe's counts as
 * released for want of reuse. */
static void let_go(struct hz_cache *c, const struct hz_cache_entry *e, struct hz_cache_batch *b)
{
	hz_class_let_go(hz_span_bytes(&e->span));
	if (e->probe) {
		hz_stats_add(cache_no_reuse, 1);
		hz_stats_add(cache_no_reuse_bytes, hz_span_bytes(&e->span));
	}
	hz_cache_batch_put(c, b, &e->span);
}

/* Evict the oldest entry (only probes when probes_only); false if none. */
static bool evict_oldest(struct hz_cache *c, bool probes_only, struct hz_cache_batch *b)
{
	int oldest = -1;

	for (unsigned i = 0; i < c->count; i++)
		if ((!probes_only || c->entries[i].probe) &&
		    (oldest < 0 || c->entries[i].idle_since < c->entries[oldest].idle_since))
			oldest = (int)i;
	if (oldest < 0)
		return false;
	struct hz_cache_entry e = hz_cache_remove(c, (unsigned)oldest);

	let_go(c, &e, b);
	return true;
}

/* An entry newer than now (its free read the clock after the caller did)
 * is not idle at all: now - idle_since would wrap. */
/* A class's cached bytes that no request took for a whole stay are more
 * than its cycle needs: entries rotate (each is reused, so none decays),
 * while the class as a whole keeps a spare the program never asks for;
 * measured in the numpy loop, 2 blocks of 32 MiB above its peak of live
 * blocks, from callocs that found the pre-zero thread late. The oldest
 * entries of at most that many bytes go (tcmalloc's and jemalloc's caches
 * are trimmed to such low-water marks too). Stops when b is full. */
static void trim_spares(struct hz_cache *c, uint64_t now, struct hz_cache_batch *b)
{
	for (unsigned k = 0; k < HZ_CLASSES && b->count < HZ_CACHE_BATCH; k++) {
		size_t spare = hz_class_spare(k, now, c->decay_ns);

		while (spare > 0 && b->count < HZ_CACHE_BATCH) {
			int oldest = -1;

			for (unsigned i = 0; i < c->count; i++) {
				const struct hz_cache_entry *e = &c->entries[i];

				if (hz_size_class(hz_span_bytes(&e->span)) == k &&
				    hz_span_bytes(&e->span) <= spare &&
				    (oldest < 0 || e->idle_since < c->entries[oldest].idle_since))
					oldest = (int)i;
			}
			if (oldest < 0)
				break;
			struct hz_cache_entry e = hz_cache_remove(c, (unsigned)oldest);

			spare -= hz_span_bytes(&e.span);
			let_go(c, &e, b);
		}
	}
}

void hz_cache_decay(struct hz_cache *c, uint64_t now, struct hz_cache_batch *b)
{
	if (c->adapt)
		trim_spares(c, now, b);
	for (unsigned i = 0; i < c->count && b->count < HZ_CACHE_BATCH;) {
		uint64_t since = c->entries[i].idle_since;

		if (now >= since && now - since >= c->entries[i].stay_ns) {
			struct hz_cache_entry e = hz_cache_remove(c, i);

			let_go(c, &e, b);
			continue; /* slot i now holds another entry */
		}
		i++;
	}
}

uint64_t hz_cache_next_decay(const struct hz_cache *c)
{
	uint64_t next = UINT64_MAX;

	for (unsigned i = 0; i < c->count; i++) {
		const struct hz_cache_entry *e = &c->entries[i];
		uint64_t end = e->idle_since > UINT64_MAX - e->stay_ns ? UINT64_MAX
								    : e->idle_since + e->stay_ns;

		if (end < next)
			next = end;
	}
	return next;
}

static bool over_budget(const struct hz_cache *c, size_t bytes)
{
	return hz_cache_budget_used(c->budget) + bytes > hz_cache_budget_max(c->budget);
}

/* Adjacent spans of one region sit in one contiguous stretch of address
 * space, so merging is only arithmetic; spans of two regions side by side
 * never merge (no block may cross regions); hugetlb spans merge only in
 * whole pages, which they are. A merged entry stays as long as the longer
 * stay of the two, and is a probe only if both were. A lazy span merges
 * only with a lazy one: a merged entry is one state for the thread. */
static void add_entry(struct hz_cache *c, struct hz_cache_entry e, struct hz_cache_batch *b)
{
	size_t bytes = hz_span_bytes(&e.span);

	for (unsigned i = 0; i < c->count; i++) {
		struct hz_cache_entry *n = &c->entries[i];

		if (n->span.backing != e.span.backing || n->clean != e.clean || n->lazy != e.lazy ||
		    hz_span_bytes(&n->span) + bytes > hz_cache_budget_max(c->budget))
			continue;
		if (hz_range_adjacent(n->span.range, e.span.range) &&
		    hz_blocks_same_region(n->span.range.start, e.span.range.start)) {
			struct hz_cache_entry merged = hz_cache_remove(c, i);

			merged.span.range = hz_range_join(merged.span.range, e.span.range);
			if (e.idle_since > merged.idle_since)
				merged.idle_since = e.idle_since;
			if (e.stay_ns > merged.stay_ns)
				merged.stay_ns = e.stay_ns;
			merged.probe = merged.probe && e.probe;
			add_entry(c, merged, b); /* it may now touch another one */
			return;
		}
	}
	/* Probes share HZ_GUESS_MAX: a larger span goes (every one, when probes
	 * are not held), else the oldest make room. */
	if (e.probe && (bytes > HZ_GUESS_MAX || (c->hold_probes && !c->hold_probes()))) {
		let_go(c, &e, b);
		return;
	}
	while (e.probe && c->probe_bytes + bytes > HZ_GUESS_MAX && evict_oldest(c, true, b))
		;
	while (c->count > 0 && (c->count == HZ_CACHE_ENTRIES || over_budget(c, bytes)))
		evict_oldest(c, false, b);
	if (over_budget(c, bytes)) {
		let_go(c, &e, b);
		return;
	}
	c->entries[c->count++] = e;
	account(c, &e, true);
}

void hz_cache_hold_probes(struct hz_cache *c, bool (*hold)(void))
{
	c->hold_probes = hold;
}

void hz_cache_add(struct hz_cache *c, struct hz_cache_entry e, struct hz_cache_batch *b)
{
	choose_stay(c, &e);
	add_entry(c, e, b);
}

void hz_cache_missed(struct hz_cache *c, struct hz_cache_batch *b)
{
	while (c->probe_bytes > 0 && evict_oldest(c, true, b))
		;
}

size_t hz_cache_granules_for(size_t size, enum hz_backing backing)
{
	size_t unit = hz_backing_page(backing) > HZ_GRANULE ? hz_backing_page(backing)
							    : HZ_GRANULE;

	/* Rounded up, a size near SIZE_MAX would wrap to one any span fits. */
	if (size > HZ_BLOCK_MAX)
		return SIZE_MAX / HZ_GRANULE;
	return hz_align_up(size, unit) / HZ_GRANULE;
}

bool hz_cache_fits(const struct hz_span *s, size_t size, size_t align)
{
	return hz_cache_granules_for(size, s->backing) <= hz_span_granules(s) &&
	       (align == 0 || s->range.start % align == 0);
}

bool hz_cache_wasteful(size_t have, size_t need)
{
	return have > need + need / 8;
}

int hz_cache_pick(const struct hz_cache *c, size_t size, size_t align, bool want_clean,
		  bool dirty_allowed, const struct hz_span *zeroing)
{
	int best = -1;

	for (unsigned i = 0; i < c->count; i++) {
		const struct hz_cache_entry *e = &c->entries[i];

		if (!hz_cache_fits(&e->span, size, align) || (!e->clean && !dirty_allowed))
			continue;
		if (best < 0) {
			best = (int)i;
			continue;
		}
		const struct hz_cache_entry *b = &c->entries[best];
		bool e_pref = e->clean == want_clean, b_pref = b->clean == want_clean;

		if (e_pref != b_pref ? e_pref : hz_span_bytes(&e->span) < hz_span_bytes(&b->span))
			best = (int)i;
	}
	if (zeroing && hz_cache_fits(zeroing, size, align) &&
	    (best < 0 || (want_clean && !c->entries[best].clean)))
		return HZ_CACHE_ZEROING;
	return best;
}

/* At a miss: the largest span too small for the request, or -1. */
static int pick_below(const struct hz_cache *c, const struct hz_cache_want *w)
{
	int best = -1;

	if (w->align > HZ_GRANULE)
		return -1;
	for (unsigned i = 0; i < c->count; i++) {
		const struct hz_cache_entry *e = &c->entries[i];

		if ((e->span.backing != HZ_BACKING_SMALL && e->span.backing != HZ_BACKING_THP) ||
		    hz_cache_fits(&e->span, w->size, 0) || (!e->clean && !w->dirty_allowed))
			continue;
		if (best < 0 || hz_span_bytes(&e->span) > hz_span_bytes(&c->entries[best].span))
			best = (int)i;
	}
	return best;
}

int hz_cache_look(struct hz_cache *c, uint64_t now, const struct hz_cache_want *w,
		  struct hz_cache_batch *b)
{
	hz_cache_decay(c, now, b);
	return hz_cache_pick(c, w->size, w->align, w->want_clean, w->dirty_allowed, w->zeroing);
}

bool hz_cache_serve(struct hz_cache *c, int i, const struct hz_cache_want *w,
		    struct hz_cache_batch *b, struct hz_cache_entry *out)
{
	if (i < 0) {
		hz_cache_missed(c, b);
		i = pick_below(c, w);
	}
	if (i < 0)
		return false;
	*out = hz_cache_take(c, (unsigned)i, w->size, b);
	return true;
}

bool hz_cache_trim(struct hz_span *s, size_t size, struct hz_span *rest)
{
	size_t need = hz_cache_granules_for(size, s->backing);

	if (!hz_cache_wasteful(hz_span_granules(s), need))
		return false;
	*rest = *s;
	hz_range_split_at(s->range, s->range.start + need * HZ_GRANULE, &s->range, &rest->range);
	return true;
}

struct hz_cache_entry hz_cache_take(struct hz_cache *c, unsigned i, size_t size,
				    struct hz_cache_batch *b)
{
	struct hz_cache_entry e = hz_cache_remove(c, i), rest = e;

	if (hz_cache_trim(&e.span, size, &rest.span))
		add_entry(c, rest, b); /* the same block: its stay */
	return e;
}

int hz_cache_find_at(const struct hz_cache *c, uintptr_t start, enum hz_backing backing)
{
	for (unsigned i = 0; i < c->count; i++)
		if (c->entries[i].span.range.start == start && c->entries[i].span.backing == backing)
			return (int)i;
	return -1;
}

int hz_cache_first_dirty(const struct hz_cache *c)
{
	for (unsigned i = 0; i < c->count; i++)
		if (!c->entries[i].clean && !c->entries[i].lazy)
			return (int)i;
	return -1;
}

int hz_cache_first_idle(const struct hz_cache *c, uint64_t now, uint64_t idle_ns)
{
	for (unsigned i = 0; i < c->count; i++) {
		const struct hz_cache_entry *e = &c->entries[i];
		bool madvisable = e->span.backing == HZ_BACKING_THP ||
				  e->span.backing == HZ_BACKING_SMALL;

		if (!e->lazy && madvisable && now >= e->idle_since &&
		    now - e->idle_since >= idle_ns)
			return (int)i;
	}
	return -1;
}
