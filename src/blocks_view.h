/* The block tables as blocks.c keeps them: the regions of address space
 * (blocks_region.c maps them) and, for each, its granules' metadata and
 * claim bits. The consistency checks built only into the test core
 * (blocks_check.c, HZ_TEST_CORE) read them too. */
#ifndef HZ_BLOCKS_VIEW_H
#define HZ_BLOCKS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "range.h"
#include "sizes.h"

struct block_meta {
	uint32_t granules; /* size of the block; meaningful on its first granule */
	uint8_t backing;   /* enum hz_backing of its first mapping */
	uint8_t live;      /* 1 while allocated; set on the first granule only */
	uint8_t foreign;   /* 1: the program changed this granule's mapping (blocks.h) */
};

/* One region: [range.start, range.end) on 1 GiB boundaries, PROT_NONE
 * where no block is committed. An empty range is a free slot. */
struct hz_block_region {
	struct hz_range range;
	struct block_meta *meta; /* one entry per granule */
	uint64_t *used;          /* one bit per granule: 1 = claimed */
	size_t granules;
	size_t origin; /* where claims start looking (blocks_region.c, origin_of) */
};

/* Bytes of the out-of-band tables (one mapping) of a region of granules
 * granules: its metadata, then its bitmap, each in whole pages. */
static inline size_t hz_block_region_meta_bytes(size_t granules)
{
	return (granules * sizeof(struct block_meta) + HZ_SZ_4K - 1) & ~(HZ_SZ_4K - 1);
}

static inline size_t hz_block_region_table_bytes(size_t granules)
{
	return hz_block_region_meta_bytes(granules) +
	       (((granules + 63) / 64 * sizeof(uint64_t) + HZ_SZ_4K - 1) & ~(HZ_SZ_4K - 1));
}

/* Slots in the region table. Regions after the fourth grow with what is
 * held (blocks_region.c), so 64 of them reach HUGEZERO_RESERVE's largest
 * value. */
#define HZ_REGIONS_MAX 64

/* The region holding a, or NULL; lock-free (blocks_region.h publishes). */
struct hz_block_region *hz_blocks_region_of(uintptr_t a);

/* Whether any granule of [start, start + len), in one region, is foreign,
 * or every block counts as foreign (blocks_foreign.c). */
bool hz_blocks_foreign_range(uintptr_t start, size_t len);

struct hz_blocks_view {
	const struct hz_block_region *regions; /* HZ_REGIONS_MAX slots, some empty */
};

#ifdef HZ_TEST_CORE
/* Take the blocks lock and fill v; hz_blocks_view_end drops the lock. */
void hz_blocks_view_begin(struct hz_blocks_view *v);
void hz_blocks_view_end(void);
#endif

#endif /* HZ_BLOCKS_VIEW_H */
