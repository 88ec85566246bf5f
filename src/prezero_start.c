/* When the pre-zero thread runs: started once its work pays, stopped for
 * unshare and setns. See prezero.h.
 *
 * A second thread changes a program for good, even asleep: glibc marks the
 * process multi-threaded at the first pthread_create and never unmarks it,
 * so from then on malloc takes its arena lock, stdio its stream locks and
 * libstdc++ its atomic reference counts (clang -O2 under the preload ran
 * 8% slower than under glibc with the thread started by its two large
 * frees, 2% faster with HUGEZERO_DISABLE=1). So in a program that has no
 * thread of its own the thread starts only when its work pays:
 *  - at the free of a dirty block of a size class that shows reuse (the
 *    cache's warm classes): its next calloc is served pre-zeroed;
 *  - at a new range the promoter tracks of FIRST_TOUCH_START_MIN or more,
 *    whose first touches it watches (promote_density.h);
 *  - at a large request once a range the promoter tracks has waited
 *    HUGEZERO_COLLAPSE_DELAY_MS, which no collapse comes before.
 * Until then a cold free goes back at once, as glibc's munmap, and calloc
 * zeroes what it reuses. A program with threads of its own pays those
 * locks already: there the thread starts at the first dirty free or
 * tracked range, as before.
 *
 * What a program can only do while single-threaded is unshare(CLONE_NEWUSER)
 * and setns into a user or mount namespace (EINVAL otherwise): the preload
 * interposes unshare and setns (src/preload/ns.c) and stops the thread
 * first; the next free starts it again. Programs that make the system call
 * directly are not seen (README, "Containers").
 *
 * Nor does the thread outlive the program's threads. glibc ends a process
 * with exit(0) when the last thread it started leaves, and this thread is
 * one it started: a program whose main thread left with pthread_exit
 * would stay alive when its last thread left, with this thread alone and
 * every signal blocked here, so that only SIGKILL ended it. So:
 *  - the main thread's pthread_exit (or cancellation) retires the thread
 *    first (hz_prezero_watch_main_thread: a thread-specific value, whose
 *    destructor glibc runs in the leaving thread before it counts it
 *    out, and which a fork's child sets in its one thread); the
 *    program's last thread then ends the process as under glibc, exit(0)
 *    with its atexit handlers and stdio buffers, and calloc zeroes from
 *    then on;
 *  - a main thread that leaves unseen (the exit system call, or one the
 *    value was not set in) leaves this thread alone: it looks at each tick
 *    (hz_pz_leave_if_alone) and then exits with the main thread's status,
 *    which ends the process with it; a main thread killed alone (seccomp's
 *    strict mode kills a thread) leaves it to kill the process. What
 *    exit(0) does in a last thread of the program cannot be done from
 *    here: the program's files closed with its threads. Without /proc it
 *    cannot tell. */
#include "prezero.h"

#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>

#include "classes.h"
#include "config.h"
#include "log.h"
#include "prezero_impl.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "sizes.h"

#define THREAD_STACK ((size_t)256 << 10)

/* The oldest range the promoter tracks while the thread does not run (ns;
 * 0: none). */
static uint64_t promotion_waits_since;

/* Detached and never joined: exit() ends it wherever it is, so it never
 * delays exit. */
static void start_thread(void)
{
	int ret;

	if (__atomic_load_n(&pz_thread_retired, __ATOMIC_SEQ_CST) ||
	    __atomic_exchange_n(&pz_thread_started, 1, __ATOMIC_SEQ_CST))
		return;
	/* Retired meanwhile: the retiring thread may have looked for a
	 * thread before this one was started, and none starts after it. */
	if (__atomic_load_n(&pz_thread_retired, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&pz_thread_started, 0, __ATOMIC_SEQ_CST);
		return;
	}
	ret = hz_prim_thread_start(hz_pz_main, NULL, THREAD_STACK);
	if (ret == -EINTR) { /* a signal handler's stack: the next request */
		__atomic_store_n(&pz_thread_started, 0, __ATOMIC_SEQ_CST);
	} else if (ret != 0) {
		hz_info("could not start the pre-zero thread; calloc zeroes instead");
		__atomic_store_n(&pz_thread_failed, 1, __ATOMIC_RELEASE);
	}
}

/* Ask the thread to end and wait until it has left its loop: 1 with *tid
 * its kernel id, 0 when none ran, -EBUSY when it did not leave in time. */
static int leave_loop(int *tid)
{
	if (!__atomic_load_n(&pz_thread_started, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&pz_thread_failed, __ATOMIC_ACQUIRE))
		return 0;
	__atomic_store_n(&pz_stop, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&pz_wake_seq, 1, __ATOMIC_SEQ_CST);
	hz_prim_futex_wake(&pz_wake_seq, 1);
	if (!hz_prezero_wait(&pz_exited, ~0, 1, HZ_THREAD_STUCK_NS))
		return -EBUSY; /* it ends later: stop stays set */
	/* Out of its loop: it runs only the C library's thread exit now. */
	*tid = __atomic_load_n(&pz_tid, __ATOMIC_ACQUIRE);
	__atomic_store_n(&pz_tid, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&pz_exited, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&pz_stop, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pz_thread_started, 0, __ATOMIC_RELEASE);
	return 1;
}

/* Out of its loop is not gone: until the kernel releases the task, it
 * still counts towards RLIMIT_NPROC and pids.max, keeps the process
 * multi-threaded for unshare and setns, and shows in /proc/PID/task with
 * the credentials it had. So the caller waits for the release too. */
