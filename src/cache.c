/* The table of freed spans. See cache.h.
 *
 * A small array scanned whole: a request looks for the smallest fitting
 * span, and 1024 entries of 32 bytes are 32 KiB, a few microseconds to
 * scan. Adjacent spans of one backing and state are merged, so a program
 * that frees many neighbours keeps few entries. */
#include "cache.h"

#include "range.h"

void hz_cache_init(struct hz_cache *c, uint64_t decay_ns, struct hz_cache_budget *budget,
		   void (*flush)(struct hz_cache_batch *b))
{
	c->count = 0;
	c->bytes = 0;
	c->clean_bytes = 0;
	c->decay_ns = decay_ns;
	c->budget = budget;
	c->flush = flush;
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

	if (add) {
		c->bytes += bytes;
		c->clean_bytes += e->clean ? bytes : 0;
		hz_cache_budget_charge(c->budget, bytes, 0);
	} else {
		c->bytes -= bytes;
		c->clean_bytes -= e->clean ? bytes : 0;
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

static void evict_oldest(struct hz_cache *c, struct hz_cache_batch *b)
{
	unsigned oldest = 0;

	for (unsigned i = 1; i < c->count; i++)
		if (c->entries[i].idle_since < c->entries[oldest].idle_since)
			oldest = i;
	struct hz_cache_entry e = hz_cache_remove(c, oldest);

	hz_cache_batch_put(c, b, &e.span);
}

/* An entry newer than now (its free read the clock after the caller did)
 * is not idle at all: now - idle_since would wrap. */
void hz_cache_decay(struct hz_cache *c, uint64_t now, struct hz_cache_batch *b)
{
	for (unsigned i = 0; i < c->count && b->count < HZ_CACHE_BATCH;) {
		uint64_t since = c->entries[i].idle_since;

		if (now >= since && now - since >= c->decay_ns) {
			struct hz_cache_entry e = hz_cache_remove(c, i);

			hz_cache_batch_put(c, b, &e.span);
			continue; /* slot i now holds another entry */
		}
		i++;
	}
}

static bool over_budget(const struct hz_cache *c, size_t bytes)
{
	return hz_cache_budget_used(c->budget) + bytes > hz_cache_budget_max(c->budget);
}

/* Adjacent spans of one region sit in one contiguous stretch of address
 * space, so merging is only arithmetic; spans of two regions side by side
 * never merge (no block may cross regions); hugetlb spans merge only in
 * whole pages, which they are. */
void hz_cache_add(struct hz_cache *c, struct hz_cache_entry e, struct hz_cache_batch *b)
{
	size_t bytes = hz_span_bytes(&e.span);

	for (unsigned i = 0; i < c->count; i++) {
		struct hz_cache_entry *n = &c->entries[i];

		if (n->span.backing != e.span.backing || n->clean != e.clean ||
		    hz_span_bytes(&n->span) + bytes > hz_cache_budget_max(c->budget))
			continue;
		if (hz_range_adjacent(n->span.range, e.span.range) &&
		    hz_blocks_same_region(n->span.range.start, e.span.range.start)) {
			struct hz_cache_entry merged = hz_cache_remove(c, i);

			merged.span.range = hz_range_join(merged.span.range, e.span.range);
			if (e.idle_since > merged.idle_since)
				merged.idle_since = e.idle_since;
			hz_cache_add(c, merged, b); /* it may now touch another one */
			return;
		}
	}
	while (c->count > 0 && (c->count == HZ_CACHE_ENTRIES || over_budget(c, bytes)))
		evict_oldest(c, b);
	if (over_budget(c, bytes)) {
		hz_cache_batch_put(c, b, &e.span);
		return;
	}
	c->entries[c->count++] = e;
	account(c, &e, true);
}

size_t hz_cache_granules_for(size_t size, enum hz_backing backing)
{
	size_t unit = hz_backing_page(backing) > HZ_GRANULE ? hz_backing_page(backing)
							    : HZ_GRANULE;

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
		  bool dirty_allowed)
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
	return best;
}

struct hz_cache_entry hz_cache_take(struct hz_cache *c, unsigned i, size_t size,
				    struct hz_cache_batch *b)
{
	struct hz_cache_entry e = hz_cache_remove(c, i);
	size_t need = hz_cache_granules_for(size, e.span.backing);

	if (hz_cache_wasteful(hz_span_granules(&e.span), need)) {
		struct hz_cache_entry rest = e;

		hz_range_split_at(e.span.range, e.span.range.start + need * HZ_GRANULE,
				  &e.span.range, &rest.span.range);
		hz_cache_add(c, rest, b);
	}
	return e;
}

int hz_cache_first_dirty(const struct hz_cache *c)
{
	for (unsigned i = 0; i < c->count; i++)
		if (!c->entries[i].clean)
			return (int)i;
	return -1;
}
