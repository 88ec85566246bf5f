/* CPU features that choose the clearing kernel. Detected once, lazily. */
#ifndef HZ_CPU_H
#define HZ_CPU_H

#include <stdbool.h>
#include <stddef.h>

enum hz_cpu_feature {
	/* x86_64 */
	HZ_CPU_ERMS = 1u << 0,     /* enhanced rep movsb/stosb */
	HZ_CPU_FSRM = 1u << 1,     /* fast short rep mov */
	HZ_CPU_AVX2 = 1u << 2,     /* CPUID and XCR0 YMM state enabled */
	HZ_CPU_AVX512F = 1u << 3,  /* CPUID and XCR0 ZMM/opmask state enabled */
	HZ_CPU_CLZERO = 1u << 4,   /* AMD CLZERO */
	/* aarch64 */
	HZ_CPU_DC_ZVA = 1u << 8,   /* DC ZVA permitted (DCZID_EL0.DZP == 0) */
	HZ_CPU_MOPS = 1u << 9,     /* FEAT_MOPS: SETP/SETM/SETE */
};

struct hz_cpu {
	unsigned features;   /* enum hz_cpu_feature bits */
	size_t zva_block;    /* DC ZVA block size in bytes, 0 when prohibited */
	char vendor[16];     /* "GenuineIntel", "AuthenticAMD", "arm64", ... */
};

/* Detect once (thread-safe, idempotent) and return the result. */
const struct hz_cpu *hz_cpu_get(void);

static inline bool hz_cpu_has(unsigned features)
{
	return (hz_cpu_get()->features & features) == features;
}

#ifdef HZ_TEST_CORE
/* Test core only (dav1d's --cpumask): from now on the CPU reports the
 * features it was detected with minus hidden (0 shows them all again), so
 * tests run the automatic choice at lower CPU levels than this machine's.
 * Returns the features detected. Callers choose the clear kernels again
 * (hz_clear_policy_reset) and call it while no other thread clears. */
unsigned hz_cpu_test_mask(unsigned hidden);
#endif

/* Fill *cpu for this machine. One implementation per architecture. */
void hz_cpu_detect(struct hz_cpu *cpu);

#endif /* HZ_CPU_H */
