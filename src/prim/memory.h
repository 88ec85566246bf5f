/* Memory operations with a meaning, built on the raw calls of prim.h:
 * reserve address space, commit memory over a reservation and decommit it,
 * put a reservation back into a hole, map at an aligned address, read
 * residency, and probe what the kernel's discard does. The rest of hugezero
 * asks for these instead of combining mmap, munmap, madvise and mincore
 * itself, so each sequence, and its failure handling, is written once.
 *
 * Every system call inside goes through prim.h's functions, so fault
 * injection (fault.h) can make each of them fail on its own, also in the
 * middle of an operation (a trim, a put-back). Conventions as in prim.h:
 * 0 or a negative errno value, and errno never changed. */
#ifndef HZ_PRIM_MEMORY_H
#define HZ_PRIM_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "range.h"

/* ---- map aligned ---- */

/* What hz_prim_map_aligned does when a trim fails: unmapping the head or
 * tail splits the mapping, which the kernel refuses at vm.max_map_count. */
enum hz_trim {
	HZ_TRIM_BEST_EFFORT, /* succeed anyway: the untrimmed piece stays mapped, unused */
	HZ_TRIM_OR_FAIL,     /* unmap all of it and fail: nothing is left behind */
};

/* Map len bytes at an address congruent to congruent modulo align (a power
 * of two, 4 KiB or more): aligned to align when congruent is 0. Maps
 * len + align bytes and unmaps the head and the tail around the address.
 * prot and flags are mmap's, without MAP_FIXED; no file (fd -1). Returns 0
 * with *out set, or a negative errno value with nothing mapped. */
int hz_prim_map_aligned(size_t len, size_t align, uintptr_t congruent, int prot,
			int flags, enum hz_trim trim, void **out);

/* ---- reservations ---- */

/* Reserve len bytes of address space at an address aligned to align:
 * PROT_NONE and MAP_NORESERVE, so no memory and no commit charge. A failed
 * trim leaves its piece reserved (HZ_TRIM_BEST_EFFORT). */
int hz_prim_reserve(size_t len, size_t align, void **out);

/* hz_prim_reserve, and where the kernel placed the len + align bytes it
 * over-mapped (*picked, set on success): an address with the kernel's
 * mmap randomisation in every bit above the page, which the aligned
 * result has lost below align. */
int hz_prim_reserve_picked(size_t len, size_t align, void **out, uintptr_t *picked);

/* What backs committed memory. */
enum hz_prim_pages {
	HZ_PAGES_HUGETLB_1G, /* hugetlb pool pages, never MAP_NORESERVE: an */
	HZ_PAGES_HUGETLB_2M, /* empty pool fails the commit, not a later fault */
	HZ_PAGES_THP,        /* ordinary memory, advised MADV_HUGEPAGE */
	HZ_PAGES_SMALL,      /* ordinary memory, advised MADV_NOHUGEPAGE */
	HZ_PAGES_DEFAULT,    /* ordinary memory, no advice: the THP mode decides */
};

/* Commit [start, start + len) of a reservation: map read-write, zero-filled
 * private memory over it (MAP_FIXED over our own PROT_NONE range). start
 * and len are multiples of the page size. For THP and SMALL the advice
 * follows; *advised says whether the kernel took it (a refused advice is no
 * error). When the mapping fails, the reservation is put back and the error
 * returned. A failed mmap may have unmapped the range first (kernels before
 * 6.12 always; 6.18 still does when the hugetlb pool cannot back it), so
 * the put-back is made with MAP_FIXED_NOREPLACE: if another thread's
 * mapping (a thread stack, a malloc arena) went into the hole meanwhile, it
 * is left alone, the rest of the range is reserved again, and the result is
 * -EEXIST: the range must never be committed again. */
int hz_prim_commit(uintptr_t start, size_t len, enum hz_prim_pages pages, bool *advised);

/* Commit hugetlb memory (pages HZ_PAGES_HUGETLB_*) over [start, start +
 * len) of a reservation, every page faulted in: mapped elsewhere first,
 * populated with MADV_POPULATE_WRITE, then moved over the range (mremap).
 * A pool or hugetlb cgroup that cannot back a page fails the populate
 * cleanly, where a later first touch would SIGBUS; and the reservation
 * is untouched by a refused mapping (a MAP_FIXED hugetlb mmap the pool
 * cannot back unmaps the range first on Linux 6.18). 0, -EEXIST as for
 * hz_prim_commit, or another negative errno value with the reservation
 * intact (also -EINVAL before Linux 5.14, or where hugetlb mappings cannot
 * be moved). */
int hz_prim_commit_populated(uintptr_t start, size_t len, enum hz_prim_pages pages);

/* Turn committed memory [start, start + len) back into reservation
 * (MAP_FIXED PROT_NONE over our own mapping): its pages go back to the
 * kernel, the address space stays ours. */
int hz_prim_decommit(uintptr_t start, size_t len);

/* Replace committed memory [start, start + len) by fresh read-write
 * zero-fill memory without advice (MAP_FIXED over our own mapping): its
 * pages go back to the kernel as with hz_prim_decommit, but the range
 * stays read-write, so the kernel merges it with read-write neighbours of
 * the same kind where a PROT_NONE range would sit between them as a
 * mapping of its own. It counts in VmData and, without overcommit, in the
 * commit charge. */
int hz_prim_refresh(uintptr_t start, size_t len);

