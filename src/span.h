/* The recycler's vocabulary, which every layer from the blocks up speaks:
 * the granule, the span (a run of granules with its backing) and the map
 * that says which region, if any, holds an address (written by the blocks,
 * read lock-free by the cache, the promoter and the preload). Definitions
 * only: nothing here calls a module. */
#ifndef HZ_SPAN_H
#define HZ_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing.h" /* enum hz_backing */
#include "range.h"
#include "sizes.h"

#define HZ_GRANULE HZ_SZ_2M
/* Largest alignment served: 1 GiB, the largest huge page. */
#define HZ_ALIGN_MAX HZ_SZ_1G
/* No block is larger than HUGEZERO_RESERVE's largest value (64 TiB): a
 * request above it fails before any rounding could wrap. */
#define HZ_BLOCK_MAX ((size_t)1 << 46)

/* Regions start and end on 1 GiB boundaries, so one byte per GiB of the
 * 47-bit user address space (128 KiB) says which region, if any, holds an
 * address: nonzero is the region's slot plus one. Written under the blocks
 * lock, with a release store after the region's tables are ready; read
 * with an acquire load and no lock. Regions the kernel places above 2^47
 * (5-level paging, an explicit hint) are not used. */
#define HZ_REGION_SHIFT 30
#define HZ_REGION_GIBS ((size_t)1 << (47 - HZ_REGION_SHIFT))
extern uint8_t hz_region_of_gib[HZ_REGION_GIBS];

static inline bool hz_blocks_owns(const void *p)
{
	uintptr_t g = (uintptr_t)p >> HZ_REGION_SHIFT;

	return g < HZ_REGION_GIBS && __atomic_load_n(&hz_region_of_gib[g], __ATOMIC_ACQUIRE) != 0;
}

/* Whether a and b lie in the same region, or both outside every region
 * (the cache merges adjacent spans only then: two regions side by side are
 * two mappings, and a block never spans both). */
static inline bool hz_blocks_same_region(uintptr_t a, uintptr_t b)
{
	uintptr_t ga = a >> HZ_REGION_SHIFT, gb = b >> HZ_REGION_SHIFT;
	uint8_t ra = ga < HZ_REGION_GIBS ? __atomic_load_n(&hz_region_of_gib[ga], __ATOMIC_ACQUIRE) : 0;
	uint8_t rb = gb < HZ_REGION_GIBS ? __atomic_load_n(&hz_region_of_gib[gb], __ATOMIC_ACQUIRE) : 0;

	return ra == rb;
}

/* A run of claimed granules that is not (or no longer) a live block: a
 * freed block kept mapped by the recycler, or part of one. */
struct hz_span {
	struct hz_range range;
	enum hz_backing backing;
};

static inline size_t hz_span_bytes(const struct hz_span *s)
{
	return hz_range_len(s->range);
}

static inline size_t hz_span_granules(const struct hz_span *s)
{
	return hz_span_bytes(s) / HZ_GRANULE;
}

#endif /* HZ_SPAN_H */
