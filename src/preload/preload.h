/* The interposition logic's own state inside libhugezero.so, shared by
 * malloc.c, mmap.c, next.c and start.c; the ABI the shim calls is in
 * shim_abi.h. */
#ifndef HZ_PRELOAD_H
#define HZ_PRELOAD_H

#include "shim_abi.h"

extern struct hz_next hz_next;

/* Large requests go to hugezero only when this is true: set up done,
 * HUGEZERO_DISABLE off and the reservation made. */
extern int hz_preload_active;

/* Make sure start-up ran. Returns 0 when this thread is inside start-up
 * itself (dlsym calling calloc): the caller must use hz_next, which then
 * points at the bootstrap allocator. */
int hz_preload_ready(hz_resolve_fn r);

/* The bootstrap allocator that serves start-up's own requests. */
int hz_boot_owns(const void *p);
size_t hz_boot_size(const void *p);
void hz_next_use_bootstrap(struct hz_next *next);
/* Fill what the resolver left NULL with safe substitutes. */
void hz_next_complete(struct hz_next *next);

#endif /* HZ_PRELOAD_H */
