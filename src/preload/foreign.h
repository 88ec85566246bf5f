/* Blocks the program changed: the interface between the shim's wrappers of
 * mprotect, pkey_mprotect, mlock, mlock2, mlockall, munlockall, madvise,
 * posix_madvise and ioctl (shim_foreign.c) and foreign.c, which marks
 * the blocks they touch foreign (blocks.h), so that their free releases
 * them reset instead of caching them. mmap(MAP_FIXED) and munmap come
 * through mmap.c.
 *
 * Each wrapper calls in here and calls the real function itself (found in
 * the shim, see preload.h). These hz_foreign_* symbols are exported for
 * the shim only; they are not a public API. */
#ifndef HZ_PRELOAD_FOREIGN_H
#define HZ_PRELOAD_FOREIGN_H

#include <stddef.h>

#include "preload.h" /* HZ_PRIVATE_API */

/* Before mprotect, pkey_mprotect, mlock, mlock2 or mmap(MAP_FIXED) of
 * [addr, addr + len): the blocks it touches become foreign. Marked before
 * the call, so a free that follows the call (in any thread) sees the
 * mark; a call that then fails only costs those blocks their reuse. */
HZ_PRIVATE_API void hz_foreign_changed(const void *addr, size_t len);

/* Before madvise (or posix_madvise, the same numbers on Linux): advice
 * that changes the mapping marks; advice that only drops or fetches
 * contents does not. */
HZ_PRIVATE_API void hz_foreign_advised(const void *addr, size_t len, int advice);

/* Around mlockall(flags): before (begin) and after, with its result. */
HZ_PRIVATE_API void hz_foreign_lock_all_begin(int flags);
HZ_PRIVATE_API void hz_foreign_lock_all_end(int flags, int result);
/* After munlockall, with its result. */
HZ_PRIVATE_API void hz_foreign_unlock_all_end(int result);

/* After ioctl(fd, request, arg) returned result: a UFFDIO_REGISTER that
 * succeeded marks its range (arg is read only then: the kernel has read
 * it, so it is readable). */
HZ_PRIVATE_API void hz_foreign_ioctl_end(unsigned long request, const void *arg, int result);

/* ---- inside libhugezero.so ---- */

/* munmap of [addr, addr + len) inside the reservation (mmap.c): when every
 * granule it touches is foreign (the program's own mapping, put over a
 * block with mmap(MAP_FIXED), is what it unmaps), or the range lies inside
 * one live block past its first page (a tail of its own block, which
 * glibc's munmap would unmap too), the range becomes reservation again,
 * which reads as unmapped to the program, its granules are foreign, and 0
 * is returned. Otherwise -EINVAL (refused: a freed block, free space, a
 * block's start, or more than one block), or the reset's error. */
int hz_foreign_unmap(void *addr, size_t len);

/* Whether mlockall(MCL_FUTURE) is in force: every new mapping is locked. */
bool hz_foreign_future_locked(void);

/* mremap(old, old_len, new_len, flags, new_addr) where the old range, or
 * the MREMAP_FIXED target, touches the reservation (mmap.c): allowed, as
 * munmap above, when the old range is the program's own (its mapping
 * over a block, or part of a live block of its own) and the target, when
 * inside the reservation, is too; those granules become foreign. A
 * shrink in place resets the tail to reservation; a move reserves the
 * range it left again (MAP_FIXED_NOREPLACE). Returns 0 with *out set,
 * -EINVAL when refused, or the call's negative errno value. */
int hz_foreign_remap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr,
		     void **out);

#endif /* HZ_PRELOAD_FOREIGN_H */
