/* A program for `hugezero run --record` to record (tests/cli/record.sh):
 * for SECONDS (default 1), callocs a 32 MiB block, writes every byte and
 * frees it, 5 ms apart, so the cache serves most blocks again; then exits
 * 0. The pause leaves the pre-zero thread time for some of them. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK (32u << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0, end = now() + seconds;
	const struct timespec pause = { .tv_nsec = 5000000 };

	while (now() < end) {
		/* volatile: the block must be made and written (clang removes a
		 * malloc whose memory nothing reads). */
		char *volatile block = calloc(1, BLOCK);

		if (block == NULL)
			return 1;
		memset(block, 1, BLOCK);
		free(block);
		nanosleep(&pause, NULL);
	}
	return 0;
}
