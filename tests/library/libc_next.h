/* The next functions a program linked with hz_core starts hz_preload_*
 * with: the process's own allocator (glibc's, or a sanitizer's when the test runs
 * under one), as dlsym(RTLD_NEXT) finds it for the real preload. Shared by
 * tests/library and tests/fuzz. */
#ifndef HZ_TEST_LIBC_NEXT_H
#define HZ_TEST_LIBC_NEXT_H

#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "options.h"
#include "preload/preload.h"

static inline void hz_test_libc_next(struct hz_next *n)
{
	n->next_malloc = malloc;
	n->next_free = free;
	n->next_calloc = calloc;
	n->next_realloc = realloc;
	n->next_posix_memalign = posix_memalign;
	n->next_aligned_alloc = aligned_alloc;
	n->next_memalign = memalign;
	n->next_valloc = valloc;
	n->next_pvalloc = pvalloc;
	n->next_malloc_usable_size = malloc_usable_size;
	n->next_mmap = mmap;
	n->next_munmap = munmap;
	n->next_mremap = mremap;
	n->next_pthread_create = pthread_create;
}

/* Start hugezero with them, as the shim does with what it resolved. Later
 * calls do nothing. */
static inline void hz_test_libc_start(void)
{
	struct hz_next n;

	hz_test_libc_next(&n);
	hz_preload_start(&n);
}

/* Options for a test of the recycler as a library, unless the environment
 * already sets them: a 256 KiB threshold so small blocks exercise it, an
 * 8 GiB reservation (plenty for these tests), and no
 * executable-text work, which concerns the preload's host program; then
 * start-up. Call before the first hz_preload_* call, while no other thread
 * runs. */
static inline void hz_test_library_options(void)
{
	setenv("HUGEZERO_THRESHOLD", "256K", 0);
	setenv("HUGEZERO_RESERVE", "8G", 0);
	setenv("HUGEZERO_EXEC", "off", 0);
	hz_options_reload();
	hz_test_libc_start();
}

#endif /* HZ_TEST_LIBC_NEXT_H */
