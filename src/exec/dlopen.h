/* dlopen under the preload (dlopen.c): the real dlopen is reached by a
 * jump, never a call, so the program's caller stays the caller; the mode
 * is applied afterwards, when the thread that called it next enters
 * hugezero. */
#ifndef HZ_EXEC_DLOPEN_H
#define HZ_EXEC_DLOPEN_H

#include <stdbool.h>

/* Exported from libhugezero.so like the hz_preload_* functions: the shim
 * (libhugezero-preload.so) calls hz_exec_dlopen_begin, and the tests'
 * helper programs call hz_exec_dlopen. Not a public API. */
#ifndef HZ_EXEC_API
#define HZ_EXEC_API __attribute__((visibility("default")))
#endif

/* Before the real dlopen, which the shim then enters by a jump with the
 * program's return address in place: glibc resolves $ORIGIN, DT_RPATH,
 * DT_RUNPATH and the namespace against the object that address lies in,
 * so nothing here searches for the file. What this thread's previous
 * dlopen loaded is settled first (hz_exec_dlopen_settle); then, when file
 * is a path without dynamic string tokens (ld.so opens exactly it), its
 * cold text is prewarmed; and the loader's counters are noted so the
 * objects this call adds can be told apart later. Keeps errno. */
HZ_EXEC_API void hz_exec_dlopen_begin(const char *file, int flags);

/* This thread's last dlopen has not been settled yet. */
extern __thread bool hz_exec_dlopen_pending;

/* Apply the mode to what this thread's last dlopen (and anything loaded
 * meanwhile) added. Called where the thread next enters hugezero: its
 * next dlopen and its next large allocation. Keeps errno. */
void hz_exec_dlopen_settle_slow(void);

static inline void hz_exec_dlopen_settle(void)
{
	if (__builtin_expect(hz_exec_dlopen_pending, 0))
		hz_exec_dlopen_settle_slow();
}

/* For a program that calls hugezero itself (the tests, bench/exec-shim.c):
 * begin, the real call, and the mode applied at once. real_dlopen is
 * called from here, so hugezero is its caller: meant for paths, as a bare
 * name or $ORIGIN would be resolved against hugezero's object. Returns
 * what real_dlopen returns; errno and dlerror() are the real call's. */
HZ_EXEC_API void *hz_exec_dlopen(void *(*real_dlopen)(const char *, int), const char *file,
				 int flags);

#endif /* HZ_EXEC_DLOPEN_H */
