/* Signal handlers that free or allocate large blocks while the program is
 * inside a large calloc or free. Not async-signal-safe by POSIX, but under
 * glibc a block of 32 MiB and more is an mmap'ed chunk, whose free and
 * allocation take no lock, and programs do it (a handler that drops a
 * buffer, one that builds a report). A timer interrupts the loop every
 * half millisecond for RUN_S; the program must finish, its blocks zero. */
#include "hostile.h"

#include <signal.h>
#include <sys/time.h>
#include <time.h>

#define RUN_S 1
#define LARGE (40 * MiB)

static void *volatile spare; /* the block the handler frees */
static volatile long handled;
static bool handler_allocates;

static void on_alarm(int sig)
{
	void *p = __atomic_exchange_n(&spare, NULL, __ATOMIC_SEQ_CST);

	(void)sig;
	if (p) {
		free(p);
		handled++;
	}
	if (handler_allocates) {
		char *q = calloc(1, LARGE);

		if (q) {
			q[LARGE - 1] = 1;
			free(q);
		}
	}
}

static void set_timer(long usec)
{
	struct itimerval it = { { 0, usec }, { 0, usec } };

	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer: %s", strerror(errno));
}

static int loop(bool allocates)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	time_t end = time(NULL) + RUN_S + 1;
	long iterations = 0;

	handler_allocates = allocates;
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	set_timer(500);
	while (time(NULL) < end) {
		size_t len = 33 * MiB + (size_t)(iterations % 7) * MiB;
		unsigned char *p;

		if (!spare) {
			char *s = malloc(LARGE);

			CHECK(s != NULL, "malloc: %s", strerror(errno));
			s[0] = 1;
			__atomic_store_n(&spare, s, __ATOMIC_SEQ_CST);
		}
		p = calloc(1, len);
		CHECK(p != NULL, "calloc: %s", strerror(errno));
		for (size_t i = 0; i < len; i += 4096)
			CHECK(p[i] == 0, "calloc'd byte %zu is %#x", i, p[i]);
		p[len / 2] = 7;
		free(p);
		iterations++;
	}
	set_timer(0);
	CHECK(handled > 0, "the handler never ran");
	NOTE("%ld iterations, %ld blocks freed by the handler", iterations, handled);
	printf("finished\n");
	return 0;
}

static int handler_frees(void)
{
	return loop(false);
}

static int handler_frees_and_allocates(void)
{
	return loop(true);
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "frees", handler_frees },
		{ "allocates", handler_frees_and_allocates },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
