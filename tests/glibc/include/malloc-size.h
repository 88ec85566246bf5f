/* glibc's internal malloc-size.h, for tst-mallocalign1: MALLOC_ALIGNMENT
 * is 2 * sizeof(size_t) on x86_64 and aarch64 (malloc/malloc.c). */
#ifndef HZ_GLIBC_MALLOC_SIZE_H
#define HZ_GLIBC_MALLOC_SIZE_H

#include <stddef.h>

#define MALLOC_ALIGNMENT (2 * sizeof(size_t))
#define MALLOC_ALIGN_MASK (MALLOC_ALIGNMENT - 1)

#endif
