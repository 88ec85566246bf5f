/* Helpers of the benchmark programs that scripts build from one file
 * (`cc bench/recycle.c`, `cc bench/threads.c`): the clock, setup errors,
 * sizes on the command line and /proc/self/status. Each defines
 * BENCH_NAME, its name in messages, before including this. */
#ifndef HZ_BENCH_STANDALONE_H
#define HZ_BENCH_STANDALONE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB ((size_t)1 << 20)

/* The compiler must assume p's memory is read here. */
#define ESCAPE(p) __asm__ volatile("" : : "r"(p) : "memory")

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void die(const char *what)
{
	fprintf(stderr, BENCH_NAME ": %s\n", what);
	exit(1);
}

/* "64M", "4G", "200" (counts take the same suffixes, binary). */
static inline size_t parse_size(const char *s)
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
		die("bad size or count (examples: 64M, 5M, 200)");
	return (size_t)v;
}

static inline const char *size_str(size_t v, char *buf, size_t cap)
{
	if (v % (1u << 30) == 0)
		snprintf(buf, cap, "%zuG", v >> 30);
	else if (v % MIB == 0)
		snprintf(buf, cap, "%zuM", v >> 20);
	else
		snprintf(buf, cap, "%zu", v);
	return buf;
}

/* A figure of /proc/self/status in KiB ("VmHWM:"), or -1. */
static inline long status_kib(const char *key)
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

#endif /* HZ_BENCH_STANDALONE_H */
