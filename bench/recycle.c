/* bench-recycle: large calloc/free workloads where freed blocks can be
 * reused, to run under LD_PRELOAD (glibc, jemalloc, mimalloc, tcmalloc,
 * hugezero). Like bench/alloc.c it only calls the C library's malloc
 * family, so whichever allocator is preloaded serves it.
 *
 *   recycle cycle SIZE N all      N x (calloc SIZE, memset every byte, free)
 *   recycle cycle SIZE N first    N x (calloc SIZE, write its first byte,
 *                                 free)
 *                                 result: ms per cycle, the mean of cycles
 *                                 2..N (the steady state); the first cycle,
 *                                 where every allocator takes fresh memory
 *                                 from the kernel, is reported apart, and
 *                                 so is the mean over all N
 *   recycle floor SIZE N thp|4k   one mapping of SIZE of its own (2 MiB
 *                                 aligned, MADV_HUGEPAGE or NOHUGEPAGE),
 *                                 every page written, then N timed memsets
 *                                 of all of it: ms per memset. What writing
 *                                 SIZE costs with no allocator and no
 *                                 fault: the floor under a write-all cycle.
 *   recycle mixed N MIN MAX LIVE [SEED]
 *                                 N callocs of a random size in [MIN, MAX]
 *                                 (bytes, 64-byte multiples), each written
 *                                 over a random 10-100 % prefix; LIVE blocks
 *                                 live at a time, the one freed next picked
 *                                 at random: total ms, every free included
 *   recycle grow SIZE N [THREADS] N x (calloc SIZE, memset every byte, one
 *                                 time in three realloc to twice SIZE and
 *                                 write its last byte, free), in each of
 *                                 THREADS threads (default 1): ms per
 *                                 cycle of one thread, the first included.
 *                                 A block rounded up from a larger freed
 *                                 one, then grown: where the rest went
 *                                 decides whether the growth is fresh
 *                                 memory
 *
 * Every cycle's calloc and free stay: an empty asm that takes the pointer
 * and clobbers memory makes the compiler assume the block is read, so it
 * can neither drop the memset nor pair the calloc with the free away.
 *
 * HZ_BENCH_VERIFY=1 adds checks, outside the timed part: after the timed
 * cycles, one more calloc of the same size must read zero in every byte
 * (so the block a recycler hands back after write-all is clean), and in
 * mixed every block is checked before it is written. The driver runs it once
 * per allocator beside the timed runs; timed runs leave it off, since
 * reading a fresh block first maps the zero page and costs a second fault.
 *
 * Output, one CSV row per line, first field the row kind:
 *   result,WORKLOAD,PARAM,METRIC,VALUE      the number the driver compares
 *   phase,WORKLOAD,PARAM,NAME,VALUE         the parts it is made of
 *   mem,WORKLOAD,PARAM,KEY,KIB              VmHWM and HugetlbPages at the end
 *
 * Benchmarks are not the library: this program exits on setup errors. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BENCH_NAME "bench-recycle"
#include "standalone.h"

/* HZ_BENCH_CPU=N pins the program (and every thread it starts later, such
 * as hugezero's pre-zero thread, which inherits the mask) to CPU N. Unlike
 * bench-alloc the default is no pinning: an allocator may do work on a
 * second CPU, and that is part of what is measured. */
static void pin(void)
{
	const char *env = getenv("HZ_BENCH_CPU");
	cpu_set_t set;
	int cpu;

	if (!env || !*env || strcmp(env, "none") == 0)
		return;
	cpu = atoi(env);
	if (cpu < 0 || cpu >= CPU_SETSIZE)
		die("HZ_BENCH_CPU: not a CPU number");
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		die("HZ_BENCH_CPU: sched_setaffinity failed");
}

static bool verify_on(void)
{
	const char *env = getenv("HZ_BENCH_VERIFY");

	return env && strcmp(env, "1") == 0;
}

/* Every byte of [p, p + len) reads zero. */
static void check_zero(const unsigned char *p, size_t len, const char *what)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v;

		memcpy(&v, p + i, 8);
		if (v != 0) {
			fprintf(stderr, "bench-recycle: %s: calloc returned a non-zero byte at +%zu\n",
				what, i);
			exit(3);
		}
	}
	for (size_t i = len & ~(size_t)7; i < len; i++)
		if (p[i] != 0) {
			fprintf(stderr, "bench-recycle: %s: calloc returned a non-zero byte at +%zu\n",
				what, i);
			exit(3);
		}
}

static void report_mem(const char *w, const char *param)
{
	printf("mem,%s,%s,vmhwm_kib,%ld\n", w, param, status_kib("VmHWM:"));
	printf("mem,%s,%s,hugetlb_kib,%ld\n", w, param, status_kib("HugetlbPages:"));
}

/* AnonHugePages of the whole process, from smaps_rollup. */
static long smaps_thp_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/smaps_rollup", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "AnonHugePages: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* ---- calloc/free cycles ---- */

