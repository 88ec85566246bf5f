/* Collapsing 4 KiB pages into a huge page. See memory.h, "collapse". */
#include "memory.h"

#include <errno.h>
#include <sys/mman.h>
#include <time.h>

#include "prim.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 for anonymous memory */
#endif

int hz_prim_collapse(uintptr_t start, size_t len)
{
	return hz_prim_madvise((void *)start, len, MADV_COLLAPSE);
}

static uint64_t cpu_ns(clockid_t clock)
{
	struct timespec ts;

	/* No symbol of ours: clock_gettime is never interposed. */
	if (clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hz_prim_thread_cpu_ns(void)
{
	return cpu_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t hz_prim_process_cpu_ns(void)
{
	return cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
}
