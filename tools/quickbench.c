/* `hugezero bench [quick]`: hugezero against glibc on this machine, in
 * under a minute. Each round runs a worker process twice, once plain and
 * once with the preload, alternating which goes first; the figures are
 * medians of the per-round times and their ratio. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "quickbench.h"

#define MiB ((size_t)1 << 20)
#define MAX_ROUNDS 15

struct workload {
	const char *name;
	const char *what;
	size_t size;
	int cycles;
	int touch_all; /* write every byte, or only the first */
};

static const struct workload workloads[] = {
	{ "calloc-64M-write-all", "64 MiB calloc + write every byte + free", 64 * MiB, 40, 1 },
	{ "calloc-64M-first-byte", "64 MiB calloc + write one byte + free", 64 * MiB, 400, 0 },
	{ "calloc-256M-write-all", "256 MiB calloc + write every byte + free", 256 * MiB, 10, 1 },
};

#define NWORK (sizeof(workloads) / sizeof(workloads[0]))

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The worker: the numpy-style loop, timed inside the process so start-up
 * does not count. Prints ms per cycle. */
int hz_quickbench_worker(int index)
{
	const struct workload *w = &workloads[index];
	volatile unsigned char sink = 0;
	double t0;

	t0 = now_ms();
	for (int i = 0; i < w->cycles; i++) {
		unsigned char *p = calloc(1, w->size);

		if (!p)
			return 1;
		if (w->touch_all)
			memset(p, i, w->size);
		else
			p[0] = (unsigned char)i;
		sink += p[w->size / 2];
		free(p);
	}
	printf("%.4f\n", (now_ms() - t0) / w->cycles);
	return sink == 255 ? 0 : 0;
}

/* Run self as a worker, with or without the preload; ms per cycle or -1. */
static double run_worker(const char *self, const char *preload, int index)
{
	char arg[16], out[64] = "";
	int pipefd[2], status;
	ssize_t n;
	pid_t pid;

	if (pipe(pipefd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		if (preload)
			setenv("LD_PRELOAD", preload, 1);
		else
			unsetenv("LD_PRELOAD");
		snprintf(arg, sizeof(arg), "%d", index);
		execl(self, self, "bench", "--worker", arg, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	n = read(pipefd[0], out, sizeof(out) - 1);
	close(pipefd[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || n <= 0)
		return -1;
	out[n] = '\0';
	return strtod(out, NULL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int hz_quickbench(const char *self, const char *preload, int rounds)
{
	printf("hugezero bench: each workload %d rounds, glibc and hugezero "
	       "alternating; ms per cycle, median (min-max)\n\n", rounds);
	printf("%-24s %22s %22s %8s\n", "workload", "glibc", "hugezero", "speedup");
	for (size_t w = 0; w < NWORK; w++) {
		double g[MAX_ROUNDS], h[MAX_ROUNDS], gs[MAX_ROUNDS], hs[MAX_ROUNDS];

		for (int r = 0; r < rounds; r++) {
			int hz_first = r % 2;

			if (hz_first)
				h[r] = run_worker(self, preload, (int)w);
			g[r] = run_worker(self, NULL, (int)w);
			if (!hz_first)
				h[r] = run_worker(self, preload, (int)w);
			if (g[r] < 0 || h[r] < 0) {
				fprintf(stderr, "hugezero bench: a worker failed\n");
				return 1;
			}
		}
		memcpy(gs, g, sizeof(g));
		memcpy(hs, h, sizeof(h));
		double gm = median(gs, rounds), hm = median(hs, rounds);

		printf("%-24s %8.3f (%.3f-%.3f) %8.3f (%.3f-%.3f) %7.2fx\n", workloads[w].name,
		       gm, gs[0], gs[rounds - 1], hm, hs[0], hs[rounds - 1], gm / hm);
	}
	printf("\nworkloads:\n");
	for (size_t w = 0; w < NWORK; w++)
		printf("  %-24s %s, %d cycles\n", workloads[w].name, workloads[w].what,
		       workloads[w].cycles);
	printf("speedup = glibc time / hugezero time; above 1 means hugezero is faster.\n");
	return 0;
}

int hz_quickbench_rounds(const char *mode)
{
	if (mode == NULL || strcmp(mode, "quick") == 0)
		return 5;
	if (strcmp(mode, "full") == 0)
		return MAX_ROUNDS;
	return -1;
}
