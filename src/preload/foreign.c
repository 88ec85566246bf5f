/* Blocks the program changed ("foreign" blocks). See foreign.h.
 *
 * glibc munmaps a large chunk on free, so whatever the program did to its
 * mapping (mprotect, mlock, madvise, a file mapped over it, a userfaultfd)
 * goes with it. A recycler that keeps the block mapped must therefore
 * never reuse such a block as it is. The options were:
 *
 *  - reset every block on free (map it afresh): a system call and the
 *    loss of its huge pages on every free, which is the cost the cache
 *    exists to avoid;
 *  - probe each block on free (MADV_FREE fails on locked, shared and file
 *    memory): a system call on every free, and blind to protection,
 *    dump, fork and KSM advice;
 *  - interpose the calls that change a mapping, and mark the blocks they
 *    touch. Chosen: it costs nothing on malloc and free (a load per
 *    granule of the freed block), and a branch in calls that are rare and
 *    slow anyway. A marked block's free releases it, and the release maps
 *    plain reservation over the range (hz_prim_reset_reservation), which
 *    drops every property at once.
 *
 * The same calls made by number through the C library's syscall() take
 * the same path (syscall.c). What it cannot see: a system call made with
 * the program's own instruction (inline assembly, a runtime's own stubs)
 * instead of the C library, and ioctls other than UFFDIO_REGISTER. For
 * those the zeroing code still never writes into a hole (mincore's
 * ENOMEM: hz_zero_choose), and the pre-zero thread reads the mark again
 * after taking a span (prezero.c, zero_job); a block made read-only by
 * such a system call and then freed remains a risk.
 *
 * userfaultfd: registration is an ioctl, and an ioctl wrapper sees every
 * device call of the program. It is still the cheapest sound check: one
 * compare of the request number per call, while no check at free can
 * tell a registered range (neither mincore, madvise nor /proc/self/maps
 * says so; smaps does, at a cost of milliseconds per read).
 *
 * mlockall(MCL_CURRENT) locks every block, cached ones too: all granules
 * are marked and the cache is released before the call. MCL_FUTURE locks
 * every mapping made afterwards: while it holds, every block counts as
 * foreign (hz_blocks_all_foreign), so each free releases and each malloc
 * maps a new, locked block, as glibc's would be. munlock, MADV_DONTNEED,
 * MADV_FREE and the like need nothing: they leave a mapping as ours. */
#include "foreign.h"

#include <errno.h>
#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "../blocks.h"
#include "../blocks_view.h"
#include "../prim/memory.h"
#include "../promote.h"
#include "../range.h"
#include "../recycle.h"
#include "../sizes.h"
#include "heap.h"
#include "pieces.h"
#include "preload.h"

#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static bool active(void)
{
	return __atomic_load_n(&hz_preload_active, __ATOMIC_ACQUIRE);
}

HZ_PRIVATE_API void hz_foreign_changed(const void *addr, size_t len)
{
	if (!active())
		return;
	hz_blocks_mark_foreign((uintptr_t)addr, len);
	hz_pieces_forget(addr, len); /* a window's rest there is not handed out */
}

/* Advice that leaves the mapping as hugezero makes it: it drops, fetches
 * or moves contents (calloc's zeroing already copes with each), or asks
 * for huge pages, which is our own advice. Everything else (fork, dump,
 * KSM, no-huge-page, access-pattern and guard advice, and advice this
 * list does not know) marks. */
static bool keeps_mapping(int advice)
{
	switch (advice) {
	case MADV_NORMAL:
	case MADV_WILLNEED:
	case MADV_DONTNEED:
	case MADV_FREE:
	case MADV_REMOVE:
	case MADV_HUGEPAGE:
	case MADV_COLD:
	case MADV_PAGEOUT:
	case MADV_POPULATE_READ:
	case MADV_POPULATE_WRITE:
	case MADV_DONTNEED_LOCKED:
	case MADV_COLLAPSE:
		return true;
	default:
		return false;
	}
}

/* Advice by which the program gives pages back while it keeps the
 * mapping: lazily freed (reclaimed under pressure), cold, paged out. */
