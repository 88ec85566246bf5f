/* hugezero: fast large memory for Linux programs.
 *
 * This header is the C API of libhugezero.so. Linking the library replaces
 * nothing: malloc stays the program's own. The LD_PRELOAD interposer is the
 * separate libhugezero-preload.so.
 *
 * Every function here is thread-safe and safe to call before main().
 */
#ifndef HUGEZERO_H
#define HUGEZERO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HZ_API __attribute__((visibility("default")))
#else
#define HZ_API
#endif

/* The library's version, "MAJOR.MINOR.PATCH", as set in meson.build. */
HZ_API const char *hz_version(void);

/* ---- Range clearing ---------------------------------------------------- */

/* Zero the bytes [dst, dst + len).
 *
 * hint is the address the caller expects to touch first, or NULL. When it
 * lies inside the range, the pages around it (HUGEZERO_CLEAR_RADIUS pages of
 * 4 KiB on each side, default 2) are cleared last with cached stores, so they
 * are in the cache when hz_clear returns. The rest is cleared first: the part
 * right of that neighbourhood, then the part left of it, each as one
 * contiguous pass, with non-temporal stores when the call is at least
 * HUGEZERO_CLEAR_NT_MIN bytes (default 64 KiB). Shorter calls are one pass
 * of cached stores.
 *
 * A hint outside the range counts as NULL. len == 0 does nothing. dst may
 * have any alignment. The memory must be writable; hz_clear cannot fail. */
HZ_API void hz_clear(void *dst, size_t len, const void *hint);

/* The clearing kernels compiled in for this architecture, numbered
 * 0 .. hz_clear_kernel_count() - 1. The list is the same on every CPU of the
 * architecture; hz_clear_kernel_supported() says which this CPU can run. */
HZ_API unsigned hz_clear_kernel_count(void);

/* Name of kernel i ("rep_stosb", "avx512_nt", "dc_zva", ...), or NULL when
 * i is out of range. */
HZ_API const char *hz_clear_kernel_name(unsigned i);

/* 1 if this CPU (and OS) can run kernel i, else 0. When why is not NULL it is
 * set to a short static reason ("CPU lacks CLZERO") or to NULL when the
 * kernel is supported. Out-of-range i returns 0 with why = "no such kernel". */
HZ_API int hz_clear_kernel_supported(unsigned i, const char **why);

/* 1 if kernel i uses non-temporal (cache-bypassing) stores, else 0. */
HZ_API int hz_clear_kernel_nontemporal(unsigned i);

/* Force hz_clear to use one kernel for every pass, or restore the automatic
 * choice with name NULL or "auto". This overrides HUGEZERO_CLEAR.
 * Returns 0, EINVAL for an unknown name, or ENOTSUP for a kernel this CPU
 * cannot run; on error the previous choice stays. */
HZ_API int hz_clear_set_kernel(const char *name);

/* Name of the kernel hz_clear uses for one contiguous pass of len bytes
 * under the current choice (automatic or forced). */
HZ_API const char *hz_clear_kernel_for(size_t len);

/* Zero [dst, dst + len) with the named kernel in one pass: no neighbourhood
 * order, one store fence at the end. For benchmarks and tests.
 * Returns 0, EINVAL for an unknown name, or ENOTSUP for an unsupported one
 * (then nothing is written). */
HZ_API int hz_clear_with(const char *name, void *dst, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* HUGEZERO_H */
