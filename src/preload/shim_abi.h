/* The shim ABI: the interface between libhugezero-preload.so (shim*.c: the
 * exported malloc, free, mmap... symbols, nothing else) and the
 * interposition logic in libhugezero.so. Only the shim and tests that stand
 * in for it include this alone; the library's own state is in preload.h.
 *
 * dlsym(RTLD_NEXT) must run in the shim: "next" is relative to the object
 * that asks, and only the shim sits right before the program's real
 * allocator in the search order. So the shim resolves the next functions
 * once, at the first call of any of its symbols, and hands the table down
 * (hz_preload_begin, hz_preload_start); every later call passes only its
 * own arguments, and small requests do not call in at all (the fast path
 * below). These hz_preload_* symbols are exported for the shim only; they are not a
 * public API and change without notice. */
#ifndef HZ_PRELOAD_SHIM_ABI_H
#define HZ_PRELOAD_SHIM_ABI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
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
	/* The C library's, for the pre-zero thread's start: the shim's own
	 * export of the name would take hugezero's call otherwise. */
	int (*next_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	/* The C library's, for glibc's heap (heap.c): the shim exports the
	 * name to see the program's own calls. */
	int (*next_mallopt)(int, int);
};

/* ---- the shim's fast path ----
 * A small request costs what the next allocator's does plus a compare: the
 * shim serves it from this copy of its own, with no call into
 * libhugezero.so. That call (a PLT jump, the library's checks, then a
 * second indirect call) cost 0.94x glibc's throughput on a tcache-hot
 * free+malloc loop (bench/alloc.c small-churn 3000000 16 1K, +1.5 ns per
 * pair on EPYC Milan, more in issue 13's figures); the copy gives 0.98x
 * (+0.4 ns). The shim hands its copy over with
 * hz_preload_attach; the library fills it when start-up completes
 * (hz_preload_start) and writes small_below and quiet_below again at
 * every hz_options_reload.
 *
 * Until then it is closed: small_below and quiet_below are 0 (no request
 * is small) and the bootstrap range is the whole address space (every
 * pointer may be the library's), so every call takes the library's path,
 * which runs or waits for start-up. The library opens it by publishing
 * owned, boot_start, next and heap_break first, then boot_len, then
 * small_below, then quiet_below, each of the last three with a release
 * store; the shim loads the one its call depends on with acquire before
 * it reads the rest. */

/* The library's region table (blocks.h), one byte per GiB of the 47-bit
 * user address space, nonzero where a region of blocks lies. */
#define HZ_SHIM_REGION_SHIFT 30
#define HZ_SHIM_REGION_GIBS ((uintptr_t)1 << (47 - HZ_SHIM_REGION_SHIFT))

struct hz_shim_fast {
	/* Requests below this many bytes go to next with no other check:
	 * small_below, or less while glibc's break is watched (heap_break). */
	size_t quiet_below;
	/* Requests below this many bytes go to next as they came: the
	 * threshold while large requests are routed (hugezero blocks or the
	 * jemalloc arena), SIZE_MAX when nothing is (HUGEZERO_DISABLE). */
	size_t small_below;
	/* The bootstrap arena: its pointers are the library's to free. */
	uintptr_t boot_start;
	size_t boot_len;
	const uint8_t *owned;
	/* The next allocator as the shim resolved it (what serves small
	 * requests: jemalloc's own functions, not the routed ones). */
	struct hz_next next;
	/* glibc's break (__curbrk) while hugezero watches the heap, else
	 * NULL, and its value when the library last looked: a request from
	 * quiet_below to small_below that finds the two differ calls
	 * hz_preload_heap_moved first (heap.c). Past the fields above, off
	 * the line the fast path reads. */
	const uintptr_t *heap_break;
	uintptr_t heap_seen;
};

/* The shim's copy, to fill when start-up completes. Called by the shim
 * before hz_preload_start; a program that stands in for the shim without
 * one does not call it. */
HZ_PRIVATE_API void hz_preload_attach(struct hz_shim_fast *fast);

/* ---- start-up ---- */

/* What hz_preload_begin tells the calling thread to do before its call. */
enum hz_start_step {
	HZ_START_DONE,    /* nothing: start-up has completed */
	HZ_START_NESTED,  /* this thread is running start-up (dlsym calling
			   * calloc): make the call, the bootstrap serves it */
	HZ_START_RESOLVE, /* this thread starts: resolve the next functions
			   * and call hz_preload_start with them */
};

/* The shim's first call of each thread until start-up has completed.
 * Exactly one caller gets HZ_START_RESOLVE; the others wait here until it
 * has called hz_preload_start (it takes microseconds), then get DONE. */
HZ_PRIVATE_API enum hz_start_step hz_preload_begin(void);

/* Install the next functions (NULL fields get hugezero's fallbacks; the
 * table is copied) and run start-up before main. Called by the thread that
 * hz_preload_begin told to resolve, or directly, before any other
 * hz_preload_* call, by a program that links the library and stands in for
 * the shim (the tests). Later calls do nothing. */
HZ_PRIVATE_API void hz_preload_start(const struct hz_next *found);

/* Called by the shim's destructor: the exit report. */
HZ_PRIVATE_API void hz_preload_exit(void);

/* ---- the interposed calls: start-up has completed, or this thread is
 * running it ---- */

/* glibc's break moved since hz_shim_fast.heap_seen: look at the heap. */
HZ_PRIVATE_API void hz_preload_heap_moved(void);

HZ_PRIVATE_API void *hz_preload_malloc(size_t size);
HZ_PRIVATE_API void hz_preload_free(void *p);
HZ_PRIVATE_API void *hz_preload_calloc(size_t nmemb, size_t size);
HZ_PRIVATE_API void *hz_preload_realloc(void *p, size_t size);
HZ_PRIVATE_API int hz_preload_posix_memalign(void **out, size_t align, size_t size);
HZ_PRIVATE_API void *hz_preload_aligned_alloc(size_t align, size_t size);
HZ_PRIVATE_API void *hz_preload_memalign(size_t align, size_t size);
HZ_PRIVATE_API void *hz_preload_valloc(size_t size);
HZ_PRIVATE_API void *hz_preload_pvalloc(size_t size);
HZ_PRIVATE_API size_t hz_preload_malloc_usable_size(void *p);
HZ_PRIVATE_API void *hz_preload_mmap(void *addr, size_t len, int prot, int flags, int fd,
				     off_t off);
HZ_PRIVATE_API int hz_preload_munmap(void *addr, size_t len);
HZ_PRIVATE_API void *hz_preload_mremap(void *old, size_t old_len, size_t new_len, int flags,
				       void *new_addr);
/* unshare and setns (ns.c): the pre-zero thread is stopped, then real
 * (the next library's, never NULL unless dlsym failed: ENOSYS) called. */
HZ_PRIVATE_API int hz_preload_unshare(int (*real)(int), int flags);
HZ_PRIVATE_API int hz_preload_setns(int (*real)(int, int), int fd, int nstype);
/* About to make system call nr (first argument first_arg) in the calling
 * thread (creds.c): one that changes the thread's credentials,
 * capabilities or sandbox stops the pre-zero thread first. */
HZ_PRIVATE_API void hz_preload_security_call(long nr, long first_arg);

#endif /* HZ_PRELOAD_SHIM_ABI_H */
