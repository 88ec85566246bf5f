/* bench-alloc: allocator workloads to run under LD_PRELOAD (glibc, jemalloc,
 * mimalloc, tcmalloc, hugezero). The program only calls the C library's
 * malloc family, so whichever allocator is preloaded serves it.
 *
 *   alloc fresh-calloc SIZE N     N x (calloc SIZE, memset every byte to 1),
 *                                 every block kept to the end, so each one is
 *                                 fresh memory: ms per block
 *   alloc random-updates [TABLE [M]]
 *                                 calloc a TABLE-byte uint64 table (default
 *                                 4G), touch every page (not timed), then M
 *                                 random 8-byte updates (default 200M): ns
 *                                 per update. TLB-bound.
 *   alloc small-churn [OPS [SLOTS [MAX [THREADS]]]]
 *                                 free + malloc of 16 B - MAX (default 64K),
 *                                 log-uniform sizes, in SLOTS live slots
 *                                 (default 10000), OPS timed operations
 *                                 (default 20000000): ns/op. 16 slots of at
 *                                 most 1 KiB stay in L1 and in glibc's
 *                                 tcache: that shows what an interposer's
 *                                 forwarding costs per call. THREADS
 *                                 (default 1) churns at once, each with its
 *                                 own slots, unpinned: mean ns/op.
 *   alloc touch-pool PAGES        map PAGES 2 MiB hugetlb pages, write them
 *                                 all and unmap: a pool "touched once"
 *
 * Output, one CSV row per line, first field the row kind:
 *   result,WORKLOAD,PARAM,METRIC,VALUE      the number the driver compares
 *   phase,WORKLOAD,PARAM,NAME,VALUE         the parts it is made of
 *   block,fresh-calloc,SIZE,I,MS            each block's calloc + write
 *   mem,WORKLOAD,PARAM,KEY,KIB              memory seen at the end: VmHWM,
 *                                           HugetlbPages, and for the big
 *                                           blocks their Rss, AnonHugePages
 *                                           and Private_Hugetlb from smaps
 * HugetlbPages matters because hugetlb memory is not in RSS, so neither
 * /usr/bin/time %M nor VmHWM counts it.
 *
 * Times are this thread's CPU time (see struct stamp); the program pins
 * itself to one CPU, HZ_BENCH_CPU or the highest one.
 *
 * Benchmarks are not the library: this program exits on setup errors. */
#ifndef _GNU_SOURCE /* meson passes it for the whole project */
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#define MIB ((size_t)1 << 20)

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Timed sections are measured in this thread's CPU time (user + system, so
 * page faults count, including the time the vCPU waits for the host to back
 * a page), not wall time: on a shared 2-CPU machine other programs take
 * turns on our CPU, and that time is not the allocator's. Wall time and the
 * number of preemptions are reported beside it. */
struct stamp {
	uint64_t cpu, wall;
	long preempted; /* involuntary context switches so far */
};

static struct stamp stamp_now(void)
{
	struct stamp s;
	struct rusage ru;

	s.cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	s.wall = clock_ns(CLOCK_MONOTONIC);
	s.preempted = getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
	return s;
}

/* wall_ms and preemptions rows for the section [a, b]. */
static void report_wall(const char *w, const char *param, struct stamp a, struct stamp b)
{
	printf("phase,%s,%s,wall_ms,%.3f\n", w, param, (double)(b.wall - a.wall) / 1e6);
	printf("phase,%s,%s,cpu_ms,%.3f\n", w, param, (double)(b.cpu - a.cpu) / 1e6);
	printf("phase,%s,%s,preemptions,%ld\n", w, param, b.preempted - a.preempted);
}

static void die(const char *what)
{
	fprintf(stderr, "bench-alloc: %s\n", what);
	exit(1);
}

/* "64M", "4G", "200000000", "20M" (counts take the same suffixes, binary). */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (end == s || *end != '\0' || v == 0)
		die("bad size or count (examples: 64M, 4G, 20000000)");
	return (size_t)v;
}

static const char *size_str(size_t v, char *buf, size_t cap)
{
	if (v % (1u << 30) == 0)
		snprintf(buf, cap, "%zuG", v >> 30);
	else if (v % MIB == 0)
		snprintf(buf, cap, "%zuM", v >> 20);
	else if (v % 1024 == 0)
		snprintf(buf, cap, "%zuK", v >> 10);
	else
		snprintf(buf, cap, "%zu", v);
	return buf;
}

