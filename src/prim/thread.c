/* Threads: the one place hugezero starts one, and the futex its pre-zero
 * thread sleeps on. See prim.h. */
#include "prim.h"
#include "../sizes.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int hz_prim_thread_start(void *(*fn)(void *), void *arg, size_t stack_size)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	int saved = errno, ret;

	ret = pthread_attr_init(&attr);
	if (ret != 0)
		return -ret;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (stack_size != 0)
		ret = pthread_attr_setstacksize(&attr, stack_size);
	if (ret == 0) {
		/* The new thread inherits the mask: blocked from its first
		 * instruction, so no signal of the program lands there. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		ret = pthread_create(&tid, &attr, fn, arg);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	errno = saved;
	return -ret;
}

int hz_prim_futex_wait(int *word, int expected, uint64_t timeout_ns)
{
	struct timespec ts = { (time_t)(timeout_ns / HZ_NS_PER_SEC),
			       (long)(timeout_ns % HZ_NS_PER_SEC) };
	int saved = errno;
	long ret;

	/* FUTEX_WAIT's timeout is relative (CLOCK_MONOTONIC). */
	ret = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected,
		      timeout_ns != 0 ? &ts : NULL, NULL, 0);
	ret = ret == -1 ? -errno : 0;
	errno = saved;
	return (int)ret;
}

int hz_prim_futex_wake(int *word, int count)
{
	int saved = errno;
	long ret = syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);

	ret = ret == -1 ? -errno : ret;
	errno = saved;
	return (int)ret;
}

int hz_prim_gettid(void)
{
	return (int)syscall(SYS_gettid); /* never fails, errno untouched */
}
