/* STNP: store pairs of 16-byte registers with the non-temporal hint, whole
 * 64-byte lines at a time. */
#include <stdint.h>
#include <string.h>

#include "../range.h"
#include "kernel.h"

#define LINE ((size_t)64)

void hz_clear_stnp(void *dst, size_t len)
{
	uintptr_t p = (uintptr_t)dst;
	uintptr_t end = p + len;
	uintptr_t a, e;

	if (len < 2 * LINE) {
		memset(dst, 0, len);
		return;
	}
	a = hz_align_up(p, LINE);
	e = hz_align_down(end, LINE);
	memset(dst, 0, a - p);
	__asm__ __volatile__("movi v0.2d, #0" ::: "v0");
	for (; a < e; a += LINE)
		__asm__ __volatile__("stnp q0, q0, [%0]\n\t"
				     "stnp q0, q0, [%0, #32]"
				     :
				     : "r"(a)
				     : "v0", "memory");
	memset((void *)e, 0, end - e);
}
