/* The hooks table (hooks.c), handed out by hz_jemalloc_hooks (api.c). */
#ifndef HZ_JEMALLOC_HOOKS_H
#define HZ_JEMALLOC_HOOKS_H

#include "../../include/hugezero/jemalloc.h"

extern extent_hooks_t hz_jemalloc_hooks_table;

#endif /* HZ_JEMALLOC_HOOKS_H */
