/* Raw system calls through syscall(): see syscall.h.
 *
 * The shim's wrappers (shim_foreign.c, shim_mmap.c) see mprotect,
 * madvise, munmap and the rest only when the program calls the C
 * library's functions. Programs and runtimes also call syscall(SYS_madvise, ...) (for advice their C
 * library has no name for, or to skip the wrapper), and glibc 2.36 has no
 * mseal at all. glibc's syscall() is one exported function, so it is
 * interposed like the rest: the numbers of the calls the wrappers handle
 * take the same path (foreign marks, the munmap and mremap refusal),
 * every other number goes straight to the C library, which costs two
 * switches per call. unshare and setns by number stop the pre-zero thread
 * first, as their wrappers do (ns.c), and so do the calls that change a
 * thread's credentials or sandbox (creds.c). clone, clone3 and fork by
 * number are made again when the pre-zero thread held the task they
 * needed (tasks.c).
 *
 * What still cannot be seen: a system call made with an instruction of
 * the program's own (inline assembly, a runtime's own stubs: Go, some
 * JITs). The zeroing code's hole check and the pre-zero thread's second
 * look at the mark (foreign.c) remain the defence there.
 *
 * Every call that reaches this symbol is the program's: hugezero's own
 * make the system-call instruction themselves (src/prim/raw.h). */
#include "syscall.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "foreign.h"
#include "tasks.h"

/* Linux 6.10; the same number on x86_64 and aarch64 (the common table). */
#ifndef SYS_mseal
#define SYS_mseal 462
#endif

/* Linux 5.3; the same number on x86_64 and aarch64 (the common table). */
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

/* The numbers that make a task as fork does (tasks.c). Not vfork: its
 * child returns through these frames on the parent's stack, as it does
 * through any syscall() (tasks.c says why a wrapper cannot help), so it
 * goes straight to the C library. */
static bool makes_task(long nr)
{
	switch (nr) {
	case SYS_clone:
	case SYS_clone3:
#ifdef SYS_fork /* x86_64; aarch64 has clone only */
	case SYS_fork:
#endif
		return true;
	default:
		return false;
	}
}

/* The numbers whose wrappers hugezero interposes (shim_*.c, mmap.c, tasks.c). */
static bool interposed(long nr)
{
	switch (nr) {
	case SYS_mmap:
	case SYS_munmap:
	case SYS_mremap:
	case SYS_mprotect:
	case SYS_pkey_mprotect:
	case SYS_madvise:
	case SYS_mlock:
	case SYS_mlock2:
	case SYS_mlockall:
	case SYS_munlockall:
	case SYS_mseal:
	case SYS_ioctl:
	case SYS_unshare:
	case SYS_setns:
		return true;
	default:
		return makes_task(nr);
	}
}

static long call(hz_syscall_fn real, long nr, const long a[6])
{
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* unshare and setns by number, for ns.c, which stops the pre-zero thread
 * and then calls the function it is given. Every thread stores the same
 * value (the C library's syscall). */
static hz_syscall_fn ns_real;

static int raw_unshare(int flags)
{
	return (int)__atomic_load_n(&ns_real, __ATOMIC_RELAXED)(SYS_unshare, (long)flags, 0L, 0L,
								 0L, 0L, 0L);
}

static int raw_setns(int fd, int nstype)
{
	return (int)__atomic_load_n(&ns_real, __ATOMIC_RELAXED)(SYS_setns, (long)fd,
								 (long)nstype, 0L, 0L, 0L, 0L);
}

/* A call that makes a task, made once more when it failed for want of
 * the task the pre-zero thread held (tasks.c); errno after a retry that
 * succeeds is what it was before. */
static long task_call(hz_syscall_fn real, long nr, const long a[6])
{
	int saved = errno;
	long ret = call(real, nr, a);

	if (ret != -1 || !hz_tasks_again(errno))
		return ret;
	errno = saved;
	return call(real, nr, a);
}

/* The calls that return their own result: the unmap and move of a range
 * (refused inside hugezero's regions), and the ones whose handler needs
 * the result. Every other interposed number is marked here first and then
 * made as it came. */
static long route(hz_syscall_fn real, long nr, const long a[6])
{
	void *addr = (void *)a[0];
	size_t len = (size_t)a[1];
	long ret;

	switch (nr) {
	case SYS_munmap:
		return hz_preload_munmap(addr, len);
	case SYS_mremap: {
		void *p = hz_preload_mremap(addr, len, (size_t)a[2], (int)a[3], (void *)a[4]);

		return p == MAP_FAILED ? -1 : (long)p;
	}
	case SYS_mlockall:
		hz_foreign_lock_all_begin((int)a[0]);
		ret = call(real, nr, a);
		hz_foreign_lock_all_end((int)a[0], ret == 0 ? 0 : -1);
		return ret;
	case SYS_munlockall:
		ret = call(real, nr, a);
		hz_foreign_unlock_all_end(ret == 0 ? 0 : -1);
		return ret;
	case SYS_ioctl:
		ret = call(real, nr, a);
		hz_foreign_ioctl_end((unsigned int)a[1], (const void *)a[2], ret == 0 ? 0 : -1);
		return ret;
	case SYS_unshare:
		__atomic_store_n(&ns_real, real, __ATOMIC_RELAXED);
		return hz_preload_unshare(raw_unshare, (int)a[0]);
	case SYS_setns:
		__atomic_store_n(&ns_real, real, __ATOMIC_RELAXED);
		return hz_preload_setns(raw_setns, (int)a[0], (int)a[1]);
	case SYS_clone:
	case SYS_clone3:
#ifdef SYS_fork
	case SYS_fork:
#endif
		return task_call(real, nr, a);
	case SYS_mmap:
		if ((int)a[3] & MAP_FIXED)
			hz_foreign_changed(addr, len); /* over a block: foreign.h */
		break;
	case SYS_madvise:
		hz_foreign_advised(addr, len, (int)a[2]);
		break;
	default: /* mprotect, pkey_mprotect, mlock, mlock2, mseal */
		hz_foreign_changed(addr, len);
		break;
	}
	return call(real, nr, a);
}

HZ_PRIVATE_API long hz_preload_syscall(hz_syscall_fn real, long nr, const long a[6])
{
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	hz_preload_security_call(nr, a[0]);
	if (!interposed(nr))
		return call(real, nr, a);
	return route(real, nr, a);
}