static int cycle(size_t size, size_t n, bool write_all)
{
	uint64_t *ns = malloc(n * sizeof(*ns));
	uint64_t calloc_ns = 0, write_ns = 0, free_ns = 0, all_ns = 0, first_ns = 0;
	size_t steady = n > 1 ? n - 1 : 1; /* cycles in the means */
	char param[48], sz[24];

	if (!ns)
		die("out of memory for the cycle times");
	snprintf(param, sizeof param, "%s-%s", size_str(size, sz, sizeof sz),
		 write_all ? "all" : "first");
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = now_ns(), t1, t2, t3;
		unsigned char *p = calloc(size, 1);

		t1 = now_ns();
		if (!p)
			die("calloc failed");
		if (write_all)
			memset(p, (int)(i % 255) + 1, size);
		else
			p[0] = 1;
		ESCAPE(p);
		t2 = now_ns();
		free(p);
		t3 = now_ns();
		ns[i] = t3 - t0;
		all_ns += t3 - t0;
		if (i == 0)
			first_ns = t3 - t0;
		if (i == 0 && n > 1)
			continue;
		calloc_ns += t1 - t0;
		write_ns += t2 - t1;
		free_ns += t3 - t2;
	}
	printf("result,cycle,%s,ms_per_cycle,%.4f\n", param,
	       (double)(calloc_ns + write_ns + free_ns) / 1e6 / (double)steady);
	printf("phase,cycle,%s,calloc_ms,%.4f\n", param, (double)calloc_ns / 1e6 / (double)steady);
	printf("phase,cycle,%s,write_ms,%.4f\n", param, (double)write_ns / 1e6 / (double)steady);
	printf("phase,cycle,%s,free_ms,%.4f\n", param, (double)free_ns / 1e6 / (double)steady);
	printf("phase,cycle,%s,first_cycle_ms,%.4f\n", param, (double)first_ns / 1e6);
	printf("phase,cycle,%s,all_cycles_ms,%.4f\n", param, (double)all_ns / 1e6 / (double)n);
	qsort(ns, n, sizeof(*ns), cmp_u64);
	printf("phase,cycle,%s,median_cycle_ms,%.4f\n", param, (double)ns[n / 2] / 1e6);
	printf("phase,cycle,%s,min_cycle_ms,%.4f\n", param, (double)ns[0] / 1e6);
	printf("phase,cycle,%s,max_cycle_ms,%.4f\n", param, (double)ns[n - 1] / 1e6);
	if (verify_on()) {
		unsigned char *p = calloc(size, 1);

		if (!p)
			die("calloc failed");
		check_zero(p, size, param);
		ESCAPE(p);
		free(p);
		printf("phase,cycle,%s,verified_zero,1\n", param);
	}
	report_mem("cycle", param);
	free(ns);
	return 0;
}

