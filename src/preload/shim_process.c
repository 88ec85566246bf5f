/* Calls that change the process: its resource limits, its break,
 * namespaces, new tasks, and the calling thread's credentials. Each tells
 * libhugezero.so first (or lets it make the call), then the real call is
 * made. */
/* setrlimit64 and prlimit64 are exported under their own names: keep
 * <sys/resource.h> from renaming the plain ones into them. */
#undef _FILE_OFFSET_BITS
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heap.h"
#include "limits.h"
#include "shim.h"

/* ---- resource limits ----
 * setrlimit, prlimit and their 64-bit names (programs built with
 * _FILE_OFFSET_BITS=64 call those): a lowered RLIMIT_AS first shrinks what
 * hugezero holds unused (src/preload/limits.c), then the real call sets it.
 * The 64-bit names take the same layout on 64-bit targets. */

#define SETRLIMIT_FN int (*)(__rlimit_resource_t, const struct rlimit *)
#define PRLIMIT_FN int (*)(pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *)

EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl)
{
	hz_shim_ready();
	hz_preload_setrlimit((int)resource, rl);
	return CALL_NEXT(SETRLIMIT_FN, "setrlimit", resource, rl);
}

EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *rl)
{
	hz_shim_ready();
	hz_preload_setrlimit((int)resource, (const struct rlimit *)rl);
	return CALL_NEXT(SETRLIMIT_FN, "setrlimit64", resource, (const struct rlimit *)rl);
}

/* Another process's limit is its own business. */
static void prlimit_begin(pid_t pid, __rlimit_resource_t resource, const struct rlimit *rl)
{
	hz_shim_ready();
	if (pid == 0 || pid == getpid())
		hz_preload_setrlimit((int)resource, rl);
}

EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *rl,
		   struct rlimit *old)
{
	prlimit_begin(pid, resource, rl);
	return CALL_NEXT(PRLIMIT_FN, "prlimit", pid, resource, rl, old);
}

EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *rl,
		     struct rlimit64 *old)
{
	prlimit_begin(pid, resource, (const struct rlimit *)rl);
	return CALL_NEXT(PRLIMIT_FN, "prlimit64", pid, resource, (const struct rlimit *)rl,
			 (struct rlimit *)old);
}

/* ---- the break: the program's own moves end the heap's watch ---- */

EXPORT void *sbrk(intptr_t increment)
{
	void *(*next)(intptr_t) = NEXT(void *(*)(intptr_t), "sbrk");

	if (increment != 0)
		hz_preload_program_moves_break();
	if (next == NULL) {
		errno = ENOSYS;
		return (void *)-1;
	}
	return next(increment);
}

EXPORT int brk(void *addr)
{
	hz_preload_program_moves_break();
	return CALL_NEXT(int (*)(void *), "brk", addr);
}

/* ---- namespaces (ns.c): the pre-zero thread stops first ---- */

EXPORT int unshare(int flags)
{
	return hz_preload_unshare(NEXT(int (*)(int), "unshare"), flags);
}

EXPORT int setns(int fd, int nstype)
{
	return hz_preload_setns(NEXT(int (*)(int, int), "setns"), fd, nstype);
}

/* ---- calls that make a task (tasks.c): made again when the pre-zero
 * thread held the task they needed ---- */

EXPORT pid_t fork(void)
{
	return hz_preload_fork(NEXT(pid_t (*)(void), "fork"));
}

EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
			  void *arg)
{
	return hz_preload_pthread_create(hz_shim_pthread_create_next(), thread, attr, fn, arg);
}

/* The three arguments after arg are read whatever flags say, as glibc's
 * own clone passes every register on to the kernel. */
EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	pid_t *parent_tid, *child_tid;
	void *tls;
	va_list ap;

	va_start(ap, arg);
	parent_tid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	child_tid = va_arg(ap, pid_t *);
	va_end(ap);
	return hz_preload_clone(NEXT(hz_clone_fn, "clone"), fn, stack, flags, arg, parent_tid, tls,
				child_tid);
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return hz_preload_posix_spawn(NEXT(hz_spawn_fn, "posix_spawn"), pid, path, actions, attr,
				      argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return hz_preload_posix_spawn(NEXT(hz_spawn_fn, "posix_spawnp"), pid, file, actions, attr,
				      argv, envp);
}

EXPORT int system(const char *command)
{
	return hz_preload_system(NEXT(int (*)(const char *), "system"), command);
}

/* Calls that change the calling thread's capabilities or sandbox (only
 * the caller's: creds.c stops the pre-zero thread first). glibc declares
 * capset in no header; prctl takes up to four more arguments, read as
 * glibc's own wrapper passes them. */

EXPORT int capset(void *header, void *data)
{
	hz_preload_security_call(SYS_capset, 0);
	return CALL_NEXT(int (*)(void *, void *), "capset", header, data);
}

EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	hz_preload_security_call(SYS_prctl, option);
	return CALL_NEXT(int (*)(int, ...), "prctl", option, a[0], a[1], a[2], a[3]);
}
