/* The program tests/preload_heap.c runs under the preload: it grows
 * glibc's main heap with 4000-byte requests and reports what the kernel
 * made of the heap, as one line on stdout:
 *
 *   vmas=N advised=0|1 refused=0|1 huge_kib=N heap_mib=N
 *
 * vmas: the [heap] mappings; advised: one of them is MADV_HUGEPAGE ("hg"
 * in VmFlags); refused: one is MADV_NOHUGEPAGE ("nh"); huge_kib: their
 * AnonHugePages. Every byte written is read
 * back before the report; a mismatch exits 3.
 *
 * Usage: preload_heap_grow MIB [STEP...]; each STEP in order:
 *   mallopt   mallopt(M_TOP_PAD, 128 KiB) before the first request
 *   calloc    grow with calloc instead of malloc
 *   realloc   grow by realloc of each request from 1000 to 4000 bytes
 *   regrow    free everything (the heap shrinks), report, grow again
 *   fork      after growing, fork; the child grows as much again and
 *             reports, the parent waits for it and reports
 *   threads   four threads allocate and free 4000-byte requests while
 *             the main thread grows the heap
 *   shrinkfirst  before anything else, 20 MiB of 500-byte requests
 *             (which the preload never looks at), one 4000-byte one, all
 *             freed and malloc_trim(0): the heap ends below where the
 *             preload saw it first
 *   sigrlimit after growing, 12 forked children (each with a second,
 *             sleeping thread, so glibc locks its arena) make and free
 *             requests of 64 B-4 KiB until a timer's signal handler, at
 *             1-21 ms, calls setrlimit(RLIMIT_DATA, 32 TiB): none may hang
 *             (5 s) or crash
 *   ownsbrk   after growing, take 16 MiB with sbrk, make one more
 *             request, touch a byte per 64 KiB of it and print
 *             "own_kib=N", the resident KiB of those 16 MiB (mincore)
 *   seesaw    40 times, free the last quarter of the requests (glibc
 *             trims the heap) and make a twentieth more than that: the
 *             heap shrinks and grows again a little higher each time */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQUEST 4000

static size_t count;
static unsigned char **blocks;
static bool use_calloc, use_realloc;
static volatile int stop_threads;

static unsigned char *one(size_t i)
{
	unsigned char *p;

	if (use_calloc) {
		p = calloc(1, REQUEST);
		if (p != NULL && p[REQUEST - 1] != 0)
			exit(3);
	} else if (use_realloc) {
		p = malloc(1000);
		if (p != NULL)
			memset(p, (int)(i & 0xff), 1000);
		p = p != NULL ? realloc(p, REQUEST) : NULL;
	} else {
		p = malloc(REQUEST);
	}
	if (p == NULL) {
		fprintf(stderr, "request %zu failed\n", i);
		exit(4);
	}
	memset(p, (int)(i & 0xff), REQUEST);
	return p;
}

static void grow(void)
{
	for (size_t i = 0; i < count; i++)
		blocks[i] = one(i);
}

static void check_and_free(void)
{
	for (size_t i = count; i-- > 0;) {
		for (size_t k = 0; k < REQUEST; k += 512)
			if (blocks[i][k] != (unsigned char)(i & 0xff))
				exit(3);
		free(blocks[i]);
	}
}

static void seesaw(void)
{
	size_t quarter = count / 4;

	for (int round = 0; round < 40; round++) {
		for (size_t i = count; i-- > count - quarter;) {
			if (blocks[i][0] != (unsigned char)(i & 0xff))
				exit(3);
			free(blocks[i]);
		}
		count -= quarter;
		for (size_t i = count; i < count + quarter + quarter / 5; i++)
			blocks[i] = one(i);
		count += quarter + quarter / 5;
	}
}

static void shrink_first(void)
{
	size_t n = (20u << 20) / 500;
	void **small = malloc(n * sizeof(*small));
	void *seen;

	if (small == NULL)
		exit(4);
	for (size_t i = 0; i < n; i++)
		if ((small[i] = malloc(500)) == NULL)
			exit(4);
	seen = malloc(REQUEST);
	free(seen);
	for (size_t i = 0; i < n; i++)
		free(small[i]);
	free(small);
	malloc_trim(0);
}

static volatile sig_atomic_t limit_set;

static void set_limit(int sig)
{
	struct rlimit rl = { (rlim_t)1 << 45, RLIM_INFINITY };

	(void)sig;
	setrlimit(RLIMIT_DATA, &rl);
	limit_set = 1;
}

static void *sleep_on(void *arg)
{
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;)
		pause();
	return NULL;
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One child: churn until the handler ran, and 50 ms more. */
static int limit_in_handler(unsigned seed)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1 };
	struct itimerspec its = { .it_value = { 0, 1000000 + (long)(seed % 20000000) } };
	void *small[64];
	double start = seconds();
	pthread_t sleeper;
	timer_t timer;

	if (pthread_create(&sleeper, NULL, sleep_on, NULL) != 0 || signal(SIGUSR1, set_limit) == SIG_ERR ||
	    timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0 || timer_settime(timer, 0, &its, NULL) != 0)
		return 11;
	while (!limit_set || seconds() - start < 0.05) {
		for (int k = 0; k < 64; k++) {
			seed = seed * 1103515245u + 12345u;
			small[k] = malloc(k & 1 ? 64 + seed % 64 : 1100 + seed % 3000);
		}
		for (int k = 0; k < 64; k++)
			free(small[(k * 37) % 64]);
		if (seconds() - start > 3)
			return 12;
	}
	return 0;
}

