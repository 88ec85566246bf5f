/* Shared by the stress programs (tests/stress): a watchdog that turns a
 * deadlock into a failure naming the phase that hung, children waited for
 * with a deadline, block stamps, a background allocation load, and a look
 * at hugezero's pre-zero thread.
 *
 * The programs run as real processes under LD_PRELOAD=libhugezero-preload.so
 * (and without it, as a glibc baseline that proves the assertions honest).
 * HZ_EXPECT_PRELOAD=1 says the preload must be there; HZ_STRESS_GDB=0 skips
 * the gdb backtraces printed when something hangs. */
#ifndef HZ_TEST_STRESS_H
#define HZ_TEST_STRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../util.h"

/* The programs' main: with HZ_EXPECT_PRELOAD set, fail unless the preload
 * is there; start the watchdog; run the tests argv[1] matches (all without
 * it) with cmocka, setup and teardown around the group (NULL for none). */
struct CMUnitTest;
int stress_main(const struct CMUnitTest *tests, size_t count, int (*setup)(void **),
		int (*teardown)(void **), int argc, char **argv);

/* ---- watchdog ---- */

/* Start the watchdog thread (all signals blocked) once. Later calls do
 * nothing. */
void stress_watchdog_start(void);

/* Enter a phase that must end within seconds: after that the watchdog
 * prints "HANG: <phase> ...", the stacks of this process (gdb), kills the
 * children it knows and exits with status 1. The text is copied. */
void stress_phase(unsigned seconds, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Leave the phase: nothing is timed until the next one. */
void stress_phase_end(void);

/* ---- children ---- */

/* A slot in shared memory where a child records the step it is at, so a
 * parent that gives up on it can say where it hung. Allocated before fork
 * (or in a signal handler: lock-free). */
unsigned stress_child_slot(void);

/* In the child: record the current step (a string literal). */
void stress_child_step(unsigned slot, const char *step);

/* Remember child pid (its steps in slot) as one to report and kill if this
 * process hangs. Async-signal-safe. */
void stress_child_track(pid_t pid, unsigned slot);

/* Wait for child pid (recorded in slot) for at most seconds. On a timeout:
 * print which child (what) hung at which step, its stacks, kill it, and
 * return -1. Otherwise return 0 with its wait status in *status. */
int stress_child_wait(pid_t pid, unsigned slot, unsigned seconds, const char *what,
		      int *status);

/* stress_child_wait, then the child must have exited with status 0;
 * otherwise say how it ended. Returns 0 or -1. */
int stress_child_reap(pid_t pid, unsigned slot, unsigned seconds, const char *what);

/* The common child check: large calloc zero, large and small malloc
 * written and read back, realloc across the threshold; steps recorded in
 * slot. Returns 0, or an exit code naming what failed (2..9). */
int stress_child_work(unsigned slot);

/* ---- blocks ---- */

/* Write the pattern of seed: every word of the first 4 KiB, then one word
 * per 4 KiB page (so every page of a large block is resident and dirty
 * when it is freed) and the last word. The value at an offset depends on
 * seed and the offset only, so a realloc'd prefix can be checked. */
void stress_stamp(void *p, size_t size, uint64_t seed);

/* Check the words of stress_stamp(p, written, seed) below valid. Returns 0,
 * or -1 after printing the first difference (what names the block). */
int stress_check(const void *p, size_t written, size_t valid, uint64_t seed,
		 const char *what);

/* 0 when all of [p, p + size) is zero; -1 after printing the first
 * non-zero byte. */
int stress_check_zero(const void *p, size_t size, const char *what);

/* Keep stores to p: the compiler may otherwise drop them before free. */
static inline void stress_escape(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

struct stress_rng {
	uint64_t s;
};

uint64_t stress_next(struct stress_rng *r);

/* HUGEZERO_THRESHOLD as the test runs with it (256 KiB from meson), or
 * 2 MiB. */
size_t stress_threshold(void);

/* An environment variable as a number, or def. */
unsigned long stress_env(const char *name, unsigned long def);

/* ---- background load ---- */

/* threads threads allocating until stress_load_stop: small blocks, large
 * blocks written then freed dirty (work for the pre-zero thread), large
 * callocs checked zero (which make it keep blocks clean), realloc across
 * the threshold, with short sleeps so a core is idle now and then (the
 * pre-zero thread is SCHED_IDLE). Signals in block stay blocked in them. */
void stress_load_start(unsigned threads, const int *block_signals, unsigned nsignals);

/* Stop and join them; returns the number of wrong blocks they found. */
unsigned stress_load_stop(void);

/* ---- hugezero's pre-zero thread ---- */

/* Whether LD_PRELOAD holds libhugezero-preload.so; with HZ_EXPECT_PRELOAD=1
 * its absence fails the test. */
bool stress_preloaded(void);

struct stress_prezero {
	pid_t tid;      /* 0: none found */
	char state;     /* from /proc/self/task/TID/stat */
	uint64_t ticks; /* utime + stime */
};

/* The state letter of thread tid of this process (R, S, D...), or '?'. */
char stress_task_state(pid_t tid);

/* Wait up to ms milliseconds for thread tid to sleep (state S or D: blocked
 * in a system call or on a lock). Returns 0, or -1 on a timeout. */
int stress_wait_blocked(pid_t tid, unsigned ms);

/* Find the pre-zero thread (the SCHED_IDLE thread of this process) and
 * read its state. Returns 0, or -1 when there is none. */
int stress_prezero_sample(struct stress_prezero *out);

#endif
