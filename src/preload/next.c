/* The next allocator in the chain, and the bootstrap allocator used while
 * we look it up: dlsym may itself call calloc (for its error state), and that
 * call arrives here before we know where the real calloc is. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "../prim/prim.h"
#include "../range.h"
#include "../sizes.h"
#include "preload.h"

/* 64 KiB: what dlsym and pthread_atfork ask for during start-up is a few
 * hundred bytes; memory from here is never reused. */
#define BOOT_SIZE (64u << 10)
#define BOOT_ALIGN 16u

static _Alignas(BOOT_ALIGN) unsigned char boot_arena[BOOT_SIZE];
static size_t boot_used;

int hz_boot_owns(const void *p)
{
	return (const unsigned char *)p >= boot_arena &&
	       (const unsigned char *)p < boot_arena + BOOT_SIZE;
}

void hz_boot_range(uintptr_t *start, size_t *len)
{
	*start = (uintptr_t)boot_arena;
	*len = BOOT_SIZE;
}

size_t hz_boot_size(const void *p)
{
	return ((const size_t *)p)[-2];
}

/* The size is checked before the arena moves: a request that cannot fit
 * takes nothing, so a huge one neither wraps boot_used nor spends the
 * arena that the requests after it need. */
static void *boot_malloc(size_t size)
{
	size_t at = __atomic_load_n(&boot_used, __ATOMIC_RELAXED), need;
	size_t *p;

	if (size > BOOT_SIZE) {
		errno = ENOMEM;
		return NULL;
	}
	need = hz_align_up(size, BOOT_ALIGN) + BOOT_ALIGN;
	do {
		if (need > BOOT_SIZE - at) {
			errno = ENOMEM;
			return NULL;
		}
	} while (!__atomic_compare_exchange_n(&boot_used, &at, at + need, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	p = (size_t *)(boot_arena + at + BOOT_ALIGN);
	p[-2] = size;
	return p; /* static storage: already zero */
}

static void boot_free(void *p)
{
	(void)p;
}

static void *boot_calloc(size_t n, size_t size)
{
	size_t total;

	if (hz_preload_calloc_total(n, size, &total) != 0)
		return NULL;
	return boot_malloc(total);
}

static void *boot_realloc(void *p, size_t size)
{
	void *q = boot_malloc(size);

	if (q && p)
		memcpy(q, p, hz_boot_size(p) < size ? hz_boot_size(p) : size);
	return q;
}

static void *boot_memalign(size_t align, size_t size)
{
	/* Start-up never asks for more than the arena's 16-byte alignment. */
	if (align > BOOT_ALIGN) {
		errno = ENOMEM;
		return NULL;
	}
	return boot_malloc(size);
}

static int boot_posix_memalign(void **out, size_t align, size_t size)
{
	void *p = boot_memalign(align, size);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static void *boot_valloc(size_t size)
{
	return boot_memalign(HZ_SZ_4K, size);
}

static size_t boot_usable(void *p)
{
	return hz_boot_owns(p) ? hz_boot_size(p) : 0;
}

/* mmap family straight to the kernel, for before dlsym answered. */
static void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *out;
	int ret = hz_prim_mmap(addr, len, prot, flags, fd, off, &out);

	if (ret != 0) {
		errno = -ret;
		return MAP_FAILED;
	}
	return out;
}

static int sys_munmap(void *addr, size_t len)
{
	int ret = hz_prim_munmap(addr, len);

	if (ret != 0) {
		errno = -ret;
		return -1;
	}
	return 0;
}

static void *sys_mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL, *out;
	va_list ap;
	int ret;

	va_start(ap, flags);
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP))
		new_addr = va_arg(ap, void *);
	va_end(ap);
	ret = hz_prim_mremap(old, old_len, new_len, flags, new_addr, &out);
	if (ret != 0) {
		errno = -ret;
		return MAP_FAILED;
	}
	return out;
}

#define BOOTSTRAP { \
	boot_malloc, boot_free, boot_calloc, boot_realloc, boot_posix_memalign, \
	boot_memalign, boot_memalign, boot_valloc, boot_valloc, boot_usable, \
	sys_mmap, sys_munmap, sys_mremap, NULL, NULL, \
}

static const struct hz_next bootstrap = BOOTSTRAP;
struct hz_next hz_next = BOOTSTRAP;

/* Substitutes for functions an allocator may lack, built on the ones it
 * has (every allocator has malloc, free and one aligned entry point). */
static void *emu_calloc(size_t n, size_t size)
{
	size_t total;
	void *p;

	if (hz_preload_calloc_total(n, size, &total) != 0)
		return NULL;
	p = hz_next.next_malloc(total);
	if (p)
		memset(p, 0, total);
	return p;
}

static size_t emu_usable(void *p)
{
	(void)p;
	return 0;
}

static int emu_posix_memalign(void **out, size_t align, size_t size)
{
	void *p = hz_next.next_memalign ? hz_next.next_memalign(align, size) : NULL;

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static void *emu_memalign(size_t align, size_t size)
{
	void *p = NULL;
	int ret = hz_next.next_posix_memalign(&p, align, size);

	if (ret != 0)
		errno = ret;
	return p;
}

static void *emu_valloc(size_t size)
{
	return hz_next.next_memalign(HZ_SZ_4K, size);
}

int hz_next_sizes_known;

/* Whether two functions are defined in the same loaded object. */
static int same_object(void *a, void *b)
{
	Dl_info ia, ib;

	return dladdr(a, &ia) != 0 && dladdr(b, &ib) != 0 && ia.dli_fbase == ib.dli_fbase;
}

void hz_next_complete(struct hz_next *next)
{
	/* malloc and free come as a pair: never mix a found one with ours. */
	if (!next->next_malloc || !next->next_free) {
		next->next_malloc = bootstrap.next_malloc;
		next->next_free = bootstrap.next_free;
	}
	if (!next->next_calloc)
		next->next_calloc = emu_calloc;
	hz_next_sizes_known = next->next_malloc_usable_size != NULL &&
			      same_object((void *)next->next_malloc,
					  (void *)next->next_malloc_usable_size);
	if (!next->next_malloc_usable_size)
		next->next_malloc_usable_size = emu_usable;
	if (!next->next_posix_memalign)
		next->next_posix_memalign = next->next_memalign ? emu_posix_memalign
								: bootstrap.next_posix_memalign;
	if (!next->next_memalign)
		next->next_memalign = emu_memalign;
	if (!next->next_aligned_alloc)
		next->next_aligned_alloc = next->next_memalign;
	if (!next->next_valloc)
		next->next_valloc = emu_valloc;
	if (!next->next_pvalloc)
		next->next_pvalloc = emu_valloc;
	if (!next->next_mmap)
		next->next_mmap = sys_mmap;
	if (!next->next_munmap)
		next->next_munmap = sys_munmap;
	if (!next->next_mremap)
		next->next_mremap = sys_mremap;
}
