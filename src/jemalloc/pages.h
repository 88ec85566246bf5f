/* Making ranges of the hooks' regions read zero, or giving their memory
 * back, by the region's backing. Every range is 4 KiB aligned; it may start
 * and end inside a huge page.
 *
 * The rules, from the kernel's behaviour:
 *  - MADV_DONTNEED on part of a transparent huge page splits it; on hugetlb
 *    it rounds the length up to whole huge pages and would zap a live
 *    neighbour. So only whole, aligned transparent huge pages are ever
 *    dropped; partial ones and hugetlb pages are cleared by writing.
 *  - MADV_FREE fails on hugetlb and, on part of a huge page, splits it.
 *  - Dropping only zeroes when the kernel really does it (under some
 *    emulators it does not): a probe checks once. */
#ifndef HZ_JEMALLOC_PAGES_H
#define HZ_JEMALLOC_PAGES_H

#include <stddef.h>
#include <stdint.h>

#include "backing.h"
#include "regions.h"

/* Make [start, start + len) read zero, paying only for resident pages and
 * keeping densely used pages mapped (hz_zero_range per huge-page-aligned
 * piece). The page holding hint is cleared last, so it is in the cache. */
void hz_pages_zero(enum hz_backing b, uintptr_t start, size_t len, uintptr_t hint);

/* Make [start, start + len) read zero and give back the memory that can be:
 * whole aligned huge pages (or 4 KiB pages) are dropped, the rest cleared. */
void hz_pages_purge(enum hz_backing b, uintptr_t start, size_t len);

/* MADV_FREE the whole huge pages (4 KiB pages on a 4 KiB backing) inside
 * the range. Returns 0, or a negative errno value when nothing was freed
 * (-ENOTSUP on hugetlb, -EINVAL when no whole page lies inside). */
int hz_pages_free_lazily(enum hz_backing b, uintptr_t start, size_t len);

/* The runs of [start, start + len) that may hold data, into *data: on 4
 * KiB or transparent huge pages, its resident (or swapped) pages, when
 * PAGEMAP_SCAN tells them apart (the rest reads zero: nothing touched it);
 * else all of it. Only they need zeroing when handed out again for a
 * zeroed request, and they are charged as the cache's memory, so an
 * extent the program used sparsely costs the cache what it holds. Past
 * HZ_REGION_RUNS runs, the last one covers the rest. */
void hz_pages_data(enum hz_backing b, uintptr_t start, size_t len, struct hz_region_runs *data);

#endif /* HZ_JEMALLOC_PAGES_H */
