/* The counters and their table. See stats.h and stats.def. */
#include "stats.h"

#include <stdbool.h>
#include <stddef.h>

struct hz_stats hz_stats;

/* hz_stats_snapshot and hz_stats_value read the struct as an array of
 * counters. */
_Static_assert(sizeof(struct hz_stats) % sizeof(uint64_t) == 0,
	       "struct hz_stats holds only uint64_t counters");
_Static_assert(sizeof(struct hz_stats) <= 0xffff, "offsets fit hz_stat_row.at");

/* HZ_STATS_LINE's when. */
#define WHEN_ALWAYS 0
#define WHEN_USED 1

#define AT(group, name) \
	offsetof(struct hz_stats, HZ_STATS_PICK_##group(name, exec.name, jemalloc.name))

const struct hz_stat_row hz_stat_rows[] = {
#define HZ_STATS_LINE(group_, heading, when)                            \
	{ .kind = HZ_STAT_KIND_LINE, .group = HZ_STAT_GROUP_##group_,   \
	  .used_only = WHEN_##when, .key = (heading) },
#define HZ_STAT(group_, name, key_, type_, unit_, text_, doc_)          \
	{ .kind = HZ_STAT_KIND_VALUE, .group = HZ_STAT_GROUP_##group_,  \
	  .type = HZ_STAT_TYPE_##type_, .unit = HZ_STAT_UNIT_##unit_,   \
	  .at = AT(group_, name), .key = (key_), .text = (text_), .doc = (doc_) },
#define HZ_STAT_BACKINGS(count, bytes, key_, doc_)                      \
	{ .kind = HZ_STAT_KIND_BACKINGS, .at = offsetof(struct hz_stats, count), \
	  .at2 = offsetof(struct hz_stats, bytes), .key = (key_), .doc = (doc_) },
#define HZ_STAT_FALLBACKS(name, key_, doc_)                             \
	{ .kind = HZ_STAT_KIND_FALLBACKS, .at = offsetof(struct hz_stats, name), \
	  .key = (key_), .doc = (doc_) },
#include "stats.def"
};

const unsigned hz_stat_row_count = sizeof(hz_stat_rows) / sizeof(hz_stat_rows[0]);

static const char *const fallback_names[HZ_FB_COUNT] = {
#define HZ_FALLBACK(id, key, doc) [HZ_FB_##id] = (key),
#include "stats.def"
};

const char *hz_fallback_name(enum hz_fallback f)
{
	return (unsigned)f < HZ_FB_COUNT ? fallback_names[f] : "?";
}

void hz_stats_fallback(enum hz_fallback why)
{
	hz_stats_add(fallbacks[why], 1);
}

void hz_stats_live(int64_t delta)
{
	uint64_t live = __atomic_add_fetch(&hz_stats.live_bytes, (uint64_t)delta,
					   __ATOMIC_RELAXED);
	uint64_t peak = __atomic_load_n(&hz_stats.peak_bytes, __ATOMIC_RELAXED);

	while (delta > 0 && live > peak &&
	       !__atomic_compare_exchange_n(&hz_stats.peak_bytes, &peak, live, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void hz_stats_snapshot(struct hz_stats *out)
{
	const uint64_t *from = (const uint64_t *)(const void *)&hz_stats;
	uint64_t *to = (uint64_t *)(void *)out;

	for (size_t i = 0; i < sizeof(hz_stats) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}
