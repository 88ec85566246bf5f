/* The block tables' consistency checks, built only into the test core.
 * See check.h. */
#include "check.h"

#include <errno.h>

#include "blocks_view.h"
#include "log.h"
#include "range.h"
#include "stats.h"

/* The tables, valid between hz_blocks_view_begin and _end. */
static struct hz_blocks_view v;

static size_t index_of(uintptr_t a)
{
	return (a - hz_reservation.start) / HZ_GRANULE;
}

static uintptr_t addr_of(size_t index)
{
	return hz_reservation.start + index * HZ_GRANULE;
}

static size_t unit_of(enum hz_backing b)
{
	size_t page = hz_backing_page(b);

	return page > HZ_GRANULE ? page : HZ_GRANULE;
}

static bool claimed(size_t i)
{
	return v.used[i / 64] & (1ULL << (i % 64));
}

/* A live block's metadata is sane and its granules are claimed. */
static int check_block(size_t i, const struct block_meta *m)
{
	size_t unit = unit_of(m->backing < HZ_BACKING_COUNT ? (enum hz_backing)m->backing
							     : HZ_BACKING_SMALL) / HZ_GRANULE;

	if (m->backing >= HZ_BACKING_COUNT || m->granules == 0 ||
	    m->granules > v.granule_count - i || i % unit != 0 || m->granules % unit != 0) {
		hz_warn("check: block at %p: %u granules, backing %u", (void *)addr_of(i),
			m->granules, m->backing);
		return -EUCLEAN;
	}
	for (size_t g = i; g < i + m->granules; g++) {
		if (!claimed(g)) {
			hz_warn("check: block at %p: granule %zu unclaimed", (void *)addr_of(i),
				g - i);
			return -EUCLEAN;
		}
	}
	return 0;
}

static int census(struct hz_blocks_census *c)
{
	size_t covered = 0; /* granules before this index belong to a block */

	*c = (struct hz_blocks_census){ 0, 0, 0 };
	for (size_t i = 0; i < v.granule_count; i++) {
		const struct block_meta *m = &v.meta[i];
		int ret;

		c->claimed_granules += claimed(i);
		if (!__atomic_load_n(&m->live, __ATOMIC_ACQUIRE))
			continue;
		if (i < covered) {
			hz_warn("check: block at %p starts inside the previous one",
				(void *)addr_of(i));
			return -EUCLEAN;
		}
		ret = check_block(i, m);
		if (ret != 0)
			return ret;
		c->live_blocks++;
		c->live_granules += m->granules;
		covered = i + m->granules;
	}
	for (size_t i = v.granule_count; i < hz_align_up(v.granule_count, 64); i++) {
		if (claimed(i)) {
			hz_warn("check: granule %zu past the reservation is claimed", i);
			return -EUCLEAN;
		}
	}
	return 0;
}

int hz_blocks_check(struct hz_blocks_census *c)
{
	uint64_t live_bytes;
	int ret;

	*c = (struct hz_blocks_census){ 0, 0, 0 };
	if (__atomic_load_n(&hz_reservation.end, __ATOMIC_ACQUIRE) == 0)
		return 0; /* nothing reserved, nothing served */
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

/* The first live block using a granule of [first, end), as the index of
 * its first granule, or v.granule_count. */
static size_t live_block_in(size_t first, size_t end)
{
	for (size_t i = 0; i < end; i++) {
		const struct block_meta *m = &v.meta[i];

		if (__atomic_load_n(&m->live, __ATOMIC_ACQUIRE) && i + m->granules > first)
			return i;
	}
	return v.granule_count;
}

int hz_blocks_check_span(const struct hz_span *span)
{
	uintptr_t start = span->range.start, end = span->range.end;
	size_t block;
	int ret = 0;

	if (hz_span_granules(span) == 0 || start < hz_reservation.start ||
	    end > hz_reservation.end || end < start ||
	    (start - hz_reservation.start) % HZ_GRANULE != 0) {
		hz_warn("check: span %p + %zu granules is not in the reservation",
			(void *)start, hz_span_granules(span));
		return -EUCLEAN;
	}
	hz_blocks_view_begin(&v);
	for (size_t g = index_of(start); g < index_of(end) && ret == 0; g++) {
		if (!claimed(g)) {
			hz_warn("check: span %p: granule %zu unclaimed", (void *)start,
				g - index_of(start));
			ret = -EUCLEAN;
		}
	}
	block = live_block_in(index_of(start), index_of(end));
	if (ret == 0 && block != v.granule_count) {
		hz_warn("check: span %p overlaps the live block at %p", (void *)start,
			(void *)addr_of(block));
		ret = -EUCLEAN;
	}
	hz_blocks_view_end();
	return ret;
}
