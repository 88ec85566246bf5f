/* PAGEMAP_SCAN (Linux 6.7) on the process's own memory: which pages of a
 * range are present, swapped out, or mapped to the shared zero page, as
 * runs, in one call. memory.c's residency walk uses it where the kernel
 * has it, and mincore otherwise. Conventions as in prim.h. */
#ifndef HZ_PRIM_PAGEMAP_H
#define HZ_PRIM_PAGEMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

/* linux/fs.h's page categories (Linux 6.7). */
#define HZ_PAGE_IS_PRESENT (1u << 3)
#define HZ_PAGE_IS_SWAPPED (1u << 4)
#define HZ_PAGE_IS_PFNZERO (1u << 5)

/* linux/fs.h of Linux 6.7; older headers lack it. The ioctl's number is
 * also the one the pre-zero thread's seccomp filter allows (confine.c). */
struct hz_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define HZ_PAGEMAP_SCAN _IOWR('f', 16, struct hz_pm_scan_arg)

/* linux/fs.h's struct page_region. */
struct hz_prim_page_region {
	uint64_t start, end;
	uint64_t categories; /* of every page in it: HZ_PAGE_IS_* */
};

/* Scan [start, end) (4 KiB aligned): fills vec with at most n regions in
 * address order, every mapped page in one of them, a region's pages all
 * of one category; a gap between regions (or before the first, after the
 * last up to *walk_end) is not mapped. Returns the number of regions, with
 * *walk_end where the scan stopped (end, or earlier when vec was full), or
 * a negative errno value: no fd could be had or kept (see pagemap.c), the
 * kernel lacks the ioctl, or it failed. The caller then uses mincore. */
int hz_prim_pagemap_scan(uintptr_t start, uintptr_t end, struct hz_prim_page_region *vec,
			 size_t n, uintptr_t *walk_end);

/* The fd the scans use now, or -1: for tests (a program that takes its
 * number). */
int hz_prim_pagemap_fd(void);

#endif /* HZ_PRIM_PAGEMAP_H */
