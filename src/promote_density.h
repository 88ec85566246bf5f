/* Which 2 MiB pages of a range are dense enough to collapse: the
 * promoter's (promote.c) one question to the page tables.
 *
 * A 2 MiB page is dense when at most HZ_PROMOTE_DENSE_MISSING of its 512
 * 4 KiB pages are not resident (mincore, or PAGEMAP_SCAN: prim/memory.h),
 * so a collapse adds at most 6% to the RSS of what it collapses, and a
 * sparse table (a page in every few MiB: tests/hostile/sparse.c, xz's
 * match finder) is never collapsed. */
#ifndef HZ_PROMOTE_DENSITY_H
#define HZ_PROMOTE_DENSITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 32 of 512 pages (6%) may be missing: random updates fill a table's pages
 * unevenly, and requiring all 512 would leave a 4 GiB table touched 5 M
 * times almost entirely on 4 KiB pages (each page resident with
 * probability 0.993, all 512 of a range with 0.03). */
#define HZ_PROMOTE_DENSE_MISSING 32
/* 2 MiB pages asked about at once at most (8 GiB): a count each on the
 * stack. */
#define HZ_PROMOTE_DENSE_MAX 4096

/* Whether every 2 MiB page of [start, start + n 2 MiB pages) is dense,
 * n at most HZ_PROMOTE_DENSE_MAX, start 2 MiB aligned. Returns 0, or
 * -ENOMEM for a hole (the range is not all mapped: *yes is false). */
int hz_promote_dense(uintptr_t start, size_t n, bool *yes);

#endif /* HZ_PROMOTE_DENSITY_H */
