/* The shim ABI: the interface between libhugezero-preload.so (shim.c: the
 * exported malloc, free, mmap... symbols, nothing else) and the
 * interposition logic in libhugezero.so. Only shim.c and tests that stand
 * in for it include this alone; the library's own state is in preload.h.
 *
 * The shim passes its resolver on every call because dlsym(RTLD_NEXT) must
 * run in the shim: "next" is relative to the object that asks, and only the
 * shim sits right before the program's real allocator in the search order.
 * These hz_preload_* symbols are exported for the shim only; they are not a
 * public API and change without notice. */
#ifndef HZ_PRELOAD_SHIM_ABI_H
#define HZ_PRELOAD_SHIM_ABI_H

#include <stddef.h>
#include <sys/types.h>

#define HZ_PRIVATE_API __attribute__((visibility("default")))

/* The next allocator and mmap in the chain. The members carry a next_
 * prefix so that they can never be taken for the symbols the shim exports
 * (hz_next.next_free is the next allocator's free, never ours). */
struct hz_next {
	void *(*next_malloc)(size_t);
	void (*next_free)(void *);
	void *(*next_calloc)(size_t, size_t);
	void *(*next_realloc)(void *, size_t);
	int (*next_posix_memalign)(void **, size_t, size_t);
	void *(*next_aligned_alloc)(size_t, size_t);
	void *(*next_memalign)(size_t, size_t);
	void *(*next_valloc)(size_t);
	void *(*next_pvalloc)(size_t);
	size_t (*next_malloc_usable_size)(void *);
	void *(*next_mmap)(void *, size_t, int, int, int, off_t);
	int (*next_munmap)(void *, size_t);
	void *(*next_mremap)(void *, size_t, size_t, int, ...);
};

/* Fills every field it can find; NULL fields get hugezero's fallbacks. */
typedef void (*hz_resolve_fn)(struct hz_next *next);

HZ_PRIVATE_API void *hz_preload_malloc(hz_resolve_fn r, size_t size);
HZ_PRIVATE_API void hz_preload_free(hz_resolve_fn r, void *p);
HZ_PRIVATE_API void *hz_preload_calloc(hz_resolve_fn r, size_t nmemb, size_t size);
HZ_PRIVATE_API void *hz_preload_realloc(hz_resolve_fn r, void *p, size_t size);
HZ_PRIVATE_API int hz_preload_posix_memalign(hz_resolve_fn r, void **out,
					     size_t align, size_t size);
HZ_PRIVATE_API void *hz_preload_aligned_alloc(hz_resolve_fn r, size_t align, size_t size);
HZ_PRIVATE_API void *hz_preload_memalign(hz_resolve_fn r, size_t align, size_t size);
HZ_PRIVATE_API void *hz_preload_valloc(hz_resolve_fn r, size_t size);
HZ_PRIVATE_API void *hz_preload_pvalloc(hz_resolve_fn r, size_t size);
HZ_PRIVATE_API size_t hz_preload_malloc_usable_size(hz_resolve_fn r, void *p);
HZ_PRIVATE_API void *hz_preload_mmap(hz_resolve_fn r, void *addr, size_t len,
				     int prot, int flags, int fd, off_t off);
HZ_PRIVATE_API int hz_preload_munmap(hz_resolve_fn r, void *addr, size_t len);
HZ_PRIVATE_API void *hz_preload_mremap(hz_resolve_fn r, void *old, size_t old_len,
				       size_t new_len, int flags, void *new_addr);
/* Called by the shim's constructor: start-up before main. */
HZ_PRIVATE_API void hz_preload_start(hz_resolve_fn r);
/* Called by the shim's destructor: the exit report. */
HZ_PRIVATE_API void hz_preload_exit(void);

#endif /* HZ_PRELOAD_SHIM_ABI_H */
