/* values: a jemalloc-linked program that cycles large values of varying
 * sizes through a few slots, as a key-value store replacing its values
 * does; for the preload's jemalloc path (src/preload/jemalloc_next.c)
 * against jemalloc alone, timed and measured from outside:
 *
 *   cc -O2 -o values bench/values.c -ljemalloc
 *   /usr/bin/time -f "%e s %M KB" ./values whole
 *   LD_PRELOAD=build/libhugezero-preload.so /usr/bin/time -f "%e s %M KB" ./values whole
 *
 *   whole    8-16 MiB values in 4 slots, every byte written, 60 rounds
 *   sparse   2-20 MiB values in 8 slots, 300 rounds: every other value
 *            written whole, the others one byte per MiB
 *
 * The sizes come from a fixed sequence, so every run asks for the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

/* Write value v of bytes: whole, or one byte per MiB. */
static void fill(char *v, size_t bytes, int round, int whole)
{
	if (whole) {
		memset(v, round, bytes);
		return;
	}
	for (size_t off = 0; off < bytes; off += MiB)
		v[off] = (char)round;
}

int main(int argc, char **argv)
{
	int sparse = argc > 1 && strcmp(argv[1], "sparse") == 0;
	int rounds = sparse ? 300 : 60, slots = sparse ? 8 : 4;
	char *slot[8] = { 0 };
	unsigned seq = 12345;
	long sum = 0;

	if (argc != 2 || (!sparse && strcmp(argv[1], "whole") != 0)) {
		fprintf(stderr, "usage: %s whole|sparse\n", argv[0]);
		return 2;
	}
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < slots; i++) {
			size_t mib;

			seq = seq * 1103515245u + 12345u;
			mib = sparse ? 2 + (seq >> 16) % 19 : 8 + (seq >> 16) % 9;
			free(slot[i]);
			slot[i] = malloc(mib * MiB);
			if (slot[i] == NULL) {
				perror("malloc");
				return 1;
			}
			fill(slot[i], mib * MiB, r, !sparse || i % 2 == 0);
			sum += slot[i][0];
		}
	printf("%ld\n", sum);
	return 0;
}
