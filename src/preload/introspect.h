/* The shim's malloc_trim, mallinfo2, mallinfo, malloc_stats, malloc_info
 * and mallopt: see introspect.c and introspect_text.c. Exported for the
 * shim only, like preload.h's hz_preload_* functions: not a public API. */
#ifndef HZ_PRELOAD_INTROSPECT_H
#define HZ_PRELOAD_INTROSPECT_H

#include <malloc.h>
#include <stddef.h>
#include <stdio.h>

#include "preload.h"

/* malloc_trim(pad): real (the next library's, NULL when it has none) is
 * called, then hugezero gives back its cached blocks and the regions left
 * without a block. Returns 1 when either gave memory back, else 0, as
 * glibc's does. Keeps errno. */
HZ_PRIVATE_API int hz_preload_malloc_trim(int (*real)(size_t), size_t pad);

/* Add the live blocks to what the next allocator's mallinfo2 or mallinfo
 * answered (see introspect.c for which fields). */
HZ_PRIVATE_API void hz_preload_mallinfo2(struct mallinfo2 *m);
HZ_PRIVATE_API void hz_preload_mallinfo(struct mallinfo *m);

/* malloc_stats and malloc_info (introspect_text.c): real's text, written
 * where it would have gone, with the live blocks counted as glibc counts
 * its mmapped chunks. real is the next library's function, NULL when it
 * has none (then malloc_stats writes nothing, malloc_info returns ENOSYS).
 * Keep errno; malloc_info returns what real returned. */
HZ_PRIVATE_API void hz_preload_malloc_stats(void (*real)(void));
HZ_PRIVATE_API int hz_preload_malloc_info(int (*real)(int, FILE *), int options, FILE *fp);

/* After the next allocator's mallopt(param, value) answered ret: what
 * hugezero's blocks follow of it (M_PERTURB). */
HZ_PRIVATE_API void hz_preload_mallopt(int param, int value, int ret);

/* Start-up: the perturb byte of MALLOC_PERTURB_ or GLIBC_TUNABLES'
 * glibc.malloc.perturb, as glibc reads them. */
void hz_preload_perturb_start(void);

/* A block malloc (not calloc) hands out: filled with the perturb byte's
 * complement when one is set, as glibc fills what it hands out. */
void hz_preload_perturb(void *p, size_t size);

#endif /* HZ_PRELOAD_INTROSPECT_H */
