/* Runs of small anonymous mmaps sharing 2 MiB windows. See pieces.h.
 *
 * CPython's pymalloc maps its arenas 1 MiB at a time, one after another,
 * and fills each before the next: 406 of python-work's 454 MiB, faulted
 * as 4 KiB pages (bench/RESULTS.md, "CPython's arenas, what huge pages
 * would give"). A 1 MiB mapping never holds an aligned 2 MiB page, so
 * neither THP `always` nor the 2 MiB alignment of larger mmaps (mmap.c)
 * helps. Here a piece of a class used densely comes from a 2 MiB window
 * advised MADV_HUGEPAGE: the first piece's first touch faults the whole
 * window as one huge page, and the window's rest is kept for the next
 * pieces of the class (one window's rest per class).
 *
 * Memory: a window's rest is resident (zero) from the first touch on, at
 * most 2 MiB less a piece per class. So a class gets windows only after
 * its pieces on 4 KiB pages have filled a window's worth and the last of
 * them was judged dense at the next mmap of its size, as the 2 MiB mmaps'
 * evidence is (evidence.h, classes.h); a sample of the later pieces starts
 * on 4 KiB pages again to renew it. A program that maps two arenas keeps
 * glibc's memory.
 *
 * The rest of a window is never the program's: a munmap, mremap,
 * MAP_FIXED, mprotect or other change (foreign.c) that reaches it (a
 * program's bug, or a range it unmaps whole after finding it free) makes
 * it go first (hz_pieces_forget), and so does mlockall; under
 * MCL_FUTURE no window is made. No lock:
 * a slot is one word changed by compare-and-swap, as mmap may be called
 * from a signal handler. A fork child inherits the windows and their rest
 * as they are. */
#include "pieces.h"

#include <stdint.h>
#include <sys/mman.h>

#include "../backing.h"
#include "../classes.h"
#include "../prim/memory.h"
#include "../prim/prim.h"
#include "../sizes.h"
#include "../stats.h"
#include "evidence.h"
#include "foreign.h"
#include "preload.h"

#define SMALLEST 18 /* log2 of 256 KiB: a window of 8 pieces */
#define LARGEST 20  /* log2 of 1 MiB: a window of 2 */
#define SIZES (LARGEST - SMALLEST + 1)

/* Per size: the rest of the last window, packed as its next piece's
 * address (4 KiB aligned) and the pieces left (1-7) in the low bits; 0 when
 * none is left. */
static uintptr_t rest[SIZES];
/* Per size: bytes mapped on 4 KiB pages (saturating at a window). The last
 * such piece the ledger holds, to be judged at the next mmap of the size
 * (hz_class_keep_lazy_mmap). */
static size_t lazy_bytes[SIZES];

bool hz_pieces_size(size_t len)
{
	unsigned k = hz_size_class(len);

	return len == (size_t)1 << k && k >= SMALLEST && k <= LARGEST;
}

static unsigned slot_of(size_t len)
{
	return hz_size_class(len) - SMALLEST;
}

/* Whether the class may take a window now (see the top). */
static bool window_earned(size_t len)
{
	if (hz_foreign_future_locked()) /* a rest would be locked too */
		return false;
	if (__atomic_load_n(&lazy_bytes[slot_of(len)], __ATOMIC_RELAXED) < HZ_SZ_2M)
		return false;
	hz_evidence_judge_last(len);
	return hz_class_mmap_thp(len) && hz_backing_fresh_thp_fast(len);
}

static void *map_lazy(size_t len)
{
	unsigned s = slot_of(len);
	void *p = hz_next.next_mmap(NULL, len, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t had;

	if (p == MAP_FAILED)
		return NULL;
	had = __atomic_load_n(&lazy_bytes[s], __ATOMIC_RELAXED);
	if (had < HZ_SZ_2M)
		__atomic_store_n(&lazy_bytes[s], had + len, __ATOMIC_RELAXED);
	hz_evidence_judge_last(len); /* what the one before left, if not judged yet */
	hz_class_keep_lazy_mmap(len, (uintptr_t)p, len);
	return p;
}

static uintptr_t rest_start(uintptr_t w)
{
	return w & ~(HZ_SZ_4K - 1);
}

static size_t rest_pieces(uintptr_t w)
{
	return w & (HZ_SZ_4K - 1);
}

/* A piece from the rest of the size's window, or 0. */
static uintptr_t take_from_rest(unsigned s, size_t len)
{
	uintptr_t w = __atomic_load_n(&rest[s], __ATOMIC_ACQUIRE), after;

	do {
		if (w == 0)
			return 0;
		after = rest_pieces(w) > 1 ? (rest_start(w) + len) | (rest_pieces(w) - 1) : 0;
	} while (!__atomic_compare_exchange_n(&rest[s], &w, after, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return rest_start(w);
}

/* A new window: its first piece for the caller, the rest kept (or given
 * back, when another thread kept a rest meanwhile). */
static uintptr_t new_window(unsigned s, size_t len)
{
	uintptr_t w, expected = 0;
	void *mem;

	if (hz_prim_map_aligned(HZ_SZ_2M, HZ_SZ_2M, 0, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, HZ_TRIM_OR_FAIL, &mem) != 0)
		return 0;
	hz_prim_madvise(mem, HZ_SZ_2M, MADV_HUGEPAGE);
	w = ((uintptr_t)mem + len) | (HZ_SZ_2M / len - 1);
	if (!__atomic_compare_exchange_n(&rest[s], &expected, w, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		hz_prim_munmap((char *)mem + len, HZ_SZ_2M - len);
	else /* kept whole: its first touch faults it whole, now, timed (backing.h) */
		(void)hz_backing_time_fresh_page((uintptr_t)mem);
	return (uintptr_t)mem;
}

void *hz_pieces_map(size_t len)
{
	unsigned s = slot_of(len);
	uintptr_t p;

	if (!hz_pieces_size(len)) /* not a piece: the caller maps it */
		return NULL;
	if (!window_earned(len))
		return map_lazy(len);
	p = take_from_rest(s, len);
	if (p == 0)
		p = new_window(s, len);
	if (p == 0)
		return map_lazy(len);
	hz_stats_add(mmap_pieces, 1);
	return (void *)p;
}

void hz_pieces_forget(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, end = len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len;

	for (unsigned s = 0; s < SIZES; s++) {
		uintptr_t w = __atomic_load_n(&rest[s], __ATOMIC_ACQUIRE);

		while (w != 0) {
			size_t bytes = rest_pieces(w) << (s + SMALLEST);

			if (rest_start(w) + bytes <= a || rest_start(w) >= end)
				break;
			if (__atomic_compare_exchange_n(&rest[s], &w, 0, false, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				hz_prim_munmap((void *)rest_start(w), bytes);
				break;
			}
		}
	}
}
