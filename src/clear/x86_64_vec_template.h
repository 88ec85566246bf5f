/* One body for the AVX2 and AVX-512 kernels, which differ only in vector
 * width (dav1d's template style). The including file defines:
 *   VEC               vector width in bytes (32 or 64)
 *   VEC_T             the vector type
 *   VEC_ZERO()        a zero vector
 *   VEC_STOREU/STORE/STREAM(ptr, v)  unaligned, aligned, non-temporal store
 *   VEC_TARGET        the gcc/clang target string
 *   KERNEL_TEMPORAL, KERNEL_NT       the function names
 *
 * Each kernel ends with an explicit vzeroupper: gcc inserts one only with
 * -fexpensive-optimizations (-O2, -O3), so at -O0, -O1 and -Os the kernels
 * returned with dirty upper vector state, and every later SSE instruction
 * of the program paid the AVX-SSE transition (test_clear_abi's XINUSE
 * check caught it in the debug build). Where gcc adds its own, the second
 * costs a cycle per call. The vector registers are first written after the
 * short-length memset, so that path leaves them clean without one. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../range.h"
#include "../sizes.h"
#include "kernel.h"

/* Both kernels: cached unaligned stores for the head and the tail, then
 * aligned stores over the body, four vectors a pass. Inlined into each with
 * stream a constant, so each keeps its one kind of store. */
static inline __attribute__((always_inline, target(VEC_TARGET))) void
clear_vec(void *dst, size_t len, bool stream)
{
	char *p = dst;
	char *end = p + len;
	VEC_T zero;
	char *a;

	if (len < (stream ? 4 : 2) * VEC) {
		memset(dst, 0, len);
		return;
	}
	zero = VEC_ZERO();
	if (stream) {
		/* Cached stores for the partial first line and the tail; the
		 * body streams whole 64-byte lines so write-combining fills
		 * them. */
		for (size_t off = 0; off < HZ_CACHE_LINE; off += VEC)
			VEC_STOREU((VEC_T *)(p + off), zero);
		a = (char *)hz_align_up((uintptr_t)p, HZ_CACHE_LINE);
	} else {
		/* Unaligned head and tail stores overlap the aligned body. */
		VEC_STOREU((VEC_T *)p, zero);
		a = (char *)hz_align_up((uintptr_t)p, VEC);
	}
	VEC_STOREU((VEC_T *)(end - VEC), zero);
#define STORE_AT(at) (stream ? VEC_STREAM((VEC_T *)(at), zero) : VEC_STORE((VEC_T *)(at), zero))
	for (; a + 4 * VEC <= end; a += 4 * VEC) {
		STORE_AT(a);
		STORE_AT(a + VEC);
		STORE_AT(a + 2 * VEC);
		STORE_AT(a + 3 * VEC);
	}
	for (; a + VEC <= end; a += VEC)
		STORE_AT(a);
#undef STORE_AT
	_mm256_zeroupper();
}

__attribute__((target(VEC_TARGET))) void KERNEL_TEMPORAL(void *dst, size_t len)
{
	clear_vec(dst, len, false);
}

__attribute__((target(VEC_TARGET))) void KERNEL_NT(void *dst, size_t len)
{
	clear_vec(dst, len, true);
}
