/* Clearing kernels: functions that zero one contiguous range in one pass.
 *
 * Every kernel accepts any alignment and any length (including 0) and
 * handles its own head and tail. Non-temporal kernels leave their stores
 * weakly ordered: the caller issues hz_clear_fence() once after the last
 * one (a fence per 4 KiB page dropped non-temporal clearing from about 66 to
 * 23 GB/s on AMD Zen 4, as measured for the foundation issue). */
#ifndef HZ_CLEAR_KERNEL_H
#define HZ_CLEAR_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*hz_clear_fn)(void *dst, size_t len);

struct hz_clear_kernel {
	const char *name;     /* as used by HUGEZERO_CLEAR */
	hz_clear_fn fn;
	const char *missing;  /* why it is unsupported when needs are absent */
	unsigned needs;       /* enum hz_cpu_feature bits, all required */
	bool built;           /* false when the compiler could not emit it */
	bool nontemporal;     /* bypasses the cache; needs the fence */
	/* The automatic choice's preference for this kernel in each role,
	 * higher first; 0: never chosen for that role. The runnable kernel
	 * with the highest rank wins (policy.c); ranks in a role are unique.
	 * kernels.c gives the figures behind them. */
	unsigned char rank_cached; /* passes below HUGEZERO_CLEAR_NT_MIN */
	unsigned char rank_nt;     /* passes from HUGEZERO_CLEAR_NT_MIN on */
};

/* This architecture's kernels, in the order hz_clear_kernel_name lists. */
extern const struct hz_clear_kernel hz_clear_kernels[];
extern const unsigned hz_clear_kernel_total;

/* Make preceding non-temporal stores globally visible before later ones. */
static inline void hz_clear_fence(void)
{
#if defined(__x86_64__)
	__asm__ __volatile__("sfence" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("dmb ishst" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

void hz_clear_memset(void *dst, size_t len);
#if defined(__x86_64__)
void hz_clear_rep_stosb(void *dst, size_t len);
void hz_clear_avx2(void *dst, size_t len);
void hz_clear_avx2_nt(void *dst, size_t len);
void hz_clear_avx512(void *dst, size_t len);
void hz_clear_avx512_nt(void *dst, size_t len);
void hz_clear_clzero(void *dst, size_t len);
#elif defined(__aarch64__)
void hz_clear_dc_zva(void *dst, size_t len);
void hz_clear_stnp(void *dst, size_t len);
void hz_clear_mops(void *dst, size_t len);
#endif

#endif /* HZ_CLEAR_KERNEL_H */
