/* aarch64 feature detection: DCZID_EL0 for DC ZVA (readable at EL0 by
 * architecture), the auxiliary vector for MOPS. */
#include "cpu.h"

#include <string.h>
#include <sys/auxv.h>

/* Linux's HWCAP2_MOPS (arch/arm64/include/uapi/asm/hwcap.h); older libc
 * headers lack it. */
#ifndef HWCAP2_MOPS
#define HWCAP2_MOPS (1UL << 43)
#endif

/* DCZID_EL0: bits 3:0 log2 of the block size in 4-byte words; bit 4 DZP
 * (DC ZVA prohibited). */
#define DCZID_BS_MASK 0xfu
#define DCZID_DZP (1u << 4)

void hz_cpu_detect(struct hz_cpu *cpu)
{
	unsigned long dczid;

	strcpy(cpu->vendor, "arm64");
	__asm__ __volatile__("mrs %0, dczid_el0" : "=r"(dczid));
	if (!(dczid & DCZID_DZP)) {
		cpu->zva_block = (size_t)4 << (dczid & DCZID_BS_MASK);
		cpu->features |= HZ_CPU_DC_ZVA;
	}
	if (getauxval(AT_HWCAP2) & HWCAP2_MOPS)
		cpu->features |= HZ_CPU_MOPS;
}
