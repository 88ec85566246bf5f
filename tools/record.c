/* hugezero run --record FILE: run the command in a child and write its
 * counters to FILE every 100 ms while it runs, as `hugezero stats PID`
 * reads them (tools/stats_cmd.c): from outside, with process_vm_readv, so
 * the program does nothing for it.
 *
 * Only the direct child is sampled: processes it forks have counters of
 * their own, unread. If the child calls exec, the new program's counters
 * are found again and start from 0. */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"
#include "stats_cmd.h"

/* 10 ms between looks for the child's counters before they are first
 * found: the preload publishes them in its constructor, before main, so
 * a program that runs less than a sample interval still gets a row. After
 * 1 s (SEARCH_FAST_NS) of looking, one look per interval: a look at a
 * program without them (HUGEZERO_DISABLE=1) reads up to 64 MiB page by
 * page (stats_cmd.c). */
#define SEARCH_NS 10000000ull
#define SEARCH_FAST_NS 1000000000ull

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define FORWARDED_COUNT (sizeof(forwarded) / sizeof(forwarded[0]))

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t child_ended;
static struct sigaction sigchld_before; /* the child gets it back */

/* A signal sent to us with kill() (si_code SI_USER, SI_QUEUE, SI_TKILL:
 * all <= 0) goes on to the child. One the kernel sends (si_code > 0: the
 * terminal's Ctrl-C or Ctrl-\, a hangup) went to the whole foreground
 * process group, the child included: passing it on would deliver it
 * twice. */
static void forward(int sig, siginfo_t *info, void *context)
{
	int saved = errno;

	(void)context;
	if (info->si_code <= 0 && child_pid > 0)
		kill((pid_t)child_pid, sig);
	errno = saved;
}

static void on_child(int sig)
{
	(void)sig;
	child_ended = 1;
}

/* Without SA_RESTART, so the child's end cuts a sleep short. A signal
 * ignored when we started stays ignored, for the child too, as `run`
 * leaves it (a shell's background job ignores SIGINT and SIGQUIT). */
static void catch_signals(void)
{
	struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO };
	struct sigaction old;

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < FORWARDED_COUNT; i++)
		if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(forwarded[i], &sa, NULL);
	sa = (struct sigaction){ .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, &sigchld_before);
}

/* Child side of spawn: the signal mask as it was, then exec; on failure
 * errno goes up the pipe. */
