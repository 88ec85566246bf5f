/* bench-threads: N threads cycling large callocs at once, to run under
 * LD_PRELOAD (glibc, tcmalloc, hugezero): how an allocator's large path
 * scales when several threads take and give back blocks together (its
 * locks, its cache, the pre-zero thread shared by all of them). Like
 * bench/recycle.c it only calls the C library's malloc family, so
 * whichever allocator is preloaded serves it.
 *
 *   threads N SIZE CYCLES
 *       N threads; each runs one untimed cycle (its first block, fresh
 *       from the kernel under every allocator), waits at a barrier for the
 *       others, then CYCLES timed cycles of calloc SIZE, memset every
 *       byte, free.
 *
 * Output, one CSV row per line, first field the row kind:
 *   result,threads,PARAM,ms_per_cycle,V   wall time from the first thread's
 *                                         start after the barrier to the
 *                                         last thread's end / CYCLES: the
 *                                         time one round of N cycles takes
 *   phase,threads,PARAM,gb_per_s,V        N x CYCLES x SIZE / that wall
 *                                         time (10^9 bytes/s), all threads
 *   phase,threads,PARAM,NAME,V            the parts: calloc / write / free
 *                                         ms per cycle (mean over every
 *                                         thread's cycles), the median and
 *                                         max of single cycles, the
 *                                         slowest thread's time, and the
 *                                         threads' context switches during
 *                                         the timed part (RUSAGE_THREAD):
 *                                         voluntary ones are sleeps, a
 *                                         contended lock's futex wait among
 *                                         them; involuntary ones are
 *                                         preemptions (more threads than
 *                                         CPUs)
 *   mem,threads,PARAM,KEY,KIB             VmHWM and HugetlbPages at the end
 * PARAM is N "x" SIZE, e.g. 4x64M.
 *
 * HZ_BENCH_VERIFY=1: every calloc of every cycle (the untimed one
 * included) must read zero in every byte, checked before it is written,
 * in every thread: a recycler shared by threads must never hand one a
 * block another is still writing or has not cleared. It changes the
 * timing (reading first maps the zero page under glibc), so the driver
 * runs it apart, small, and times runs without it.
 *
 * Every cycle's calloc and free stay: an empty asm that takes the pointer
 * and clobbers memory makes the compiler assume the block is read.
 *
 * Benchmarks are not the library: this program exits on setup errors. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "bench-threads"
#include "standalone.h"

/* 64: more threads than any machine here has CPUs, by far. */
#define MAX_THREADS 64

struct worker {
	pthread_t tid;
	unsigned idx;
	size_t size, cycles;
	uint64_t *cycle_ns;            /* cycles entries */
	uint64_t calloc_ns, write_ns, free_ns;
	uint64_t start_ns, end_ns;     /* its timed cycles' start and end */
	long vcsw, ivcsw;              /* during the timed cycles */
};

static pthread_barrier_t start_line;
static bool verify;

/* Every byte of [p, p + len) reads zero, or the program exits. */
static void check_zero(const unsigned char *p, size_t len, unsigned idx, size_t cycle)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = 0;

		memcpy(&v, p + i, len - i < 8 ? len - i : 8);
		if (v != 0) {
			fprintf(stderr, "bench-threads: thread %u cycle %zu: calloc returned a "
				"non-zero byte near +%zu\n", idx, cycle, i);
			exit(3);
		}
	}
}

static void switches(long *vcsw, long *ivcsw)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		die("getrusage(RUSAGE_THREAD) failed");
	*vcsw = ru.ru_nvcsw;
	*ivcsw = ru.ru_nivcsw;
}

