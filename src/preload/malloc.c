/* The malloc family: large requests become hugezero blocks, everything else
 * goes to the next allocator untouched. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../blocks.h"
#include "../config.h"
#include "../exec/dlopen.h"
#include "../recycle.h"
#include "../range.h"
#include "../sizes.h"
#include "../stats.h"
#include "introspect.h"
#include "limits.h"
#include "preload.h"
#include "reentry.h"

/* HUGEZERO_THRESHOLD: one plain load on the small-request path. */
static inline size_t threshold(void)
{
	return __atomic_load_n(&hz_config_threshold, __ATOMIC_RELAXED);
}

static inline int is_large(size_t size)
{
	return size >= threshold() &&
	       __atomic_load_n(&hz_preload_active, __ATOMIC_RELAXED) && !hz_preload_forking;
}

/* A hugezero block (all zero with zero), or NULL when the reservation
 * cannot serve it: then the caller asks the next allocator, so we are never
 * worse than it. */
static void *large_alloc(size_t size, size_t align, bool zero)
{
	void *p;
	int ret;

	if (!hz_reentry_enter()) /* a signal handler's, inside ours */
		return NULL;
	/* The thread's last dlopen, if not settled yet (src/exec/dlopen.c):
	 * the first large request after it is where its new objects are
	 * found and advised. */
	hz_exec_dlopen_settle();
	ret = hz_recycle_alloc(size, align, zero, &p);
	hz_reentry_leave();
	if (ret != 0)
		return NULL;
	hz_stats_add(mallocs, 1);
	if (!zero)
		hz_preload_perturb(p, size);
	return p;
}

/* The next allocator's NULL: true when it came for want of memory that
 * hugezero held unused, which is now given back (limits.c), and the call
 * is worth making again; errno is then what it was before the call
 * (before), as a call that succeeds leaves it. */
static bool again(const void *p, int before)
{
	if (p != NULL || !hz_preload_give_back_for(errno))
		return false;
	errno = before;
	return true;
}

HZ_PRIVATE_API void *hz_preload_malloc(size_t size)
{
	int before;
	void *p;

	if (is_large(size) && (p = large_alloc(size, 0, false)))
		return p;
	before = errno;
	p = hz_next.next_malloc(size);
	return again(p, before) ? hz_next.next_malloc(size) : p;
}

HZ_PRIVATE_API void hz_preload_free(void *p)
{
	if (p == NULL || hz_boot_owns(p))
		return;
	if (hz_blocks_owns(p)) {
		hz_reentry_free(p);
		return;
	}
	hz_next.next_free(p);
}

HZ_PRIVATE_API void *hz_preload_calloc(size_t nmemb, size_t size)
{
	size_t total;
	int before;
	void *p;

	if (hz_preload_calloc_total(nmemb, size, &total) != 0)
		return NULL;
	if (is_large(total) && (p = large_alloc(total, 0, true))) {
		/* Zero however it came (hz_recycle_alloc with zero): fresh
		 * from the kernel, or cached, its dirty part zeroed by the
		 * pre-zero thread or by this call (recycle.c, zero_dirty). */
		hz_stats_add(callocs, 1);
		hz_stats_add(calloc_bytes, total);
		return p;
	}
	before = errno;
	p = hz_next.next_calloc(nmemb, size);
	return again(p, before) ? hz_next.next_calloc(nmemb, size) : p;
}

/* Move a block between hugezero and the next allocator, copying what both
 * sizes hold. */
static void *move_across(void *p, size_t old_size, size_t size, int to_large)
{
	void *q = to_large ? large_alloc(size, 0, false) : hz_next.next_malloc(size);

	if (q == NULL)
		return NULL;
	memcpy(q, p, old_size < size ? old_size : size);
	if (to_large)
		hz_next.next_free(p);
	else
		hz_preload_free(p);
	return q;
}

/* A block's resize in place or by mremap; a signal handler's, inside
 * ours, moves it instead (move_across). */
static int resize(void *p, size_t size, void **out)
{
	int ret;

	if (!hz_reentry_enter())
		return -EAGAIN;
	ret = hz_recycle_resize(p, size, out);
	hz_reentry_leave();
	return ret;
}

