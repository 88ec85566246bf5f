/* When the next allocator is jemalloc: large requests are served by a
 * jemalloc arena that carries hugezero's extent hooks (jemalloc_next.c). */
#ifndef HZ_PRELOAD_JEMALLOC_NEXT_H
#define HZ_PRELOAD_JEMALLOC_NEXT_H

#include "preload.h"

/* Called by start-up once *next is resolved and complete. When next's
 * malloc is jemalloc's (its object also exports mallocx), sends large
 * requests to hugezero's jemalloc arena: next's malloc, calloc and realloc
 * are wrapped, and the aligned family is routed there by malloc.c
 * (hz_preload_route_aligned). Returns 1: hugezero then makes no blocks of
 * its own, so every pointer the program gets is jemalloc's and every
 * jemalloc API works on it. Returns 0 (nothing changed) otherwise. */
int hz_jemalloc_next_start(struct hz_next *next);

#endif /* HZ_PRELOAD_JEMALLOC_NEXT_H */