static void one_cycle(struct worker *w, size_t i, bool timed)
{
	uint64_t t0 = now_ns(), t1, t2, t3;
	unsigned char *p = calloc(w->size, 1);

	t1 = now_ns();
	if (!p)
		die("calloc failed");
	if (verify)
		check_zero(p, w->size, w->idx, i);
	/* Each thread writes its own value, so a block two threads were
	 * given at once would show in the check of the next calloc. */
	memset(p, (int)((w->idx * 31 + i) % 255) + 1, w->size);
	ESCAPE(p);
	t2 = now_ns();
	free(p);
	t3 = now_ns();
	if (!timed)
		return;
	w->cycle_ns[i] = t3 - t0;
	w->calloc_ns += t1 - t0;
	w->write_ns += t2 - t1;
	w->free_ns += t3 - t2;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	long v0, iv0, v1, iv1;

	one_cycle(w, 0, false);
	pthread_barrier_wait(&start_line);
	/* Each thread reads the clock itself: the main thread may be
	 * scheduled long after the barrier opens, when cycles have run. */
	w->start_ns = now_ns();
	switches(&v0, &iv0);
	for (size_t i = 0; i < w->cycles; i++)
		one_cycle(w, i, true);
	w->end_ns = now_ns();
	switches(&v1, &iv1);
	w->vcsw = v1 - v0;
	w->ivcsw = iv1 - iv0;
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int run(unsigned n, size_t size, size_t cycles)
{
	struct worker w[MAX_THREADS];
	uint64_t *all = malloc(n * cycles * sizeof(*all));
	uint64_t start = UINT64_MAX, end = 0, slowest = 0, ca = 0, wr = 0, fr = 0;
	long vcsw = 0, ivcsw = 0;
	char param[48], sz[24];
	double wall_ms, per;

	if (!all)
		die("out of memory for the cycle times");
	snprintf(param, sizeof param, "%ux%s", n, size_str(size, sz, sizeof sz));
	if (pthread_barrier_init(&start_line, NULL, n) != 0)
		die("pthread_barrier_init failed");
	for (unsigned t = 0; t < n; t++) {
		w[t] = (struct worker){ .idx = t, .size = size, .cycles = cycles,
					.cycle_ns = all + (size_t)t * cycles };
		if (pthread_create(&w[t].tid, NULL, work, &w[t]) != 0)
			die("pthread_create failed");
	}
	/* The clock runs from the first thread's start, once every thread is
	 * past its untimed cycle, to the last one's end. */
	for (unsigned t = 0; t < n; t++) {
		pthread_join(w[t].tid, NULL);
		if (w[t].start_ns < start)
			start = w[t].start_ns;
		if (w[t].end_ns > end)
			end = w[t].end_ns;
		if (w[t].end_ns - w[t].start_ns > slowest)
			slowest = w[t].end_ns - w[t].start_ns;
		ca += w[t].calloc_ns;
		wr += w[t].write_ns;
		fr += w[t].free_ns;
		vcsw += w[t].vcsw;
		ivcsw += w[t].ivcsw;
	}
	wall_ms = (double)(end - start) / 1e6;
	per = (double)n * (double)cycles;
	qsort(all, n * cycles, sizeof(*all), cmp_u64);
	printf("result,threads,%s,ms_per_cycle,%.4f\n", param, wall_ms / (double)cycles);
	printf("phase,threads,%s,gb_per_s,%.3f\n", param,
	       (double)size * per / ((double)(end - start)));
	printf("phase,threads,%s,wall_ms,%.3f\n", param, wall_ms);
	printf("phase,threads,%s,calloc_ms,%.4f\n", param, (double)ca / 1e6 / per);
	printf("phase,threads,%s,write_ms,%.4f\n", param, (double)wr / 1e6 / per);
	printf("phase,threads,%s,free_ms,%.4f\n", param, (double)fr / 1e6 / per);
	printf("phase,threads,%s,median_cycle_ms,%.4f\n", param,
	       (double)all[n * cycles / 2] / 1e6);
	printf("phase,threads,%s,max_cycle_ms,%.4f\n", param, (double)all[n * cycles - 1] / 1e6);
	printf("phase,threads,%s,slowest_thread_ms,%.3f\n", param, (double)slowest / 1e6);
	printf("phase,threads,%s,voluntary_switches,%ld\n", param, vcsw);
	printf("phase,threads,%s,involuntary_switches,%ld\n", param, ivcsw);
	if (verify)
		printf("phase,threads,%s,verified_zero,1\n", param);
	printf("mem,threads,%s,vmhwm_kib,%ld\n", param, status_kib("VmHWM:"));
	printf("mem,threads,%s,hugetlb_kib,%ld\n", param, status_kib("HugetlbPages:"));
	pthread_barrier_destroy(&start_line);
	free(all);
	return 0;
}

int main(int argc, char **argv)
{
	const char *env = getenv("HZ_BENCH_VERIFY");
	size_t n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	verify = env && strcmp(env, "1") == 0;
	if (argc != 5 || strcmp(argv[1], "threads") != 0) {
		fprintf(stderr, "usage: %s threads N SIZE CYCLES\n", argv[0]);
		return 2;
	}
	n = parse_size(argv[2]);
	if (n > MAX_THREADS)
		die("at most 64 threads");
	return run((unsigned)n, parse_size(argv[3]), parse_size(argv[4]));
}
