/* The huge-page-backed regions the jemalloc hooks carve extents from, and
 * the per-page bookkeeping inside them (see extents.h for the why).
 *
 * Every region is one mapping of its own, 2 MiB aligned (or more), whose
 * length is a whole number of its backing's pages. Two bitmaps per region,
 * one bit per 4 KiB page, live in a separate anonymous mapping:
 *   free:  the page is ours to hand out (0: jemalloc holds it);
 *   dirty: the page is free and may still hold old data (0 when free means
 *          it reads zero: never touched, or zeroed since).
 *
 * The table is sorted by address. Functions that read or change it or a
 * region expect the caller (extents.c) to hold its lock; hz_regions_map and
 * hz_regions_unmap make system calls and expect the lock not held. */
#ifndef HZ_JEMALLOC_REGIONS_H
#define HZ_JEMALLOC_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing.h"
#include "range.h"
#include "sizes.h"

struct hz_region {
	struct hz_range range; /* the mapping */
	uint64_t *free_map;
	uint64_t *dirty_map;
	size_t map_bytes;     /* of the mapping holding both maps */
	size_t free_pages;
	size_t dirty_pages;
	uint64_t idle_since;  /* ns, when it last became entirely free */
	uint64_t dirty_since; /* ns, when dirty pages were last added */
	unsigned arena;
	enum hz_backing backing;
	bool lazy; /* on 4 KiB pages until extents earn huge ones (extents.h) */
};

/* Totals over the table. */
struct hz_regions_totals {
	size_t mapped_bytes;
	size_t dirty_bytes;
};

extern struct hz_region hz_regions[];
extern unsigned hz_region_count;
extern struct hz_regions_totals hz_regions_totals;

/* Pages of 4 KiB in r: the bits of each map. */
static inline size_t hz_region_pages(const struct hz_region *r)
{
	return hz_range_len(r->range) / HZ_SZ_4K;
}

/* The index of the page holding addr, which r contains. */
static inline size_t hz_region_page_of(const struct hz_region *r, uintptr_t addr)
{
	return (addr - r->range.start) / HZ_SZ_4K;
}

/* Pages [first, end) of r as addresses. */
static inline struct hz_range hz_region_run(const struct hz_region *r, size_t first, size_t end)
{
	return (struct hz_range){ r->range.start + first * HZ_SZ_4K,
				  r->range.start + end * HZ_SZ_4K };
}

static inline bool hz_region_empty(const struct hz_region *r)
{
	return r->free_pages == hz_region_pages(r);
}

/* Map a new region for arena of at least max(size, min_len) bytes, aligned
 * to align (any power of two): hugetlb, THP or 4 KiB pages, in the order
 * HUGEZERO_BACKING allows, or, when lazy, 4 KiB pages (MADV_NOHUGEPAGE:
 * huge pages come only where an extent earns them, extents.h). All of it
 * free and zero. 0 or -ENOMEM. */
int hz_regions_map(unsigned arena, size_t size, size_t align, size_t min_len, bool lazy,
		   struct hz_region *out);

/* Give a region's memory and address space back, with its maps. */
void hz_regions_unmap(const struct hz_region *r);

/* The region holding addr, or NULL. */
struct hz_region *hz_regions_find(uintptr_t addr);

/* Add a mapped region to the table: 0, or -ENOMEM when the table is full. */
int hz_regions_insert(const struct hz_region *r);

/* Remove r from the table and return it (to unmap once unlocked). */
struct hz_region hz_regions_take_out(struct hz_region *r);

/* First fit, by address, of n free pages starting on a multiple of align
 * (a power of two >= 4 KiB) in arena's regions: the region and *first (its
 * page index), or NULL. */
struct hz_region *hz_regions_fit(unsigned arena, size_t n, size_t align, size_t *first);

/* Of the fits that cover dirty pages (pages still resident, which the
 * extent then reuses rather than faulting fresh ones), the one covering
 * the most, the first by address among equals; NULL when none does. Only
 * the first HZ_REGION_RUNS dirty runs, by address, are looked at. */
struct hz_region *hz_regions_fit_dirty(unsigned arena, size_t n, size_t align, size_t *first);

/* Whether pages [first, first + n) of r are all free. */
bool hz_regions_all_free(const struct hz_region *r, size_t first, size_t n);

/* Whether any of pages [first, first + n) of r is free. */
bool hz_regions_any_free(const struct hz_region *r, size_t first, size_t n);

/* Dirty runs found in a range: up to HZ_REGION_RUNS, the last one
 * stretched over the rest when there are more. */
#define HZ_REGION_RUNS 32

struct hz_region_runs {
	struct hz_range run[HZ_REGION_RUNS];
	unsigned count;
};

/* Add run to *d; past HZ_REGION_RUNS the last run is stretched over it. */
void hz_region_runs_add(struct hz_region_runs *d, struct hz_range run);

/* Hand pages [first, first + n) of r out (they must be free); their dirty
 * runs go to *dirty. */
void hz_regions_claim(struct hz_region *r, size_t first, size_t n,
		      struct hz_region_runs *dirty);

/* Take pages [first, first + n) of r back (they must be handed out), dirty
 * or known zero. now stamps the region's idle and dirty times. */
void hz_regions_unclaim(struct hz_region *r, size_t first, size_t n, bool dirty,
			uint64_t now);

/* Mark run (free pages of r) as holding data. */
void hz_regions_mark_dirty(struct hz_region *r, struct hz_range run, uint64_t now);

/* Hand out r's dirty runs for purging, at most most pages of them,
 * appending to *out until it is full (no run is stretched here). Returns
 * the pages claimed. */
size_t hz_regions_claim_dirty(struct hz_region *r, struct hz_region_runs *out, size_t most);

#endif /* HZ_JEMALLOC_REGIONS_H */
