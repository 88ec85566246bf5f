/* The foreign marks of blocks.h: a byte per granule in its region's
 * metadata, written by the preload's interposers without a lock. */
#include "blocks.h"

#include "blocks_view.h"
#include "range.h"

static int all_foreign;

void hz_blocks_mark_foreign(uintptr_t start, size_t len)
{
	uintptr_t end = len > UINTPTR_MAX - start ? UINTPTR_MAX : start + len;

	/* Release: a free that reads the mark after this store also sees
	 * everything the program did before its call. Addresses in no region
	 * skip to the next GiB (regions are whole GiBs). */
	for (uintptr_t a = start; a < end;) {
		struct hz_block_region *r = hz_blocks_region_of(a);

		if (!r) {
			uintptr_t next = hz_align_down(a, (uintptr_t)1 << HZ_REGION_SHIFT) + ((uintptr_t)1 << HZ_REGION_SHIFT);

			if (next <= a)
				break;
			a = next;
			continue;
		}
		__atomic_store_n(&r->meta[(a - r->range.start) / HZ_GRANULE].foreign, 1,
				 __ATOMIC_RELEASE);
		a = hz_align_down(a, HZ_GRANULE) + HZ_GRANULE;
	}
}

void hz_blocks_all_foreign(bool on)
{
	__atomic_store_n(&all_foreign, on, __ATOMIC_RELEASE);
}

bool hz_blocks_foreign_range(uintptr_t start, size_t len)
{
	struct hz_block_region *r = hz_blocks_region_of(start);

	if (__atomic_load_n(&all_foreign, __ATOMIC_ACQUIRE))
		return true;
	if (!r)
		return false;
	for (uintptr_t a = start; a < start + len; a += HZ_GRANULE)
		if (__atomic_load_n(&r->meta[(a - r->range.start) / HZ_GRANULE].foreign,
				    __ATOMIC_ACQUIRE))
			return true;
	return false;
}

bool hz_blocks_reusable(const struct hz_span *span)
{
	return !hz_blocks_foreign_range(span->range.start, hz_span_bytes(span));
}
