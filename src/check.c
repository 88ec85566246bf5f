/* The cache's consistency checks and draining, built only into the test
 * core. See check.h. */
#include "check.h"

#include <errno.h>

#include "cache.h"
#include "classes.h"
#include "log.h"
#include "prezero.h"
#include "prim/prim.h"
#include "stats.h"

#define HELD_MAX 32
#define CHECK_WAIT_S 10

void hz_recycle_drain(void)
{
	for (;;) {
		struct hz_cache_batch b = { .count = 0 };
		struct hz_cache *c = hz_prezero_enter(&b);
		bool empty = false;
		unsigned held = 0;

		if (c) {
			while (c->count > 0 && b.count < HZ_CACHE_BATCH) {
				struct hz_cache_entry e = hz_cache_remove(c, c->count - 1);

				hz_cache_batch_put(c, &b, &e.span);
			}
			empty = c->count == 0;
			held = hz_prezero_each_held(NULL, NULL);
			hz_prezero_leave();
		}
		hz_prezero_release(&b);
		if (c && empty && held == 0)
			return;
		if (!c || held > 0) /* the thread gives its spans back within a unit */
			hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
	}
}

struct held {
	struct hz_span spans[HELD_MAX];
	unsigned count;
};

static void note_held(const struct hz_span *span, void *ctx)
{
	struct held *h = ctx;

	if (h->count < HELD_MAX)
		h->spans[h->count++] = *span;
}

static bool overlap(const struct hz_span *s, const struct hz_span *t)
{
	return hz_range_overlaps(s->range, t->range);
}

static int check_entry(const struct hz_cache *t, unsigned i, const struct held *h,
		       struct hz_recycle_census *c)
{
	const struct hz_span *s = &t->entries[i].span;

	if (s->backing >= HZ_BACKING_COUNT || hz_blocks_check_span(s) != 0)
		return -EUCLEAN;
	for (unsigned j = 0; j < i; j++) {
		if (overlap(s, &t->entries[j].span)) {
			hz_warn("check: cached spans %p and %p overlap", (void *)s->range.start,
				(void *)t->entries[j].span.range.start);
			return -EUCLEAN;
		}
	}
	for (unsigned j = 0; j < h->count; j++) {
		if (overlap(s, &h->spans[j])) {
			hz_warn("check: cached span %p overlaps one the pre-zero thread holds",
				(void *)s->range.start);
			return -EUCLEAN;
		}
	}
	c->spans++;
	c->cached_bytes += hz_span_bytes(s);
	c->clean_bytes += t->entries[i].clean ? hz_span_bytes(s) : 0;
	return 0;
}

static int check_totals(const struct hz_cache *t, const struct hz_recycle_census *c)
{
	uint64_t stat = __atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED);
	size_t max = hz_cache_policy()->cache_max;

	if (c->cached_bytes != t->bytes || c->clean_bytes != t->clean_bytes ||
	    stat != t->bytes || hz_cache_budget_used(t->budget) < t->bytes) {
		hz_warn("check: cache holds %zu bytes (%zu clean), counted %zu (%zu), stats %llu, "
			"budget %zu", c->cached_bytes, c->clean_bytes, t->bytes, t->clean_bytes,
			(unsigned long long)stat, hz_cache_budget_used(t->budget));
		return -EUCLEAN;
	}
	if (t->count > HZ_CACHE_ENTRIES || (t->count > 0 && t->bytes > max)) {
		hz_warn("check: %u spans, %zu bytes over a %zu-byte cache", t->count, t->bytes, max);
		return -EUCLEAN;
	}
	return 0;
}

static int check_held(const struct held *h, struct hz_recycle_census *c)
{
	for (unsigned i = 0; i < h->count; i++) {
		if (hz_blocks_check_span(&h->spans[i]) != 0)
			return -EUCLEAN;
		for (unsigned j = 0; j < i; j++) {
			if (overlap(&h->spans[i], &h->spans[j])) {
				hz_warn("check: two spans the pre-zero thread holds overlap at %p",
					(void *)h->spans[i].range.start);
				return -EUCLEAN;
			}
		}
		c->in_flight_bytes += hz_span_bytes(&h->spans[i]);
	}
	return 0;
}

/* The table, once the thread is out of its turn. A request passes by a
 * thread preempted in its turn (and by each later look in that same turn),
 * so one try fails the check wherever the thread runs slowly (an emulated
 * CPU, a sanitizer): wait for the turn to end, as a request later would. */
static struct hz_cache *enter_to_check(struct hz_cache_batch *b)
{
	uint64_t t0 = hz_prim_now_ns();
	struct hz_cache *t;

	while (!(t = hz_prezero_enter(b)) &&
	       hz_prim_now_ns() - t0 < (uint64_t)CHECK_WAIT_S * 1000000000u)
		hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
	return t;
}

int hz_recycle_check(struct hz_recycle_census *c,
		     void (*visit)(const struct hz_span *span, bool clean, void *ctx),
		     void *ctx)
{
	struct hz_cache_batch b = { .count = 0 };
	struct held h = { .count = 0 };
	struct hz_cache *t;
	int ret;

	*c = (struct hz_recycle_census){ 0, 0, 0, 0 };
	t = enter_to_check(&b);
	if (!t) {
		hz_warn("check: the pre-zero thread stays in its turn at the table for %d s",
			CHECK_WAIT_S);
		return -EUCLEAN;
	}
	hz_prezero_each_held(note_held, &h);
	ret = check_held(&h, c);
	for (unsigned i = 0; i < t->count && ret == 0; i++)
		ret = check_entry(t, i, &h, c);
	if (ret == 0)
		ret = check_totals(t, c);
	for (unsigned i = 0; i < t->count && ret == 0 && visit; i++)
		visit(&t->entries[i].span, t->entries[i].clean, ctx);
	hz_prezero_leave();
	hz_prezero_release(&b);
	return ret;
}
