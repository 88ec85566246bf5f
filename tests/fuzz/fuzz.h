/* What every fuzz target shares: libFuzzer's entry points (replay.c calls
 * them in every build, libFuzzer in the clang fuzz build) and the check
 * that stops the run with one line naming the broken invariant. */
#ifndef HZ_FUZZ_H
#define HZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* abort() rather than a cmocka failure: libFuzzer saves the input as a
 * crash, and the sanitizers print the stack. */
#define FUZZ_CHECK(cond, ...)                                             \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: check failed: %s: ",      \
				__FILE__, __LINE__, #cond);               \
			fprintf(stderr, __VA_ARGS__);                     \
			fputc('\n', stderr);                              \
			abort();                                          \
		}                                                         \
	} while (0)

/* For the loops that only verify (stamps, zero scans): coverage feedback
 * from them is noise to libFuzzer, and its comparison hooks made them the
 * bulk of fuzz_recycle's time. */
#if defined(__clang__)
#define FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FUZZ_NO_COVERAGE
#endif

/* Little-endian integers from the input, zero past its end. */
static inline uint64_t fuzz_bytes(const uint8_t *data, size_t size, size_t at,
				  unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		if (at + i < size)
			v |= (uint64_t)data[at + i] << (8 * i);
	return v;
}

#endif /* HZ_FUZZ_H */
