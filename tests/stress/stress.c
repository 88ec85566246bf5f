/* Shared by the stress programs. See stress.h. */
#include "stress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

/* Steps of 4096 children at once; slots are reused round-robin. */
#define CHILD_SLOTS 4096
#define STEP_LEN 48
/* Children killed when this process hangs. */
#define TRACKED 4096
/* Processes whose stacks are printed on a hang: this one and a few
 * children (gdb takes a second or two each). */
#define DUMP_CHILDREN 3
#define GDB "/usr/bin/gdb"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* write(2) of a formatted line: no stdio lock, which a hung thread may
 * hold. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 1)
		n = (int)sizeof(buf) - 1;
	if (n > 0 && write(2, buf, (size_t)n) < 0)
		return;
}

/* ---- children's steps, in memory shared with them ---- */

static char (*steps)[STEP_LEN];
static unsigned next_slot;

static struct {
	pid_t pid;
	unsigned slot;
} tracked[TRACKED];
static unsigned next_tracked;

static void map_steps(void)
{
	void *m = mmap(NULL, (size_t)CHILD_SLOTS * STEP_LEN, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED) {
		say("stress: cannot map the children's step table: %s\n", strerror(errno));
		_exit(1);
	}
	steps = m;
}

unsigned stress_child_slot(void)
{
	unsigned slot = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED) % CHILD_SLOTS;

	memcpy(steps[slot], "forked", sizeof("forked"));
	return slot;
}

void stress_child_step(unsigned slot, const char *step)
{
	size_t n = strlen(step);

	if (steps == NULL) /* a program without the watchdog (helper.c) */
		return;
	if (n >= STEP_LEN)
		n = STEP_LEN - 1;
	memcpy(steps[slot], step, n);
	steps[slot][n] = '\0';
}

static void slot_step(unsigned slot, char *out)
{
	memcpy(out, steps[slot], STEP_LEN);
	out[STEP_LEN - 1] = '\0';
}

void stress_child_track(pid_t pid, unsigned slot)
{
	unsigned i = __atomic_fetch_add(&next_tracked, 1, __ATOMIC_RELAXED) % TRACKED;

	__atomic_store_n(&tracked[i].slot, slot, __ATOMIC_RELAXED);
	__atomic_store_n(&tracked[i].pid, pid, __ATOMIC_RELEASE);
}

static void untrack(pid_t pid)
{
	for (unsigned i = 0; i < TRACKED; i++)
		if (__atomic_load_n(&tracked[i].pid, __ATOMIC_RELAXED) == pid)
			__atomic_store_n(&tracked[i].pid, 0, __ATOMIC_RELAXED);
}

/* ---- stacks of a hung process ---- */

/* gdb from a posix_spawn (no fork handlers, no malloc: the process may be
 * stuck in either), without LD_PRELOAD, its output on our stderr. Bounded:
 * killed after 60 s. */
static void dump_stacks(pid_t pid)
{
	const char *want = getenv("HZ_STRESS_GDB");
	char pidbuf[24], *argv[] = { "gdb", "-nx", "-batch", "-p", pidbuf, "-ex",
				     "thread apply all bt 40", NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", "HOME=/tmp", NULL };
	uint64_t until;
	pid_t gdb;
	int status;

	if ((want && strcmp(want, "0") == 0) || access(GDB, X_OK) != 0) {
		say("stress: (no stacks: %s)\n", want ? "HZ_STRESS_GDB=0" : GDB " missing");
		return;
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	say("stress: stacks of process %d:\n", (int)pid);
	dup2(2, 1);
	if (posix_spawn(&gdb, GDB, NULL, NULL, argv, envp) != 0)
		return;
	until = now_ns() + 60000000000ull;
	while (waitpid(gdb, &status, WNOHANG) == 0) {
		if (now_ns() > until) {
			kill(gdb, SIGKILL);
			waitpid(gdb, &status, 0);
			break;
		}
		nap_ns(10000000);
	}
}

/* ---- the watchdog ---- */

static pthread_mutex_t phase_mutex = PTHREAD_MUTEX_INITIALIZER;
static char phase_text[256];
static unsigned phase_seconds;
static uint64_t phase_deadline; /* ns; 0: none */
static pthread_once_t watchdog_once = PTHREAD_ONCE_INIT;

static void hang(void)
{
	char text[256] = "(phase text busy)", step[STEP_LEN];
	unsigned dumped = 0;

	if (pthread_mutex_trylock(&phase_mutex) == 0) {
		memcpy(text, phase_text, sizeof(text));
		pthread_mutex_unlock(&phase_mutex);
	}
	say("HANG: %s: not done after %u s (pid %d)\n", text, phase_seconds, (int)getpid());
	for (unsigned i = 0; i < TRACKED; i++) {
		pid_t pid = __atomic_load_n(&tracked[i].pid, __ATOMIC_ACQUIRE);

		if (pid <= 0 || waitpid(pid, NULL, WNOHANG) != 0)
			continue;
		slot_step(tracked[i].slot, step);
		say("HANG:   child %d still running, at step \"%s\"\n", (int)pid, step);
		if (dumped++ < DUMP_CHILDREN)
			dump_stacks(pid);
		kill(pid, SIGKILL);
	}
	dump_stacks(getpid());
	say("HANG: %s: giving up\n", text);
	_exit(1);
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t deadline;

		nap_ns(50000000);
		deadline = __atomic_load_n(&phase_deadline, __ATOMIC_ACQUIRE);
		if (deadline != 0 && now_ns() > deadline)
			hang();
	}
	return NULL;
}

static void start_watchdog(void)
{
	sigset_t all, old;
	pthread_t tid;

	map_steps();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&tid, NULL, watchdog_main, NULL) != 0) {
		say("stress: cannot start the watchdog\n");
		_exit(1);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_detach(tid);
}

