/* Threads: the one place hugezero starts one, the futex its pre-zero
 * thread sleeps on, and the CPU-time clocks. See prim.h. */
#include "prim.h"
#include "fault.h"
#include "raw.h"
#include "../sizes.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static hz_prim_pthread_create_fn *libc_pthread_create;

void hz_prim_use_pthread_create(hz_prim_pthread_create_fn *create)
{
	__atomic_store_n(&libc_pthread_create, create, __ATOMIC_RELEASE);
}

void hz_prim_offer_pthread_create(hz_prim_pthread_create_fn *create)
{
	hz_prim_pthread_create_fn *none = NULL;

	__atomic_compare_exchange_n(&libc_pthread_create, &none, create, false,
				    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static int create_thread(pthread_t *tid, const pthread_attr_t *attr, void *(*fn)(void *),
			 void *arg)
{
	hz_prim_pthread_create_fn *create = __atomic_load_n(&libc_pthread_create,
							    __ATOMIC_ACQUIRE);

	return create ? create(tid, attr, fn, arg) : ENOSYS;
}

/* Whether the caller runs on the alternate signal stack: a handler's. */
static bool on_signal_stack(void)
{
	stack_t ss;

	return HZ_RAW(SYS_sigaltstack, NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

int hz_prim_thread_start(void *(*fn)(void *), void *arg, size_t stack_size)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	int saved = errno, ret;

	if (on_signal_stack())
		return -EINTR;
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
		ret = create_thread(&tid, &attr, fn, arg);
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
	long ret;

	/* FUTEX_WAIT's timeout is relative (CLOCK_MONOTONIC). */
	ret = HZ_RAW(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected,
		     timeout_ns != 0 ? &ts : NULL, NULL, 0);
	return ret < 0 ? (int)ret : 0;
}

int hz_prim_futex_wake(int *word, int count)
{
	return (int)HZ_RAW(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

bool hz_prim_single_threaded(void)
{
	return __libc_single_threaded;
}

int hz_prim_gettid(void)
{
	return (int)HZ_RAW(SYS_gettid); /* never fails */
}

void hz_prim_exit_thread(int status)
{
	for (;;)
		HZ_RAW(SYS_exit, status);
}

void hz_prim_kill_process(void)
{
	HZ_RAW(SYS_tgkill, hz_prim_getpid(), hz_prim_gettid(), SIGKILL);
	hz_prim_exit_thread(128 + SIGKILL); /* refused: the status a shell shows */
}

/* The kernel drops the task from its user's count and from its pids
 * cgroup in release_task, before it unhashes the id that tgkill looks up:
 * ESRCH means both counts are down. */
bool hz_prim_thread_known(int tid)
{
	return HZ_RAW(SYS_tgkill, hz_prim_getpid(), tid, 0) == 0;
}

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1) /* Linux 5.9 */
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* The number of private tables made, and in each thread that made one,
 * its number. Thread-local: a new thread starts at 0 even where it
 * reuses an exited thread's pthread_t, and a fork's child has only a copy
 * of the forking thread, never of the one with a table (no syscall per
 * call, as gettid was). */
static unsigned private_tables;
static __thread unsigned private_table_here;

int hz_prim_files_unshare(bool keep_stderr)
{
	int ret = hz_prim_fault(HZ_CALL_UNSHARE, 0, 0);

	/* One call: the new table copies only the numbers below the first
	 * closed, so it never holds a program's pipe or socket open (a
	 * reader waiting for EOF would wait for us); with stderr kept,
	 * stdin and stdout for the two calls after it. */
	if (ret == 0)
		ret = (int)HZ_RAW(SYS_close_range, keep_stderr ? 3u : 0u, ~0u, CLOSE_RANGE_UNSHARE);
	if (ret == 0 && keep_stderr) {
		(void)HZ_RAW(SYS_close, 0);
		(void)HZ_RAW(SYS_close, 1);
	}
	if (ret != 0)
		return ret;
	private_table_here = __atomic_add_fetch(&private_tables, 1, __ATOMIC_RELEASE);
	return 0;
}

unsigned hz_prim_files_private(void)
{
	unsigned n = private_table_here;

	return n != 0 && n == __atomic_load_n(&private_tables, __ATOMIC_ACQUIRE) ? n : 0;
}

static uint64_t cpu_ns(clockid_t clock)
{
	struct timespec ts;

	/* No symbol of ours: clock_gettime is never interposed. */
	if (clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hz_prim_thread_cpu_ns(void)
{
	return cpu_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t hz_prim_process_cpu_ns(void)
{
	return cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
}

uint64_t hz_prim_thread_minor_faults(void)
{
	struct rusage ru;

	/* No symbol of ours either: getrusage is never interposed. */
	if (getrusage(RUSAGE_THREAD, &ru) != 0 || ru.ru_minflt < 0)
		return UINT64_MAX;
	return (uint64_t)ru.ru_minflt;
}