static void exec_child(char **cmd, const sigset_t *mask, int report_fd)
{
	int err;

	sigaction(SIGCHLD, &sigchld_before, NULL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	execvp(cmd[0], cmd);
	err = errno;
	/* Lost, the parent still sees this child exit with 127. */
	while (write(report_fd, &err, sizeof(err)) < 0 && errno == EINTR)
		;
	_exit(127);
}

/* Forks and execs cmd. 0 with *pid set once the exec succeeded (the
 * close-on-exec pipe closed without a word), else the exec's or fork's
 * negative errno value, the child reaped. The forwarded signals wait,
 * blocked, until child_pid names the child. */
static int spawn(char **cmd, pid_t *pid)
{
	sigset_t block, old;
	int fds[2], err = 0;
	ssize_t n;
	pid_t p;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	sigemptyset(&block);
	for (size_t i = 0; i < FORWARDED_COUNT; i++)
		sigaddset(&block, forwarded[i]);
	sigprocmask(SIG_BLOCK, &block, &old);
	p = fork();
	if (p == 0)
		exec_child(cmd, &old, fds[1]);
	err = p < 0 ? errno : 0;
	child_pid = p > 0 ? p : 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(fds[1]);
	do
		n = p > 0 ? read(fds[0], &err, sizeof(err)) : 0;
	while (n < 0 && errno == EINTR);
	close(fds[0]);
	if (err != 0) {
		if (p > 0)
			while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
				;
		child_pid = 0;
		return -err;
	}
	*pid = p;
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Until the monotonic clock reads at, or the child ends. Other signals
 * (forwarded ones) resume the sleep. */
static void sleep_until(uint64_t at)
{
	struct timespec ts = { .tv_sec = (time_t)(at / 1000000000ull),
			       .tv_nsec = (long)(at % 1000000000ull) };

	while (!child_ended &&
	       clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* The counters can be read a moment apart (stats_cmd.c): assisted_bytes,
 * a part of cleared_bytes, may be read newer than it. */
static uint64_t less(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* One row, in HZ_RECORD_HEADER's order. */
static void write_row(FILE *out, double secs, const struct hz_stats *s)
{
	fprintf(out, "%.3f\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n",
		secs, (unsigned long long)s->live_bytes, (unsigned long long)s->cache_bytes,
		(unsigned long long)s->bytes[HZ_BACKING_HUGETLB1G] +
			(unsigned long long)s->bytes[HZ_BACKING_HUGETLB2M],
		(unsigned long long)s->bytes[HZ_BACKING_THP],
		(unsigned long long)s->bytes[HZ_BACKING_SMALL],
		(unsigned long long)s->prezeroed_bytes + (unsigned long long)s->assisted_bytes,
		(unsigned long long)less(s->cleared_bytes, s->assisted_bytes),
		(unsigned long long)s->cache_hits, (unsigned long long)s->cache_misses,
		(unsigned long long)s->thp_promoted,
		(unsigned long long)s->promote_collapsed_bytes);
	fflush(out);
}

struct recording {
	FILE *out;
	const char *file;
	pid_t pid;
	uint64_t start;
	struct hz_stats_header header;
	bool found, failed;
	int why;       /* the last reason no sample was taken */
	unsigned rows;
};

/* One sample, if the child's counters can be read. */
static void take_sample(struct recording *r)
{
	static struct hz_stats s;
	int ret = r->found ? hz_stats_read(r->pid, &r->header, &s) : 0;

	if (!r->found || ret == -ENOENT) {
		ret = hz_stats_find(r->pid, &r->header);
		r->found = ret == 0;
		ret = r->found ? hz_stats_read(r->pid, &r->header, &s) : ret;
	}
	if (ret != 0) {
		r->why = ret;
		return;
	}
	if (r->failed)
		return;
	write_row(r->out, (double)(now_ns() - r->start) / 1e9, &s);
	r->rows++;
	if (ferror(r->out)) {
		fprintf(stderr, "hugezero run: --record %s: cannot write: %s; the command "
			"goes on unrecorded\n", r->file, strerror(errno));
		r->failed = true;
	}
}

/* Samples until the child ends; returns its wait status. */
static int sample_until_exit(struct recording *r)
{
	uint64_t next = r->start;
	int status = 0;

	for (;;) {
		pid_t w;
		uint64_t now;

		/* Before the wait: an end after it cuts the sleep short. */
		child_ended = 0;
		w = waitpid(r->pid, &status, WNOHANG);
		if (w == r->pid || (w < 0 && errno != EINTR))
			return w == r->pid ? status : 0;
		take_sample(r);
		now = now_ns();
		if (r->found)
			next += HZ_RECORD_INTERVAL_NS;
		else
			next = now + (now - r->start < SEARCH_FAST_NS ? SEARCH_NS
								 : HZ_RECORD_INTERVAL_NS);
		if (next < now) /* behind (a stopped machine): skip, do not catch up */
			next = now + HZ_RECORD_INTERVAL_NS;
		sleep_until(next);
	}
}

/* The recording has its header only: say why. */
static void explain_empty(const struct recording *r, const char *cmd)
{
	const char *why;

	if (r->why == -EACCES || r->why == -EPERM)
		why = "not allowed to read its memory (a set-uid program?)";
	else if (r->why == -EPROTO)
		why = "it runs another hugezero version, whose counters differ";
	else
		why = "no hugezero counters in it: it ended before the first sample, ran "
		      "with HUGEZERO_DISABLE=1,\nor ignores LD_PRELOAD (set-uid, static)";
	fprintf(stderr, "hugezero run: --record: no sample of %s: %s; %s has only its "
		"header\n", cmd, why, r->file);
}

static int exit_status(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int hz_record_run(const char *file, char **cmd)
{
	struct recording r = { .file = file, .why = -ENOENT };
	int ret, status;

	r.out = fopen(file, "we");
	if (r.out == NULL || fputs(HZ_RECORD_HEADER "\n", r.out) < 0 || fflush(r.out) != 0) {
		fprintf(stderr, "hugezero run: --record %s: %s\n", file, strerror(errno));
		if (r.out)
			fclose(r.out);
		return 1;
	}
	catch_signals();
	r.start = now_ns();
	ret = spawn(cmd, &r.pid);
	if (ret != 0) {
		fclose(r.out);
		fprintf(stderr, "hugezero run: %s: %s\n", cmd[0], strerror(-ret));
		return ret == -ENOENT ? 127 : 126;
	}
	status = sample_until_exit(&r);
	if (r.rows == 0 && !r.failed)
		explain_empty(&r, cmd[0]);
	if (fclose(r.out) != 0 && !r.failed)
		fprintf(stderr, "hugezero run: --record %s: %s\n", file, strerror(errno));
	return exit_status(status);
}