int hz_prezero_stop(void)
{
	int tid = 0, ret = leave_loop(&tid);
	uint64_t deadline = hz_prim_now_ns() + HZ_THREAD_STUCK_NS;

	if (ret != 1 || tid == 0)
		return ret;
	while (hz_prim_thread_known(tid)) {
		if (hz_prim_now_ns() >= deadline)
			return -EBUSY;
		hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
	}
	return 1;
}

void hz_prezero_retire(void)
{
	if (__atomic_exchange_n(&pz_thread_retired, 1, __ATOMIC_SEQ_CST))
		return;
	hz_prezero_stop();
}

static pthread_key_t main_thread_key;
static int main_thread_watched; /* the key exists */

/* As hz_prezero_retire, without a deadline, and even after one that gave
 * up (a step aside): glibc ends the process from whichever thread it
 * counts out last, and from the pre-zero thread (a file table without the
 * program's stdout) that exit(0) would lose the program's buffered
 * output. The main thread is leaving; at most a join waits on it. */
static void main_thread_leaves(void *value)
{
	int tid = 0;

	(void)value;
	__atomic_store_n(&pz_thread_retired, 1, __ATOMIC_SEQ_CST);
	while (leave_loop(&tid) == -EBUSY)
		;
	while (tid != 0 && hz_prim_thread_known(tid))
		hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
}

void hz_prezero_watch_main_thread(void)
{
	static int asked;

	if (hz_prim_gettid() != hz_prim_getpid() ||
	    __atomic_exchange_n(&asked, 1, __ATOMIC_ACQ_REL))
		return;
	if (pthread_key_create(&main_thread_key, main_thread_leaves) != 0)
		return;
	pthread_setspecific(main_thread_key, &main_thread_key);
	__atomic_store_n(&main_thread_watched, 1, __ATOMIC_RELEASE);
}

void hz_pz_fork_child_watch(void)
{
	/* The child's one thread, whichever thread forked, is its main. */
	if (__atomic_load_n(&main_thread_watched, __ATOMIC_ACQUIRE))
		pthread_setspecific(main_thread_key, &main_thread_key);
}

void hz_pz_leave_if_alone(uint64_t now)
{
	static uint64_t next_look; /* the thread's own */
	int status;

	if (now < next_look)
		return;
	next_look = now + HZ_STAY_TICK_NS;
	if (hz_prim_main_thread_left(&status) != 1)
		return;
	if (WIFSIGNALED(status)) /* killed alone, as seccomp kills a thread */
		hz_prim_kill_process();
	hz_prim_exit_thread(WEXITSTATUS(status));
}

void hz_prezero_start(void)
{
	if (!__atomic_load_n(&pz_thread_started, __ATOMIC_ACQUIRE))
		start_thread();
}

void hz_prezero_wake(void)
{
	if (!__atomic_load_n(&pz_thread_started, __ATOMIC_ACQUIRE)) {
		start_thread();
		return;
	}
	__atomic_add_fetch(&pz_wake_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pz_sleeping, __ATOMIC_SEQ_CST))
		hz_prim_futex_wake(&pz_wake_seq, 1);
}

bool hz_prezero_welcome(void)
{
	return __atomic_load_n(&pz_thread_started, __ATOMIC_ACQUIRE) ||
	       !hz_prim_single_threaded();
}

bool hz_prezero_holds_probes(void)
{
	return hz_prezero_mode() != HZ_PREZERO_OPT_THREAD || hz_prezero_welcome();
}

/* 16 MiB: in a program with no thread of its own, the smallest range whose
 * first writes the thread starts to watch at once (promote_density.h, "the
 * first touches"). Written densely on 4 KiB pages such a range faults for
 * 40-80 ms on a VM whose host backs memory lazily (0.2-0.4 GB/s), on huge
 * pages for about 1.2; the thread costs the program what glibc's locks
 * cost once it has two threads (above; clang -O2 2.4%, bench/RESULTS.md,
 * "the first touches"). ImageMagick's 16-24 MiB pixel caches run 1.16x
 * glibc with it. Smaller ranges wait for the collapse delay, as before. */
#define FIRST_TOUCH_START_MIN ((size_t)16 << 20)

/* The promoter tracks a range of len since then: the thread starts now when
 * welcome or for a range whose first touches are worth watching, else once
 * the oldest such range has waited the collapse delay. A sleeping thread is
 * woken: at its next tick (HZ_STAY_TICK_NS, classes.h, a quarter second) a
 * sequential writer has long faulted the whole range in. */
static void start_for_promotion(uint64_t since, size_t len)
{
	uint64_t w = __atomic_load_n(&promotion_waits_since, __ATOMIC_RELAXED);

	if (hz_prezero_welcome() || len >= FIRST_TOUCH_START_MIN) {
		hz_prezero_wake();
		return;
	}
	while ((w == 0 || since < w) &&
	       !__atomic_compare_exchange_n(&promotion_waits_since, &w, since, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	hz_prezero_poke();
}

void hz_prezero_watch(uintptr_t start, size_t len, enum hz_promote_kind kind)
{
	if (hz_prezero_mode() != HZ_PREZERO_OPT_THREAD || !hz_promote_enabled())
		return;
	if (hz_promote_track(start, len, kind))
		start_for_promotion(hz_prim_now_ns(), len);
}

void hz_prezero_poke(void)
{
	uint64_t w = __atomic_load_n(&promotion_waits_since, __ATOMIC_RELAXED);
	uint64_t delay = hz_config()->collapse_delay_ms * HZ_NS_PER_MS;

	if (w != 0 && hz_prim_now_ns() - w >= delay) {
		__atomic_store_n(&promotion_waits_since, 0, __ATOMIC_RELAXED);
		hz_prezero_start();
	}
}
