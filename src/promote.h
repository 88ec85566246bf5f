/* Lazy huge pages: fresh blocks and the large anonymous mmaps the preload
 * aligns start on 4 KiB pages (2 MiB aligned, so that they can be
 * promoted). The pre-zero thread watches their first touches and advises
 * THP on the rest of a range the program starts writing densely
 * (promote_density.h), and it collapses the 2 MiB ranges of them
 * that the program has made densely resident into huge pages
 * (MADV_COLLAPSE), a bounded amount per tick and a share of the program's CPU
 * time (HUGEZERO_COLLAPSE_CPU), backing off when collapses
 * fail or are slow. A sparse table keeps glibc's RSS; a dense one gets the
 * TLB reach of THP once it is dense. promote.c and promote_collapse.c say
 * how. */
#ifndef HZ_PROMOTE_H
#define HZ_PROMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hz_promote_kind {
	HZ_PROMOTE_BLOCK, /* a block in the regions: ours while the region is held */
	HZ_PROMOTE_MMAP,  /* a program's mmap the preload aligned: ours to advise
			   * until the program unmaps, moves or maps over it; or
			   * a jemalloc extent, until jemalloc gives it back */
};

/* Whether ranges can be promoted: HUGEZERO_PROMOTE is on, THP is in
 * "madvise" mode (under "always" the kernel already gives THP at fault, as
 * it does for glibc's memory; under "never" there is none) and the process
 * has not disabled THP (prctl). The promoter runs on the pre-zero thread,
 * so it promotes only where that thread runs (hz_prezero_watch). */
bool hz_promote_enabled(void);

/* Watch [start, start + len) (start 2 MiB aligned; the whole 2 MiB ranges
 * inside it are candidates; a block's evidence is for the size class of
 * len rounded up to 2 MiB, its length). A block range replaces every block range it
 * overlaps (the granules were mapped again). Lock-free; when the tracker
 * is full the range stays on 4 KiB pages (counted) and false is returned.
 * Call only when hz_promote_enabled(), through hz_prezero_watch, which
 * starts the thread that runs the promoter. */
bool hz_promote_track(uintptr_t start, size_t len, enum hz_promote_kind kind);

/* The program is about to unmap, move or map over [start, start + len):
 * forget every mmap range it touches. If the promoter is collapsing one of
 * them right now, wait for that (at most HZ_THREAD_STUCK_NS, classes.h), so
 * that no collapse lands on whatever is mapped there next. Lock-free, and
 * a few loads when nothing is tracked. Keeps errno. */
void hz_promote_forget(uintptr_t start, size_t len);

/* The program gave [start, start + len) back to the kernel
 * (MADV_FREE, MADV_COLD, MADV_PAGEOUT): a collapse would make lazily
 * freed pages resident for good and bring paged-out ones back; or it
 * advised MADV_NOHUGEPAGE, which no advice of ours may undo. So every
 * range it touches, mmap or block, is forgotten as by hz_promote_forget
 * (a block is tracked again when it is handed out anew). */
void hz_promote_leave(uintptr_t start, size_t len);

/* The pre-zero thread, once per turn of its loop: look at the first touches
 * of new ranges, and scan and collapse, within a bounded budget, if a tick
 * is due. Returns the nanoseconds until the next look or tick is due (the
 * thread sleeps at most that long). */
uint64_t hz_promote_tick(uint64_t now);

#ifdef HZ_TEST_CORE
/* Tests: the next tick is due at once, with the backoff reset. */
void hz_promote_test_kick(void);
/* Tests: the first touches of ranges tracked from now on are watched this
 * long (promote_first.c's FIRST_TOUCH_NS otherwise), so that a busy machine's
 * wait for the idle-priority thread does not end the watch. */
void hz_promote_test_first_touch_ns(uint64_t ns);
/* Tests: whether the range watched from start was seen written in strides
 * (promote_density.h), so that a test writes its next column only after
 * the idle-priority thread has looked. */
bool hz_promote_test_seen_strided(uintptr_t start);
#endif

#endif /* HZ_PROMOTE_H */