/* One CPU for the whole run, so the scheduler does not move us mid-phase:
 * HZ_BENCH_CPU, else the highest allowed one, away from CPU 0 where most
 * interrupts land. HZ_BENCH_CPU=none leaves the affinity alone. */
static void pin(void)
{
	const char *env = getenv("HZ_BENCH_CPU");
	cpu_set_t set;
	int cpu = -1;

	if (env && strcmp(env, "none") == 0)
		return;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return;
	if (env && *env)
		cpu = atoi(env);
	else
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set))
				cpu = i;
	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof set, &set);
}

/* ---- memory report ---- */

static long status_kib(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, klen) == 0) {
			v = strtol(line + klen, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

struct backing {
	long rss, thp, hugetlb; /* KiB */
};

/* Sum smaps fields over the mappings overlapping the given ranges. A
 * mapping that only partly overlaps is counted whole: good enough for
 * blocks of many MiB. */
static struct backing backing_of(void *const *p, const size_t *len, size_t n)
{
	struct backing b = { 0, 0, 0 };
	char line[512];
	int inside = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return (struct backing){ -1, -1, -1 };
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		long v;

		/* A mapping's header starts "lo-hi "; its fields start with a
		 * name and a colon, which never parses as "%lx-". */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			inside = 0;
			for (size_t i = 0; i < n; i++)
				if ((uintptr_t)p[i] < hi && (uintptr_t)p[i] + len[i] > lo)
					inside = 1;
		} else if (inside) {
			if (sscanf(line, "Rss: %ld", &v) == 1)
				b.rss += v;
			else if (sscanf(line, "AnonHugePages: %ld", &v) == 1)
				b.thp += v;
			else if (sscanf(line, "Private_Hugetlb: %ld", &v) == 1)
				b.hugetlb += v;
		}
	}
	fclose(f);
	return b;
}

static void report_mem(const char *w, const char *param, void *const *p,
		       const size_t *len, size_t n)
{
	struct backing b = backing_of(p, len, n);

	printf("mem,%s,%s,vmhwm_kib,%ld\n", w, param, status_kib("VmHWM:"));
	printf("mem,%s,%s,hugetlb_kib,%ld\n", w, param, status_kib("HugetlbPages:"));
	printf("mem,%s,%s,blocks_rss_kib,%ld\n", w, param, b.rss);
	printf("mem,%s,%s,blocks_thp_kib,%ld\n", w, param, b.thp);
	printf("mem,%s,%s,blocks_hugetlb_kib,%ld\n", w, param, b.hugetlb);
}

/* ---- workloads ---- */

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int fresh_calloc(size_t size, size_t n)
{
	void **blocks = malloc(n * sizeof(*blocks));
	size_t *lens = malloc(n * sizeof(*lens));
	uint64_t alloc_ns = 0, write_ns = 0, min_ns = UINT64_MAX, max_ns = 0;
	uint64_t first_ns = 0, sum = 0;
	struct stamp start, end;
	char param[32];

	if (!blocks || !lens)
		die("out of memory for the block list");
	size_str(size, param, sizeof param);
	start = stamp_now();
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t1, t2;

		blocks[i] = calloc(size, 1);
		t1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		if (!blocks[i])
			die("calloc failed");
		memset(blocks[i], 1, size);
		t2 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		lens[i] = size;
		/* Depends on the memset, so it cannot be dropped. */
		sum += ((unsigned char *)blocks[i])[size - 1] +
		       ((unsigned char *)blocks[i])[i * 4096 % size];
		alloc_ns += t1 - t0;
		write_ns += t2 - t1;
		printf("block,fresh-calloc,%s,%zu,%.3f\n", param, i, (double)(t2 - t0) / 1e6);
		if (i == 0)
			first_ns = t2 - t0;
		if (t2 - t0 < min_ns)
			min_ns = t2 - t0;
		if (t2 - t0 > max_ns)
			max_ns = t2 - t0;
	}
	end = stamp_now();
	if (sum != 2 * n)
		die("blocks do not hold what was written");
	printf("result,fresh-calloc,%s,ms_per_block,%.3f\n", param,
	       (double)(alloc_ns + write_ns) / 1e6 / (double)n);
	printf("phase,fresh-calloc,%s,calloc_ms_per_block,%.3f\n", param,
	       (double)alloc_ns / 1e6 / (double)n);
	printf("phase,fresh-calloc,%s,write_ms_per_block,%.3f\n", param,
	       (double)write_ns / 1e6 / (double)n);
	printf("phase,fresh-calloc,%s,first_block_ms,%.3f\n", param, (double)first_ns / 1e6);
	printf("phase,fresh-calloc,%s,min_block_ms,%.3f\n", param, (double)min_ns / 1e6);
	printf("phase,fresh-calloc,%s,max_block_ms,%.3f\n", param, (double)max_ns / 1e6);
	printf("phase,fresh-calloc,%s,gb_per_s,%.3f\n", param,
	       (double)size * (double)n / (double)(alloc_ns + write_ns));
	report_wall("fresh-calloc", param, start, end);
	report_mem("fresh-calloc", param, blocks, lens, n);
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	free(blocks);
	free(lens);
	return 0;
}

