/* Small helpers shared by the C tests: a reproducible pseudo-random
 * sequence and a reader of /proc/self/smaps. Header-only, so every test
 * program (and every build, cross builds included) takes what it uses. */
#ifndef HZ_TESTS_UTIL_H
#define HZ_TESTS_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif /* HZ_TESTS_UTIL_H */
