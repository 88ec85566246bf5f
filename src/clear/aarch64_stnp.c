/* STNP: store pairs of 16-byte registers with the non-temporal hint, whole
 * 64-byte lines at a time. */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "../range.h"
#include "../sizes.h"
#include "kernel.h"

void hz_clear_stnp(void *dst, size_t len)
{
	uintptr_t p = (uintptr_t)dst;
	uintptr_t end = p + len;
	uintptr_t a, e;
	/* The zero is an input operand in a register the compiler chose. It
	 * once was v0, set by one asm statement and assumed to survive until
	 * the next, which nothing promised: the compiler may use v0 in
	 * between. tests/test_clear_abi.c calls this with junk in v0. */
	const uint8x16_t zero = vdupq_n_u8(0);

	if (len < 2 * HZ_CACHE_LINE) {
		memset(dst, 0, len);
		return;
	}
	a = hz_align_up(p, HZ_CACHE_LINE);
	e = hz_align_down(end, HZ_CACHE_LINE);
	memset(dst, 0, a - p);
	for (; a < e; a += HZ_CACHE_LINE)
		__asm__ __volatile__("stnp %q1, %q1, [%0]\n\t"
				     "stnp %q1, %q1, [%0, #32]"
				     :
				     : "r"(a), "w"(zero)
				     : "memory");
	memset((void *)e, 0, end - e);
}
