/* libhugezero-preload.so: the symbols that interpose the C library's, each
 * a one-line call into libhugezero.so, and the lookup of the next
 * allocator, which must happen here (see preload.h). */
/* mmap and mmap64 are both exported: keep <sys/mman.h> from renaming one
 * into the other (64-bit off_t either way on 64-bit targets). */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>

#include "../exec/exec.h"
#include "preload.h"

#define EXPORT __attribute__((visibility("default")))

static void resolve(struct hz_next *next)
{
	next->malloc = dlsym(RTLD_NEXT, "malloc");
	next->free = dlsym(RTLD_NEXT, "free");
	next->calloc = dlsym(RTLD_NEXT, "calloc");
	next->realloc = dlsym(RTLD_NEXT, "realloc");
	next->posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	next->aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	next->memalign = dlsym(RTLD_NEXT, "memalign");
	next->valloc = dlsym(RTLD_NEXT, "valloc");
	next->pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	next->malloc_usable_size = dlsym(RTLD_NEXT, "malloc_usable_size");
	next->mmap = dlsym(RTLD_NEXT, "mmap");
	next->munmap = dlsym(RTLD_NEXT, "munmap");
	next->mremap = dlsym(RTLD_NEXT, "mremap");
}

EXPORT void *malloc(size_t size) { return hz_preload_malloc(resolve, size); }
EXPORT void free(void *p) { hz_preload_free(resolve, p); }
EXPORT void *calloc(size_t n, size_t size) { return hz_preload_calloc(resolve, n, size); }
EXPORT void *realloc(void *p, size_t size) { return hz_preload_realloc(resolve, p, size); }

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return hz_preload_realloc(resolve, p, total);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	return hz_preload_posix_memalign(resolve, out, align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	return hz_preload_aligned_alloc(resolve, align, size);
}

EXPORT void *memalign(size_t align, size_t size)
{
	return hz_preload_memalign(resolve, align, size);
}

EXPORT void *valloc(size_t size) { return hz_preload_valloc(resolve, size); }
EXPORT void *pvalloc(size_t size) { return hz_preload_pvalloc(resolve, size); }

EXPORT size_t malloc_usable_size(void *p)
{
	return hz_preload_malloc_usable_size(resolve, p);
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return hz_preload_mmap(resolve, addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return hz_preload_mmap(resolve, addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len) { return hz_preload_munmap(resolve, addr, len); }

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	va_list ap;

	va_start(ap, flags);
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP))
		new_addr = va_arg(ap, void *);
	va_end(ap);
	return hz_preload_mremap(resolve, old, old_len, new_len, flags, new_addr);
}

/* dlopen: executable text on large folios (src/exec/). The caller's
 * address is passed on so a bare name is searched in the caller's RUNPATH,
 * not ours. */
EXPORT void *dlopen(const char *file, int flags)
{
	static void *(*real)(const char *, int);
	void *(*fn)(const char *, int) = __atomic_load_n(&real, __ATOMIC_RELAXED);

	if (fn == NULL) {
		fn = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
		__atomic_store_n(&real, fn, __ATOMIC_RELAXED);
	}
	return hz_exec_dlopen(fn, file, flags, __builtin_return_address(0));
}

/* Start before main so the reservation exists before threads do, and
 * report at exit. */
__attribute__((constructor)) static void preload_start(void)
{
	hz_preload_start(resolve);
}

__attribute__((destructor)) static void preload_stop(void)
{
	hz_preload_exit();
}

/* ---- namespaces (ns.c): the pre-zero thread stops first ---- */

EXPORT int unshare(int flags)
{
	static int (*real)(int);
	int (*fn)(int) = __atomic_load_n(&real, __ATOMIC_RELAXED);

	if (fn == NULL) {
		fn = (int (*)(int))dlsym(RTLD_NEXT, "unshare");
		__atomic_store_n(&real, fn, __ATOMIC_RELAXED);
	}
	return hz_preload_unshare(fn, flags);
}

EXPORT int setns(int fd, int nstype)
{
	static int (*real)(int, int);
	int (*fn)(int, int) = __atomic_load_n(&real, __ATOMIC_RELAXED);

	if (fn == NULL) {
		fn = (int (*)(int, int))dlsym(RTLD_NEXT, "setns");
		__atomic_store_n(&real, fn, __ATOMIC_RELAXED);
	}
	return hz_preload_setns(fn, fd, nstype);
}
