/* Which 2 MiB pages of a range are dense enough to collapse: the
 * promoter's (promote_collapse.c) one question to the page tables.
 *
 * A 2 MiB page is dense when at most HZ_SPARSE_PAGES (sizes.h) of its 512
 * 4 KiB pages are not resident (mincore, or PAGEMAP_SCAN: prim/memory.h),
 * so a collapse adds at most 6% to the RSS of what it collapses, and a
 * sparse table (a page in every few MiB: tests/hostile/sparse.c, xz's
 * match finder) is never collapsed. */
#ifndef HZ_PROMOTE_DENSITY_H
#define HZ_PROMOTE_DENSITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sizes.h"

/* 32 of 512 pages (6%, HZ_SPARSE_PAGES) may be missing: random updates
 * fill a table's pages unevenly, and requiring all 512 would leave a 4 GiB
 * table touched 5 M times almost entirely on 4 KiB pages (each page
 * resident with probability 0.993, all 512 of a range with 0.03). */
/* 2 MiB pages asked about at once at most (8 GiB): a count each on the
 * stack. */
#define HZ_PROMOTE_DENSE_MAX 4096

/* Whether a 2 MiB page holding resident 4 KiB pages is whole: at most
 * HZ_SPARSE_PAGES of them missing. */
static inline bool hz_promote_page_whole(uint16_t resident)
{
	return HZ_SZ_2M / HZ_SZ_4K - resident <= HZ_SPARSE_PAGES;
}

/* Whether every 2 MiB page of [start, start + n 2 MiB pages) is dense,
 * n at most HZ_PROMOTE_DENSE_MAX, start 2 MiB aligned. Returns 0, or
 * -ENOMEM for a hole (the range is not all mapped: *yes is false). */
int hz_promote_dense(uintptr_t start, size_t n, bool *yes);

/* ---- the first touches of a range ----
 *
 * A fresh range faults 4 KiB pages; on this kind of VM each costs 10-19
 * us, where a fresh 2 MiB page costs about 0.15 ms, so a range written
 * densely runs its faults 30-60 times faster once THP is advised on the
 * part not yet touched. Advice costs nothing where the program goes on
 * writing densely, and at most the one 2 MiB page it stops in otherwise.
 * So the promoter looks at a new range's residency every few ms and
 * judges it by the 2 MiB pages touched so far:
 *  - dense: at least one is whole (HZ_SPARSE_PAGES missing) and at most
 *    HZ_FRONT_EDGES more are partly written, the edges a sequential
 *    writer (or one per thread) is filling now: advise THP from the page
 *    after the last one touched (the frontier) to the end, and below the
 *    first one touched (a writer going down: promote_first.c);
 *  - sparse: more partly written pages than that, and more than whole
 *    ones (random updates over a table, xz's match finder): leave it to
 *    the collapse of dense pages later;
 *  - else wait for more writes. */
enum hz_front {
	HZ_FRONT_WAIT,
	HZ_FRONT_DENSE,
	HZ_FRONT_SPARSE,
};

/* A writer per thread: the edges being filled at once, in pages. */
#define HZ_FRONT_EDGES 2

/* The verdict on n 2 MiB pages of which resident[i] 4 KiB pages are
 * resident; when dense, *frontier is the first page to advise (n when
 * every page was touched). Pure: the rule above. */
enum hz_front hz_promote_front_judge(const uint16_t *resident, size_t n, size_t *frontier);

/* The same for [start, start + n 2 MiB pages) as the page tables have it
 * now, counted in resident[n] (the caller's: the promoter's thread has the
 * stack for 8 GiB of counts, a program thread in mmap asks about less).
 * Returns 0, or -ENOMEM for a hole (the range is not all mapped). */
int hz_promote_front(uintptr_t start, size_t n, uint16_t *resident, enum hz_front *verdict,
		     size_t *frontier);

/* ---- a strided writer ----
 *
 * A program may fill a block column by column: ImageMagick writes a
 * resized image so, a pixel of every row, then the next. Each 2 MiB page
 * then holds as many touched 4 KiB pages as rows of the image fall in it,
 * the same count in every page, and the first touches look sparse. Random
 * updates give uneven counts instead, and a program that writes one field
 * of each record gives even ones that never grow. So a range whose pages
 * hold even counts (hz_promote_front_strided), and whose every page holds
 * more at a later look, is being filled: its pages are collapsed at once
 * (promote_first.c), where THP advice cannot help a page already touched.
 * Each page must hold HZ_SPARSE_PAGES (sizes.h) first, so a collapse at
 * most multiplies the RSS of what it collapses by 16: stacks of 1 MiB in
 * one block, each touched a page or two deeper at a time, stay on 4 KiB
 * pages. */

/* The count of the 2 MiB pages of resident[n] below which only
 * HZ_FRONT_EDGES of them fall (the pages a writer per thread is in now),
 * among the touched ones (touched) or all. 0 when too few are counted. */
uint16_t hz_promote_front_level(const uint16_t *resident, size_t n, bool touched);

/* Whether resident[n]'s touched pages, but for those below the level,
 * hold even counts, within one page and a 16th (HZ_SPARSE_PAGES of 512)
 * of each other, and at least HZ_SPARSE_PAGES: HZ_FRONT_DENSE
 * when they do, HZ_FRONT_SPARSE when they do not, HZ_FRONT_WAIT while too
 * few pages are touched or reach the level to tell (a writer's first
 * pass, part way). *level: the touched pages' level. Pure. */
enum hz_front hz_promote_front_strided(const uint16_t *resident, size_t n, uint16_t *level);

/* ---- a range the program has moved on from ----
 *
 * The evidence a range leaves for the next of its size (preload/mmap.c,
 * preload/pieces.c), read once the program maps that next one. The range
 * is counted in units of 2 MiB, or as one unit when smaller; a unit is
 * whole when at most its share of HZ_SPARSE_PAGES is missing.
 * Huge pages over it would have cost the missing pages of every unit
 * touched, so it is:
 *  - dense: a unit is whole, and at most one other is touched in part
 *    (where the program stopped writing);
 *  - sparse: touched in any other way;
 *  - no evidence (HZ_FRONT_WAIT): untouched, or unmapped since. */

/* The verdict on [start, start + len) as the page tables have it now,
 * start and len 4 KiB aligned, counted in resident[units] (the caller's,
 * as for hz_promote_front): on its first units units, less a tail past
 * its last whole 2 MiB. */
enum hz_front hz_promote_used(uintptr_t start, size_t len, uint16_t *resident, size_t units);

#endif /* HZ_PROMOTE_DENSITY_H */
