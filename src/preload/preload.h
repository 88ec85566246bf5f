/* The interposition logic's own state inside libhugezero.so, shared by
 * malloc.c, mmap.c, next.c and start.c; the ABI the shim calls is in
 * shim_abi.h. */
#ifndef HZ_PRELOAD_H
#define HZ_PRELOAD_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shim_abi.h"

/* The next functions: the bootstrap allocator until start-up installs
 * what the shim resolved, so a call that arrives before (or during) it is
 * served without a check on the fast path. */
extern struct hz_next hz_next;

/* Large requests go to hugezero only when this is true: set up done,
 * HUGEZERO_DISABLE off and the reservation made (start.c sets it;
 * reentry.c, which every large path reads, holds it). */
extern int hz_preload_active;

/* This thread is inside fork between hugezero's prepare handler and its
 * parent or child handler, holding hugezero's locks, while the handlers
 * of other libraries run (start.c): large requests go to the next
 * allocator and frees of blocks wait (reentry.c). */
extern __thread bool hz_preload_forking;

/* From now on new large requests go to the next allocator, and a block
 * freed goes back to the kernel at once: a seccomp filter is in force,
 * which may kill the process for any call glibc's malloc would not make
 * (start.c). */
void hz_preload_step_aside(void);

/* hz_next.next_malloc_usable_size answers for next_malloc's blocks: both
 * come from the same object. Otherwise (a program's own allocator without
 * one, whose lookup then finds the C library's) a block's size is not
 * known, and realloc leaves it to the next allocator. */
extern int hz_next_sizes_known;

/* The bootstrap allocator that serves start-up's own requests. */
int hz_boot_owns(const void *p);
/* Where the arena lies (the shim's fast path tells its pointers apart). */
void hz_boot_range(uintptr_t *start, size_t *len);
size_t hz_boot_size(const void *p);
/* Fill what the resolver left NULL with safe substitutes. */
void hz_next_complete(struct hz_next *next);

/* calloc's n * size, in *total. When it overflows: errno ENOMEM and
 * -ENOMEM, for calloc to return NULL as the C library's does. */
static inline int hz_preload_calloc_total(size_t n, size_t size, size_t *total)
{
	if (__builtin_mul_overflow(n, size, total)) {
		errno = ENOMEM;
		return -ENOMEM;
	}
	return 0;
}

/* Start-up: large aligned requests (posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc; a power-of-two alignment) go to large, which
 * returns NULL for what it does not serve (too small, or it could not):
 * the next allocator then gets the call. Without it, hugezero's blocks
 * serve them (malloc.c, which routes the family in one place). */
void hz_preload_route_aligned(void *(*large)(size_t align, size_t size));

#endif /* HZ_PRELOAD_H */
