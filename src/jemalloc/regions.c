/* The region table and the page bookkeeping. See regions.h. */
#include "regions.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "bitmap.h"
#include "log.h"
#include "prim/memory.h"
#include "prim/prim.h"

/* 1024 regions: new regions are at least an eighth of what is mapped
 * (extents.c), so even 1024 regions of the 64 MiB minimum would be 64 GiB,
 * the default HUGEZERO_RESERVE. */
#define MAX_REGIONS 1024

struct hz_region hz_regions[MAX_REGIONS];
unsigned hz_region_count;
struct hz_regions_totals hz_regions_totals;

/* ---- mapping (no lock) ---- */

/* A region is its own mapping, outside the reservation that hz_blocks
 * carves the preload's blocks from: under libhugezero-preload.so, free(p)
 * takes every pointer inside that reservation for a preload block, and a
 * program may free() what it got from a hooked arena (jemalloc allows it).
 * So regions go straight to the backing layer: a PROT_NONE reservation of
 * their own, aligned, with huge-page memory mapped over it. */
static int map_memory(size_t *len, size_t align, bool lazy, uintptr_t *start,
		      enum hz_backing *got)
{
	enum hz_backing want = lazy ? HZ_BACKING_SMALL : hz_backing_first();
	size_t unit = hz_backing_page(want) > HZ_SZ_2M ? hz_backing_page(want) : HZ_SZ_2M;
	void *mem;
	int ret;

	if (align < unit)
		align = unit;
	if (align > SIZE_MAX / 4 || *len > SIZE_MAX / 4)
		return -ENOMEM;
	*len = hz_align_up(*len, unit);
	if (hz_prim_reserve(*len, align, &mem) != 0)
		return -ENOMEM;
	ret = hz_backing_map((uintptr_t)mem, *len, want, NULL, got);
	if (ret == -EEXIST) {
		/* Unmapping the region would unmap the other mapping in it. */
		hz_debug("jemalloc: %zu MiB region at %p holds a mapping not ours: left unused",
			 *len >> 20, mem);
		return -ENOMEM;
	}
	if (ret != 0) {
		hz_prim_munmap(mem, *len);
		return -ENOMEM;
	}
	*start = (uintptr_t)mem;
	return 0;
}

int hz_regions_map(unsigned arena, size_t size, size_t align, size_t min_len, bool lazy,
		   struct hz_region *r)
{
	size_t len = size > min_len ? size : min_len, words;
	uintptr_t start;
	void *maps;

	if (map_memory(&len, align, lazy, &start, &r->backing) != 0)
		return -ENOMEM;
	r->lazy = lazy;
	words = (len / HZ_SZ_4K + 63) / 64;
	/* Out of band, never in memory a program can scribble on, and never
	 * through malloc: the hooks run inside jemalloc. */
	r->map_bytes = hz_align_up(2 * words * sizeof(uint64_t), HZ_SZ_4K);
	if (hz_prim_mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &maps) != 0) {
		hz_prim_munmap((void *)start, len);
		return -ENOMEM;
	}
	r->range = hz_range_make(start, len);
	r->free_map = maps;
	r->dirty_map = r->free_map + words;
	r->free_pages = hz_region_pages(r);
	r->dirty_pages = 0;
	r->idle_since = 0;
	r->dirty_since = 0;
	r->arena = arena;
	hz_bits_set(r->free_map, 0, hz_region_pages(r), true); /* fresh: free and zero */
	hz_debug("jemalloc arena %u: new %zu MiB region at %p (%s)", arena, len >> 20,
		 (void *)start,
		 lazy ? "4 KiB pages, huge where written densely"
		 : r->backing == HZ_BACKING_SMALL ? "4 KiB pages" : "huge pages");
	return 0;
}

void hz_regions_unmap(const struct hz_region *r)
{
	/* The whole mapping: hugetlb lengths are whole pages by construction. */
	hz_prim_munmap((void *)r->range.start, hz_range_len(r->range));
	hz_prim_munmap(r->free_map, r->map_bytes);
}

/* ---- the table ---- */

