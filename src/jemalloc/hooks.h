/* The hooks table (hooks.c), handed out by hz_jemalloc_hooks (api.c), and
 * the settings of the program's jemalloc that the preload reads and sets
 * (api.c, through mallctl). */
#ifndef HZ_JEMALLOC_HOOKS_H
#define HZ_JEMALLOC_HOOKS_H

#include <stddef.h>

#include "../../include/hugezero/jemalloc.h"

extern extent_hooks_t hz_jemalloc_hooks_table;

/* opt.oversize_threshold: requests this large go to an arena of their
 * own; 0 when there is none (disabled, or a jemalloc before 5.2). */
size_t hz_jemalloc_oversize_threshold(void);

/* Make an arena purge freed extents at once, as jemalloc's own arena for
 * oversize requests does (dirty and muzzy decay 0). 0 or an errno value. */
int hz_jemalloc_purge_at_once(unsigned arena_ind);

/* arena.<i>.destroy: 0 or an errno value. */
int hz_jemalloc_destroy_arena(unsigned arena_ind);

#endif /* HZ_JEMALLOC_HOOKS_H */
