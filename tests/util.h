/* Small helpers shared by the C tests: the KiB/MiB/GiB units, a monotonic
 * clock, a reproducible pseudo-random sequence and a reader of
 * /proc/self/smaps. Header-only, so every test program (and every build,
 * cross builds included) takes what it uses. */
#ifndef HZ_TESTS_UTIL_H
#define HZ_TESTS_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t hz_test_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64: fast, and the same sequence for the same seed everywhere,
 * so a failing run can be repeated. The seed must not be 0. */
struct hz_test_rng {
	uint64_t s;
};

static inline uint64_t hz_test_rng_next(struct hz_test_rng *r)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return r->s;
}

/* Bytes of an smaps field ("Rss:", "AnonHugePages:", ...) summed over the
 * mappings that overlap [lo, hi); 0 when smaps cannot be read. */
static inline uint64_t hz_test_smaps_sum(uintptr_t lo, uintptr_t hi, const char *field)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], perms[8];
	unsigned long a, b;
	uint64_t kb = 0;
	size_t flen = strlen(field);
	bool in = false;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3)
			in = a < hi && b > lo;
		else if (in && strncmp(line, field, flen) == 0)
			kb += strtoull(line + flen, NULL, 10);
	}
	fclose(f);
	return kb * 1024;
}

/* Whether THP's sysfs mode is mode ("[always]", "[madvise]" or
 * "[never]", brackets included); false when it cannot be read. */
static inline bool hz_test_thp_mode_is(const char *mode)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	return strstr(buf, mode) != NULL;
}

/* A pattern that depends on seed and on each 8-byte word's offset (so a
 * page mapped at the wrong place shows), its check (offset of the first
 * word that differs, or len), and the offset of the first non-zero byte
 * (or len). */
static inline uint64_t hz_test_pattern_word(size_t off, unsigned seed)
{
	return ((uint64_t)seed << 40) ^ (off * 0x9e3779b97f4a7c15ull) ^ 0x5a5a;
}

static inline void hz_test_fill(void *p, size_t len, unsigned seed)
{
	uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = hz_test_pattern_word(i * 8, seed);
}

static inline size_t hz_test_check(const void *p, size_t len, unsigned seed)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != hz_test_pattern_word(i * 8, seed))
			return i * 8;
	return len;
}

static inline size_t hz_test_first_nonzero(const void *p, size_t len)
{
	const unsigned char *b = p;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, b + i, 8);
		if (w)
			break;
	}
	for (; i < len; i++)
		if (b[i])
			return i;
	return len;
}

/* Whether mincore and madvise both fail with ENOMEM on a range holding an
 * unmapped page, as Linux does (qemu-user accepts the madvise): the tests
 * of hugezero's hole detection (hz_prim_all_mapped asks both) need it. */
static inline bool hz_test_mincore_sees_holes(void)
{
	const size_t page = 4096;
	unsigned char vec[2];
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool sees;

	if (p == MAP_FAILED)
		return false;
	munmap(p + page, page);
	sees = mincore(p, 2 * page, vec) != 0 && errno == ENOMEM &&
	       madvise(p, 2 * page, MADV_NORMAL) != 0 && errno == ENOMEM;
	munmap(p, page);
	return sees;
}

/* A thread that only sleeps, on a 256 KiB stack (at least PTHREAD_STACK_MIN:
 * 128 KiB on arm64). */
static inline void *hz_test_parked(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* Give the test program a thread of its own, as the programs these tests
 * stand for have: the pre-zero thread then starts at the first dirty free
 * and keeps cold blocks, instead of waiting until its work pays
 * (src/prezero_start.c). Exits on failure. */
static inline void hz_test_have_a_thread(void)
{
	pthread_attr_t attr;
	pthread_t t;

	if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, 256 << 10) != 0 ||
	    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
	    pthread_create(&t, &attr, hz_test_parked, NULL) != 0) {
		fprintf(stderr, "could not start a thread\n");
		exit(1);
	}
	pthread_attr_destroy(&attr);
}

#endif /* HZ_TESTS_UTIL_H */
