/* The shape every whole-block kernel shares (dc_zva, stnp, clzero): memset
 * below two blocks, else memset the unaligned head and tail and let the
 * kernel's one instruction store each aligned block in between. The block
 * store is passed as a function and inlined: always_inline with a constant
 * pointer leaves the same loop as when each kernel wrote it out. */
#ifndef HZ_CLEAR_BY_BLOCK_H
#define HZ_CLEAR_BY_BLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../range.h"

/* Store zeros over the aligned block at a. */
typedef void (*hz_clear_block_fn)(uintptr_t a);

/* Clear [dst, dst + len) with store for each whole block of block bytes
 * (a power of two; 0 means the instruction may not be used: memset). */
static inline __attribute__((always_inline)) void
hz_clear_by_block(void *dst, size_t len, size_t block, hz_clear_block_fn store)
{
	uintptr_t p = (uintptr_t)dst;
	uintptr_t end = p + len;
	uintptr_t a, e;

	if (block == 0 || len < 2 * block) {
		memset(dst, 0, len);
		return;
	}
	a = hz_align_up(p, block);
	e = hz_align_down(end, block);
	memset(dst, 0, a - p);
	for (; a < e; a += block)
		store(a);
	memset((void *)e, 0, end - e);
}

#endif /* HZ_CLEAR_BY_BLOCK_H */
