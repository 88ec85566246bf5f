/* The table of clearing kernels for this architecture. Order matters only
 * for listing; the automatic choice is made in policy.c. */
#include "../cpu/cpu.h"
#include "kernel.h"

#ifdef HZ_HAVE_MOPS
#define MOPS_BUILT true
#else
#define MOPS_BUILT false
#endif

const struct hz_clear_kernel hz_clear_kernels[] = {
	{ "memset", hz_clear_memset, 0, true, false, NULL },
#if defined(__x86_64__)
	{ "rep_stosb", hz_clear_rep_stosb, HZ_CPU_ERMS, true, false,
	  "CPU lacks ERMS (enhanced rep stosb)" },
	{ "avx2", hz_clear_avx2, HZ_CPU_AVX2, true, false,
	  "CPU or OS lacks AVX2 (CPUID/XCR0)" },
	{ "avx2_nt", hz_clear_avx2_nt, HZ_CPU_AVX2, true, true,
	  "CPU or OS lacks AVX2 (CPUID/XCR0)" },
	{ "avx512", hz_clear_avx512, HZ_CPU_AVX512F, true, false,
	  "CPU or OS lacks AVX-512F (CPUID/XCR0)" },
	{ "avx512_nt", hz_clear_avx512_nt, HZ_CPU_AVX512F, true, true,
	  "CPU or OS lacks AVX-512F (CPUID/XCR0)" },
	{ "clzero", hz_clear_clzero, HZ_CPU_CLZERO, true, true,
	  "CPU lacks CLZERO (AMD only)" },
#elif defined(__aarch64__)
	{ "dc_zva", hz_clear_dc_zva, HZ_CPU_DC_ZVA, true, false,
	  "DC ZVA is prohibited (DCZID_EL0.DZP)" },
	{ "stnp", hz_clear_stnp, 0, true, true, NULL },
	{ "mops", hz_clear_mops, HZ_CPU_MOPS, MOPS_BUILT, false,
	  "CPU lacks FEAT_MOPS (AT_HWCAP2)" },
#endif
};

const unsigned hz_clear_kernel_total =
	sizeof(hz_clear_kernels) / sizeof(hz_clear_kernels[0]);
