/* AVX2 clearing, temporal and non-temporal (vmovntdq ymm), 32-byte stores.
 * Built with a per-function target so the rest of the library stays
 * baseline x86_64; only called when CPUID and XCR0 allow AVX2. */
#include <immintrin.h>

#define VEC ((size_t)32)
#define VEC_T __m256i
#define VEC_ZERO _mm256_setzero_si256
#define VEC_STOREU _mm256_storeu_si256
#define VEC_STORE _mm256_store_si256
#define VEC_STREAM _mm256_stream_si256
#define VEC_TARGET "avx2"
#define KERNEL_TEMPORAL hz_clear_avx2
#define KERNEL_NT hz_clear_avx2_nt
#include "x86_64_vec_template.h"
