/* Mapping and unmapping the regions of address space that blocks are
 * carved from, and publishing them in hz_region_of_gib. blocks.c decides
 * when (under its locks); these do the system calls and the tables. */
#ifndef HZ_BLOCKS_REGION_H
#define HZ_BLOCKS_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blocks_view.h"

/* Reserve len bytes (a multiple of 1 GiB) of PROT_NONE address space on a
 * 1 GiB boundary, below 2^47, with its tables; near is an address to try
 * to place it right under (the lowest region held, or 0). Fills *r.
 * Returns 0 or a negative errno value, with nothing left mapped. */
int hz_region_map(size_t len, uintptr_t near, struct hz_block_region *r);

/* Give a region and its tables back to the kernel (unpublished first). */
void hz_region_unmap(const struct hz_block_region *r);

/* Point r's GiBs at slot (id = slot + 1), or at nothing (id 0), with
 * release stores: a reader that sees the id sees the filled slot. */
void hz_region_publish(const struct hz_block_region *r, uint8_t id);

/* The region table; blocks.c's lock guards the slots, hz_region_of_gib
 * publishes them. */
extern struct hz_block_region hz_block_regions[HZ_REGIONS_MAX];

/* With the blocks lock held: */

/* Recompute hz_reservation, the hull of the regions. */
void hz_region_update_hull(void);

/* A free slot, and where to place the next region (the lowest region's
 * start, 0 when none): -ENOSPC when the table is full. */
int hz_region_free_slot(size_t *slot, uintptr_t *near);

/* The size of the next region for a block of need bytes when held bytes
 * are held; 0 when cap (hz_blocks_reservation_size) leaves no room. */
size_t hz_region_next_size(size_t need, size_t held, size_t cap);

#ifdef HZ_TEST_CORE
/* Tests that lay blocks out by address (two regions side by side, a block
 * at a region's start) set this: every new region's claims then start at
 * its start, as before address randomisation. */
extern bool hz_region_origin_off;
#endif

#endif /* HZ_BLOCKS_REGION_H */
