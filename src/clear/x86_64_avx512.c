/* AVX-512 clearing, temporal and non-temporal (vmovntdq zmm), 64-byte
 * stores: one store per cache line. Only called when CPUID and XCR0 allow
 * AVX-512F. */
#include <immintrin.h>

#define VEC ((size_t)64)
#define VEC_T __m512i
#define VEC_ZERO _mm512_setzero_si512
#define VEC_STOREU _mm512_storeu_si512
#define VEC_STORE _mm512_store_si512
#define VEC_STREAM _mm512_stream_si512
#define VEC_TARGET "avx512f"
#define KERNEL_TEMPORAL hz_clear_avx512
#define KERNEL_NT hz_clear_avx512_nt
#include "x86_64_vec_template.h"
