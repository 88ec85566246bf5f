#include "util.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif

void bench_buf_map(struct bench_buf *b, size_t len)
{
	size_t map_len;
	char *m, *p;

	len = (len + BENCH_HUGE - 1) / BENCH_HUGE * BENCH_HUGE;
	map_len = len + BENCH_HUGE;
	m = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "bench: mmap of %zu bytes: %s\n", map_len,
			strerror(errno));
		exit(1);
	}
	/* Trim to a 2 MiB-aligned mapping of exactly len bytes, so the VMA
	 * that smaps reports is this buffer alone. */
	p = (char *)(((uintptr_t)m + BENCH_HUGE - 1) & ~(uintptr_t)(BENCH_HUGE - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	if (m + map_len > p + len)
		munmap(p + len, (size_t)(m + map_len - (p + len)));
	if (madvise(p, len, MADV_HUGEPAGE) != 0)
		fprintf(stderr, "bench: madvise(MADV_HUGEPAGE): %s (THP off?)\n",
			strerror(errno));
	/* Every 4 KiB page, not only one per 2 MiB: where a huge page cannot
	 * be had, the small pages must be faulted in too. */
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)p)[off] = 1;
	b->p = p;
	b->len = len;
}

void bench_buf_unmap(struct bench_buf *b)
{
	if (b->p)
		munmap(b->p, b->len);
	b->p = NULL;
	b->len = 0;
}

static size_t smaps_kib(const char *line, const char *key)
{
	size_t n = strlen(key);

	if (strncmp(line, key, n) != 0)
		return (size_t)-1;
	return (size_t)strtoull(line + n, NULL, 10);
}

int bench_buf_thp(const struct bench_buf *b, size_t *huge, size_t *mapped)
{
	uintptr_t lo = (uintptr_t)b->p, hi = lo + b->len;
	char line[4096];
	int inside = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	*huge = *mapped = 0;
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long start, end;
		size_t kib;

		/* A VMA header is "start-end perms ..."; no field line ("Key: n
		 * kB") parses as two hex numbers joined by '-'. */
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			inside = start < hi && end > lo;
			if (inside)
				*mapped += end - start;
			continue;
		}
		if (inside && (kib = smaps_kib(line, "AnonHugePages:")) != (size_t)-1)
			*huge += kib * 1024;
	}
	fclose(f);
	return 0;
}

double bench_buf_thp_share(const struct bench_buf *b, int collapse)
{
	size_t huge, mapped;

	if (bench_buf_thp(b, &huge, &mapped) != 0 || mapped == 0)
		return -1;
	if (huge < mapped && collapse) {
		if (madvise(b->p, b->len, MADV_COLLAPSE) != 0)
			fprintf(stderr, "bench: madvise(MADV_COLLAPSE): %s\n", strerror(errno));
		if (bench_buf_thp(b, &huge, &mapped) != 0 || mapped == 0)
			return -1;
	}
	return (double)huge / (double)mapped;
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

long bench_preemptions(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		return 0;
	return ru.ru_nivcsw;
}

double bench_ticks_per_ns(void)
{
	static double cached;
	uint64_t t0, c0, t1, c1;

	if (cached > 0)
		return cached;
	t0 = bench_now_ns();
	c0 = bench_ticks_begin();
	do
		t1 = bench_now_ns();
	while (t1 - t0 < 50000000u);
	c1 = bench_ticks_end();
	cached = (double)(c1 - c0) / (double)(t1 - t0);
	return cached;
}

int bench_pin(int cpu)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return -1;
	if (cpu < 0)
		for (int i = CPU_SETSIZE - 1; i >= 0; i--)
			if (CPU_ISSET(i, &set)) {
				cpu = i;
				break;
			}
	if (cpu < 0)
		return -1;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof set, &set) == 0 ? cpu : -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct bench_stat bench_stat_of(double *v, size_t n)
{
	struct bench_stat s = { 0, 0, 0, n };

	if (n == 0)
		return s;
	qsort(v, n, sizeof *v, cmp_double);
	s.min = v[0];
	s.max = v[n - 1];
	s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return s;
}

size_t bench_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return 0;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	case '\0': return (size_t)v;
	default: return 0;
	}
	/* "307200K\n", as sysfs writes cache sizes, is fine too. */
	if (strcmp(end, "") != 0 && strcmp(end, "\n") != 0 && strcmp(end, "iB") != 0 &&
	    strcmp(end, "B") != 0)
		return 0;
	return (size_t)v;
}

const char *bench_size_str(size_t bytes, char *buf, size_t cap)
{
	if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
		snprintf(buf, cap, "%zuG", bytes >> 30);
	else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		snprintf(buf, cap, "%zuM", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(buf, cap, "%zuK", bytes >> 10);
	else
		snprintf(buf, cap, "%zu", bytes);
	return buf;
}

int bench_mkdir_for(const char *path)
{
	char dir[4096];
	char *slash;

	if (strlen(path) >= sizeof dir)
		return -1;
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	for (char *q = dir + 1; *q; q++)
		if (*q == '/') {
			*q = '\0';
			if (mkdir(dir, 0777) != 0 && errno != EEXIST)
				return -1;
			*q = '/';
		}
	return mkdir(dir, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

const char *bench_cpu_model(char *buf, size_t cap)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(buf, cap, "unknown");
	if (f == NULL)
		return buf;
	while (fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			colon += 1 + (colon[1] == ' ');
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(buf, cap, "%s", colon);
			break;
		}
	}
	fclose(f);
	return buf;
}

uint64_t bench_read(const void *p, size_t len)
{
	const uint64_t *w = p;
	uint64_t acc = 0;

	for (size_t i = 0; i < len / 8; i += 8)
		acc += w[i] ^ w[i + 1] ^ w[i + 2] ^ w[i + 3] ^
		       w[i + 4] ^ w[i + 5] ^ w[i + 6] ^ w[i + 7];
	return acc;
}

void bench_dirty(void *p, size_t len)
{
	volatile uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i += 8)
		w[i] = i;
}
