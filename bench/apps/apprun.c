/* bench-apps-run: run one command and measure it as bench/run-apps reports
 * it.
 *
 *   apprun [-i MS] -o FILE -- COMMAND ARGS...
 *
 * It forks and execs COMMAND, and while it runs it reads
 * /proc/PID/smaps_rollup of the command and of every descendant (found
 * through /proc/PID/task/TID/children) every MS milliseconds (default 50):
 * the peaks of the summed Rss, AnonHugePages and Private_Hugetlb are what
 * the huge-page columns of the report come from. The first sample is
 * taken 5 ms after the fork, so a program shorter than one interval is
 * still seen; a peak between two samples is not.
 *
 * When COMMAND exits, wait4() gives its rusage: user and system time and
 * ru_maxrss, which cover the command and every descendant it waited for
 * (ru_maxrss is the largest single process, not a sum). Wall time is
 * CLOCK_MONOTONIC from before fork to after wait4.
 *
 * FILE gets one line of key=value pairs. The exit status is the command's
 * (128 + signal if it was killed), so the driver can fail loudly.
 *
 * Sampling costs the other CPU about 1 ms per sample for a process with
 * 1 GiB resident on 4 KiB pages (the kernel walks its page tables), less
 * on huge pages; every allocator pays the same rate. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Processes followed per sample: a build tree (gcc -> cc1, as; a shell
 * driver -> server, client) is a handful. */
#define MAX_PIDS 256

struct mem {
	long rss_kib, thp_kib, hugetlb_kib;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void add_rollup(int pid, struct mem *m)
{
	char path[64], line[256];
	FILE *f;
	long v;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	f = fopen(path, "re");
	if (f == NULL)
		return; /* exited between the listing and now */
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Rss: %ld", &v) == 1)
			m->rss_kib += v;
		else if (sscanf(line, "AnonHugePages: %ld", &v) == 1)
			m->thp_kib += v;
		else if (sscanf(line, "Private_Hugetlb: %ld", &v) == 1 ||
			 sscanf(line, "Shared_Hugetlb: %ld", &v) == 1)
			m->hugetlb_kib += v;
	}
	fclose(f);
}

/* The children of every thread of pid, appended to pids[] (breadth first
 * from the caller's loop). */
static void add_children(int pid, int *pids, int *n)
{
	char path[64];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL && *n < MAX_PIDS) {
		char cpath[320];
		FILE *f;
		int c;

		if (e->d_name[0] == '.')
			continue;
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", pid, e->d_name);
		f = fopen(cpath, "re");
		if (f == NULL)
			continue;
		while (*n < MAX_PIDS && fscanf(f, "%d", &c) == 1)
			pids[(*n)++] = c;
		fclose(f);
	}
	closedir(d);
}

static void sample(int root, struct mem *peak)
{
	int pids[MAX_PIDS], n = 1;
	struct mem m = { 0, 0, 0 };

	pids[0] = root;
	for (int i = 0; i < n; i++) {
		add_rollup(pids[i], &m);
		add_children(pids[i], pids, &n);
	}
	if (m.rss_kib > peak->rss_kib)
		peak->rss_kib = m.rss_kib;
	if (m.thp_kib > peak->thp_kib)
		peak->thp_kib = m.thp_kib;
	if (m.hugetlb_kib > peak->hugetlb_kib)
		peak->hugetlb_kib = m.hugetlb_kib;
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	int interval_ms = 50, opt, pidfd, status, samples = 0, rc;
	struct mem peak = { 0, 0, 0 };
	struct rusage ru;
	double t0, t1;
	pid_t pid;
	FILE *f;

	while ((opt = getopt(argc, argv, "+i:o:")) != -1) {
		if (opt == 'i')
			interval_ms = atoi(optarg);
		else if (opt == 'o')
			out = optarg;
		else
			goto usage;
	}
	if (out == NULL || optind >= argc || interval_ms <= 0)
		goto usage;
	t0 = now_s();
	pid = fork();
	if (pid < 0) {
		perror("bench-apps-run: fork");
		return 125;
	}
	if (pid == 0) {
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "bench-apps-run: cannot run %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		siginfo_t si;

		/* The first sample after 5 ms: the exec is done by then and a
		 * short program still gets one. */
		if (pidfd >= 0) {
			if (poll(&p, 1, samples ? interval_ms : 5) > 0)
				break;
		} else {
			usleep((useconds_t)(samples ? interval_ms : 5) * 1000);
			si.si_pid = 0;
			if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
			    si.si_pid == pid)
				break;
		}
		sample(pid, &peak);
		samples++;
	}
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR) {
			perror("bench-apps-run: wait4");
			return 125;
		}
	t1 = now_s();
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	f = fopen(out, "we");
	if (f == NULL) {
		perror(out);
		return 125;
	}
	fprintf(f, "wall_s=%.4f user_s=%.4f sys_s=%.4f maxrss_kib=%ld rss_peak_kib=%ld "
		   "thp_peak_kib=%ld hugetlb_peak_kib=%ld samples=%d status=%d\n",
		t1 - t0, (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss,
		peak.rss_kib, peak.thp_kib, peak.hugetlb_kib, samples, rc);
	if (fclose(f) != 0) {
		perror(out);
		return 125;
	}
	return rc;
usage:
	fprintf(stderr, "usage: bench-apps-run [-i MS] -o FILE -- COMMAND ARGS...\n");
	return 2;
}
