/* Anonymous mmap: large private anonymous mappings the program asks for
 * without an address come back 2 MiB aligned, so THP can back them. Only
 * THP: programs unmap and mprotect parts of such mappings, which hugetlb
 * does not allow. Everything else passes through.
 *
 * No advice by default (lazy huge pages, promote.h): such mappings are
 * often sparse (hash tables, coroutine stacks, other allocators' chunks;
 * cc1 makes about a hundred of 2 MiB), and MADV_HUGEPAGE gave each touched
 * 2 MiB a whole huge page. They fault 4 KiB pages, as under glibc, and the
 * promoter collapses the 2 MiB ranges the program makes dense. The
 * program's munmap, mremap and MAP_FIXED over one end its tracking first
 * (hz_promote_forget), so no collapse lands on what is mapped there next.
 * HUGEZERO_LAZY_THP=0 advises THP at map time as before. A size class's
 * mmaps used densely earn THP at map time for the next ones (below). */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "../backing.h"
#include "../blocks.h"
#include "../classes.h"
#include "../config.h"
#include "../log.h"
#include "../prim/memory.h"
#include "../prim/prim.h"
#include "../prezero.h"
#include "../promote.h"
#include "../range.h"
#include "../sizes.h"
#include "../stats.h"
#include "evidence.h"
#include "foreign.h"
#include "limits.h"
#include "pieces.h"
#include "preload.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#ifndef MAP_32BIT
#define MAP_32BIT 0 /* x86_64 only */
#endif

/* Only plain requests are aligned. An address (hint or fixed), a stack
 * that grows, hugetlb, and MAP_32BIT are the program's own placement:
 * MAP_32BIT's window is 1 GiB (the kernel's 0x40000000-0x80000000 on
 * x86_64), and rounding each 3 MiB JIT buffer to 4 MiB there fits a
 * quarter fewer of them (256 instead of 341). */
static int plain_request(void *addr, int prot, int flags)
{
	const int special = MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_GROWSDOWN |
			    MAP_HUGETLB | MAP_STACK | MAP_32BIT;

	return addr == NULL && (flags & MAP_ANONYMOUS) &&
	       (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & special) &&
	       (prot & PROT_WRITE) &&
	       __atomic_load_n(&hz_preload_active, __ATOMIC_RELAXED) && !hz_preload_forking &&
	       hz_config()->mmap;
}

static int wants_alignment(void *addr, size_t len, int prot, int flags)
{
	return len >= __atomic_load_n(&hz_config_threshold, __ATOMIC_RELAXED) &&
	       len <= SIZE_MAX - 2 * HZ_SZ_2M && plain_request(addr, prot, flags);
}

/* A piece (pieces.h): exactly read-write, private and anonymous, so that
 * the pieces of one window share its protection and flags. */
static int wants_piece(void *addr, size_t len, int prot, int flags)
{
	return hz_pieces_size(len) && prot == (PROT_READ | PROT_WRITE) &&
	       flags == (MAP_PRIVATE | MAP_ANONYMOUS) &&
	       len < __atomic_load_n(&hz_config_threshold, __ATOMIC_RELAXED) &&
	       hz_promote_enabled() && plain_request(addr, prot, flags);
}

/* ---- evidence: a class's last lazy mmap, judged at its next ----
 *
 * cc1 makes its GC pages in 2 MiB mmaps, one after another, each written
 * through before the next: THP at map time (HUGEZERO_LAZY_THP=0) made
 * gcc -O2 10% faster here, and a 2 MiB range has no rest for the first
 * touches (promote_density.h) to advise. So a class's last mmap left on
 * 4 KiB pages is judged when the program maps the next of its size
 * (hz_promote_used): what it made resident is evidence for the class
 * (classes.h), which gives its next mmaps THP at map time, all but a
 * sample. Only mmaps of up to HZ_GUESS_MAX (classes.h): a larger range
 * used sparsely would cost more RSS on a wrong guess; the first touches
 * serve those (the ledger holds none larger). */
static void keep_for_judging(void *start, size_t size)
{
	hz_class_keep_lazy_mmap(size, (uintptr_t)start, hz_align_down(size, HZ_SZ_2M));
}

/* THP at map time on the class's evidence, where fresh huge pages are not
 * slower than 4 KiB pages here. */
static bool thp_at_map(size_t size)
{
	if (size > HZ_GUESS_MAX || !hz_promote_enabled())
		return false;
	hz_evidence_judge_last(size);
	return hz_class_mmap_thp(size) && hz_backing_fresh_thp_fast(size);
}

/* 2 MiB aligned. A trim splits the mapping, which fails at
 * vm.max_map_count: then all of it goes back (HZ_TRIM_OR_FAIL) and the
 * caller maps the plain request, so no unused piece is left behind. */