struct hz_region *hz_regions_find(uintptr_t a)
{
	unsigned lo = 0, hi = hz_region_count;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		struct hz_region *r = &hz_regions[mid];

		if (a < r->range.start)
			hi = mid;
		else if (a >= r->range.end)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

int hz_regions_insert(const struct hz_region *n)
{
	unsigned i = 0;

	if (hz_region_count == MAX_REGIONS)
		return -ENOMEM;
	while (i < hz_region_count && hz_regions[i].range.start < n->range.start)
		i++;
	memmove(&hz_regions[i + 1], &hz_regions[i],
		(hz_region_count - i) * sizeof(hz_regions[0]));
	hz_regions[i] = *n;
	hz_region_count++;
	hz_regions_totals.mapped_bytes += hz_range_len(n->range);
	return 0;
}

struct hz_region hz_regions_take_out(struct hz_region *r)
{
	struct hz_region out = *r;
	unsigned i = (unsigned)(r - hz_regions);

	memmove(&hz_regions[i], &hz_regions[i + 1],
		(hz_region_count - i - 1) * sizeof(hz_regions[0]));
	hz_region_count--;
	hz_regions_totals.mapped_bytes -= hz_range_len(out.range);
	hz_regions_totals.dirty_bytes -= out.dirty_pages * HZ_SZ_4K;
	return out;
}

/* ---- pages ---- */

static bool fit_in(const struct hz_region *r, size_t n, size_t align, size_t *first)
{
	size_t i = 0, pages = hz_region_pages(r);

	for (;;) {
		uintptr_t at;
		size_t used;

		i = hz_bits_find(r->free_map, i, pages, true);
		if (i == pages)
			return false;
		at = hz_align_up(r->range.start + i * HZ_SZ_4K, align);
		if (at >= r->range.end || n > (r->range.end - at) / HZ_SZ_4K)
			return false;
		i = hz_region_page_of(r, at);
		used = hz_bits_find(r->free_map, i, i + n, false);
		if (used == i + n) {
			*first = i;
			return true;
		}
		i = used + 1;
	}
}

struct hz_region *hz_regions_fit(unsigned arena, size_t n, size_t align, size_t *first)
{
	for (unsigned k = 0; k < hz_region_count; k++) {
		struct hz_region *r = &hz_regions[k];

		if (r->arena == arena && r->free_pages >= n && fit_in(r, n, align, first))
			return r;
	}
	return NULL;
}

/* Page index of the start of [first, first + n) moved down to align, or
 * SIZE_MAX when that leaves the region or any page of it is not free. */
static size_t placed(const struct hz_region *r, size_t first, size_t n, size_t align)
{
	uintptr_t at = hz_align_down(r->range.start + first * HZ_SZ_4K, align);
	size_t i;

	if (at < r->range.start)
		return SIZE_MAX;
	i = hz_region_page_of(r, at);
	if (n > hz_region_pages(r) - i || !hz_regions_all_free(r, i, n))
		return SIZE_MAX;
	return i;
}

/* The placement of n pages in r that covers the most dirty pages: one
 * that starts where a dirty run starts, or ends where one ends, among the
 * first *runs dirty runs (counted down: the lock is held, and a map of
 * scattered dirty pages would otherwise cost milliseconds per extent). */
static size_t most_dirty_in(const struct hz_region *r, size_t n, size_t align, size_t *first,
			    unsigned *runs)
{
	size_t i = 0, pages = hz_region_pages(r), best = 0;

	while (*runs > 0 && (i = hz_bits_find(r->dirty_map, i, pages, true)) < pages) {
		size_t j = hz_bits_find(r->dirty_map, i, pages, false);
		size_t at[2] = { placed(r, i, n, align), j >= n ? placed(r, j - n, n, align) : SIZE_MAX };

		for (int k = 0; k < 2; k++) {
			size_t covered = at[k] == SIZE_MAX ? 0 : hz_bits_count(r->dirty_map, at[k], n);

			if (covered > best) {
				best = covered;
				*first = at[k];
			}
		}
		if (best == n)
			break;
		(*runs)--;
		i = j;
	}
	return best;
}

struct hz_region *hz_regions_fit_dirty(unsigned arena, size_t n, size_t align, size_t *first)
{
	struct hz_region *best = NULL;
	unsigned runs = HZ_REGION_RUNS;
	size_t most = 0;

