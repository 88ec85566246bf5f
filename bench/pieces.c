/* The bound for small anonymous mmaps that come in runs, as CPython's
 * pymalloc maps its 1 MiB arenas: an LD_PRELOAD library that serves every
 * private anonymous mmap of exactly PIECES_SIZE bytes (default 1 MiB)
 * without an address from one region advised MADV_HUGEPAGE, back to back,
 * so that two arenas share each 2 MiB page and fault it once, as a huge
 * page. munmap of such a piece only drops its pages (the address is not
 * reused). Under glibc alone each arena faults 256 pages of 4 KiB, and THP
 * `always` cannot help: no 1 MiB mapping holds an aligned 2 MiB page
 * (bench/RESULTS.md, "CPython's arenas, what huge pages would give").
 *
 *   cc -O2 -fPIC -shared -o pieces.so bench/pieces.c
 *   LD_PRELOAD=./pieces.so python3 bench/apps/python-work.py 300000
 *
 * Not for real use: the region (4 GiB of address space, MAP_NORESERVE) is
 * never given back, a piece's address is never reused, and an mremap of a
 * piece goes to the kernel as it is. Everything else goes to the next
 * library's mmap and munmap (with libhugezero-preload.so after it in
 * LD_PRELOAD, to hugezero's). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REGION ((size_t)4 << 30)
#define HUGE ((uintptr_t)2 << 20)

static char *base, *next_piece, *end;
static size_t piece = (size_t)1 << 20;
static void *(*next_mmap)(void *, size_t, int, int, int, off_t);
static int (*next_munmap)(void *, size_t);

__attribute__((constructor)) static void setup(void)
{
	const char *s = getenv("PIECES_SIZE");
	char *b;

	next_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	next_munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
	if (s)
		piece = strtoull(s, NULL, 0);
	b = (char *)syscall(SYS_mmap, NULL, REGION + HUGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (b == MAP_FAILED)
		return;
	b = (char *)(((uintptr_t)b + HUGE - 1) & ~(HUGE - 1));
	syscall(SYS_madvise, b, REGION, MADV_HUGEPAGE);
	base = next_piece = b;
	end = b + REGION;
}

static int is_piece_request(void *addr, size_t len, int prot, int flags)
{
	return base && next_mmap && next_munmap && addr == NULL && len == piece && prot == (PROT_READ | PROT_WRITE) &&
	       flags == (MAP_PRIVATE | MAP_ANONYMOUS);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (is_piece_request(addr, len, prot, flags)) {
		char *p = __atomic_fetch_add(&next_piece, len, __ATOMIC_RELAXED);

		if (p + len <= end)
			return p;
	}
	if (next_mmap)
		return next_mmap(addr, len, prot, flags, fd, off);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

int munmap(void *addr, size_t len)
{
	if ((char *)addr >= base && (char *)addr < end)
		return (int)syscall(SYS_madvise, addr, len, MADV_DONTNEED);
	if (next_munmap)
		return next_munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}
