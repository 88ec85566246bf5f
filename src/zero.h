/* Making a used range read zero again, paying only for what its last user
 * touched. */
#ifndef HZ_ZERO_H
#define HZ_ZERO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a range may be zeroed. */
enum hz_zero_how {
	HZ_ZERO_WRITE_ONLY, /* hugetlb: clear resident pages, never drop them */
	HZ_ZERO_ANY,        /* THP or 4 KiB: dropping pages is allowed too */
};

/* Zero [start, start + len) (4 KiB aligned, anonymous private memory),
 * paying for what the last user touched, not for the whole range:
 *  - Pages never touched (not resident) read zero already: an untouched
 *    anonymous page is zero-filled on first access. The exception is a page
 *    swapped out, so when the system has swap those are dropped too.
 *  - Sparse use (HZ_ZERO_ANY and under 1/16 of the pages resident): runs of
 *    256 KiB and more are dropped with MADV_DONTNEED, and the kernel
 *    zero-fills the pages the next user touches (clearing would write whole
 *    huge pages it probably never touches); shorter runs are cleared, which
 *    costs less than their madvise (zero.c). With swap the whole range is
 *    dropped with one call.
 *  - Dense use: runs of resident pages are cleared with hz_clear, which is
 *    faster than the kernel's fault-time clearing and keeps the pages mapped
 *    (on virtual machines, pages given back are slow to get again). Given
 *    a hint (a block about to be used; 0: none), a range that fits in half
 *    the last-level cache (hz_zero_fits_cache) is cleared with cached
 *    stores, wherever the hint lies, and the run holding the hint last, so
 *    it is in the cache; otherwise with non-temporal stores.
 * This relies on mincore and MADV_DONTNEED behaving as on Linux; a start-up
 * probe checks both, and without them the whole range is cleared.
 * A range with a hole (hz_zero_choose) is not written at all.
 * Returns the bytes written. */
size_t hz_zero_range(uintptr_t start, size_t len, uintptr_t hint,
		     enum hz_zero_how how);

/* hz_zero_range in two steps, for callers that act on the choice (the
 * recycler gives sparsely used blocks 4 KiB pages from then on, and densely
 * used ones huge pages). */
enum hz_zero_method {
	HZ_ZERO_DROP,       /* sparse use, under 1/16 resident: long runs dropped */
	HZ_ZERO_CLEAR,      /* dense use (zero.c): runs cleared */
	HZ_ZERO_CLEAR_PART, /* scattered use: runs cleared, not evidence of density */
};

/* Choose how to zero [start, start + len) into *method. Returns 0, or
 * -EFAULT when part of the range is not mapped at all (mincore: ENOMEM; a
 * hole the program made, or MADV_DONTFORK left in a child): the range is
 * not hugezero's plain memory any more, nothing may write it, and the
 * caller gives it back (hz_blocks_mark_foreign, then release) instead of
 * handing it out. Checked whatever the backing and whether mincore is
 * trusted: a failed probe never means "clear everything". */
int hz_zero_choose(uintptr_t start, size_t len, enum hz_zero_how how,
		   enum hz_zero_method *method);
size_t hz_zero_with(uintptr_t start, size_t len, uintptr_t hint,
		    enum hz_zero_method method, enum hz_zero_how how);

/* A block was handed out, which may then be written: a residency pass
 * kept for hz_zero_with (zero.c) may be stale from then on. */
void hz_zero_handed_out(void);

/* Who hears of a range found to have a hole while it was being zeroed
 * (nothing more of it is written): the blocks, which mark it foreign so
 * that it is never handed out. Installed once by the layer that composes
 * the two (recycle.c); NULL, as at start: nobody. */
void hz_zero_on_hole(void (*mark)(uintptr_t start, size_t len));

/* Did the start-up probe find mincore and MADV_DONTNEED behaving as on
 * Linux (false under some emulators)? Without them whole ranges are
 * cleared. */
bool hz_zero_residency_trusted(void);

/* Whether len bytes fit in half of the last-level cache: a clear given a
 * hint (a block about to be used) that fits is done with cached stores,
 * so the user's first writes find its lines (zero.c). */
bool hz_zero_fits_cache(size_t len);

#endif /* HZ_ZERO_H */
