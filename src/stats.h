/* Counters of what hugezero did, updated with relaxed atomics (they are
 * statistics, not synchronisation) and reported at exit. */
#ifndef HZ_STATS_H
#define HZ_STATS_H

#include <stdint.h>

#include "backing.h"

enum hz_fallback {
	HZ_FB_POOL_EMPTY,      /* hugetlb pool had too few free pages */
	HZ_FB_HUGETLB_FAILED,  /* mmap(MAP_HUGETLB) failed anyway */
	HZ_FB_THP_UNAVAILABLE, /* THP disabled by sysfs or prctl */
	HZ_FB_THP_SLOW,        /* fresh THP faulted slower than 4 KiB pages */
	HZ_FB_RESERVE_FULL,    /* no room left in the reservation: next allocator */
	HZ_FB_MAP_FAILED,      /* mapping the block failed: next allocator */
	HZ_FB_COUNT
};

struct hz_stats {
	uint64_t blocks[HZ_BACKING_COUNT]; /* new blocks mapped, per backing */
	uint64_t bytes[HZ_BACKING_COUNT];
	uint64_t fallbacks[HZ_FB_COUNT];
	uint64_t mallocs;          /* large requests served (any entry point) */
	uint64_t callocs;          /* large calloc calls */
	uint64_t calloc_bytes;
	uint64_t cleared_bytes;    /* bytes calloc zeroed itself (recycled blocks) */
	uint64_t clear_ns;
	uint64_t realloc_moved;    /* realloc moved with mremap, no copy */
	uint64_t realloc_in_place;
	uint64_t realloc_copied;   /* realloc had to copy (mremap refused) */
	uint64_t cache_hits;       /* large requests served from the cache */
	uint64_t cache_misses;     /* ... that needed a fresh block */
	uint64_t cache_bytes;      /* bytes in the cache now (resident or not) */
	uint64_t cache_released_bytes; /* given back by decay or eviction */
	uint64_t prezeroed_bytes;  /* written by the pre-zero thread */
	uint64_t prezero_ns;
	uint64_t takeovers;        /* callocs that took a block mid-zeroing */
	uint64_t prezero_starved;  /* times the thread paused, starved of CPU */
	uint64_t takeovers_abandoned; /* ... given up: the thread was too slow */
	uint64_t assisted_bytes;   /* of calloc's own clears, done by the thread */
	uint64_t thp_demoted;      /* sparsely used blocks moved to 4 KiB pages */
	uint64_t thp_promoted;     /* densely used ones moved back to THP */
	uint64_t live_bytes;
	uint64_t peak_bytes;
	uint64_t mmaps_aligned;    /* anonymous mmaps made THP-aligned */
	uint64_t mmap_bytes;
};

extern struct hz_stats hz_stats;

#define hz_stats_add(field, v) \
	((void)__atomic_add_fetch(&hz_stats.field, (v), __ATOMIC_RELAXED))

void hz_stats_fallback(enum hz_fallback why);
void hz_stats_live(int64_t delta); /* tracks live and peak bytes */

const char *hz_backing_name(enum hz_backing b);
const char *hz_fallback_name(enum hz_fallback f);

/* Keep a private copy of stderr for the exit report: programs such as
 * coreutils close stderr in their atexit handlers, which run before
 * shared-library destructors. Call once at start-up. */
void hz_stats_keep_stderr(void);

/* Write the report HUGEZERO_STATS / HUGEZERO_STATS_FILE ask for, if any. */
void hz_stats_report(void);

#endif /* HZ_STATS_H */
