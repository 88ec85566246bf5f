/* A spin-wait hint for the architecture. */
#ifndef HZ_CPU_RELAX_H
#define HZ_CPU_RELAX_H

static inline void hz_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif /* HZ_CPU_RELAX_H */