static int random_updates(size_t bytes, size_t updates)
{
	size_t n = bytes / sizeof(uint64_t);
	uint64_t *table, s = 0x9e3779b97f4a7c15u, check = 0;
	struct stamp t0, t1, t2;
	char param[32];

	if (n & (n - 1))
		die("the table size must be a power of two");
	size_str(bytes, param, sizeof param);
	t0 = stamp_now();
	table = calloc(n, sizeof(*table));
	if (!table)
		die("calloc of the table failed");
	/* Every 4 KiB page written once, so the timed loop takes no fault. */
	for (size_t i = 0; i < n; i += 4096 / sizeof(*table))
		((volatile uint64_t *)table)[i] = 0;
	t1 = stamp_now();
	for (size_t i = 0; i < updates; i++) {
		uint64_t r = xorshift(&s);

		table[r & (n - 1)] += r;
	}
	t2 = stamp_now();
	for (size_t i = 0; i < n; i += n / 64)
		check += table[i];
	printf("result,random-updates,%s,ns_per_update,%.3f\n", param,
	       (double)(t2.cpu - t1.cpu) / (double)updates);
	printf("phase,random-updates,%s,touch_ms,%.3f\n", param, (double)(t1.cpu - t0.cpu) / 1e6);
	report_wall("random-updates", param, t1, t2);
	printf("phase,random-updates,%s,updates,%zu\n", param, updates);
	printf("phase,random-updates,%s,check,%" PRIu64 "\n", param, check & 0xffff);
	report_mem("random-updates", param, (void *const *)&table, &bytes, 1);
	free(table);
	return 0;
}

/* Log-uniform in [16, max): a power-of-two base from 16 B to max / 2, plus
 * up to one base more. Most requests are small, as in real programs, but the
 * big ones carry most of the bytes. classes = log2(max / 16). */
static size_t churn_size(uint64_t r, unsigned classes)
{
	size_t base = (size_t)16 << (r % classes);

	return base + (size_t)((r >> 8) % base);
}

/* One thread's churn: its own slots and sizes, timed in its own CPU time. */
struct churn {
	size_t ops, slots;
	unsigned classes;
	uint64_t seed, sum;
	struct stamp t0, t1;
};

static void *churn_run(void *arg)
{
	struct churn *c = arg;
	unsigned char **slot = calloc(c->slots, sizeof(*slot));
	uint64_t s = c->seed, sum = 0;

	if (!slot)
		die("out of memory for the slots");
	/* Fill every slot first: the timed part is the steady state. */
	for (size_t i = 0; i < c->slots; i++) {
		size_t size = churn_size(xorshift(&s), c->classes);

		slot[i] = malloc(size);
		if (!slot[i])
			die("malloc failed");
		slot[i][0] = 1;
		slot[i][size - 1] = 1;
	}
	c->t0 = stamp_now();
	for (size_t i = 0; i < c->ops; i++) {
		uint64_t r = xorshift(&s);
		size_t k = (size_t)(r >> 32) % c->slots;
		size_t size = churn_size(r, c->classes);

		sum += slot[k][0];
		free(slot[k]);
		slot[k] = malloc(size);
		if (!slot[k])
			die("malloc failed");
		/* The first and last byte, so the memory is used and reached. */
		slot[k][0] = (unsigned char)i;
		slot[k][size - 1] = (unsigned char)i;
	}
	c->t1 = stamp_now();
	c->sum = sum;
	for (size_t i = 0; i < c->slots; i++)
		free(slot[i]);
	free(slot);
	return NULL;
}