static bool gives_back(int advice)
{
	return advice == MADV_FREE || advice == MADV_COLD || advice == MADV_PAGEOUT;
}

/* The program wants 4 KiB pages there: the promoter must never advise THP
 * or collapse over that (promote.h). Its MADV_HUGEPAGE agrees with ours. */
static bool refuses_huge_pages(int advice)
{
	return advice == MADV_NOHUGEPAGE;
}

/* Called before the advice is given: hz_promote_leave waits for a promoter
 * inside the range, so none of its advice lands after the program's. */
HZ_PRIVATE_API void hz_foreign_advised(const void *addr, size_t len, int advice)
{
	if (!keeps_mapping(advice))
		hz_foreign_changed(addr, len);
	/* First: advice on the whole block leaves no 4 KiB edge to split. */
	if (advice == MADV_HUGEPAGE && active())
		hz_blocks_advise_huge((uintptr_t)addr, len);
	if ((gives_back(advice) || refuses_huge_pages(advice)) && active())
		hz_promote_leave((uintptr_t)addr, len);
}

/* MCL_FUTURE is in force (as the kernel has it: each successful mlockall
 * sets or clears it). */
static int future_locked;

HZ_PRIVATE_API void hz_foreign_lock_all_begin(int flags)
{
	/* Locked, glibc's pad would be locked memory ahead of use. */
	if (flags & MCL_FUTURE)
		hz_heap_end();
	if (!active() || !(flags & (MCL_CURRENT | MCL_FUTURE)))
		return;
	/* Locked, a window's rest would be locked memory nobody asked for. */
	hz_pieces_forget(NULL, SIZE_MAX);
	if (flags & MCL_FUTURE)
		hz_blocks_all_foreign(true);
	if (flags & MCL_CURRENT)
		hz_blocks_mark_foreign(hz_reservation.start,
				       hz_reservation.end - hz_reservation.start);
	hz_recycle_drop();
}

HZ_PRIVATE_API void hz_foreign_lock_all_end(int flags, int result)
{
	if (!active())
		return;
	if (result == 0)
		__atomic_store_n(&future_locked, (flags & MCL_FUTURE) != 0, __ATOMIC_RELAXED);
	hz_blocks_all_foreign(__atomic_load_n(&future_locked, __ATOMIC_RELAXED));
}

bool hz_foreign_future_locked(void)
{
	return __atomic_load_n(&future_locked, __ATOMIC_RELAXED);
}

HZ_PRIVATE_API void hz_foreign_unlock_all_end(int result)
{
	if (!active() || result != 0)
		return;
	__atomic_store_n(&future_locked, 0, __ATOMIC_RELAXED);
	hz_blocks_all_foreign(false);
}

HZ_PRIVATE_API void hz_foreign_ioctl_end(unsigned long request, const void *arg, int result)
{
	const struct uffdio_register *reg = arg;

	if (request != UFFDIO_REGISTER || result != 0 || !active())
		return;
	hz_blocks_mark_foreign((uintptr_t)reg->range.start, (size_t)reg->range.len);
}

/* Every granule [a, end) touches is foreign. */
static bool all_foreign(uintptr_t a, uintptr_t end)
{
	for (uintptr_t g = hz_align_down(a, HZ_GRANULE); g < end; g += HZ_GRANULE) {
		struct hz_span one = { hz_range_make(g, HZ_GRANULE), HZ_BACKING_THP };

		if (hz_blocks_reusable(&one))
			return false;
	}
	return true;
}

/* Whether [a, end) lies inside one live block, past its first page: the
 * first granule at or before a whose block is live must reach end. A
 * range from the block's start is the bug the refusal names (the pointer
 * malloc returned, taken for one from mmap: under glibc that pointer is
 * not even page aligned, and munmap fails); a tail is what a program
 * gives back from glibc's mmapped chunk. Read without the blocks lock:
 * the caller unmaps memory it holds, which no other thread frees
 * meanwhile unless the program races with itself. */
