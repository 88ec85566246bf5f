/* The block tables as blocks.c keeps them, for the consistency checks that
 * are built only into the test core (blocks_check.c, HZ_TEST_CORE). */
#ifndef HZ_BLOCKS_VIEW_H
#define HZ_BLOCKS_VIEW_H

#include <stddef.h>
#include <stdint.h>

struct block_meta {
	uint32_t granules; /* size of the block; meaningful on its first granule */
	uint8_t backing;   /* enum hz_backing of its first mapping */
	uint8_t live;      /* 1 while allocated; set on the first granule only */
	uint8_t foreign;   /* 1: the program changed this granule's mapping (blocks.h) */
};

struct hz_blocks_view {
	const struct block_meta *meta; /* one entry per granule */
	const uint64_t *used;          /* one bit per granule: 1 = claimed */
	size_t granule_count;
};

#ifdef HZ_TEST_CORE
/* Take the blocks lock and fill v; hz_blocks_view_end drops the lock. */
void hz_blocks_view_begin(struct hz_blocks_view *v);
void hz_blocks_view_end(void);
#endif

#endif /* HZ_BLOCKS_VIEW_H */
