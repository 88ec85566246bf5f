/* exec-load LIB ROUNDS: dlopen the generated library (bench/exec-run builds
 * it: functions of 64 KiB of NOPs each) and run every function ROUNDS
 * times; prints the wall time of the loop in ms. A text-heavy loop whose
 * instruction fetches walk all of the library's text. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	long (*const *table)(long);
	const int *count;
	long sum = 0;
	double t;
	void *h;
	int rounds;

	if (argc != 3) {
		fprintf(stderr, "usage: exec-load LIB ROUNDS\n");
		return 2;
	}
	rounds = atoi(argv[2]);
	h = dlopen(argv[1], RTLD_NOW);
	if (h == NULL) {
		fprintf(stderr, "exec-load: %s\n", dlerror());
		return 1;
	}
	table = (long (*const *)(long))dlsym(h, "hzgen_table");
	count = dlsym(h, "hzgen_count");
	if (table == NULL || count == NULL)
		return 1;
	t = now_ms();
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < *count; i++)
			sum += table[i](r);
	printf("%.1f\n", now_ms() - t);
	return sum == 0;
}
