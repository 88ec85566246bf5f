/* The block tables' consistency checks, built only into the test core.
 * See check.h. */
#include "check.h"

#include <errno.h>

#include "bitmap.h"
#include "blocks_view.h"
#include "log.h"
#include "range.h"
#include "stats.h"

/* The tables, valid between hz_blocks_view_begin and _end. */
static struct hz_blocks_view v;

static uintptr_t addr_of(const struct hz_block_region *r, size_t index)
{
	return r->range.start + index * HZ_GRANULE;
}

static size_t unit_of(enum hz_backing b)
{
	size_t page = hz_backing_page(b);

	return page > HZ_GRANULE ? page : HZ_GRANULE;
}

/* A live block's metadata is sane and its granules are claimed. */
static int check_block(const struct hz_block_region *r, size_t i, const struct block_meta *m)
{
	size_t unit = unit_of(m->backing < HZ_BACKING_COUNT ? (enum hz_backing)m->backing
							     : HZ_BACKING_SMALL) / HZ_GRANULE;

	if (m->backing >= HZ_BACKING_COUNT || m->granules == 0 ||
	    m->granules > r->granules - i || i % unit != 0 || m->granules % unit != 0) {
		hz_warn("check: block at %p: %u granules, backing %u", (void *)addr_of(r, i),
			m->granules, m->backing);
		return -EUCLEAN;
	}
	for (size_t g = i; g < i + m->granules; g++) {
		if (!hz_bits_get(r->used, g)) {
			hz_warn("check: block at %p: granule %zu unclaimed", (void *)addr_of(r, i),
				g - i);
			return -EUCLEAN;
		}
	}
	return 0;
}

/* A region is published for each of its GiBs, and nothing else is. */
static int check_published(const struct hz_block_region *r, size_t slot)
{
	for (uintptr_t g = r->range.start >> HZ_REGION_SHIFT; g < r->range.end >> HZ_REGION_SHIFT;
	     g++) {
		if (hz_region_of_gib[g] != slot + 1) {
			hz_warn("check: region %p: GiB %#lx not published", (void *)r->range.start,
				(unsigned long)g);
			return -EUCLEAN;
		}
	}
	return 0;
}

static int census_region(const struct hz_block_region *r, size_t slot, struct hz_blocks_census *c)
{
	size_t covered = 0; /* granules before this index belong to a block */
	int ret = check_published(r, slot);

	for (size_t i = 0; i < r->granules && ret == 0; i++) {
		const struct block_meta *m = &r->meta[i];

		c->claimed_granules += hz_bits_get(r->used, i);
		if (!__atomic_load_n(&m->live, __ATOMIC_ACQUIRE))
			continue;
		if (i < covered) {
			hz_warn("check: block at %p starts inside the previous one",
				(void *)addr_of(r, i));
			return -EUCLEAN;
		}
		ret = check_block(r, i, m);
		c->live_blocks++;
		c->live_granules += m->granules;
		covered = i + m->granules;
	}
	for (size_t i = r->granules; i < hz_align_up(r->granules, 64) && ret == 0; i++) {
		if (hz_bits_get(r->used, i)) {
			hz_warn("check: granule %zu past the region's end is claimed", i);
			return -EUCLEAN;
		}
	}
	return ret;
}

static int census(struct hz_blocks_census *c)
{
	size_t published = 0, gibs = 0;
	int ret = 0;

	for (size_t k = 0; k < HZ_REGIONS_MAX && ret == 0; k++) {
		if (hz_range_empty(v.regions[k].range))
			continue;
		gibs += hz_range_len(v.regions[k].range) >> HZ_REGION_SHIFT;
		ret = census_region(&v.regions[k], k, c);
	}
	for (size_t g = 0; g < HZ_REGION_GIBS; g++)
		published += hz_region_of_gib[g] != 0;
	if (ret == 0 && published != gibs) {
		hz_warn("check: %zu GiB published, the regions hold %zu", published, gibs);
		ret = -EUCLEAN;
	}
	return ret;
}

int hz_blocks_check(struct hz_blocks_census *c)
{
	uint64_t live_bytes;
	int ret;

	*c = (struct hz_blocks_census){ 0, 0, 0 };
	hz_blocks_view_begin(&v);
	ret = census(c);
	hz_blocks_view_end();
	live_bytes = __atomic_load_n(&hz_stats.live_bytes, __ATOMIC_RELAXED);
	if (ret == 0 && live_bytes != c->live_granules * HZ_GRANULE) {
		hz_warn("check: live_bytes %llu, live blocks hold %zu",
			(unsigned long long)live_bytes, c->live_granules * HZ_GRANULE);
		ret = -EUCLEAN;
	}
	return ret;
}

/* The region holding all of [start, end), or NULL. */
static const struct hz_block_region *region_holding(uintptr_t start, uintptr_t end)
{
	for (size_t k = 0; k < HZ_REGIONS_MAX; k++) {
		struct hz_range r = v.regions[k].range;

		if (!hz_range_empty(r) && start >= r.start && end <= r.end && end > start &&
		    (start - r.start) % HZ_GRANULE == 0)
			return &v.regions[k];
	}
	return NULL;
}

/* The first live block of r using a granule of [first, end), as the index
 * of its first granule, or r->granules. */
static size_t live_block_in(const struct hz_block_region *r, size_t first, size_t end)
{
	for (size_t i = 0; i < end; i++) {
		const struct block_meta *m = &r->meta[i];

		if (__atomic_load_n(&m->live, __ATOMIC_ACQUIRE) && i + m->granules > first)
			return i;
	}
	return r->granules;
}

int hz_blocks_check_span(const struct hz_span *span)
{
	uintptr_t end = span->range.end;
	const struct hz_block_region *r;
	size_t block, first, last;
	int ret = 0;

	hz_blocks_view_begin(&v);
	r = hz_span_granules(span) == 0 ? NULL : region_holding(span->range.start, end);
	if (r == NULL) {
		hz_blocks_view_end();
		hz_warn("check: span %p + %zu granules is not in a region",
			(void *)span->range.start, hz_span_granules(span));
		return -EUCLEAN;
	}
	first = (span->range.start - r->range.start) / HZ_GRANULE;
	last = first + hz_span_granules(span);
	for (size_t g = first; g < last && ret == 0; g++) {
		if (!hz_bits_get(r->used, g)) {
			hz_warn("check: span %p: granule %zu unclaimed", (void *)span->range.start,
				g - first);
			ret = -EUCLEAN;
		}
	}
	block = live_block_in(r, first, last);
	if (ret == 0 && block != r->granules) {
		hz_warn("check: span %p overlaps the live block at %p", (void *)span->range.start,
			(void *)addr_of(r, block));
		ret = -EUCLEAN;
	}
	hz_blocks_view_end();
	return ret;
}
