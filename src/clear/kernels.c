/* The table of clearing kernels for this architecture. The order is the
 * listing order only; the automatic choice follows the ranks (kernel.h),
 * whose figures are in bench/RESULTS.md.
 *
 * x86_64: cached passes are short (< CLEAR_NT_MIN), where glibc's memset
 * picks vector stores or rep stosb by size and is as fast as any of ours, so
 * memset is the only cached candidate. For long passes one 64-byte
 * non-temporal store per line keeps the write-combining buffers full with
 * the fewest instructions: avx512_nt, then avx2_nt, clzero, rep_stosb and
 * memset.
 *
 * aarch64: cached passes prefer mops (the CPU's own strategy), then dc_zva,
 * then memset; long passes stnp, then memset. */
#include "../cpu/cpu.h"
#include "kernel.h"

#ifdef HZ_HAVE_MOPS
#define MOPS_BUILT true
#else
#define MOPS_BUILT false
#endif

const struct hz_clear_kernel hz_clear_kernels[] = {
	{ .name = "memset", .fn = hz_clear_memset, .built = true,
	  .rank_cached = 1, .rank_nt = 1 },
#if defined(__x86_64__)
	{ .name = "rep_stosb", .fn = hz_clear_rep_stosb, .needs = HZ_CPU_ERMS,
	  .built = true, .missing = "CPU lacks ERMS (enhanced rep stosb)",
	  .rank_nt = 2 },
	{ .name = "avx2", .fn = hz_clear_avx2, .needs = HZ_CPU_AVX2,
	  .built = true, .missing = "CPU or OS lacks AVX2 (CPUID/XCR0)" },
	{ .name = "avx2_nt", .fn = hz_clear_avx2_nt, .needs = HZ_CPU_AVX2,
	  .built = true, .nontemporal = true,
	  .missing = "CPU or OS lacks AVX2 (CPUID/XCR0)", .rank_nt = 4 },
	{ .name = "avx512", .fn = hz_clear_avx512, .needs = HZ_CPU_AVX512F,
	  .built = true, .missing = "CPU or OS lacks AVX-512F (CPUID/XCR0)" },
	{ .name = "avx512_nt", .fn = hz_clear_avx512_nt, .needs = HZ_CPU_AVX512F,
	  .built = true, .nontemporal = true,
	  .missing = "CPU or OS lacks AVX-512F (CPUID/XCR0)", .rank_nt = 5 },
	{ .name = "clzero", .fn = hz_clear_clzero, .needs = HZ_CPU_CLZERO,
	  .built = true, .nontemporal = true,
	  .missing = "CPU lacks CLZERO (AMD only)", .rank_nt = 3 },
#elif defined(__aarch64__)
	{ .name = "dc_zva", .fn = hz_clear_dc_zva, .needs = HZ_CPU_DC_ZVA,
	  .built = true, .missing = "DC ZVA is prohibited (DCZID_EL0.DZP)",
	  .rank_cached = 2 },
	{ .name = "stnp", .fn = hz_clear_stnp, .built = true, .nontemporal = true,
	  .rank_nt = 2 },
	{ .name = "mops", .fn = hz_clear_mops, .needs = HZ_CPU_MOPS,
	  .built = MOPS_BUILT, .missing = "CPU lacks FEAT_MOPS (AT_HWCAP2)",
	  .rank_cached = 3 },
#endif
};

const unsigned hz_clear_kernel_total =
	sizeof(hz_clear_kernels) / sizeof(hz_clear_kernels[0]);
