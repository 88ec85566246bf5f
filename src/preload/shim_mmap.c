/* mmap, munmap, mremap and syscall(2): every call goes to the library,
 * which places large anonymous mappings and keeps its blocks apart from
 * the program's calls. */
/* mmap and mmap64 are both exported: keep <sys/mman.h> from renaming one
 * into the other (64-bit off_t either way on 64-bit targets). */
#undef _FILE_OFFSET_BITS
#include <stdarg.h>
#include <sys/mman.h>

#include "shim.h"

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	hz_shim_ready();
	return hz_preload_mmap(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	hz_shim_ready();
	return hz_preload_mmap(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len)
{
	hz_shim_ready();
	return hz_preload_munmap(addr, len);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	va_list ap;

	va_start(ap, flags);
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP))
		new_addr = va_arg(ap, void *);
	va_end(ap);
	hz_shim_ready();
	return hz_preload_mremap(old, old_len, new_len, flags, new_addr);
}

/* syscall(2) (syscall.c): the memory calls above, made by number. glibc's
 * syscall() takes the number and six longs, whatever the call uses (its
 * own implementation loads six registers): read as many. */
EXPORT long syscall(long nr, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	return hz_preload_syscall(hz_shim_syscall_next(), nr, a);
}
