/* What the program does to its blocks, as the preload's interposers see
 * it, without a lock: the foreign marks of blocks.h, a byte per granule
 * in its region's metadata, and its own MADV_HUGEPAGE over a block. */
#include "blocks.h"

#include <sys/mman.h>

#include "backing.h"
#include "blocks_impl.h"
#include "blocks_view.h"
#include "prim/prim.h"
#include "range.h"
#include "stats.h"

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
			uintptr_t gib = (uintptr_t)1 << HZ_REGION_SHIFT;
			uintptr_t next = hz_align_down(a, gib) + gib;

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

/* The program's MADV_HUGEPAGE covers a block from inside its first 2 MiB
 * to at most its end: numpy advises each array of 4 MiB or more from the
 * first page boundary past its pointer to its last byte. Advice on part
 * of a 2 MiB page leaves that page on 4 KiB pages (the kernel maps a huge
 * page only where one mapping covers all of it), so the block's first and
 * last 2 MiB, and the rest of the block after the program's range,
 * faulted 4 KiB pages: 36 k faults more in a pandas run, and three
 * mappings for each block. The rounding around the program's bytes is
 * the block's own. */
bool hz_blocks_advise_huge(uintptr_t start, size_t len)
{
	uintptr_t first = start & ~(uintptr_t)(HZ_GRANULE - 1);
	struct hz_block_region *in = hz_blocks_region_of(first);
	struct block_meta *m;
	size_t bytes;

	if (len == 0 || start % HZ_SZ_4K != 0 || !in || hz_range_empty(in->range) ||
	    first < in->range.start || first >= in->range.end)
		return false;
	m = &in->meta[hz_region_index(in, first)];
	/* After the lookup: a prctl, which advice outside our blocks skips. */
	if (!__atomic_load_n(&m->live, __ATOMIC_ACQUIRE) || m->backing != HZ_BACKING_SMALL ||
	    !hz_backing_thp_allowed())
		return false;
	bytes = (size_t)m->granules * HZ_GRANULE;
	/* Advice short of the block's last 2 MiB is the program's alone: one
	 * page at a block's head turned a 256 MiB block written once every
	 * 2 MiB into 256 MiB of huge pages. A part the program changed (a
	 * guard, its own mapping) is its own too. */
	if (len > bytes || start - first > bytes - len ||
	    start - first + len <= bytes - HZ_GRANULE || hz_blocks_foreign_range(first, bytes) ||
	    hz_prim_madvise((void *)first, bytes, MADV_HUGEPAGE) != 0)
		return false;
	/* Now a THP block: its reuse and release judge it as one (mincore
	 * cannot tell a sparse use of huge pages from a dense one). */
	m->backing = HZ_BACKING_THP;
	hz_backing_name_mapping(first, bytes, HZ_BACKING_THP);
	hz_stats_add(thp_program_advised, 1);
	return true;
}
