/* What blocks.c shares with blocks_resize.c: claiming and giving back
 * granules of a region, the lookup of a live block. Internal to the block
 * layer; the rest of the library uses blocks.h. */
#ifndef HZ_BLOCKS_IMPL_H
#define HZ_BLOCKS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "backing.h"
#include "blocks_view.h"

static inline size_t hz_region_index(const struct hz_block_region *r, uintptr_t a)
{
	return (a - r->range.start) / HZ_GRANULE;
}

static inline uintptr_t hz_region_addr(const struct hz_block_region *r, size_t index)
{
	return r->range.start + index * HZ_GRANULE;
}

/* The metadata of the live block starting at p, and its region; stops the
 * program when p is not one (double free, or a pointer into the middle of
 * a block). r may be NULL. */
struct block_meta *hz_blocks_live(const void *p, const char *what, struct hz_block_region **r);

/* Live bytes grew (a hand-out, which zero.c counts) or shrank by delta. */
void hz_blocks_count_live(int64_t delta);

/* size rounded up to whole pages of page; -ENOMEM past HZ_BLOCK_MAX. */
int hz_blocks_len(size_t size, size_t page, size_t *len);

/* The unit a block of backing b is claimed in: its page, at least a granule. */
size_t hz_blocks_unit(enum hz_backing b);

/* Claim n granules aligned to align granules in a region held, or in a new
 * one. */
int hz_blocks_claim(size_t n, size_t align, struct hz_block_region **r, size_t *first);

/* Claim granules [first + old_g, first + new_g) of r, right after a block,
 * if they are free: 0 or -ENOMEM. */
int hz_blocks_claim_after(struct hz_block_region *r, size_t first, size_t old_g, size_t new_g);

/* Give granules back to the bitmap. */
void hz_blocks_unclaim(struct hz_block_region *r, size_t first, size_t n);

/* After mapping granules failed with err: back to the bitmap, unless
 * another mapping took part of their range (-EEXIST, hz_prim_commit): then
 * they stay claimed for good, so no block is ever mapped over it. */
void hz_blocks_unclaim_after(int err, struct hz_block_region *r, size_t first, size_t n);

/* Stops the program unless span is one the recycler may hand out: in one
 * region on granule boundaries, claimed, its block not live (blocks.c).
 * Returns its region. */
struct hz_block_region *hz_blocks_check_hand_out(const struct hz_span *span);

/* Give [start, start + len) back to its region (reset if foreign) and its
 * granules back to the bitmap. */
void hz_blocks_release_range(uintptr_t start, size_t len);

#endif /* HZ_BLOCKS_IMPL_H */
