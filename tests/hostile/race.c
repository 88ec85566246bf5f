/* realloc that moves a block, racing other threads' fresh allocations of
 * the address range it leaves: each thread's blocks keep their bytes and
 * its own free of them succeeds. The window (between the old range going
 * back and its metadata being cleared) is a few instructions long, so the
 * case runs for a bounded time with more threads than CPUs, to be
 * preempted there now and then; it does not hit the window reliably. */
#include "hostile.h"

#include <pthread.h>
#include <time.h>

#define SECONDS 3
#define MOVERS 2
#define TAKERS 4

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double deadline;

/* Grows a 4 MiB block with a neighbour in the way, so realloc moves it,
 * then frees both. */
static void *mover(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg, rounds = 0;

	while (now() < deadline) {
		char *p = malloc(4 * MiB), *wall = malloc(2 * MiB), *q;

		CHECK(p && wall, "malloc");
		p[0] = (char)seed;
		p[4 * MiB - 1] = (char)seed;
		q = realloc(p, (6 + rounds % 8) * MiB);
		CHECK(q != NULL && q[0] == (char)seed && q[4 * MiB - 1] == (char)seed,
		      "realloc lost the block's bytes");
		free(wall);
		free(q);
		rounds++;
	}
	return NULL;
}

/* Takes blocks of the sizes the movers leave behind. */
static void *taker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char *held[8] = { NULL };

	for (unsigned i = 0; now() < deadline; i++) {
		char **slot = &held[i % 8];

		free(*slot);
		*slot = malloc((size_t)(2 + (i + seed) % 5) * 2 * MiB / 2);
		CHECK(*slot != NULL, "malloc");
		**slot = 1;
	}
	for (int i = 0; i < 8; i++)
		free(held[i]);
	return NULL;
}

int main(void)
{
	pthread_t t[MOVERS + TAKERS];

	deadline = now() + SECONDS;
	for (int i = 0; i < MOVERS + TAKERS; i++)
		CHECK(pthread_create(&t[i], NULL, i < MOVERS ? mover : taker,
				     (void *)(uintptr_t)(i + 1)) == 0, "pthread_create");
	for (int i = 0; i < MOVERS + TAKERS; i++)
		pthread_join(t[i], NULL);
	puts("every block kept its bytes and was freed");
	return 0;
}