/* Anonymous memory of its own, 2 MiB aligned, MADV_HUGEPAGE when thp. */
static unsigned char *map_floor(size_t size, bool thp)
{
	size_t pad = 2 * MIB;
	unsigned char *raw = mmap(NULL, size + pad, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *p;

	if (raw == MAP_FAILED)
		die("mmap failed");
	p = (unsigned char *)(((uintptr_t)raw + pad - 1) & ~(uintptr_t)(pad - 1));
	if (madvise(p, size, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
		die("madvise failed");
	return p;
}

static int floor_memset(size_t size, size_t n, bool thp)
{
	unsigned char *p = map_floor(size, thp);
	uint64_t t0, t1;
	char param[32], sz[24];

	snprintf(param, sizeof param, "%s-%s", size_str(size, sz, sizeof sz), thp ? "thp" : "4k");
	memset(p, 0xff, size);
	ESCAPE(p);
	t0 = now_ns();
	for (size_t i = 0; i < n; i++) {
		memset(p, (int)(i % 255) + 1, size);
		ESCAPE(p);
	}
	t1 = now_ns();
	printf("result,floor,%s,ms_per_memset,%.4f\n", param, (double)(t1 - t0) / 1e6 / (double)n);
	printf("phase,floor,%s,gb_per_s,%.3f\n", param,
	       (double)size * (double)n / (double)(t1 - t0));
	printf("phase,floor,%s,anon_huge_kib,%ld\n", param, smaps_thp_kib());
	return 0;
}

/* ---- mixed sizes, random free order ---- */

static int mixed(size_t n, size_t min, size_t max, size_t live, uint64_t seed)
{
	unsigned char **slot = calloc(live, sizeof(*slot));
	uint64_t s = seed ? seed : 0x9e3779b97f4a7c15u;
	uint64_t calloc_ns = 0, write_ns = 0, free_ns = 0, written = 0, t0, t1;
	bool verify = verify_on();
	char param[64], a[24], b[24];

	if (!slot || min > max || live == 0 || live > n)
		die("mixed: need MIN <= MAX and 0 < LIVE <= N");
	snprintf(param, sizeof param, "%zux%s-%s", n, size_str(min, a, sizeof a),
		 size_str(max, b, sizeof b));
	for (size_t i = 0; i < n + live; i++) {
		/* The first LIVE steps fill the slots; afterwards each step frees
		 * a random one and refills it; the last LIVE steps only free. */
		size_t k = i < live ? i : (size_t)(xorshift(&s) % live);

		if (i >= live) {
			if (i >= n) /* drain in random order too */
				while (!slot[k])
					k = (k + 1) % live;
			t0 = now_ns();
			free(slot[k]);
			free_ns += now_ns() - t0;
			slot[k] = NULL;
		}
		if (i >= n)
			continue;
		size_t size = min + (size_t)(xorshift(&s) % ((max - min) / 64 + 1)) * 64;
		size_t prefix = size / 10 + (size_t)(xorshift(&s) % (size - size / 10 + 1));

		t0 = now_ns();
		slot[k] = calloc(size, 1);
		t1 = now_ns();
		calloc_ns += t1 - t0;
		if (!slot[k])
			die("calloc failed");
		if (verify)
			check_zero(slot[k], size, "mixed");
		t0 = now_ns();
		memset(slot[k], (int)(i % 255) + 1, prefix);
		ESCAPE(slot[k]);
		write_ns += now_ns() - t0;
		written += prefix;
	}
	uint64_t total = calloc_ns + write_ns + free_ns;

	printf("result,mixed,%s,ms_total,%.3f\n", param, (double)total / 1e6);
	printf("phase,mixed,%s,calloc_ms,%.3f\n", param, (double)calloc_ns / 1e6);
	printf("phase,mixed,%s,write_ms,%.3f\n", param, (double)write_ns / 1e6);
	printf("phase,mixed,%s,free_ms,%.3f\n", param, (double)free_ns / 1e6);
	printf("phase,mixed,%s,written_mib,%.1f\n", param, (double)written / (double)MIB);
	printf("phase,mixed,%s,gb_per_s,%.3f\n", param, (double)written / (double)total);
	if (verify)
		printf("phase,mixed,%s,verified_zero,1\n", param);
	report_mem("mixed", param);
	free(slot);
	return 0;
}

/* ---- calloc, then realloc to twice the size one time in three ---- */

struct grower {
	pthread_t tid;
	size_t size, n, grown;
	uint64_t seed;
};

static void *grow_loop(void *arg)
{
	struct grower *g = arg;
	uint64_t s = g->seed;
	size_t size = g->size;

	for (size_t i = 0; i < g->n; i++) {
		unsigned char *p = calloc(size, 1);

		if (!p)
			die("calloc failed");
		memset(p, (int)(i % 255) + 1, size);
		if (xorshift(&s) % 3 == 0) {
			unsigned char *q = realloc(p, 2 * size);

			if (!q)
				die("realloc failed");
			p = q;
			p[2 * size - 1] = 1;
			g->grown++;
		}
		ESCAPE(p);
		free(p);
	}
	return NULL;
}

static int grow(size_t size, size_t n, size_t threads)
{
	struct grower *g = calloc(threads, sizeof(*g));
	uint64_t t0 = now_ns();
	size_t grown = 0;
	char param[48], sz[24];

	if (!g || threads == 0)
		die("grow: need 1 or more threads");
	snprintf(param, sizeof param, "%sx%zu", size_str(size, sz, sizeof sz), threads);
	for (size_t t = 0; t < threads; t++) {
		g[t] = (struct grower){ .size = size, .n = n, .seed = 0x9e3779b97f4a7c15u + t };
		if (pthread_create(&g[t].tid, NULL, grow_loop, &g[t]) != 0)
			die("pthread_create failed");
	}
	for (size_t t = 0; t < threads; t++) {
		pthread_join(g[t].tid, NULL);
		grown += g[t].grown;
	}
	printf("result,grow,%s,ms_per_cycle,%.4f\n", param,
	       (double)(now_ns() - t0) / 1e6 / (double)n);
	printf("phase,grow,%s,grown,%zu\n", param, grown);
	report_mem("grow", param);
	free(g);
	return 0;
}

int main(int argc, char **argv)
{
	const char *w = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	pin();
	if (strcmp(w, "cycle") == 0 && argc == 5 &&
	    (strcmp(argv[4], "all") == 0 || strcmp(argv[4], "first") == 0))
		return cycle(parse_size(argv[2]), parse_size(argv[3]), strcmp(argv[4], "all") == 0);
	if (strcmp(w, "floor") == 0 && argc == 5 &&
	    (strcmp(argv[4], "thp") == 0 || strcmp(argv[4], "4k") == 0))
		return floor_memset(parse_size(argv[2]), parse_size(argv[3]),
				    strcmp(argv[4], "thp") == 0);
	if (strcmp(w, "mixed") == 0 && (argc == 6 || argc == 7))
		return mixed(parse_size(argv[2]), parse_size(argv[3]), parse_size(argv[4]),
			     parse_size(argv[5]), argc == 7 ? strtoull(argv[6], NULL, 0) : 0);
	if (strcmp(w, "grow") == 0 && (argc == 4 || argc == 5))
		return grow(parse_size(argv[2]), parse_size(argv[3]),
			    argc == 5 ? parse_size(argv[4]) : 1);
	fprintf(stderr,
		"usage: %s cycle SIZE N all|first | floor SIZE N thp|4k | "
		"mixed N MIN MAX LIVE [SEED] | grow SIZE N [THREADS]\n", argv[0]);
	return 2;
}
