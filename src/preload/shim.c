/* libhugezero-preload.so: the symbols that interpose the C library's, and
 * the lookup of the next allocator, which must happen in this object, once
 * (see shim_abi.h). A small request goes from the shim straight to the
 * next allocator; everything else is a call into libhugezero.so.
 *
 * This file: start-up, and the lookup of the next allocator it hands to
 * the library. The exported symbols are in shim_malloc.c (the malloc
 * family and its fast path), shim_mmap.c (mmap, munmap, mremap, syscall),
 * shim_foreign.c (calls that change blocks the program holds),
 * shim_dlopen.c, shim_introspect.c and shim_process.c (limits, namespaces,
 * new tasks, credentials). */
#include <dlfcn.h>
#include <stdint.h>

#include "shim.h"

int hz_shim_started;

/* 64-byte aligned: malloc's and free's fields share one cache line. */
_Alignas(64) struct hz_shim_fast hz_shim_fast = { .quiet_below = 0, .small_below = 0,
					       .boot_len = SIZE_MAX };

/* The versioned lookup of the same names (defined at the end of the file). */
static void resolve_versioned(struct hz_next *next);

/* The allocator's functions after malloc and free, as X(name, version):
 * struct hz_next's next_<name>, looked up by resolve and again by
 * resolve_versioned at the C library's version (aligned_alloc came in a
 * later one than the rest). One list, so neither lookup misses a name. */
#define ALLOCATOR_REST(X)                                                    \
	X(calloc, LIBC_BASE) X(realloc, LIBC_BASE) X(posix_memalign, LIBC_BASE) \
	X(aligned_alloc, LIBC_ALIGNED_ALLOC) X(memalign, LIBC_BASE)            \
	X(valloc, LIBC_BASE) X(pvalloc, LIBC_BASE) X(malloc_usable_size, LIBC_BASE)

static void resolve(struct hz_next *next)
{
	next->next_malloc = dlsym(RTLD_NEXT, "malloc");
	next->next_free = dlsym(RTLD_NEXT, "free");
#define LOOKUP(name, version) next->next_##name = dlsym(RTLD_NEXT, #name);
	ALLOCATOR_REST(LOOKUP)
#undef LOOKUP
	next->next_mmap = dlsym(RTLD_NEXT, "mmap");
	next->next_munmap = dlsym(RTLD_NEXT, "munmap");
	next->next_mremap = dlsym(RTLD_NEXT, "mremap");
	next->next_mallopt = dlsym(RTLD_NEXT, "mallopt");
	resolve_versioned(next);
	next->next_pthread_create = hz_shim_pthread_create_next();
}

/* In the thread that runs start-up, calls made meanwhile (dlsym allocates)
 * return at once: the library's table is still the bootstrap allocator,
 * which serves them. */
void hz_shim_start_up(void)
{
	struct hz_next found;

	switch (hz_preload_begin()) {
	case HZ_START_NESTED:
		return;
	case HZ_START_RESOLVE:
		resolve(&found);
		hz_preload_attach(&hz_shim_fast);
		hz_preload_start(&found);
		break;
	case HZ_START_DONE:
		break;
	}
	__atomic_store_n(&hz_shim_started, 1, __ATOMIC_RELEASE);
}

/* Start before main so the reservation exists before threads do, and
 * report at exit. */
__attribute__((constructor)) static void preload_start(void)
{
	hz_shim_ready();
}

__attribute__((destructor)) static void preload_stop(void)
{
	hz_preload_exit();
}

void *hz_shim_next_once(void **cache, const char *name)
{
	void *fn = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (fn == NULL) {
		fn = dlsym(RTLD_NEXT, name);
		__atomic_store_n(cache, fn, __ATOMIC_RELAXED);
	}
	return fn;
}

/* pthread_create, looked up with the allocator (resolve_versioned):
 * hugezero starts its own thread through this symbol, maybe while it
 * holds one of its locks, where dlsym's loader lock must not be taken. */
static void *next_pthread_create;

hz_pthread_create_fn hz_shim_pthread_create_next(void)
{
	return (hz_pthread_create_fn)hz_shim_next_once(&next_pthread_create, "pthread_create");
}

/* The C library's syscall() (shim_mmap.c), looked up with the allocator:
 * a program may make its first syscall() anywhere, a signal handler
 * included (gettid, futex), where dlsym, which takes the loader's lock,
 * must not run. */
static void *next_syscall;

hz_syscall_fn hz_shim_syscall_next(void)
{
	return (hz_syscall_fn)hz_shim_next_once(&next_syscall, "syscall");
}

/* ---- the next allocator at the C library's symbol versions ----
 * A program linked against glibc refers to malloc@GLIBC_2.2.5 (x86_64;
 * GLIBC_2.17 on aarch64), and ld.so binds it to the first object that
 * defines that version, even as a non-default one: glibc's
 * libc_malloc_debug.so defines malloc & co. only at malloc@GLIBC_2.2.5,
 * which dlsym (it asks for the default version) passes over. So look the
 * allocator up the way the program's own reference binds, and keep what
 * dlsym found where the version is not defined. An allocator without
 * version information (jemalloc, a program's own) matches either way. */
#if defined(__x86_64__)
#define LIBC_BASE "GLIBC_2.2.5"
#define LIBC_ALIGNED_ALLOC "GLIBC_2.16"
#elif defined(__aarch64__)
#define LIBC_BASE "GLIBC_2.17"
#define LIBC_ALIGNED_ALLOC "GLIBC_2.17"
#endif

#ifdef LIBC_BASE
/* The versioned definition of name, where there is one. */
#define VERSIONED(name, version)                                             \
	{                                                                    \
		void *fn_ = dlvsym(RTLD_NEXT, #name, version);               \
		if (fn_ != NULL)                                             \
			next->next_##name = (__typeof__(next->next_##name))fn_; \
	}

#include <link.h>

/* Whether the object defining a comes before the one defining b in the
 * search order (the link map's order, for objects loaded at start). */
static int searched_before(void *a, void *b)
{
	Dl_info ia, ib;
	struct link_map *ma = NULL, *mb = NULL;

	if (dladdr1(a, &ia, (void **)&ma, RTLD_DL_LINKMAP) == 0 ||
	    dladdr1(b, &ib, (void **)&mb, RTLD_DL_LINKMAP) == 0 || ma == NULL || ma == mb)
		return 0;
	for (struct link_map *m = ma->l_next; m != NULL; m = m->l_next)
		if (m == mb)
			return 1;
	return 0;
}

static void resolve_versioned(struct hz_next *next)
{
	/* malloc and free come from one object: both versioned or neither. */
	void *vmalloc = dlvsym(RTLD_NEXT, "malloc", LIBC_BASE);
	void *vfree = dlvsym(RTLD_NEXT, "free", LIBC_BASE);

	hz_shim_syscall_next();
	hz_shim_pthread_create_next();
	/* dlvsym passes over a definition without version information in an
	 * object that has some (jemalloc's malloc), which the program's
	 * reference does bind to: the versioned answer counts only when it
	 * comes before dlsym's in the search order. */
	if (vmalloc == NULL || vfree == NULL || next->next_malloc == NULL ||
	    !searched_before(vmalloc, (void *)next->next_malloc))
		return;
	next->next_malloc = (void *(*)(size_t))vmalloc;
	next->next_free = (void (*)(void *))vfree;
	ALLOCATOR_REST(VERSIONED)
}
#else
static void resolve_versioned(struct hz_next *next)
{
	(void)next; /* no known base version here: dlsym's answer stands */
	hz_shim_syscall_next();
	hz_shim_pthread_create_next();
}
#endif
