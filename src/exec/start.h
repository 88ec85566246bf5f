/* HUGEZERO_EXEC at the preload's start-up (start.c). */
#ifndef HZ_EXEC_START_H
#define HZ_EXEC_START_H

/* Exported from libhugezero.so like the hz_preload_* functions: the shim
 * (libhugezero-preload.so) calls hz_exec_dlopen, and the tests' helper
 * programs call both. Not a public API. */
#ifndef HZ_EXEC_API
#define HZ_EXEC_API __attribute__((visibility("default")))
#endif

/* Apply HUGEZERO_EXEC to every executable PT_LOAD segment of the process.
 * Call once from the preload's start-up, before the program starts threads
 * (remap refuses to run once there are several). Later calls do nothing.
 * Never fails: what cannot be done is skipped, with the reason at
 * HUGEZERO_VERBOSE=2. */
HZ_EXEC_API void hz_exec_start(void);

#endif /* HZ_EXEC_START_H */
