/* Signal handlers that free or allocate large blocks while the program is
 * inside a large calloc or free. Not async-signal-safe by POSIX, but under
 * glibc a block of 32 MiB and more is an mmap'ed chunk, whose free and
 * allocation take no lock, and programs do it (a handler that drops a
 * buffer, one that builds a report). A timer interrupts the loop every
 * half millisecond for RUN_S; the program must finish, its blocks zero.
 *
 * And the same while another thread forks without pause: a block freed
 * while the library is busy, or inside fork, waits in one list
 * (src/preload/reentry.c), which both the interrupted call and the fork
 * handlers drain.
 *
 * And a handler on a small alternate stack (sigaltstack), which glibc's
 * large calls fit in: the kernel's signal frame, as measured on this
 * machine, and ROOM more. The program is linked -z now, so that no lazy
 * binding of its own takes the room. */
#include "hostile.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* ---- handler frees while another thread forks ---- */

static volatile int forks_stop;

/* Forks until told to stop; each child callocs a large block, checks it
 * and leaves. The forks done, or -1 when a child failed. */
static void *fork_loop(void *arg)
{
	long *forks = arg;

	while (!forks_stop) {
		pid_t child = fork();
		int status;

		if (child == 0) {
			unsigned char *q = calloc(1, LARGE);

			_exit(q != NULL && q[LARGE - 1] == 0 ? 0 : 3);
		}
		if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			*forks = -1;
			return NULL;
		}
		++*forks;
	}
	return NULL;
}

static int handler_frees_while_forking(void)
{
	long forks = 0;
	pthread_t t;

	CHECK(pthread_create(&t, NULL, fork_loop, &forks) == 0, "pthread_create failed");
	loop(false);
	forks_stop = 1;
	CHECK(pthread_join(t, NULL) == 0, "pthread_join failed");
	CHECK(forks > 0, "a fork or its child failed, or none ran (%ld)", forks);
	NOTE("%ld forks", forks);
	return 0;
}

/* ---- a small alternate stack ---- */

#define ROOM (6 * 1024)

static volatile uintptr_t frame_top;
static volatile int small_ok;

static void measure_frame(int sig)
{
	char here;

	(void)sig;
	frame_top = (uintptr_t)&here;
}

/* The large calls glibc serves with mmap, munmap and mremap. */
static void large_calls(int sig)
{
	char *a = malloc(4 * MiB), *b = calloc(1, 64 * MiB), *c;

	(void)sig;
	if (!a || !b || b[0] != 0 || b[64 * MiB - 1] != 0)
		return;
	a[0] = 1;
	free(a);
	free(b);
	b = calloc(1, 64 * MiB);
	c = b ? realloc(b, 96 * MiB) : NULL;
	if (!c || c[12345] != 0)
		return;
	free(c);
	c = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return;
	c[0] = 1;
	munmap(c, 8 * MiB);
	small_ok = 1;
}

/* An alternate stack of len bytes above a guard page. */
static void alt_stack(size_t len, void (*handler)(int))
{
	char *m = mmap(NULL, len + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);
	stack_t ss = { .ss_sp = m + 4096, .ss_size = len };
	struct sigaction sa = { .sa_handler = handler, .sa_flags = SA_ONSTACK };

	CHECK(m != MAP_FAILED, "mmap of the stack: %s", strerror(errno));
	CHECK(mprotect(m, 4096, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
	CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack: %s", strerror(errno));
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	frame_top = (uintptr_t)(m + 4096 + len);
}

static int small_stack(bool warm)
{
	uintptr_t top;
	size_t frame;

	alt_stack(64 * 1024, measure_frame);
	top = frame_top;
	raise(SIGUSR1);
	frame = top - frame_top;
	if (warm) { /* the library started, if preloaded */
		free(calloc(1, 64 * MiB));
		free(malloc(4 * MiB));
	}
	alt_stack(frame + ROOM, large_calls);
	raise(SIGUSR1);
	NOTE("a signal frame of %zu bytes, a stack of %zu", frame, frame + ROOM);
	CHECK(small_ok, "the large calls in the handler failed");
	printf("the handler's large calls fit\n");
	return 0;
}

static int small_stack_first(void)
{
	return small_stack(false);
}

static int small_stack_warm(void)
{
	return small_stack(true);
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "frees", handler_frees },
		{ "allocates", handler_frees_and_allocates },
		{ "frees_while_forking", handler_frees_while_forking },
		{ "small_stack_first", small_stack_first },
		{ "small_stack_warm", small_stack_warm },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
