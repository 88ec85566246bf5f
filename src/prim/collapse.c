/* Collapsing 4 KiB pages into a huge page. See memory.h, "collapse". */
#include "memory.h"

#include <errno.h>
#include <sys/mman.h>

#include "prim.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 for anonymous memory */
#endif

int hz_prim_collapse(uintptr_t start, size_t len)
{
	return hz_prim_madvise((void *)start, len, MADV_COLLAPSE);
}