static bool inside_live_block(uintptr_t a, uintptr_t end)
{
	const struct hz_block_region *r = hz_blocks_region_of(a);
	size_t g, last;

	if (r == NULL || end > r->range.end)
		return false;
	last = (end - 1 - r->range.start) / HZ_GRANULE;
	for (g = (a - r->range.start) / HZ_GRANULE;; g--) {
		if (__atomic_load_n(&r->meta[g].live, __ATOMIC_ACQUIRE))
			return g + __atomic_load_n(&r->meta[g].granules, __ATOMIC_RELAXED) > last &&
			       a >= r->range.start + g * HZ_GRANULE + HZ_SZ_4K;
		if (g == 0)
			return false;
	}
}

/* [a, a + len) (len rounded to pages) lies in the reservation, and is the
 * program's to unmap or move: its own mapping over a block, or part of a
 * live block of its own. Sets *end. */
static bool programs_range(uintptr_t a, size_t len, uintptr_t *end)
{
	if (len == 0 || a % HZ_SZ_4K != 0 || len > SIZE_MAX - HZ_SZ_4K)
		return false;
	*end = a + hz_align_up(len, HZ_SZ_4K);
	if (*end < a || a < hz_reservation.start || *end > hz_reservation.end)
		return false;
	return all_foreign(a, *end) || inside_live_block(a, *end);
}

int hz_foreign_unmap(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, end;

	if (!active() || len == 0 || a % HZ_SZ_4K != 0 || len > SIZE_MAX - HZ_SZ_4K)
		return -EINVAL;
	len = hz_align_up(len, HZ_SZ_4K);
	end = a + len;
	if (end < a || a < hz_reservation.start || end > hz_reservation.end)
		return -EINVAL;
	/* The program's own mapping over a block (all foreign), or part of a
	 * live block of its own: glibc's munmap would unmap either (a block's
	 * tail given back by a program that knows it is mmapped), and the
	 * program may never touch that range again. It goes; the range stays
	 * ours, marked so that the block's free resets all of it, and reads
	 * as unmapped (PROT_NONE) until then, so no other mapping lands
	 * inside a region. Anything else (a freed block, free space, two
	 * blocks at once) is refused. */
	if (!all_foreign(a, end)) {
		if (!inside_live_block(a, end))
			return -EINVAL;
		hz_blocks_mark_foreign(a, len);
	}
	return hz_prim_reset_reservation(a, len);
}

/* mremap of the program's own range in a block (a file view it mapped
 * there and now shrinks, grows or moves), or of a range onto its own
 * block with MREMAP_FIXED, as glibc would let it. A shrink in place
 * drops the tail the way munmap does (no hole at any time). A move
 * leaves a hole where the range was, which is reserved again at once
 * without replacing anything (hz_prim_reserve_hole): a mapping another
 * thread made there in between (microseconds) survives, and is the one
 * risk left, since the block's free resets its whole range. */
int hz_foreign_remap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr,
		     void **out)
{
	uintptr_t a = (uintptr_t)old, end = 0, to_end = 0;
	bool old_ours = hz_blocks_touches(hz_range_make(a, old_len > UINTPTR_MAX - a ? 0 : old_len));
	bool fixed = (flags & MREMAP_FIXED) != 0;
	size_t keep = hz_align_up(new_len, HZ_SZ_4K);
	void *p;

	if (!active() || (old_ours && !programs_range(a, old_len, &end)))
		return -EINVAL;
	if (fixed && hz_blocks_touches(hz_range_make((uintptr_t)new_addr, new_len)) &&
	    !programs_range((uintptr_t)new_addr, new_len, &to_end))
		return -EINVAL;
	if (old_ours)
		hz_blocks_mark_foreign(a, end - a);
	if (fixed && to_end != 0)
		hz_blocks_mark_foreign((uintptr_t)new_addr, to_end - (uintptr_t)new_addr);
	if (old_ours && !fixed && new_len != 0 && keep < end - a) {
		int ret = hz_prim_reset_reservation(a + keep, end - a - keep);

		if (ret != 0)
			return ret;
		*out = old;
		return 0;
	}
	p = hz_next.next_mremap(old, old_len, new_len, flags, new_addr);
	if (p == MAP_FAILED)
		return -errno;
	if (old_ours && p != old && !(flags & MREMAP_DONTUNMAP))
		(void)hz_prim_reserve_hole(a, end - a); /* -EEXIST: counted there */
	*out = p;
	return 0;
}
