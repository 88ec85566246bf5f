/* The system-call instruction, inline: how src/prim/ reaches the kernel.
 *
 * Not through the C library's syscall(): the preload exports a syscall()
 * of its own (src/preload/shim_mmap.c) that routes the program's calls by
 * number, and within libhugezero-preload.so a call of syscall() binds to
 * that symbol. Our own munmap made there would be refused as the
 * program's, and the lowest layer would call the highest. Nor through the
 * C library's wrappers (mmap, madvise...), which the preload interposes
 * too. The instruction itself reaches no symbol at all, and makes no
 * cancellation point.
 *
 * HZ_RAW(nr, args...) takes up to six arguments and returns what the
 * kernel gives: the result, or a negative errno value in [-4095, -1]. It
 * never reads or writes errno. The register conventions are the kernel's
 * (musl's arch/x86_64/syscall_arch.h and arch/aarch64/syscall_arch.h). */
#ifndef HZ_PRIM_RAW_H
#define HZ_PRIM_RAW_H

#include <sys/syscall.h>

#ifdef __clang_analyzer__
/* The static analyzer does not look into inline assembly: it would take
 * what the kernel writes through a pointer argument (a struct stat, a
 * capability set) for uninitialised memory. A call it cannot see into
 * lets it assume those writes. */
long hz_prim_raw6(long nr, long a, long b, long c, long d, long e, long f);
#else
/* Every argument register is loaded: the kernel reads only those its call
 * takes, and one form keeps one copy of the assembly to check. */
static inline __attribute__((always_inline)) long hz_prim_raw6(long nr, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	/* The instruction leaves the return address in rcx and the flags
	 * in r11. */
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
#else
#error "src/prim/raw.h: add the system-call instruction for this architecture"
#endif
}
#endif /* __clang_analyzer__ */

/* Whether a result of hz_prim_raw6 is an error: an address the kernel
 * returns (mmap, mremap) is never in the last page of the address space. */
static inline int hz_prim_raw_failed(long ret)
{
	return (unsigned long)ret > -4096ul;
}

/* HZ_RAW(nr) to HZ_RAW(nr, a, b, c, d, e, f): the missing arguments are 0. */
#define HZ_RAW(...) HZ_RAW_PADDED(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)
#define HZ_RAW_PADDED(nr, a, b, c, d, e, f, ...)                                  \
	hz_prim_raw6((long)(nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), \
		     (long)(f))

#endif /* HZ_PRIM_RAW_H */