#define CHURN_THREADS_MAX 64

/* THREADS churns at once, each OPS operations on SLOTS slots of its own:
 * ns/op is their mean CPU time per operation. */
static int small_churn(size_t ops, size_t slots, size_t max, size_t threads)
{
	struct churn c[CHURN_THREADS_MAX];
	pthread_t tid[CHURN_THREADS_MAX];
	unsigned classes = 0;
	uint64_t cpu = 0, sum = 0;
	char param[48];

	while (((size_t)16 << (classes + 1)) <= max)
		classes++;
	if (classes == 0 || ((size_t)16 << classes) != max)
		die("small-churn: MAX must be a power of two, at least 32");
	if (threads > CHURN_THREADS_MAX)
		die("small-churn: at most 64 threads");
	snprintf(param, sizeof param, "%zux", slots);
	size_str(max, param + strlen(param), sizeof param - strlen(param));
	if (threads > 1)
		snprintf(param + strlen(param), sizeof param - strlen(param), "x%zut", threads);
	for (size_t t = 0; t < threads; t++) {
		c[t] = (struct churn){ .ops = ops, .slots = slots, .classes = classes,
				       .seed = 0x2545f4914f6cdd1du + 0x9e3779b97f4a7c15u * t };
		if (threads > 1 && pthread_create(&tid[t], NULL, churn_run, &c[t]) != 0)
			die("pthread_create failed");
	}
	if (threads == 1)
		churn_run(&c[0]);
	for (size_t t = 0; threads > 1 && t < threads; t++)
		pthread_join(tid[t], NULL);
	for (size_t t = 0; t < threads; t++) {
		cpu += c[t].t1.cpu - c[t].t0.cpu;
		sum += c[t].sum;
	}
	printf("result,small-churn,%s,ns_per_op,%.3f\n", param,
	       (double)cpu / (double)(ops * threads));
	report_wall("small-churn", param, c[0].t0, c[0].t1);
	printf("phase,small-churn,%s,ops,%zu\n", param, ops * threads);
	printf("phase,small-churn,%s,check,%" PRIu64 "\n", param, sum & 0xffff);
	report_mem("small-churn", param, NULL, NULL, 0);
	return 0;
}

/* Fault every page of the 2 MiB pool in once and give them back: they stay
 * in the pool, backed by the host from now on. */
static int touch_pool(size_t pages)
{
	size_t len = pages * 2 * MIB;
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT),
		       -1, 0);

	if (p == MAP_FAILED)
		die("mmap of the hugetlb pool failed (is vm.nr_hugepages large enough?)");
	memset(p, 1, len);
	munmap(p, len);
	printf("phase,touch-pool,%zu,ms,%.3f\n", pages, (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	const char *w = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Threads of a churn run side by side, each on a CPU of its own. */
	if (!(strcmp(w, "small-churn") == 0 && argc > 5 && parse_size(argv[5]) > 1))
		pin();
	if (strcmp(w, "fresh-calloc") == 0 && argc == 4)
		return fresh_calloc(parse_size(argv[2]), parse_size(argv[3]));
	if (strcmp(w, "random-updates") == 0 && argc <= 4)
		return random_updates(argc > 2 ? parse_size(argv[2]) : (size_t)4 << 30,
				      argc > 3 ? parse_size(argv[3]) : 200000000);
	if (strcmp(w, "small-churn") == 0 && argc <= 6)
		return small_churn(argc > 2 ? parse_size(argv[2]) : 20000000,
				   argc > 3 ? parse_size(argv[3]) : 10000,
				   argc > 4 ? parse_size(argv[4]) : 64 * 1024,
				   argc > 5 ? parse_size(argv[5]) : 1);
	if (strcmp(w, "touch-pool") == 0 && argc == 3)
		return touch_pool(parse_size(argv[2]));
	fprintf(stderr,
		"usage: %s fresh-calloc SIZE N | random-updates [TABLE [M]] |\n"
		"       small-churn [OPS [SLOTS [MAX [THREADS]]]] | touch-pool PAGES\n", argv[0]);
	return 2;
}