HZ_PRIVATE_API void *hz_preload_realloc(void *p, size_t size)
{
	int before;
	void *q;

	/* A bootstrap pointer first, start-up or not: no other allocator
	 * knows it, and dlsym's first allocations come from there before the
	 * rest of start-up runs with the real table installed. */
	if (hz_boot_owns(p)) {
		q = hz_preload_malloc(size);
		if (q)
			memcpy(q, p, hz_boot_size(p) < size ? hz_boot_size(p) : size);
		return q;
	}
	if (p == NULL)
		return hz_preload_malloc(size);
	if (hz_blocks_owns(p)) {
		if (size == 0) { /* glibc frees and returns NULL */
			hz_preload_free(p);
			return NULL;
		}
		if (size < threshold() || !is_large(size))
			return move_across(p, hz_blocks_usable(p), size, 0);
		if (resize(p, size, &q) == 0)
			return q;
		/* The reservation cannot hold it, or a signal handler's call
		 * is inside ours: the next allocator may. */
		q = move_across(p, hz_blocks_usable(p), size, 0);
		if (q)
			return q;
		errno = ENOMEM;
		return NULL;
	}
	if (size != 0 && is_large(size) && hz_next_sizes_known) {
		q = move_across(p, hz_next.next_malloc_usable_size(p), size, 1);
		if (q)
			return q;
	}
	before = errno;
	q = hz_next.next_realloc(p, size);
	return size != 0 && again(q, before) ? hz_next.next_realloc(p, size) : q;
}

/* ---- the aligned family ----
 * The one place that routes posix_memalign, aligned_alloc, memalign,
 * valloc and pvalloc, whoever serves large requests: a large one with a
 * power-of-two alignment goes to large_aligned (hugezero's blocks, or the
 * jemalloc arena with our hooks, jemalloc_next.c); the rest, and what
 * large_aligned cannot serve, to the next allocator's own entry point,
 * which decides what odd alignments mean (glibc rounds memalign's up to a
 * power of two) and sets errno as it would without hugezero. */
static void *blocks_aligned(size_t align, size_t size)
{
	if (is_large(size) && align <= HZ_ALIGN_MAX)
		return large_alloc(size, align, false);
	return NULL;
}

static void *(*large_aligned)(size_t align, size_t size) = blocks_aligned;

void hz_preload_route_aligned(void *(*large)(size_t align, size_t size))
{
	__atomic_store_n(&large_aligned, large, __ATOMIC_RELEASE);
}

static void *aligned_large(size_t align, size_t size)
{
	if (!hz_is_pow2(align))
		return NULL;
	return __atomic_load_n(&large_aligned, __ATOMIC_ACQUIRE)(align, size);
}

HZ_PRIVATE_API int hz_preload_posix_memalign(void **out, size_t align, size_t size)
{
	void *p;
	int ret;

	if (!hz_is_pow2(align) || align % sizeof(void *) != 0)
		return EINVAL;
	p = aligned_large(align, size);
	if (p) {
		*out = p;
		return 0;
	}
	ret = hz_next.next_posix_memalign(out, align, size);
	if (ret == ENOMEM && hz_preload_give_back_for(ENOMEM))
		ret = hz_next.next_posix_memalign(out, align, size);
	return ret;
}

HZ_PRIVATE_API void *hz_preload_aligned_alloc(size_t align, size_t size)
{
	int before = errno;
	void *p = aligned_large(align, size);

	if (p == NULL && again(p = hz_next.next_aligned_alloc(align, size), before))
		p = hz_next.next_aligned_alloc(align, size);
	return p;
}

HZ_PRIVATE_API void *hz_preload_memalign(size_t align, size_t size)
{
	int before = errno;
	void *p = aligned_large(align, size);

	if (p == NULL && again(p = hz_next.next_memalign(align, size), before))
		p = hz_next.next_memalign(align, size);
	return p;
}

HZ_PRIVATE_API void *hz_preload_valloc(size_t size)
{
	int before = errno;
	void *p = aligned_large(HZ_SZ_4K, size);

	if (p == NULL && again(p = hz_next.next_valloc(size), before))
		p = hz_next.next_valloc(size);
	return p;
}

HZ_PRIVATE_API void *hz_preload_pvalloc(size_t size)
{
	int before = errno;
	void *p;

	/* pvalloc rounds the size up to whole pages; blocks are whole
	 * granules already. A size that cannot be rounded is the next
	 * allocator's to refuse (glibc: ENOMEM). */
	p = size <= SIZE_MAX - HZ_SZ_4K ? aligned_large(HZ_SZ_4K, hz_align_up(size, HZ_SZ_4K))
					: NULL;
	if (p == NULL && again(p = hz_next.next_pvalloc(size), before))
		p = hz_next.next_pvalloc(size);
	return p;
}

HZ_PRIVATE_API size_t hz_preload_malloc_usable_size(void *p)
{
	if (p == NULL)
		return 0;
	if (hz_boot_owns(p))
		return hz_boot_size(p);
	if (hz_blocks_owns(p))
		return hz_blocks_usable(p);
	return hz_next.next_malloc_usable_size(p);
}
