/* Fork storms from a multithreaded process (issue 8: "0 deadlocks in 1000
 * forks"): fork from the main thread while other threads allocate and the
 * pre-zero thread zeroes, and fork from a signal handler. Every child
 * checks a large calloc is zero and that large and small blocks work, then
 * leaves with exit() or _exit(); the parent checks every child's status,
 * within a deadline (stress.h's watchdog names what hung).
 *
 * The signal goes to a thread that waits in sigsuspend with the signal
 * masked everywhere else: fork from a handler that interrupted malloc is
 * undefined with glibc too, so it is not what is tested. The same program
 * runs without the preload as a glibc baseline. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "stress.h"

/* 20 s: a child does a few MiB of work in milliseconds; only a hang takes
 * this long. */
#define CHILD_SECONDS 20
/* The storm's forks stop at HZ_FORKS or after this long, whichever comes
 * first: 1000 forks took 17-28 s on the machines before, 132 s on an AMD
 * EPYC VM whose fresh memory faults 3x slower (a child's large calloc is
 * fresh memory), past meson's 120 s. At least MIN_FORKS must fit. */
#define STORM_SECONDS 75
#define MIN_FORKS 200

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static void run_child(unsigned slot, unsigned n)
{
	int rc = stress_child_work(slot);

	/* Half leave through exit(): atexit handlers, destructors (the
	 * preload's report) and stdio flushing run in the child. */
	if (n % 2)
		_exit(rc);
	exit(rc);
}

/* A dirty block freed and a large calloc right before fork: the pre-zero
 * thread has work (and calloc demand) when fork takes hugezero's locks. */
static void feed_prezero(unsigned n)
{
	size_t t = stress_threshold(), size = (4 + n % 13) * t;
	unsigned char *p = malloc(size);

	if (p)
		stress_stamp(p, size, n);
	stress_escape(p);
	free(p);
	p = calloc(1, 2 * t);
	stress_escape(p);
	free(p);
}

static void expect_prezero_ran(unsigned runnable, unsigned forks,
			       const struct stress_prezero *before,
			       const struct stress_prezero *after)
{
	const char *prezero = getenv("HUGEZERO_PREZERO");

	if (!stress_preloaded()) {
		printf("glibc baseline: no pre-zero thread to look at\n");
		return;
	}
	if (prezero && strcmp(prezero, "thread") != 0) {
		printf("HUGEZERO_PREZERO=%s: calloc zeroes, no pre-zero thread\n", prezero);
		if (after->tid != 0)
			fail_msg("a SCHED_IDLE thread %d runs with HUGEZERO_PREZERO=%s",
				 (int)after->tid, prezero);
		return;
	}
	if (after->tid == 0)
		fail_msg("no pre-zero thread (SCHED_IDLE) found in the process");
	printf("pre-zero thread %d runnable at %u of %u forks, %llu ticks of CPU during them\n",
	       (int)after->tid, runnable, forks,
	       (unsigned long long)(after->ticks - (before->tid == after->tid ? before->ticks : 0)));
	/* Runnable at no fork at all would mean the storm never raced it. */
	if (runnable == 0)
		fail_msg("the pre-zero thread was never busy when fork ran");
}

static void fork_storm_children_allocate_while_threads_allocate(void **state)
{
	unsigned forks = (unsigned)stress_env("HZ_FORKS", 1000), runnable = 0, bad = 0, errors;
	unsigned done = 0;
	struct stress_prezero before = { 0 }, now = { 0 };
	time_t until = time(NULL) + STORM_SECONDS;

	(void)state;
	fflush(NULL); /* children leaving with exit() would write it again */
	stress_load_start(3, NULL, 0);
	feed_prezero(0);
	nap_us(20000);
	stress_prezero_sample(&before);
	for (unsigned i = 0; i < forks && bad < 5 && time(NULL) < until; i++, done++) {
		unsigned slot = stress_child_slot();
		pid_t pid;

		stress_phase(CHILD_SECONDS + 20, "fork storm: fork %u of %u, 3 threads allocating",
			     i + 1, forks);
		feed_prezero(i);
		if (stress_prezero_sample(&now) == 0 && now.state == 'R')
			runnable++;
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			run_child(slot, i);
		stress_child_track(pid, slot);
		if (stress_child_reap(pid, slot, CHILD_SECONDS, "fork storm") != 0)
			bad++;
	}
	stress_phase(60, "fork storm: stopping the allocating threads");
	errors = stress_load_stop();
	stress_prezero_sample(&now);
	stress_phase_end();
	printf("%u of %u forks in at most %d s\n", done, forks, STORM_SECONDS);
	assert_int_equal(bad, 0);
	assert_int_equal(errors, 0);
	if (done < MIN_FORKS && done < forks)
		fail_msg("only %u forks in %d s: each took over %d ms", done, STORM_SECONDS,
			 STORM_SECONDS * 1000 / MIN_FORKS);
	expect_prezero_ran(runnable, done, &before, &now);
}

