/* DC ZVA: zero a whole block (DCZID_EL0 gives its size, typically 64 bytes)
 * without reading it first. */
#include <stdint.h>

#include "../cpu/cpu.h"
#include "by_block.h"
#include "kernel.h"

static inline void store_zva(uintptr_t a)
{
	__asm__ __volatile__("dc zva, %0" : : "r"(a) : "memory");
}

void hz_clear_dc_zva(void *dst, size_t len)
{
	hz_clear_by_block(dst, len, hz_cpu_get()->zva_block, store_zva);
}
