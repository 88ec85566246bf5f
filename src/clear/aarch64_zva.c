/* DC ZVA: zero a whole block (DCZID_EL0 gives its size, typically 64 bytes)
 * without reading it first. */
#include <stdint.h>
#include <string.h>

#include "../cpu/cpu.h"
#include "../range.h"
#include "kernel.h"

void hz_clear_dc_zva(void *dst, size_t len)
{
	size_t block = hz_cpu_get()->zva_block;
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
		__asm__ __volatile__("dc zva, %0" : : "r"(a) : "memory");
	memset((void *)e, 0, end - e);
}
