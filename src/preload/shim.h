/* What the files of libhugezero-preload.so share among themselves, and
 * nothing the library sees (that is shim_abi.h): start-up, the fast path's
 * copy, and the lookup of the next definition of a symbol. Everything here
 * is hidden; only the EXPORT definitions leave the object. */
#ifndef HZ_PRELOAD_SHIM_H
#define HZ_PRELOAD_SHIM_H

#include <dlfcn.h>
#include <errno.h>

#include "shim_abi.h"
#include "syscall.h"
#include "tasks.h"

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))
#define COLD __attribute__((noinline, cold))

/* Start-up has completed: set once, never cleared. One load and a branch
 * that is always taken the same way on every call, in place of the call
 * into the library that checked its own state. */
HIDDEN extern int hz_shim_started;

/* The fast path's copy (shim_abi.h): closed until the library fills it. */
HIDDEN extern struct hz_shim_fast hz_shim_fast;

/* The first call of a thread before start-up completed (shim.c). */
HIDDEN COLD void hz_shim_start_up(void);

static inline void hz_shim_ready(void)
{
	if (__builtin_expect(!__atomic_load_n(&hz_shim_started, __ATOMIC_ACQUIRE), 0))
		hz_shim_start_up();
}

/* dlsym(RTLD_NEXT, name), looked up at the first call and kept in *cache
 * (relaxed: threads that race store the same answer). */
HIDDEN void *hz_shim_next_once(void **cache, const char *name);

/* The C library's syscall() and pthread_create, looked up with the
 * allocator (shim.c says why they cannot wait for their first call). */
HIDDEN hz_syscall_fn hz_shim_syscall_next(void);
HIDDEN hz_pthread_create_fn hz_shim_pthread_create_next(void);

/* The next definition of name, looked up once, at its first call. Not in
 * struct hz_next, resolved at start-up: these may be called before it (a
 * library's constructor, an allocator's own initialisation), where start-up
 * must not run; the library needs none of them in its table. */
#define NEXT(type, name)                                                     \
	({                                                                   \
		static void *next_;                                          \
		(__typeof__(type))hz_shim_next_once(&next_, name);           \
	})

/* A function this C library lacks fails as the kernel would without it. */
#define CALL_NEXT(type, name, ...)                                           \
	({                                                                   \
		__typeof__(type) f_ = NEXT(type, name);                      \
		f_ ? f_(__VA_ARGS__) : (errno = ENOSYS, -1);                 \
	})

#endif /* HZ_PRELOAD_SHIM_H */