/* ---- fork from a signal handler ---- */

#define MAX_SIGNAL_FORKS 4096

static pid_t signal_pids[MAX_SIGNAL_FORKS];
static unsigned signal_slots[MAX_SIGNAL_FORKS];
static unsigned signal_forks;
static unsigned signal_runnable;
static int signal_stop;

/* Only the signal thread runs it, so signal_forks has one writer. */
static void fork_in_handler(int sig)
{
	unsigned i = __atomic_load_n(&signal_forks, __ATOMIC_RELAXED), slot;
	int saved = errno;
	pid_t pid;

	(void)sig;
	if (i >= MAX_SIGNAL_FORKS)
		return;
	slot = stress_child_slot();
	pid = fork();
	if (pid == 0)
		run_child(slot, i);
	if (pid > 0)
		stress_child_track(pid, slot);
	signal_pids[i] = pid;
	signal_slots[i] = slot;
	__atomic_store_n(&signal_forks, i + 1, __ATOMIC_RELEASE);
	errno = saved;
}

static void wake_only(int sig)
{
	(void)sig;
}

/* The only thread with SIGUSR1 unmasked: it waits in sigsuspend, holding
 * no lock, when the handler forks. */
static void *signal_thread(void *arg)
{
	sigset_t wait_mask;

	(void)arg;
	pthread_sigmask(SIG_SETMASK, NULL, &wait_mask);
	sigdelset(&wait_mask, SIGUSR1);
	sigdelset(&wait_mask, SIGUSR2);
	while (!__atomic_load_n(&signal_stop, __ATOMIC_ACQUIRE))
		sigsuspend(&wait_mask);
	return NULL;
}

static void fork_from_signal_handler_while_threads_allocate(void **state)
{
	unsigned forks = (unsigned)stress_env("HZ_SIGNAL_FORKS", 200), bad = 0, errors;
	struct sigaction sa = { 0 };
	struct stress_prezero before = { 0 }, now = { 0 };
	const int sigs[] = { SIGUSR1, SIGUSR2 };
	sigset_t set, old;
	pthread_t tid;

	(void)state;
	if (forks > MAX_SIGNAL_FORKS)
		forks = MAX_SIGNAL_FORKS;
	fflush(NULL);
	sa.sa_handler = fork_in_handler;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	sa.sa_handler = wake_only;
	assert_int_equal(sigaction(SIGUSR2, &sa, NULL), 0);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, &old); /* this thread and the ones it starts */
	stress_load_start(3, sigs, 2);
	assert_int_equal(pthread_create(&tid, NULL, signal_thread, NULL), 0);
	feed_prezero(0);
	nap_us(20000);
	stress_prezero_sample(&before);
	for (unsigned i = 0; i < forks && bad < 5; i++) {
		stress_phase(CHILD_SECONDS + 20,
			     "fork from a signal handler: signal %u of %u, 3 threads allocating",
			     i + 1, forks);
		feed_prezero(i);
		if (stress_prezero_sample(&now) == 0 && now.state == 'R')
			signal_runnable++;
		pthread_kill(tid, SIGUSR1);
		while (__atomic_load_n(&signal_forks, __ATOMIC_ACQUIRE) == i)
			nap_us(50);
		if (signal_pids[i] < 0) {
			fprintf(stderr, "fork in the handler failed\n");
			bad++;
		} else if (stress_child_reap(signal_pids[i], signal_slots[i], CHILD_SECONDS,
					     "fork from a signal handler") != 0) {
			bad++;
		}
	}
	stress_phase(60, "fork from a signal handler: stopping the threads");
	__atomic_store_n(&signal_stop, 1, __ATOMIC_RELEASE);
	pthread_kill(tid, SIGUSR2);
	pthread_join(tid, NULL);
	errors = stress_load_stop();
	stress_prezero_sample(&now);
	stress_phase_end();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	assert_int_equal(bad, 0);
	assert_int_equal(errors, 0);
	expect_prezero_ran(signal_runnable, forks, &before, &now);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(fork_storm_children_allocate_while_threads_allocate),
		cmocka_unit_test(fork_from_signal_handler_while_threads_allocate),
	};

	return stress_main(all, sizeof(all) / sizeof(all[0]), NULL, NULL, argc, argv);
}