static void *map_aligned(size_t len, int prot, int flags)
{
	size_t size = hz_align_up(len, HZ_SZ_4K);
	void *start;

	if (hz_prim_map_aligned(size, HZ_SZ_2M, 0, prot, flags, HZ_TRIM_OR_FAIL, &start) != 0)
		return MAP_FAILED;
	if (!hz_config()->lazy_thp) {
		hz_prim_madvise(start, size, MADV_HUGEPAGE);
	} else if (thp_at_map(size) && hz_prim_madvise(start, size, MADV_HUGEPAGE) == 0) {
		hz_stats_add(thp_up_front, 1);
		/* Its first page, which the program writes first: timed
		 * (backing.h), before the program can register the range with
		 * userfaultfd, whose handler the fault would wait for. */
		if (size >= HZ_SZ_2M)
			(void)hz_backing_time_fresh_page((uintptr_t)start);
	} else {
		keep_for_judging(start, size);
		hz_prezero_watch((uintptr_t)start, size, HZ_PROMOTE_MMAP);
	}
	hz_stats_add(mmaps_aligned, 1);
	hz_stats_add(mmap_bytes, size);
	return start;
}

/* The kernel's mmap; its ENOMEM after hugezero held address space or
 * memory unused is asked again once that is given back (limits.c). */
static void *next_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	int before = errno;
	void *p = hz_next.next_mmap(addr, len, prot, flags, fd, off);

	if (p != MAP_FAILED || !hz_preload_give_back_for(errno))
		return p;
	errno = before;
	return hz_next.next_mmap(addr, len, prot, flags, fd, off);
}

HZ_PRIVATE_API void *hz_preload_mmap(void *addr, size_t len, int prot, int flags, int fd,
				     off_t off)
{
	/* An offset off a page boundary is the kernel's EINVAL, anonymous
	 * memory or not: never served here. */
	if ((uint64_t)off % hz_prim_page_size() != 0)
		return hz_next.next_mmap(addr, len, prot, flags, fd, off);
	if (wants_alignment(addr, len, prot, flags)) {
		int saved = errno;
		void *p = map_aligned(len, prot, flags);

		if (p != MAP_FAILED)
			return p;
		errno = saved; /* try the plain request below */
	}
	if (wants_piece(addr, len, prot, flags)) {
		int saved = errno;
		void *p = hz_pieces_map(len);

		if (p)
			return p;
		errno = saved;
	}
	if (flags & MAP_FIXED) {
		hz_foreign_changed(addr, len); /* over a block or a window's rest: foreign.h */
		hz_promote_forget((uintptr_t)addr, len);
	}
	return next_mmap(addr, len, prot, flags, fd, off);
}

/* The regions hold our blocks and their metadata's promises: a range the
 * kernel unmapped inside one could take other mappings where we later map
 * blocks. So munmap and mremap there go through foreign.c, which lets the
 * program unmap or move what is its own (a mapping it put over a block,
 * part of a live block of its own) and keeps the range reserved; anything
 * else (a freed block, free space: a bug) is refused, as the kernel does
 * for ranges it does not allow. */
static int touches_reservation(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	struct hz_range r = { a, len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len };

	return hz_blocks_touches(r);
}

/* Said under HUGEZERO_VERBOSE only: the program gets its EINVAL, and its
 * stderr is not ours to write to. */
static void refuse(const char *what, const void *addr)
{
	static int told;

	if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
		hz_info("%s(%p) inside hugezero's reserved range refused with EINVAL "
			"(a pointer from malloc was unmapped)", what, addr);
	errno = EINVAL;
}

HZ_PRIVATE_API int hz_preload_munmap(void *addr, size_t len)
{
	if (touches_reservation(addr, len)) {
		/* The program's own mapping over a block goes (foreign.h). */
		int ret = hz_foreign_unmap(addr, len);

		if (ret == 0)
			return 0;
		if (ret != -EINVAL) {
			errno = -ret;
			return -1;
		}
		refuse("munmap", addr);
		return -1;
	}
	hz_promote_forget((uintptr_t)addr, len);
	hz_pieces_forget(addr, len);
	return hz_next.next_munmap(addr, len);
}

HZ_PRIVATE_API void *hz_preload_mremap(void *old, size_t old_len, size_t new_len, int flags,
				       void *new_addr)
{
	if (touches_reservation(old, old_len) ||
	    ((flags & MREMAP_FIXED) && touches_reservation(new_addr, new_len))) {
		/* The program's own range goes or moves (foreign.h). */
		void *out;
		int ret = hz_foreign_remap(old, old_len, new_len, flags, new_addr, &out);

		if (ret == 0)
			return out;
		if (ret != -EINVAL) {
			errno = -ret;
			return MAP_FAILED;
		}
		refuse("mremap", old);
		return MAP_FAILED;
	}
	hz_promote_forget((uintptr_t)old, old_len);
	/* Up to where it may grow in place, as it could under glibc. */
	hz_pieces_forget(old, old_len > new_len ? old_len : new_len);
	if (flags & MREMAP_FIXED) {
		hz_promote_forget((uintptr_t)new_addr, new_len);
		hz_pieces_forget(new_addr, new_len);
	}
	return hz_next.next_mremap(old, old_len, new_len, flags, new_addr);
}
