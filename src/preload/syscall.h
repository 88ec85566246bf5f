/* syscall(2) through the C library's syscall() function: the interface
 * between the shim's syscall symbol (shim_mmap.c) and syscall.c,
 * which routes the memory calls hugezero interposes to the same handlers
 * as their wrappers. This symbol is exported for the shim only; it is not
 * a public API. */
#ifndef HZ_PRELOAD_SYSCALL_H
#define HZ_PRELOAD_SYSCALL_H

#include "preload.h" /* HZ_PRIVATE_API */

/* The next syscall() in the chain: the C library's. */
typedef long (*hz_syscall_fn)(long, ...);

/* syscall(nr, a...) as the C library's: -1 with errno set for a result
 * in [-4095, -1], the result otherwise. real is the next syscall() (NULL:
 * ENOSYS). Every caller is the program: hugezero makes its own system
 * calls without this symbol (src/prim/raw.h). */
HZ_PRIVATE_API long hz_preload_syscall(hz_syscall_fn real, long nr, const long a[6]);

#endif /* HZ_PRELOAD_SYSCALL_H */
