/* x86_64 feature detection: CPUID for what the CPU has, XCR0 (XGETBV) for
 * what the OS saves on context switch. AVX state the OS does not enable
 * faults on first use, so CPUID alone is not enough. */
#include "cpu.h"

#include <cpuid.h>
#include <string.h>

/* XCR0 bits: SSE(1) | AVX(2) state; opmask(5) | ZMM_Hi256(6) | Hi16_ZMM(7). */
#define XCR0_AVX_STATE 0x06u
#define XCR0_AVX512_STATE 0xe0u

static unsigned long long read_xcr0(void)
{
	unsigned lo, hi;

	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((unsigned long long)hi << 32) | lo;
}

void hz_cpu_detect(struct hz_cpu *cpu)
{
	unsigned a, b, c, d, max_leaf, max_ext;
	unsigned long long xcr0 = 0;

	max_leaf = __get_cpuid_max(0, NULL);
	__cpuid(0, a, b, c, d);
	memcpy(cpu->vendor + 0, &b, 4);
	memcpy(cpu->vendor + 4, &d, 4);
	memcpy(cpu->vendor + 8, &c, 4);
	cpu->vendor[12] = '\0';

	__cpuid(1, a, b, c, d);
	if (c & bit_OSXSAVE)
		xcr0 = read_xcr0();

	if (max_leaf >= 7) {
		__cpuid_count(7, 0, a, b, c, d);
		if (b & (1u << 9)) /* CPUID.7.0:EBX[9] ERMS */
			cpu->features |= HZ_CPU_ERMS;
		if (d & (1u << 4)) /* CPUID.7.0:EDX[4] fast short rep mov */
			cpu->features |= HZ_CPU_FSRM;
		if ((b & bit_AVX2) && (xcr0 & XCR0_AVX_STATE) == XCR0_AVX_STATE)
			cpu->features |= HZ_CPU_AVX2;
		if ((b & bit_AVX512F) &&
		    (xcr0 & (XCR0_AVX_STATE | XCR0_AVX512_STATE)) ==
			    (XCR0_AVX_STATE | XCR0_AVX512_STATE))
			cpu->features |= HZ_CPU_AVX512F;
	}

	max_ext = __get_cpuid_max(0x80000000u, NULL);
	if (max_ext >= 0x80000008u) {
		__cpuid(0x80000008u, a, b, c, d);
		if (b & 1u) /* CPUID.80000008h:EBX[0] CLZERO */
			cpu->features |= HZ_CPU_CLZERO;
	}
}
