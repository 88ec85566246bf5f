/* Regions of address space for large blocks. See blocks_region.h.
 *
 * A region is 1 GiB aligned so that block alignments up to HZ_ALIGN_MAX
 * are index alignments and one byte per GiB answers hz_blocks_owns.
 * Aligning by over-mapping takes 1 GiB more address space for a moment,
 * which a tight RLIMIT_AS (ulimit -v 2097152) does not leave, so exact-size
 * placements at 1 GiB boundaries are tried around it. */
#include "blocks_region.h"

#include <errno.h>
#include <sys/mman.h>

#include "blocks.h"
#include "log.h"
#include "options.h"
#include "prim/memory.h"
#include "prim/prim.h"

#define ANON (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
#define GIB ((uintptr_t)1 << HZ_REGION_SHIFT)
#define TOP ((uintptr_t)HZ_REGION_GIBS << HZ_REGION_SHIFT)

uint8_t hz_region_of_gib[HZ_REGION_GIBS];
struct hz_block_region hz_block_regions[HZ_REGIONS_MAX];
struct hz_range hz_reservation;

/* Reserve exactly [at, at + len), or fail with nothing mapped. */
static int reserve_at(uintptr_t at, size_t len)
{
	if (at == 0 || at % GIB != 0 || at > TOP || len > TOP - at)
		return -EINVAL;
	return hz_prim_reserve_exactly(at, len);
}

/* Where the kernel would put len bytes, rounded down and then up to 1 GiB:
 * one of them is usually free. */
static int reserve_near_kernel_pick(size_t len, uintptr_t *out, uintptr_t *picked)
{
	uintptr_t a;
	void *p;
	int ret = hz_prim_mmap(NULL, len, PROT_NONE, ANON, -1, 0, &p);

	if (ret != 0)
		return ret;
	a = (uintptr_t)p;
	*picked = a;
	if (a % GIB == 0 && a + len <= TOP) {
		*out = a;
		return 0;
	}
	ret = hz_prim_munmap(p, len);
	if (ret != 0)
		return ret;
	if (reserve_at(hz_align_down(a, GIB), len) == 0) {
		*out = hz_align_down(a, GIB);
		return 0;
	}
	if (reserve_at(hz_align_up(a, GIB), len) == 0) {
		*out = hz_align_up(a, GIB);
		return 0;
	}
	return -ENOMEM;
}

/* Right below the lowest region first (the kernel fills the mmap area top
 * down, and regions side by side keep hz_reservation tight), then the
 * over-map and trim, then the kernel's pick rounded to 1 GiB. *picked is
 * the address the kernel chose, or 0 right below the lowest region. */
static int place(size_t len, uintptr_t near, uintptr_t *out, uintptr_t *picked)
{
	void *p;
	int ret;

	*picked = 0;
	if (near > len && reserve_at(near - len, len) == 0) {
		*out = near - len;
		return 0;
	}
	ret = hz_prim_reserve_picked(len, GIB, &p, picked);
	if (ret == 0) {
		if ((uintptr_t)p <= TOP && len <= TOP - (uintptr_t)p) {
			*out = (uintptr_t)p;
			return 0;
		}
		hz_prim_munmap(p, len);
		return -ENOMEM;
	}
	return reserve_near_kernel_pick(len, out, picked);
}

/* The granule claims in a region start from (blocks.c, claim_in): the
 * granule of its GiB the kernel's pick lies in, in the region's lower
 * half. Alignment to 1 GiB took the kernel's mmap randomisation off the
 * low 30 bits of the region's address; this puts 8 of them back into the
 * first block's, at the 2 MiB granularity that keeps huge pages aligned
 * (the 9 below 2 MiB a block cannot have). The lower half (bit 29 lost)
 * leaves 512 MiB or more after the first block, so the blocks that follow
 * lie right after it, as glibc's mmaps lie next to each other, instead of
 * wrapping round to the region's start. A region placed right below the
 * lowest one (picked 0) starts at its start: its address follows from
 * that region's, as an mmap's from the one before it. */
#ifdef HZ_TEST_CORE
bool hz_region_origin_off;
#endif

static size_t origin_of(uintptr_t picked, size_t granules)
{
	size_t g = (size_t)(picked & (GIB - 1)) / HZ_GRANULE;

#ifdef HZ_TEST_CORE
	if (__atomic_load_n(&hz_region_origin_off, __ATOMIC_RELAXED))
		return 0;
#endif
	return g % (GIB / HZ_GRANULE / 2) % (granules / 2 + 1);
}

