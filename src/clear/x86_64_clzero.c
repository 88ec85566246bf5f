/* AMD CLZERO: zeroes the whole 64-byte line containing rAX without reading
 * it. Its stores are weakly ordered, like non-temporal ones, so the caller
 * fences once at the end. */
#include <stdint.h>

#include "../sizes.h"
#include "by_block.h"
#include "kernel.h"

static inline void store_clzero(uintptr_t a)
{
	/* clzero: the encoding, because older assemblers lack the name */
	__asm__ __volatile__(".byte 0x0f, 0x01, 0xfc" : : "a"(a) : "memory");
}

void hz_clear_clzero(void *dst, size_t len)
{
	hz_clear_by_block(dst, len, HZ_CACHE_LINE, store_clzero);
}