static void limits_in_handlers(void)
{
	for (unsigned i = 0; i < 12; i++) {
		pid_t pid = fork();
		double start = seconds();
		int status = 0;
		pid_t w;

		if (pid < 0)
			exit(8);
		if (pid == 0)
			_exit(limit_in_handler(i * 2654435761u));
		while ((w = waitpid(pid, &status, WNOHANG)) == 0 && seconds() - start < 5)
			usleep(2000);
		if (w == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fprintf(stderr, "child %u hung\n", i);
			exit(10);
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "child %u ended with status %#x\n", i, status);
			exit(10);
		}
	}
}

static void own_break(void)
{
	size_t len = (size_t)16 << 20, resident = 0;
	unsigned char *own = sbrk((intptr_t)len), *request, vec[4096];

	if (own == (void *)-1)
		exit(13);
	request = malloc(REQUEST);
	if (request == NULL)
		exit(4);
	for (size_t o = 0; o < len; o += 64 << 10)
		own[o] = 1;
	if (mincore(own, len, vec) != 0)
		exit(13);
	for (size_t i = 0; i < len / 4096; i++)
		resident += vec[i] & 1;
	printf("own_kib=%zu\n", resident * 4);
	free(request);
}

static void check(void)
{
	for (size_t i = 0; i < count; i++)
		if (blocks[i][0] != (unsigned char)(i & 0xff) ||
		    blocks[i][REQUEST - 1] != (unsigned char)(i & 0xff))
			exit(3);
}

/* The [heap] mappings of /proc/self/smaps. */
static void report(size_t heap_mib)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in_heap = false;
	int vmas = 0, advised = 0, refused = 0;
	long huge = 0, kib;
	unsigned long start, end;

	if (f == NULL)
		exit(5);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			in_heap = strstr(line, "[heap]") != NULL;
			vmas += in_heap;
		} else if (in_heap && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) {
			huge += kib;
		} else if (in_heap && strncmp(line, "VmFlags:", 8) == 0) {
			advised |= strstr(line, " hg") != NULL;
			refused |= strstr(line, " nh") != NULL;
		}
	}
	fclose(f);
	printf("vmas=%d advised=%d refused=%d huge_kib=%ld heap_mib=%zu\n", vmas, advised, refused,
	       huge, heap_mib);
	fflush(stdout);
}

static void *churn(void *arg)
{
	(void)arg;
	while (!stop_threads) {
		void *p = malloc(REQUEST);

		if (p == NULL)
			exit(4);
		memset(p, 7, REQUEST);
		free(p);
	}
	return NULL;
}

static size_t heap_mib(const char *base)
{
	return (size_t)((const char *)sbrk(0) - base) >> 20;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
	pthread_t threads[4];
	bool with_threads = false;
	const char *base;

	if (mib == 0) {
		fprintf(stderr, "usage: preload_heap_grow MIB [mallopt|calloc|realloc|regrow|fork|threads|seesaw|shrinkfirst|sigrlimit|ownsbrk]...\n");
		return 2;
	}
	count = mib * 1024 * 1024 / REQUEST;
	blocks = malloc(count * 4 * sizeof(*blocks)); /* fork and seesaw grow on */
	if (blocks == NULL)
		return 4;
	base = sbrk(0);
	for (int a = 2; a < argc; a++) {
		if (strcmp(argv[a], "mallopt") == 0 && mallopt(M_TOP_PAD, 128 << 10) != 1)
			return 6;
		use_calloc |= strcmp(argv[a], "calloc") == 0;
		use_realloc |= strcmp(argv[a], "realloc") == 0;
		with_threads |= strcmp(argv[a], "threads") == 0;
	}
	for (int a = 2; a < argc; a++)
		if (strcmp(argv[a], "shrinkfirst") == 0)
			shrink_first();
	for (int t = 0; with_threads && t < 4; t++)
		if (pthread_create(&threads[t], NULL, churn, NULL) != 0)
			return 7;
	grow();
	for (int a = 2; a < argc; a++) {
		if (strcmp(argv[a], "seesaw") == 0) {
			seesaw();
		} else if (strcmp(argv[a], "ownsbrk") == 0) {
			own_break();
		} else if (strcmp(argv[a], "sigrlimit") == 0) {
			limits_in_handlers();
		} else if (strcmp(argv[a], "regrow") == 0) {
			check_and_free();
			report(heap_mib(base));
			grow();
		} else if (strcmp(argv[a], "fork") == 0) {
			pid_t pid = fork();
			int status;

			if (pid < 0)
				return 8;
			if (pid == 0) {
				check();
				blocks += count;
				grow();
				report(heap_mib(base));
				_exit(0);
			}
			if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
			    WEXITSTATUS(status) != 0)
				return 9;
		}
	}
	stop_threads = 1;
	for (int t = 0; with_threads && t < 4; t++)
		pthread_join(threads[t], NULL);
	check();
	report(heap_mib(base));
	return 0;
}
