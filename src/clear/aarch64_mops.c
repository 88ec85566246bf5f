/* FEAT_MOPS: SETP/SETM/SETE, the architecture's memset in three
 * instructions; the CPU chooses the strategy. Built only when the assembler
 * knows the instructions (meson defines HZ_HAVE_MOPS). */
#include <stdint.h>
#include <string.h>

#include "kernel.h"

void hz_clear_mops(void *dst, size_t len)
{
#ifdef HZ_HAVE_MOPS
	uint64_t zero = 0;

	__asm__ __volatile__(".arch_extension mops\n\t"
			     "setp [%0]!, %1!, %2\n\t"
			     "setm [%0]!, %1!, %2\n\t"
			     "sete [%0]!, %1!, %2"
			     : "+r"(dst), "+r"(len)
			     : "r"(zero)
			     : "memory", "cc");
#else
	/* Never selected: the table marks the kernel as not built. */
	memset(dst, 0, len);
#endif
}
