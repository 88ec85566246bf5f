/* The sizes every module speaks of, defined once: the page and huge-page
 * sizes of x86_64 and arm64 (4 KiB base pages), the cache line, and the
 * nanoseconds of a second; the share of a range that is sparse use; and the
 * size class. */
#ifndef HZ_SIZES_H
#define HZ_SIZES_H

#include <stddef.h>

#define HZ_KIB ((size_t)1 << 10)
#define HZ_MIB ((size_t)1 << 20)
#define HZ_GIB ((size_t)1 << 30)

/* The base page, the contiguous-PTE folio (arm64's contpte, the smallest
 * mTHP size exec text uses), the PMD huge page and the PUD huge page. */
#define HZ_SZ_4K (4 * HZ_KIB)
#define HZ_SZ_64K (64 * HZ_KIB)
#define HZ_SZ_2M (2 * HZ_MIB)
#define HZ_SZ_1G HZ_GIB

/* 64 bytes: the line of every x86_64 and arm64 core the clearing kernels
 * run on (the line-sized stores and CLZERO assume it). */
#define HZ_CACHE_LINE ((size_t)64)

/* A 16th: the share of a range under which its use is sparse. A freed
 * block used less is dropped, not cleared (zero.c); a 2 MiB page missing
 * no more of its 4 KiB pages is dense, and a strided writer's pages must
 * each hold as many before they are collapsed, which then multiplies
 * their RSS by 16 at most (promote_density.h). */
#define HZ_SPARSE_DIV 16
/* So many of a 2 MiB page's 512 4 KiB pages: 32. */
#define HZ_SPARSE_PAGES (HZ_SZ_2M / HZ_SZ_4K / HZ_SPARSE_DIV)

#define HZ_NS_PER_SEC 1000000000ull
#define HZ_NS_PER_MS 1000000ull

/* The size class of bytes, the floor of its log2 (0 for 0): what the
 * cache, the promoter and the ledger (classes.h) keep their counts per. */
static inline unsigned hz_size_class(size_t bytes)
{
	return bytes ? 63u - (unsigned)__builtin_clzll((unsigned long long)bytes) : 0;
}

#endif /* HZ_SIZES_H */