int hz_region_map(size_t len, uintptr_t near, struct hz_block_region *r)
{
	size_t granules = len / HZ_GRANULE;
	size_t bytes = hz_block_region_table_bytes(granules);
	uintptr_t start, picked;
	void *tables;
	int ret;

	/* Out of band, and never through malloc: we may be malloc. */
	ret = hz_prim_mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0,
			   &tables);
	if (ret != 0)
		return ret;
	ret = place(len, near, &start, &picked);
	if (ret != 0) {
		hz_prim_munmap(tables, bytes);
		return ret;
	}
	hz_prim_name_mapping((void *)start, len, "hugezero-reserve");
	r->range = hz_range_make(start, len);
	r->meta = tables;
	r->used = (uint64_t *)((char *)tables + hz_block_region_meta_bytes(granules));
	r->granules = granules;
	r->origin = origin_of(picked, granules);
	hz_info("reserved %zu GiB of address space at %p for large blocks", len >> 30,
		(void *)start);
	return 0;
}

void hz_region_unmap(const struct hz_block_region *r)
{
	if (hz_prim_munmap((void *)r->range.start, hz_range_len(r->range)) != 0)
		hz_debug("could not unmap the region at %p: it stays reserved, unused",
			 (void *)r->range.start);
	hz_prim_munmap(r->meta, hz_block_region_table_bytes(r->granules));
	hz_info("gave back %zu GiB of address space at %p", hz_range_len(r->range) >> 30,
		(void *)r->range.start);
}

void hz_region_publish(const struct hz_block_region *r, uint8_t id)
{
	for (uintptr_t g = r->range.start >> HZ_REGION_SHIFT; g < r->range.end >> HZ_REGION_SHIFT;
	     g++)
		__atomic_store_n(&hz_region_of_gib[g], id, __ATOMIC_RELEASE);
}

/* ---- the table (callers hold the blocks lock) ---- */

size_t hz_blocks_reservation_size(void)
{
	uint64_t size = hz_option_u64(HZ_OPT_RESERVE);
	uint64_t limit = hz_prim_address_space_limit();

	/* Leave the program at least half of what RLIMIT_AS allows. */
	if (limit != UINT64_MAX && size > limit / 2)
		size = hz_align_down(limit / 2, HZ_ALIGN_MAX);
	return (size_t)hz_align_down(size, HZ_ALIGN_MAX);
}

/* hz_reservation: the hull of the regions (under the lock). */
void hz_region_update_hull(void)
{
	struct hz_range hull = { 0, 0 };

	for (size_t k = 0; k < HZ_REGIONS_MAX; k++) {
		struct hz_range r = hz_block_regions[k].range;

		if (hz_range_empty(r))
			continue;
		if (hz_range_empty(hull) || r.start < hull.start)
			hull.start = r.start;
		if (r.end > hull.end)
			hull.end = r.end;
	}
	__atomic_store_n(&hz_reservation.start, hull.start, __ATOMIC_RELAXED);
	__atomic_store_n(&hz_reservation.end, hull.end, __ATOMIC_RELEASE);
}

/* A free slot and where to place the next region (the lowest start), under
 * the lock; -ENOSPC when the table is full. */
int hz_region_free_slot(size_t *slot, uintptr_t *near)
{
	int ret = -ENOSPC;

	*near = 0;
	for (size_t k = 0; k < HZ_REGIONS_MAX; k++) {
		struct hz_range r = hz_block_regions[k].range;

		if (hz_range_empty(r)) {
			if (ret != 0)
				*slot = k;
			ret = 0;
		} else if (*near == 0 || r.start < *near) {
			*near = r.start;
		}
	}
	return ret;
}

/* The size of the next region for a block of need bytes: 1 GiB, or what
 * the block needs, or a quarter of what is held (so that 64 slots reach
 * 64 TiB), within the cap. 0 when the cap leaves no room for the block. */
size_t hz_region_next_size(size_t need, size_t held_now, size_t cap)
{
	size_t size = hz_align_up(need, HZ_ALIGN_MAX);

	if (size > cap || held_now > cap - size)
		return 0;
	if (size < held_now / 4)
		size = hz_align_down(held_now / 4, HZ_ALIGN_MAX);
	if (size > cap - held_now)
		size = hz_align_up(need, HZ_ALIGN_MAX);
	return size;
}

bool hz_blocks_touches(struct hz_range r)
{
	uintptr_t g = r.start >> HZ_REGION_SHIFT;

	if (hz_range_empty(r))
		return false;
	for (; g <= (r.end - 1) >> HZ_REGION_SHIFT && g < HZ_REGION_GIBS; g++)
		if (__atomic_load_n(&hz_region_of_gib[g], __ATOMIC_ACQUIRE) != 0)
			return true;
	return false;
}

