/* A checked call into a clearing kernel, in the manner of checkasm: an asm
 * trampoline (clear_abi.c) loads the callee-saved registers with the
 * caller's values, fills the caller-saved ones with junk, calls the kernel
 * and records what the registers and the ABI's control state held after. */
#ifndef HZ_TEST_CLEAR_ABI_H
#define HZ_TEST_CLEAR_ABI_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
/* rbx, rbp, r12, r13, r14, r15 */
#define ABI_SAVED 6
#elif defined(__aarch64__)
/* x19 ... x28, then d8 ... d15 (the low halves of v8 ... v15) */
#define ABI_SAVED 18
#endif

/* Byte offsets the trampoline uses; test_clear_abi.c asserts they match. */
#define ABI_OFF_GOT (ABI_SAVED * 8)
#define ABI_OFF_FLAGS (ABI_SAVED * 16)
#define ABI_OFF_CHECK_AVX (ABI_OFF_FLAGS + 8)
#define ABI_OFF_XINUSE (ABI_OFF_FLAGS + 16)
#define ABI_OFF_MXCSR (ABI_OFF_FLAGS + 24)
#define ABI_OFF_FPUCW (ABI_OFF_FLAGS + 32)
#define ABI_OFF_FP_DELTA (ABI_OFF_FLAGS + 40)

struct abi_state {
	uint64_t set[ABI_SAVED]; /* in: loaded into the callee-saved registers */
	uint64_t got[ABI_SAVED]; /* out: what they held when the kernel returned */
	uint64_t flags;          /* out: RFLAGS (x86_64), FPCR (aarch64) */
	uint64_t check_avx;      /* in, x86_64: vzeroupper before, XINUSE after */
	uint64_t xinuse;         /* out, x86_64: XGETBV(1) when check_avx */
	uint64_t mxcsr;          /* out, x86_64: MXCSR (low 32 bits) */
	uint64_t fpucw;          /* out, x86_64: x87 control word (low 16 bits) */
	uint64_t fp_delta;       /* out, aarch64: x29 - sp, 0 if x29 survived */
};

typedef void (*abi_kernel_fn)(void *dst, size_t len);

/* Call fn(dst, len) as described above. The trampoline restores the
 * caller's registers and clears DF itself, so a bad kernel is reported,
 * not left to break the caller. */
void abi_checked_call(abi_kernel_fn fn, void *dst, size_t len, struct abi_state *s);

/* Deliberately bad kernels, to prove the check sees what it looks for:
 * abi_clobbering_kernel overwrites two callee-saved registers (rbx and r12;
 * x19 and d8) and on x86_64 returns with DF set; abi_stale_vector_kernel
 * stores 16 bytes of vector register 0 without setting it first, as the
 * arm64 STNP kernel risked when its zero lived across two asm statements. */
void abi_clobbering_kernel(void *dst, size_t len);
void abi_stale_vector_kernel(void *dst, size_t len);
#if defined(__x86_64__)
/* Leaves the upper half of ymm0 non-zero (no vzeroupper); AVX only. */
void abi_dirty_upper_kernel(void *dst, size_t len);
#endif

#endif /* HZ_TEST_CLEAR_ABI_H */
