/* The shim's setrlimit, setrlimit64, prlimit and prlimit64 (RLIMIT_AS):
 * see limits.c. Exported for the shim only, like preload.h's hz_preload_*
 * functions: not a public API. */
#ifndef HZ_PRELOAD_LIMITS_H
#define HZ_PRELOAD_LIMITS_H

#include <stdbool.h>
#include <sys/resource.h>

#include "preload.h"

/* Before the real call sets resource to *rl (the calling process's own
 * limit; rl NULL when the call only reads): for RLIMIT_AS, give back what
 * hugezero holds unused when the new soft limit would not leave it room.
 * Keeps errno. */
HZ_PRIVATE_API void hz_preload_setrlimit(int resource, const struct rlimit *rl);

/* After a call that failed with err: when it is ENOMEM, give back what
 * hugezero holds unused (its cached blocks, its regions without a block);
 * true when anything went, and the call is worth making again. */
HZ_PRIVATE_API bool hz_preload_give_back_for(int err);

#endif /* HZ_PRELOAD_LIMITS_H */