/* Turn [start, start + len), whatever the program made of it, back into
 * plain reservation: a fresh PROT_NONE mapping (MAP_FIXED) replaces every
 * mapping there, and with them every property a mapping carries
 * (protection, protection key, lock, fork and dump advice, KSM, THP
 * advice, guard regions, a userfaultfd registration, a file or shared
 * mapping put over it). Under mlockall(MCL_FUTURE) a new mapping is
 * locked too, and the kernel counts it against RLIMIT_MEMLOCK before it
 * removes the locked one it replaces: so the range is unlocked first and
 * the new mapping after (failures of munlock are ignored: the range may
 * not be locked, or hold a hole). Fails as mmap does, e.g. -EPERM on
 * memory the program sealed (mseal), which then stays as it is. */
int hz_prim_reset_reservation(uintptr_t start, size_t len);

/* Reserve exactly [start, start + len) (PROT_NONE, MAP_NORESERVE) only if
 * nothing is mapped in it: 0, or -EEXIST with nothing mapped (on a kernel
 * that takes MAP_FIXED_NOREPLACE for a hint, the mapping it made
 * elsewhere is undone), or another negative errno value. */
int hz_prim_reserve_exactly(uintptr_t start, size_t len);

/* Reserve [start, start + len) again after its memory was moved away (a
 * plain mremap leaves a hole): MAP_FIXED_NOREPLACE, never MAP_FIXED, so a
 * mapping another thread made in the hole meanwhile survives. Returns 0
 * when all of the range is reserved again; -EEXIST when another mapping
 * holds part of it (every other part is reserved), or another negative
 * errno value when the range could not be reserved. */
int hz_prim_reserve_hole(uintptr_t start, size_t len);

/* Whether every page of [start, start + len) is mapped: mincore fails with
 * ENOMEM on a range holding a page that is not, and madvise(MADV_NORMAL)
 * is asked to confirm it (a range both call a hole is one). Other
 * failures say nothing, and count as mapped. */
bool hz_prim_all_mapped(uintptr_t start, size_t len);

/* How many put-backs (above) found another mapping in the hole, since the
 * start of the process. */
uint64_t hz_prim_holes_taken(void);

/* ---- residency ---- */

/* One maximal run of 4 KiB pages that all hold data (resident), or all
 * not. */
typedef void hz_prim_run_fn(void *ctx, struct hz_range run, bool resident);

/* The residency of [start, start + len) (4 KiB aligned, mapped), as runs in
 * address order, none empty, each passed to fn: hz_prim_residency_scan's
 * runs of data, and the others joined. */
int hz_prim_residency(uintptr_t start, size_t len, hz_prim_run_fn *fn, void *ctx);

/* What a run of pages holds. */
enum hz_prim_res {
	HZ_RES_NONE,      /* not resident: reads zero (unless swapped, see below) */
	HZ_RES_DATA,      /* resident (or swapped out, when exact): may hold data */
	HZ_RES_ZERO_PAGE, /* only read, mapped to the shared zero page: reads zero */
};
typedef void hz_prim_page_fn(void *ctx, struct hz_range run, enum hz_prim_res res);

/* The residency of [start, start + len) (4 KiB aligned, mapped), in one
 * pass, as maximal runs in address order, none empty, each passed to fn.
 * PAGEMAP_SCAN (Linux 6.7, pagemap.h) answers where it can: then *exact is
 * set, pages swapped out come as HZ_RES_DATA and pages on the zero page as
 * HZ_RES_ZERO_PAGE. Elsewhere (an older kernel, no /proc, the ioctl
 * refused, any failure) mincore answers, in one call up to 1 GiB: *exact
 * is false, a page swapped out reads HZ_RES_NONE, and a zero-page page
 * HZ_RES_DATA. A piece holding a page that is not mapped at all (a hole:
 * the program unmapped it, or MADV_DONTFORK left it out of this child)
 * must not be written: the walk stops before it (the runs before it were
 * passed) and -ENOMEM is returned. A piece mincore fails on otherwise
 * counts as resident (its state is unknown, so the caller treats it as
 * used) and the first such error is returned, else 0. */
int hz_prim_residency_scan(uintptr_t start, size_t len, hz_prim_page_fn *fn, void *ctx,
			   bool *exact);

/* ---- what discarding does ---- */

struct hz_prim_discard {
	bool mincore_works;   /* a written page reads resident, an untouched one not */
	bool dontneed_zeroes; /* MADV_DONTNEED makes a written private anonymous
			       * page read zero (under some emulators it does not) */
};

/* Probed once per process on a scratch mapping, the answer then kept.
 * Returns 0, or -ENOMEM when the scratch mapping could not be made
 * (RLIMIT_AS, vm.max_map_count): then nothing is kept, and the next call
 * probes again. */
int hz_prim_probe_discard(struct hz_prim_discard *out);

#endif /* HZ_PRIM_MEMORY_H */

/* ---- collapse (collapse.c) ---- */

/* Collapse the 4 KiB pages of [start, start + len) (2 MiB aligned, mapped,
 * anonymous) into huge pages with MADV_COLLAPSE, synchronously: it copies
 * the pages, keeps the contents, and fills pages never touched with zeros,
 * whatever khugepaged's max_ptes_none says (the caller judges density).
 * A range already on huge pages succeeds at once. Errors as the kernel
 * gives them: -EINVAL where THP is not allowed (before Linux 6.1,
 * MADV_NOHUGEPAGE, prctl(PR_SET_THP_DISABLE), a range that is not one
 * anonymous mapping), -EAGAIN (pages busy, try later), -ENOMEM (no huge
 * page, or a hole), -EBUSY (the memory cgroup's charge failed, or a
 * userfaultfd-armed range holds missing pages). */
int hz_prim_collapse(uintptr_t start, size_t len);

