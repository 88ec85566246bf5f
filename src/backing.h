/* Huge-page backing for a range of the reservation: hugetlb 1 GiB, hugetlb
 * 2 MiB, THP or 4 KiB pages, in HUGEZERO_BACKING's order with fallback. */
#ifndef HZ_BACKING_H
#define HZ_BACKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hz_backing {
	HZ_BACKING_HUGETLB1G,
	HZ_BACKING_HUGETLB2M,
	HZ_BACKING_THP,
	HZ_BACKING_SMALL, /* 4 KiB pages */
	HZ_BACKING_COUNT
};

/* Page size of a backing. */
size_t hz_backing_page(enum hz_backing b);

/* The backing HUGEZERO_BACKING asks for, the first hz_backing_map tries
 * (it falls back from there when the hugetlb pool or cgroup is short, or
 * THP is unusable). The same for every size: the caller aligns and rounds
 * the block to hz_backing_page() of the result. */
enum hz_backing hz_backing_first(void);

/* 1 when MADV_HUGEPAGE memory gets THP in this process now: THP is not
 * "never" in sysfs and the process has not disabled it with
 * prctl(PR_SET_THP_DISABLE); else 0. */
int hz_backing_thp_usable(void);

/* Whether a block on 4 KiB pages may be advised THP after its start:
 * HUGEZERO_BACKING is not none (4 KiB pages only), and THP is usable. */
bool hz_backing_thp_allowed(void);

/* Whether a fresh huge page faults at least as fast as 4 KiB pages here,
 * for len bytes of fresh memory about to be advised (or collapsed):
 * measured on a scratch page, again once HZ_GUESS_MAX bytes were decided
 * on since (backing_fresh.c); true with HUGEZERO_THP_CHECK=0. Advice on
 * fresh memory pays only then. */
bool hz_backing_fresh_thp_fast(size_t len);

/* Fault the program's 2 MiB page at page (2 MiB aligned), just advised
 * THP, untouched and about to be written, and time it on the calling
 * thread's CPU clock: one of the library's fresh huge pages each time some
 * are advised (a window of pieces, an mmap or a block of a class used
 * densely, the rest of a block written densely, glibc's heap:
 * backing_fresh.c). Returns 1 when it faulted at least as fast as 4 KiB
 * pages, 0 when slower, and then hz_backing_fresh_thp_fast is false from
 * now on in this process; -1 when nothing was timed (HUGEZERO_THP_CHECK=0,
 * HUGEZERO_POPULATE=1, part of the page resident already, the page
 * faulted in by the program meanwhile, or the fault failed). */
int hz_backing_time_fresh_page(uintptr_t page);

#ifdef HZ_TEST_CORE
/* Tests: no page of the program's own seen slow yet, each one timed from
 * now on ns longer (a slow host), and with alone, the verdict from those
 * pages alone (no scratch page: fast until one is seen slow). */
void hz_backing_test_own_pages(bool alone, uint64_t ns);
#endif

/* A block of the regions, which may start on 4 KiB pages and get huge
 * pages once written densely (backing.c). */
struct hz_lazy_block {
	/* Bytes from start the program asked for (the rest of the last 2 MiB
	 * is rounding, never worth a huge page). */
	size_t used;
	/* The whole block's length, whose size class's evidence may give it
	 * huge pages at once: a grown block's tail (blocks.h) is mapped
	 * apart, but it is that block's. */
	size_t block_len;
};

/* Map [start, start + len) read-write over the reservation, trying want and
 * then each smaller backing. start and len are multiples of want's page.
 * The memory is zero. lazy: a block of the regions (above); NULL for
 * jemalloc's extents, which get what they ask for. Returns 0 and the
 * backing used, or a negative errno value with the reservation intact;
 * -EEXIST when a failed mapping left a hole that another mapping took part
 * of (hz_prim_commit): the range is not ours any more, and must never be
 * mapped over. Memory goes back with hz_blocks_drop_memory (blocks.h). */
int hz_backing_map(uintptr_t start, size_t len, enum hz_backing want,
		   const struct hz_lazy_block *lazy, enum hz_backing *got);

/* Whether fresh memory here starts on 4 KiB pages and earns huge pages
 * once written densely (below, "lazy huge pages"): the auto backing, THP
 * usable and in "madvise" mode, LAZY_THP on and POPULATE off. The jemalloc
 * hooks ask it for the preload's regions. */
bool hz_backing_lazy(void);

/* Who watches a block that starts on 4 KiB pages, to give it huge pages
 * once it is written densely (the promoter, through the pre-zero thread),
 * told the block's start and the bytes the program uses: installed once by
 * the layer that composes the two (recycle.c), so that the backing calls
 * nothing above it. NULL, as at start: nobody watches. */
void hz_backing_on_lazy(void (*watch)(uintptr_t start, size_t len));

/* The backing's name in messages and the stats ("hugetlb1g", "thp", "4k"),
 * "?" if none. */
const char *hz_backing_name(enum hz_backing b);

/* Name [start, start + len) in /proc/PID/maps for memory of backing b
 * ("hugezero-thp", "hugezero-4k"; hugetlb mappings cannot be named).
 * Kernels without CONFIG_ANON_VMA_NAME keep mappings unnamed. */
void hz_backing_name_mapping(uintptr_t start, size_t len, enum hz_backing b);

#endif /* HZ_BACKING_H */