	for (unsigned k = 0; k < hz_region_count && most < n && runs > 0; k++) {
		struct hz_region *r = &hz_regions[k];
		size_t at, covered;

		if (r->arena != arena || r->dirty_pages <= most || r->free_pages < n)
			continue;
		covered = most_dirty_in(r, n, align, &at, &runs);
		if (covered > most) {
			most = covered;
			best = r;
			*first = at;
		}
	}
	return best;
}

bool hz_regions_all_free(const struct hz_region *r, size_t first, size_t n)
{
	return hz_bits_count(r->free_map, first, n) == n;
}

bool hz_regions_any_free(const struct hz_region *r, size_t first, size_t n)
{
	return hz_bits_find(r->free_map, first, first + n, true) != first + n;
}

void hz_region_runs_add(struct hz_region_runs *d, struct hz_range run)
{
	if (d->count < HZ_REGION_RUNS)
		d->run[d->count++] = run;
	else
		d->run[HZ_REGION_RUNS - 1].end = run.end; /* one span for the rest */
}

void hz_regions_claim(struct hz_region *r, size_t first, size_t n,
		      struct hz_region_runs *d)
{
	size_t i = first, end = first + n, dirty = hz_bits_count(r->dirty_map, first, n);

	d->count = 0;
	while ((i = hz_bits_find(r->dirty_map, i, end, true)) < end) {
		size_t j = hz_bits_find(r->dirty_map, i, end, false);

		hz_region_runs_add(d, hz_region_run(r, i, j));
		i = j;
	}
	hz_bits_set(r->free_map, first, n, false);
	hz_bits_set(r->dirty_map, first, n, false);
	r->free_pages -= n;
	r->dirty_pages -= dirty;
	hz_regions_totals.dirty_bytes -= dirty * HZ_SZ_4K;
}

void hz_regions_unclaim(struct hz_region *r, size_t first, size_t n, bool dirty,
			uint64_t now)
{
	hz_bits_set(r->free_map, first, n, true);
	if (dirty) {
		hz_bits_set(r->dirty_map, first, n, true);
		r->dirty_pages += n;
		r->dirty_since = now;
		hz_regions_totals.dirty_bytes += n * HZ_SZ_4K;
	}
	r->free_pages += n;
	if (hz_region_empty(r))
		r->idle_since = now;
}

void hz_regions_mark_dirty(struct hz_region *r, struct hz_range run, uint64_t now)
{
	size_t first = hz_region_page_of(r, run.start), n = hz_range_len(run) / HZ_SZ_4K;
	size_t clean = n - hz_bits_count(r->dirty_map, first, n);

	hz_bits_set(r->dirty_map, first, n, true);
	r->dirty_pages += clean;
	r->dirty_since = now;
	hz_regions_totals.dirty_bytes += clean * HZ_SZ_4K;
}

size_t hz_regions_claim_dirty(struct hz_region *r, struct hz_region_runs *out, size_t most)
{
	size_t i = 0, pages = hz_region_pages(r), claimed = 0;

	while (out->count < HZ_REGION_RUNS && claimed < most &&
	       (i = hz_bits_find(r->dirty_map, i, pages, true)) < pages) {
		size_t j = hz_bits_find(r->dirty_map, i, pages, false);

		if (j - i > most - claimed)
			j = i + (most - claimed);
		claimed += j - i;

		hz_bits_set(r->free_map, i, j - i, false);
		hz_bits_set(r->dirty_map, i, j - i, false);
		r->free_pages -= j - i;
		r->dirty_pages -= j - i;
		hz_regions_totals.dirty_bytes -= (j - i) * HZ_SZ_4K;
		out->run[out->count++] = hz_region_run(r, i, j);
		i = j;
	}
	return claimed;
}
