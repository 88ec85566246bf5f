/* The extent manager behind the jemalloc hooks.
 *
 * jemalloc asks for page-aligned extents of any page multiple (2, 2.5, 3 MiB
 * ... while it grows), then splits them, and gives back sub-ranges. So the
 * hooks cannot hand out hugezero blocks one to one: they map large regions
 * (at least 64 MiB, 2 MiB aligned, huge-page backed; regions.h) and carve
 * extents out of them page by page, keeping out-of-band bitmaps per region:
 * which pages are free, and which free pages may still hold old data.
 *
 * Regions belong to the arena that first needed them, so an arena's memory
 * can be given back when the arena is destroyed. All functions are
 * thread-safe; none allocates through malloc. */
#ifndef HZ_JEMALLOC_EXTENTS_H
#define HZ_JEMALLOC_EXTENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing.h"

struct hz_jemalloc_stats;

/* Hand out [*out, *out + size) to arena: at want when want is not 0 (and
 * then exactly there, or fail), else anywhere, aligned to align (a power of
 * two; at least 4 KiB is used). size is a multiple of 4 KiB. Dirty pages in
 * the range are zeroed when must_zero; *zeroed says whether every byte
 * reads zero. Returns 0, -EINVAL for a bad request, or -ENOMEM. */
int hz_extents_alloc(unsigned arena, uintptr_t want, size_t size, size_t align,
		     bool must_zero, uintptr_t *out, bool *zeroed);

/* Take [addr, addr + size) back as dirty (destroy: jemalloc is done with it
 * for good, so a region left empty is released at once). Returns 0, or
 * -ENOENT when the range is not ours. A range that is ours but not handed
 * out (a double free) stops the program. */
int hz_extents_free(uintptr_t addr, size_t size, bool destroy);

/* Where [addr, addr + size) lies: 0 inside one of our regions (its backing
 * in *backing), -ENOENT outside all of them, -EINVAL across a region's
 * edge. */
int hz_extents_find(uintptr_t addr, size_t size, enum hz_backing *backing);

/* Whether two adjacent ranges lie in the same region (so jemalloc may merge
 * them): 0 yes, -ENOENT neither is ours, -EXDEV otherwise. */
int hz_extents_mergeable(uintptr_t a, size_t a_size, uintptr_t b, size_t b_size);

/* Counters for one arena, or every arena when arena is ~0u. */
void hz_extents_stats(unsigned arena, struct hz_jemalloc_stats *out);

/* Who gives extents huge pages as they earn them: the preload, whose
 * pre-zero thread runs the promoter (promote.h), installs it at start.
 * Then regions mapped while it is watching and hz_backing_lazy() holds
 * start on 4 KiB pages
 * (MADV_NOHUGEPAGE), as glibc's memory does, and each extent handed out
 * from one with a whole 2 MiB page or more is passed to watch (its whole
 * 2 MiB pages), which advises THP on them once their first writes are
 * dense. forget is told of every such range that jemalloc purges or gives
 * back; a range given back loses its advice too, so that it starts on
 * 4 KiB pages again when carved anew. Without a watcher (a program that
 * makes an arena with the library's hooks, not under the preload) regions
 * get huge pages at once (HUGEZERO_BACKING). Why: values written once,
 * buffers allocated at a value's size and barely touched, and jemalloc's
 * metadata each took whole huge pages at once, and redis' peak was 1.09x
 * jemalloc's alone (bench/RESULTS.md). */
struct hz_extents_watcher {
	bool (*watching)(void); /* whether watch can act now (its thread runs) */
	void (*watch)(uintptr_t start, size_t len);
	void (*forget)(uintptr_t start, size_t len);
};
void hz_extents_watch_with(const struct hz_extents_watcher *w);

/* jemalloc purged [addr, addr + size), which is ours and still its: the
 * watch on it ends (a collapse would make lazily freed pages resident). */
void hz_extents_purged(uintptr_t addr, size_t size);

/* In a fork child: the other threads are gone, so the lock is free. */
void hz_extents_fork_child(void);

#endif /* HZ_JEMALLOC_EXTENTS_H */
