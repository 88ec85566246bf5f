/* STNP: store pairs of 16-byte registers with the non-temporal hint, whole
 * 64-byte lines at a time. */
#include <arm_neon.h>
#include <stdint.h>

#include "../sizes.h"
#include "by_block.h"
#include "kernel.h"

static inline void store_stnp(uintptr_t a)
{
	/* The zero is an input operand in a register the compiler chose. It
	 * once was v0, set by one asm statement and assumed to survive until
	 * the next, which nothing promised: the compiler may use v0 in
	 * between. tests/test_clear_abi.c calls this with junk in v0. */
	const uint8x16_t zero = vdupq_n_u8(0);

	__asm__ __volatile__("stnp %q1, %q1, [%0]\n\t"
			     "stnp %q1, %q1, [%0, #32]"
			     :
			     : "r"(a), "w"(zero)
			     : "memory");
}

void hz_clear_stnp(void *dst, size_t len)
{
	hz_clear_by_block(dst, len, HZ_CACHE_LINE, store_stnp);
}
