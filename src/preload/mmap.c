/* Anonymous mmap: large private anonymous mappings the program asks for
 * without an address come back 2 MiB aligned with MADV_HUGEPAGE, so THP can
 * back them. Only THP: programs unmap and mprotect parts of such mappings,
 * which hugetlb does not allow. Everything else passes through. */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "../blocks.h"
#include "../config.h"
#include "../log.h"
#include "../prim/memory.h"
#include "../prim/prim.h"
#include "../range.h"
#include "../stats.h"
#include "preload.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define THP_SIZE ((size_t)2 << 20)

static int wants_alignment(void *addr, size_t len, int prot, int flags)
{
	const int special = MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_GROWSDOWN |
			    MAP_HUGETLB | MAP_STACK;

	return addr == NULL && (flags & MAP_ANONYMOUS) &&
	       (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & special) &&
	       (prot & PROT_WRITE) &&
	       len >= __atomic_load_n(&hz_config_threshold, __ATOMIC_RELAXED) &&
	       len <= SIZE_MAX - 2 * THP_SIZE &&
	       __atomic_load_n(&hz_preload_active, __ATOMIC_RELAXED) &&
	       hz_config()->mmap;
}

/* 2 MiB aligned. A trim splits the mapping, which fails at
 * vm.max_map_count: then all of it goes back (HZ_TRIM_OR_FAIL) and the
 * caller maps the plain request, so no unused piece is left behind. */
static void *map_aligned(size_t len, int prot, int flags)
{
	size_t size = hz_align_up(len, 4096);
	void *start;

	if (hz_prim_map_aligned(size, THP_SIZE, 0, prot, flags, HZ_TRIM_OR_FAIL, &start) != 0)
		return MAP_FAILED;
	hz_prim_madvise(start, size, MADV_HUGEPAGE);
	hz_stats_add(mmaps_aligned, 1);
	hz_stats_add(mmap_bytes, size);
	return start;
}

HZ_PRIVATE_API void *hz_preload_mmap(hz_resolve_fn r, void *addr, size_t len,
				     int prot, int flags, int fd, off_t off)
{
	if (hz_preload_ready(r) && wants_alignment(addr, len, prot, flags)) {
		int saved = errno;
		void *p = map_aligned(len, prot, flags);

		if (p != MAP_FAILED)
			return p;
		errno = saved; /* try the plain request below */
	}
	return hz_next.mmap(addr, len, prot, flags, fd, off);
}

/* The regions hold our blocks and their metadata's promises: a program
 * that unmaps or moves part of one (always a bug: it is not the program's
 * memory) would let the kernel place other mappings where we later map
 * blocks. Refuse, as the kernel does for ranges it does not allow. */
static int touches_reservation(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	struct hz_range r = { a, len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len };

	return hz_blocks_touches(r);
}

static void refuse(const char *what, const void *addr)
{
	static int warned;

	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		hz_warn("%s(%p) inside hugezero's reserved range refused with EINVAL "
			"(a pointer from malloc was unmapped)", what, addr);
	errno = EINVAL;
}

HZ_PRIVATE_API int hz_preload_munmap(hz_resolve_fn r, void *addr, size_t len)
{
	hz_preload_ready(r);
	if (touches_reservation(addr, len)) {
		refuse("munmap", addr);
		return -1;
	}
	return hz_next.munmap(addr, len);
}

HZ_PRIVATE_API void *hz_preload_mremap(hz_resolve_fn r, void *old, size_t old_len,
				       size_t new_len, int flags, void *new_addr)
{
	hz_preload_ready(r);
	if (touches_reservation(old, old_len) ||
	    ((flags & MREMAP_FIXED) && touches_reservation(new_addr, new_len))) {
		refuse("mremap", old);
		return MAP_FAILED;
	}
	return hz_next.mremap(old, old_len, new_len, flags, new_addr);
}
