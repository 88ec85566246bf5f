/* The calls that make a task. The kernel counts every task of a process
 * against its real uid's RLIMIT_NPROC and its pids cgroup's pids.max, the
 * pre-zero thread included: a program that runs at its limit (a service
 * user with RLIMIT_NPROC 2, a container with pids.max 2) and plans one
 * child finds fork failing with EAGAIN where glibc's succeeds. So each
 * call that makes a task is made as it came, and when it fails with
 * EAGAIN while the thread runs, the thread is stopped, the kernel's
 * release of its task awaited (microseconds) and the call made once more.
 * The next free of a dirty block starts the thread again
 * (prezero_start.c); should that fail at the limit, calloc zeroes
 * instead.
 *
 * Made again rather than stopping the thread beforehand: a task limit is
 * met rarely, and a thread stopped before every fork would be started
 * again after it, a thread creation per fork. Nor is the thread left
 * unstarted under a low RLIMIT_NPROC: the count of the user's tasks,
 * which decides, is not known without a walk of /proc, and a limit of
 * thousands binds a program with thousands of tasks as well.
 *
 * What a second call changes: fork runs the program's pthread_atfork
 * handlers again, prepare then parent, as for a program that retries
 * fork itself after EAGAIN (bash does); a failed fork ran the parent
 * handlers already, so they stay paired. The other calls leave nothing
 * behind when they fail.
 *
 * vfork is left alone: its child runs on the caller's stack until it
 * calls execve or _exit, and returns through the frame of whatever
 * called the C library's vfork; the child's calls overwrite a wrapper's
 * frame, which the parent then returns through. glibc's own vfork keeps
 * its return address in a register for that reason. posix_spawn and
 * system make the same clone(CLONE_VM | CLONE_VFORK) inside the C
 * library, where nothing can see it, so they are wrapped whole: they
 * fail before anything else happened. popen spawns the same way and is
 * not wrapped. */
#include "tasks.h"

#include <errno.h>
#include <stdint.h>
#include <sys/wait.h>

#include "../prezero.h"

bool hz_tasks_again(int err)
{
	return err == EAGAIN && hz_prezero_stop() == 1;
}

HZ_PRIVATE_API pid_t hz_preload_fork(pid_t (*real)(void))
{
	int saved = errno;
	pid_t pid;

	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	pid = real();
	if (pid != -1 || !hz_tasks_again(errno))
		return pid;
	errno = saved;
	return real();
}

HZ_PRIVATE_API int hz_preload_pthread_create(hz_pthread_create_fn real, pthread_t *thread,
					     const pthread_attr_t *attr, void *(*fn)(void *),
					     void *arg)
{
	int saved = errno, ret;

	if (real == NULL)
		return ENOSYS;
	ret = real(thread, attr, fn, arg);
	if (ret == 0 || !hz_tasks_again(ret))
		return ret;
	errno = saved;
	return real(thread, attr, fn, arg);
}

/* The child runs fn on its own stack and never returns here. */
HZ_PRIVATE_API int hz_preload_clone(hz_clone_fn real, int (*fn)(void *), void *stack, int flags,
				    void *arg, pid_t *parent_tid, void *tls, pid_t *child_tid)
{
	int saved = errno, ret;

	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	ret = real(fn, stack, flags, arg, parent_tid, tls, child_tid);
	if (ret != -1 || !hz_tasks_again(errno))
		return ret;
	errno = saved;
	return real(fn, stack, flags, arg, parent_tid, tls, child_tid);
}

HZ_PRIVATE_API int hz_preload_posix_spawn(hz_spawn_fn real, pid_t *pid, const char *file,
					  const posix_spawn_file_actions_t *actions,
					  const posix_spawnattr_t *attr, char *const argv[],
					  char *const envp[])
{
	int saved = errno, ret;

	if (real == NULL)
		return ENOSYS;
	ret = real(pid, file, actions, attr, argv, envp);
	if (ret == 0 || !hz_tasks_again(ret))
		return ret;
	errno = saved;
	return real(pid, file, actions, attr, argv, envp);
}

/* glibc's system reports a shell it could not start as one that exited
 * with 127 (system(NULL): as no shell, 0), and leaves posix_spawn's error
 * in errno; a shell that ran leaves errno alone. */
static bool not_started(const char *command, int status)
{
	return errno == EAGAIN && status == (command != NULL ? W_EXITCODE(127, 0) : 0);
}

HZ_PRIVATE_API int hz_preload_system(int (*real)(const char *), const char *command)
{
	int saved = errno, status;

	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	errno = 0;
	status = real(command);
	if (!not_started(command, status) || !hz_tasks_again(EAGAIN)) {
		if (errno == 0)
			errno = saved;
		return status;
	}
	errno = saved;
	return real(command);
}
