/* dlopen through hugezero (dlopen.c): prewarm, then the mode applied to
 * what the call loaded. */
#ifndef HZ_EXEC_DLOPEN_H
#define HZ_EXEC_DLOPEN_H

/* Exported from libhugezero.so like the hz_preload_* functions: the shim
 * (libhugezero-preload.so) calls hz_exec_dlopen, and the tests' helper
 * programs call both. Not a public API. */
#ifndef HZ_EXEC_API
#define HZ_EXEC_API __attribute__((visibility("default")))
#endif

/* dlopen through hugezero: when the library is mostly not in the page
 * cache, prewarm its text before the real dlopen maps it, then apply the
 * mode to the segments of every object the call loaded. caller is the
 * return address of the program's dlopen call (the shim passes
 * __builtin_return_address(0)): the real dlopen, called from here, would
 * otherwise search hugezero's DT_RUNPATH instead of the caller's, so bare
 * names found through the caller's directories are passed on as paths.
 * NULL is fine for paths. Returns what real_dlopen returns; errno and
 * dlerror() are the real call's. */
HZ_EXEC_API void *hz_exec_dlopen(void *(*real_dlopen)(const char *, int),
				 const char *file, int flags, const void *caller);

#endif /* HZ_EXEC_DLOPEN_H */
