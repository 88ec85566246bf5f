/* The interface between libhugezero-preload.so (shim.c: the exported
 * malloc, free, mmap... symbols, nothing else) and the interposition logic
 * here in libhugezero.so.
 *
 * The shim passes its resolver on every call because dlsym(RTLD_NEXT) must
 * run in the shim: "next" is relative to the object that asks, and only the
 * shim sits right before the program's real allocator in the search order.
 * These hz_preload_* symbols are exported for the shim only; they are not a
 * public API and change without notice. */
#ifndef HZ_PRELOAD_H
#define HZ_PRELOAD_H

#include <stddef.h>
#include <sys/types.h>

#define HZ_PRIVATE_API __attribute__((visibility("default")))

/* The next allocator and mmap in the chain. */
struct hz_next {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
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
/* unshare and setns (ns.c): the pre-zero thread is stopped, then real
 * (the next library's, never NULL unless dlsym failed: ENOSYS) called. */
HZ_PRIVATE_API int hz_preload_unshare(int (*real)(int), int flags);
HZ_PRIVATE_API int hz_preload_setns(int (*real)(int, int), int fd, int nstype);
/* Called by the shim's constructor: start-up before main. */
HZ_PRIVATE_API void hz_preload_start(hz_resolve_fn r);
/* Called by the shim's destructor: the exit report. */
HZ_PRIVATE_API void hz_preload_exit(void);

/* ---- inside libhugezero.so ---- */

extern struct hz_next hz_next;

/* Large requests go to hugezero only when this is true: set up done,
 * HUGEZERO_DISABLE off and the reservation made. */
extern int hz_preload_active;

/* Make sure start-up ran. Returns 0 when this thread is inside start-up
 * itself (dlsym calling calloc): the caller must use hz_next, which then
 * points at the bootstrap allocator. */
int hz_preload_ready(hz_resolve_fn r);

/* The bootstrap allocator that serves start-up's own requests. */
int hz_boot_owns(const void *p);
size_t hz_boot_size(const void *p);
void hz_next_use_bootstrap(struct hz_next *next);
/* Fill what the resolver left NULL with safe substitutes. */
void hz_next_complete(struct hz_next *next);

#endif /* HZ_PRELOAD_H */