void stress_watchdog_start(void)
{
	pthread_once(&watchdog_once, start_watchdog);
}

void stress_phase(unsigned seconds, const char *fmt, ...)
{
	va_list ap;

	stress_watchdog_start();
	pthread_mutex_lock(&phase_mutex);
	va_start(ap, fmt);
	vsnprintf(phase_text, sizeof(phase_text), fmt, ap);
	va_end(ap);
	phase_seconds = seconds;
	__atomic_store_n(&phase_deadline, now_ns() + seconds * 1000000000ull, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&phase_mutex);
}

void stress_phase_end(void)
{
	__atomic_store_n(&phase_deadline, 0, __ATOMIC_RELEASE);
}

int stress_child_reap(pid_t pid, unsigned slot, unsigned seconds, const char *what)
{
	int status = 0;

	if (stress_child_wait(pid, slot, seconds, what, &status) != 0)
		return -1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	fprintf(stderr, "%s: child %d %s %d\n", what, (int)pid,
		WIFEXITED(status) ? "exited with" : "killed by signal",
		WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return -1;
}

int stress_child_wait(pid_t pid, unsigned slot, unsigned seconds, const char *what,
		      int *status)
{
	uint64_t until = now_ns() + seconds * 1000000000ull, nap = 20000;
	char step[STEP_LEN];
	pid_t r;

	while ((r = waitpid(pid, status, WNOHANG)) == 0 || (r < 0 && errno == EINTR)) {
		if (now_ns() > until) {
			slot_step(slot, step);
			say("HANG: %s: child %d not done after %u s, at step \"%s\"\n", what,
			    (int)pid, seconds, step);
			dump_stacks(pid);
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			untrack(pid);
			return -1;
		}
		nap_ns(nap);
		if (nap < 200000)
			nap *= 2;
	}
	untrack(pid);
	if (r != pid) {
		say("stress: waitpid(%d): %s\n", (int)pid, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- blocks ---- */

uint64_t stress_next(struct stress_rng *r)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return r->s;
}

static uint64_t word_at(uint64_t seed, size_t off)
{
	return (seed ^ (off * 0x9e3779b97f4a7c15ull)) | 1; /* never 0 */
}

#define NO_OFF ((size_t)-1)

/* The stamped offset after off in a block of size (>= 8) bytes: every word
 * of the first 4 KiB, each page start, the last word; NO_OFF at the end. */
static size_t next_off(size_t off, size_t size)
{
	size_t last = (size & ~(size_t)7) - 8, n;

	if (off >= last)
		return NO_OFF;
	n = off < 4096 - 8 ? off + 8 : (off & ~(size_t)4095) + 4096;
	return n < last ? n : last;
}

void stress_stamp(void *p, size_t size, uint64_t seed)
{
	if (size < 8)
		return;
	for (size_t off = 0; off != NO_OFF; off = next_off(off, size)) {
		uint64_t w = word_at(seed, off);

		memcpy((char *)p + off, &w, 8);
	}
}

int stress_check(const void *p, size_t written, size_t valid, uint64_t seed, const char *what)
{
	if (written < 8)
		return 0;
	for (size_t off = 0; off != NO_OFF && off + 8 <= valid; off = next_off(off, written)) {
		uint64_t w;

		memcpy(&w, (const char *)p + off, 8);
		if (w != word_at(seed, off)) {
			say("stress: %s %p (%zu bytes, %zu valid): word at %zu is %#llx, "
			    "not %#llx\n", what, p, written, valid, off, (unsigned long long)w,
			    (unsigned long long)word_at(seed, off));
			return -1;
		}
	}
	return 0;
}

int stress_check_zero(const void *p, size_t size, const char *what)
{
	const uint64_t *w = p;
	size_t n = size / 8;

	for (size_t i = 0; i < n; i += 8) {
		uint64_t any = 0;

		for (size_t j = i; j < i + 8 && j < n; j++)
			any |= w[j];
		if (any == 0)
			continue;
		for (size_t j = i; j < n; j++)
			if (w[j]) {
				say("stress: %s %p (%zu bytes): byte %zu not zero\n", what, p,
				    size, j * 8);
				return -1;
			}
	}
	for (size_t i = n * 8; i < size; i++)
		if (((const unsigned char *)p)[i]) {
			say("stress: %s %p: byte %zu not zero\n", what, p, i);
			return -1;
		}
	return 0;
}

static size_t parse_size(const char *v)
{
	char *end;
	unsigned long long n = strtoull(v, &end, 10);

	switch (*end) {
	case 'k': case 'K': return (size_t)n << 10;
	case 'm': case 'M': return (size_t)n << 20;
	case 'g': case 'G': return (size_t)n << 30;
	default: return (size_t)n;
	}
}

size_t stress_threshold(void)
{
	const char *v = getenv("HUGEZERO_THRESHOLD");
	size_t t = v ? parse_size(v) : 0;

	return t >= 4096 ? t : 2 * MiB;
}

unsigned long stress_env(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

/* ---- the common child check ---- */

int stress_child_work(unsigned slot)
{
	size_t t = stress_threshold();
	unsigned char *big, *mid, *small;

	stress_child_step(slot, "large calloc");
	big = calloc(1, 8 * t);
	if (big == NULL || stress_check_zero(big, 8 * t, "child calloc") != 0)
		return 2;
	stress_child_step(slot, "large malloc");
	mid = malloc(4 * t + 4096);
	if (mid == NULL)
		return 3;
	stress_stamp(mid, 4 * t + 4096, 0xc0ffee);
	stress_stamp(big, 8 * t, 0xbeef);
	if (stress_check(mid, 4 * t + 4096, 4 * t + 4096, 0xc0ffee, "child malloc") != 0 ||
	    stress_check(big, 8 * t, 8 * t, 0xbeef, "child calloc") != 0)
		return 4;
	stress_child_step(slot, "small malloc");
	small = malloc(200);
	if (small == NULL)
		return 5;
	stress_stamp(small, 200, 7);
	stress_child_step(slot, "realloc across the threshold");
	small = realloc(small, 2 * t);
	if (small == NULL || stress_check(small, 200, 200, 7, "child realloc up") != 0)
		return 6;
	stress_stamp(small, 2 * t, 8);
	small = realloc(small, 64);
	if (small == NULL || stress_check(small, 2 * t, 64, 8, "child realloc down") != 0)
		return 7;
	stress_child_step(slot, "free");
	free(small);
	free(mid);
	free(big); /* dirty: wakes the child's own pre-zero thread */
	stress_child_step(slot, "large calloc after free");
	big = calloc(1, 8 * t);
	if (big == NULL || stress_check_zero(big, 8 * t, "child calloc after free") != 0)
		return 8;
	free(big);
	stress_child_step(slot, "exit");
	return 0;
}

/* ---- background load ---- */

#define MAX_LOAD 16

static pthread_t load_threads[MAX_LOAD];
static unsigned load_count;
static int load_stop;
static unsigned load_errors;

static void load_round(struct stress_rng *r, size_t t)
{
	uint64_t x = stress_next(r);
	size_t size = t + (x >> 16) % (6 * t);
	void *small[32];
	unsigned char *p;

	for (unsigned i = 0; i < 32; i++) {
		small[i] = malloc(16 + (x >> (i % 32)) % 4000);
		if (small[i])
			memset(small[i], (int)i, 16);
	}
	switch (x % 4) {
	case 0: /* written, freed dirty */
		p = malloc(size);
		if (p) {
			stress_stamp(p, size, x);
			if (stress_check(p, size, size, x, "load malloc") != 0)
				__atomic_add_fetch(&load_errors, 1, __ATOMIC_RELAXED);
		}
		free(p);
		break;
	case 1: /* calloc: the pre-zero thread keeps blocks clean for these */
		p = calloc(1, size);
		if (p && stress_check_zero(p, size, "load calloc") != 0)
			__atomic_add_fetch(&load_errors, 1, __ATOMIC_RELAXED);
		if (p)
			stress_stamp(p, size, x);
		free(p);
		break;
	default: /* realloc up across the threshold and back */
		p = malloc(4096);
		if (p == NULL)
			break;
		stress_stamp(p, 4096, x);
		p = realloc(p, size);
		if (p == NULL)
			break;
		if (stress_check(p, 4096, 4096, x, "load realloc up") != 0)
			__atomic_add_fetch(&load_errors, 1, __ATOMIC_RELAXED);
		stress_stamp(p, size, x + 1);
		p = realloc(p, 1000);
		if (p && stress_check(p, size, 1000, x + 1, "load realloc down") != 0)
			__atomic_add_fetch(&load_errors, 1, __ATOMIC_RELAXED);
		free(p);
		break;
	}
	for (unsigned i = 0; i < 32; i++)
		free(small[i]);
}

static void *load_main(void *arg)
{
	struct stress_rng r = { 0x9e3779b97f4a7c15ull ^ (uintptr_t)arg };
	size_t t = stress_threshold();

	while (!__atomic_load_n(&load_stop, __ATOMIC_RELAXED)) {
		load_round(&r, t);
		/* About half a core each: the forks and children still get
		 * CPU time on a 2-core machine, and a core idles now and then
		 * so the SCHED_IDLE pre-zero thread runs. */
		nap_ns(500000);
	}
	return NULL;
}

void stress_load_start(unsigned threads, const int *block_signals, unsigned nsignals)
{
	sigset_t set, old;

	sigemptyset(&set);
	for (unsigned i = 0; i < nsignals; i++)
		sigaddset(&set, block_signals[i]);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	__atomic_store_n(&load_stop, 0, __ATOMIC_RELAXED);
	for (load_count = 0; load_count < threads && load_count < MAX_LOAD; load_count++)
		if (pthread_create(&load_threads[load_count], NULL, load_main,
				   (void *)(uintptr_t)(load_count + 1)) != 0)
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

unsigned stress_load_stop(void)
{
	__atomic_store_n(&load_stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < load_count; i++)
		pthread_join(load_threads[i], NULL);
	load_count = 0;
	return __atomic_exchange_n(&load_errors, 0, __ATOMIC_RELAXED);
}

/* ---- the pre-zero thread ---- */

bool stress_preloaded(void)
{
	const char *v = getenv("LD_PRELOAD");

	return v != NULL && strstr(v, "hugezero-preload") != NULL;
}

/* State and utime + stime from /proc/self/task/TID/stat, and its nice. */
static int read_task(pid_t tid, struct stress_prezero *out, long *nice)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* ") S ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime cutime cstime priority nice" */
	if (p == NULL || sscanf(p, ") %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
				   "%*d %*d %*d %ld", &out->state, &ut, &st, nice) != 4)
		return -1;
	out->tid = tid;
	out->ticks = ut + st;
	return 0;
}

char stress_task_state(pid_t tid)
{
	struct stress_prezero t;
	long nice;

	return read_task(tid, &t, &nice) == 0 ? t.state : '?';
}

int stress_wait_blocked(pid_t tid, unsigned ms)
{
	for (unsigned i = 0; i < ms * 10; i++) {
		char state = stress_task_state(tid);

		if (state == 'S' || state == 'D')
			return 0;
		nap_ns(100000);
	}
	return -1;
}

int stress_prezero_sample(struct stress_prezero *out)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int ret = -1;

	out->tid = 0;
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		pid_t tid = (pid_t)atoi(e->d_name);
		long nice = 0;

		if (tid <= 0)
			continue;
		/* SCHED_IDLE, or nice 19 where that was refused. */
		if (sched_getscheduler(tid) == SCHED_IDLE ||
		    (read_task(tid, out, &nice) == 0 && nice == 19)) {
			ret = read_task(tid, out, &nice);
			break;
		}
	}
	closedir(d);
	if (ret != 0)
		out->tid = 0;
	return ret;
}

int stress_main(const struct CMUnitTest *tests, size_t count, int (*setup)(void **),
		int (*teardown)(void **), int argc, char **argv)
{
	if (getenv("HZ_EXPECT_PRELOAD") && !stress_preloaded()) {
		fprintf(stderr, "HZ_EXPECT_PRELOAD=1 but libhugezero-preload.so is not in LD_PRELOAD\n");
		return 1;
	}
	stress_watchdog_start();
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return _cmocka_run_group_tests("all", tests, count, setup, teardown);
}
