/* The malloc family's exported symbols: the fast path to the next
 * allocator, and the library's entry for everything else.
 *
 * Each call is a compare and a tail call to the next allocator when the
 * request is small (and the pointer neither a block nor the bootstrap's;
 * from 1 KiB up, while glibc's heap is watched, after a second compare:
 * whether its break moved, heap.c);
 * anything else, and every call before start-up completed, goes to the
 * library through a cold function of its own, so the fast path keeps no
 * frame. The pairs below repeat that shape on purpose: each has its own
 * signature and its own test for small, and a macro that wrote them would
 * hide the fast path that bench/alloc.c measures. */
#include <errno.h>
#include <stdint.h>

#include "shim.h"

static inline size_t below(void)
{
	return __atomic_load_n(&hz_shim_fast.small_below, __ATOMIC_ACQUIRE);
}

static inline size_t quiet_below(void)
{
	return __atomic_load_n(&hz_shim_fast.quiet_below, __ATOMIC_ACQUIRE);
}

/* glibc's break moved since the library last looked (heap.c). Read on
 * the medium path only: the break moves once per 128 KiB of growth at
 * most, and a program whose heap grows makes medium requests. */
static inline int heap_moved(void)
{
	const uintptr_t *brk = __atomic_load_n(&hz_shim_fast.heap_break, __ATOMIC_ACQUIRE);

	return brk != NULL && __atomic_load_n(brk, __ATOMIC_RELAXED) !=
				      __atomic_load_n(&hz_shim_fast.heap_seen, __ATOMIC_RELAXED);
}

static inline void look_at_heap(void)
{
	if (heap_moved())
		hz_preload_heap_moved();
}

/* Small but not quiet: looks at the heap first when its break moved. */
static inline int small_and_quiet(size_t size)
{
	return size < below() && !heap_moved();
}

/* Whether p is the next allocator's (or NULL): neither in the bootstrap
 * arena nor in a region of blocks. A block's region is in the table before
 * its pointer reaches any thread, so a relaxed load sees it. */
static inline int foreign_pointer(const void *p)
{
	size_t boot_len = __atomic_load_n(&hz_shim_fast.boot_len, __ATOMIC_ACQUIRE);
	uintptr_t a = (uintptr_t)p, g = a >> HZ_SHIM_REGION_SHIFT;

	if (a - hz_shim_fast.boot_start < boot_len)
		return 0;
	/* Above the table (5-level paging): never a block's. */
	if (__builtin_expect(g >= HZ_SHIM_REGION_GIBS, 0))
		return 1;
	return __atomic_load_n(&hz_shim_fast.owned[g], __ATOMIC_RELAXED) == 0;
}

static COLD void *slow_malloc(size_t size)
{
	hz_shim_ready();
	look_at_heap();
	return hz_preload_malloc(size);
}

EXPORT void *malloc(size_t size)
{
	if (__builtin_expect(size < quiet_below(), 1) || __builtin_expect(small_and_quiet(size), 1))
		return hz_shim_fast.next.next_malloc(size);
	return slow_malloc(size);
}

static COLD void slow_free(void *p)
{
	hz_shim_ready();
	hz_preload_free(p);
}

EXPORT void free(void *p)
{
	if (__builtin_expect(foreign_pointer(p), 1)) {
		hz_shim_fast.next.next_free(p);
		return;
	}
	slow_free(p);
}

static COLD void *slow_calloc(size_t n, size_t size)
{
	hz_shim_ready();
	look_at_heap();
	return hz_preload_calloc(n, size);
}

EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;

	if (__builtin_expect(!__builtin_mul_overflow(n, size, &total) &&
				     (total < quiet_below() || small_and_quiet(total)),
			     1))
		return hz_shim_fast.next.next_calloc(n, size);
	return slow_calloc(n, size);
}

/* Small on both sides: the next allocator's block stays its own. A block
 * that crosses the threshold either way is the library's to move. */
static COLD void *slow_realloc(void *p, size_t size)
{
	hz_shim_ready();
	look_at_heap();
	return hz_preload_realloc(p, size);
}

static inline void *realloc_to(void *p, size_t size)
{
	if (__builtin_expect((size < quiet_below() || small_and_quiet(size)) && foreign_pointer(p), 1))
		return hz_shim_fast.next.next_realloc(p, size);
	return slow_realloc(p, size);
}

EXPORT void *realloc(void *p, size_t size)
{
	return realloc_to(p, size);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_to(p, total);
}

static COLD int slow_posix_memalign(void **out, size_t align, size_t size)
{
	hz_shim_ready();
	return hz_preload_posix_memalign(out, align, size);
}

/* A bad alignment is the library's to refuse (EINVAL), as before. */
EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (__builtin_expect(size < below() && align >= sizeof(void *) && (align & (align - 1)) == 0,
			     1))
		return hz_shim_fast.next.next_posix_memalign(out, align, size);
	return slow_posix_memalign(out, align, size);
}

static COLD void *slow_aligned_alloc(size_t align, size_t size)
{
	hz_shim_ready();
	return hz_preload_aligned_alloc(align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (__builtin_expect(size < below(), 1))
		return hz_shim_fast.next.next_aligned_alloc(align, size);
	return slow_aligned_alloc(align, size);
}

static COLD void *slow_memalign(size_t align, size_t size)
{
	hz_shim_ready();
	return hz_preload_memalign(align, size);
}

EXPORT void *memalign(size_t align, size_t size)
{
	if (__builtin_expect(size < below(), 1))
		return hz_shim_fast.next.next_memalign(align, size);
	return slow_memalign(align, size);
}

static COLD void *slow_valloc(size_t size)
{
	hz_shim_ready();
	return hz_preload_valloc(size);
}

EXPORT void *valloc(size_t size)
{
	if (__builtin_expect(size < below(), 1))
		return hz_shim_fast.next.next_valloc(size);
	return slow_valloc(size);
}

static COLD void *slow_pvalloc(size_t size)
{
	hz_shim_ready();
	return hz_preload_pvalloc(size);
}

/* pvalloc asks for whole 4 KiB pages: small is what the rounded size is. */
#define PVALLOC_PAGE ((size_t)4096)

EXPORT void *pvalloc(size_t size)
{
	if (__builtin_expect(size <= SIZE_MAX - PVALLOC_PAGE &&
				     ((size + PVALLOC_PAGE - 1) & ~(PVALLOC_PAGE - 1)) < below(),
			     1))
		return hz_shim_fast.next.next_pvalloc(size);
	return slow_pvalloc(size);
}

static COLD size_t slow_malloc_usable_size(void *p)
{
	hz_shim_ready();
	return hz_preload_malloc_usable_size(p);
}

EXPORT size_t malloc_usable_size(void *p)
{
	if (__builtin_expect(p != NULL && foreign_pointer(p), 1))
		return hz_shim_fast.next.next_malloc_usable_size(p);
	return slow_malloc_usable_size(p);
}
