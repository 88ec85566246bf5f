/* AMD CLZERO: zeroes the whole 64-byte line containing rAX without reading
 * it. Its stores are weakly ordered, like non-temporal ones, so the caller
 * fences once at the end. */
#include <stdint.h>
#include <string.h>

#include "../range.h"
#include "../sizes.h"
#include "kernel.h"

void hz_clear_clzero(void *dst, size_t len)
{
	uintptr_t p = (uintptr_t)dst;
	uintptr_t end = p + len;
	uintptr_t a, e;

	if (len < 2 * HZ_CACHE_LINE) {
		memset(dst, 0, len);
		return;
	}
	a = hz_align_up(p, HZ_CACHE_LINE);
	e = hz_align_down(end, HZ_CACHE_LINE);
	memset(dst, 0, a - p);
	for (; a < e; a += HZ_CACHE_LINE)
		/* clzero: the encoding, because older assemblers lack the name */
		__asm__ __volatile__(".byte 0x0f, 0x01, 0xfc" : : "a"(a) : "memory");
	memset((void *)e, 0, end - e);
}
