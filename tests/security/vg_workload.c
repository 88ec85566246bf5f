/* A workload for Memcheck (valgrind.sh) under libhugezero-preload.so: every
 * entry point of the preload on large blocks, reuse through the cache and
 * the pre-zero thread, realloc in place and by mremap, anonymous mmap,
 * threads and fork, and hz_clear with every kernel this CPU has as
 * Valgrind presents it. It checks what it gets (calloc reads zero, data
 * survives realloc) and exits non-zero on a wrong result; Valgrind reports
 * the memory errors. */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../util.h"

static int failures;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "vg_workload: " __VA_ARGS__);     \
			fputc('\n', stderr);                              \
			failures++;                                       \
		}                                                         \
	} while (0)

static void *(*volatile do_malloc)(size_t) = malloc;

/* Word by word: Memcheck runs byte loops slowly. */
static int all_zero(const unsigned char *p, size_t n)
{
	size_t i = 0;

	for (; i < n && (uintptr_t)(p + i) % 8; i++)
		if (p[i])
			return 0;
	for (; i + 8 <= n; i += 8)
		if (*(const uint64_t *)(const void *)(p + i))
			return 0;
	for (; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Allocate, dirty, free, calloc again: blocks come back from the cache,
 * zeroed by the pre-zero thread or by calloc. */
static void reuse(void)
{
	static const size_t sizes[] = { 2 * MiB, 3 * MiB + 5, 16 * MiB };

	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < 3; i++) {
			unsigned char *p = do_malloc(sizes[i]);

			CHECK(p != NULL, "malloc(%zu) failed", sizes[i]);
			if (p == NULL)
				continue;
			memset(p, 0xa5, sizes[i]);
			free(p);
			p = calloc(1, sizes[i]);
			CHECK(p != NULL && all_zero(p, sizes[i]), "calloc(%zu) not zero", sizes[i]);
			free(p);
		}
	}
}

static void aligned_and_realloc(void)
{
	unsigned char *p, *q;
	void *a = NULL;

	CHECK(posix_memalign(&a, 64 * MiB, 4 * MiB) == 0 && (uintptr_t)a % (64 * MiB) == 0,
	      "posix_memalign 64 MiB");
	free(a);
	a = aligned_alloc(2 * MiB, 6 * MiB);
	CHECK(a && (uintptr_t)a % (2 * MiB) == 0, "aligned_alloc");
	free(a);
	a = memalign(4096, 3 * MiB);
	CHECK(a != NULL, "memalign");
	free(a);
	a = valloc(5 * MiB);
	CHECK(a != NULL, "valloc");
	free(a);
	a = pvalloc(5 * MiB + 1);
	CHECK(a != NULL && malloc_usable_size(a) >= 5 * MiB + 4096, "pvalloc");
	free(a);

	/* Grow (in place or by mremap), shrink, move to the C library. */
	p = do_malloc(4 * MiB);
	CHECK(p != NULL, "malloc");
	if (p == NULL)
		return;
	memset(p, 0x3c, 4 * MiB);
	q = realloc(p, 64 * MiB);
	CHECK(q && q[0] == 0x3c && q[4 * MiB - 1] == 0x3c, "realloc grow");
	p = q;
	q = realloc(p, 3 * MiB);
	CHECK(q && q[3 * MiB - 1] == 0x3c, "realloc shrink");
	p = q;
	q = realloc(p, 100);
	CHECK(q && q[99] == 0x3c, "realloc to small");
	p = q;
	q = realloc(p, 8 * MiB);
	CHECK(q && q[99] == 0x3c, "realloc from small");
	free(q);
}

static void anonymous_mmap(void)
{
	size_t len = 10 * MiB + 4096;
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap");
	if (p == MAP_FAILED)
		return;
	CHECK(all_zero(p, len), "mmap not zero");
	memset(p, 1, len);
	CHECK(munmap(p, len) == 0, "munmap");
}

static void *thread_main(void *arg)
{
	size_t base = (size_t)(uintptr_t)arg;

	for (int i = 0; i < 8; i++) {
		size_t n = base + (size_t)(i % 4) * MiB;
		unsigned char *p = calloc(n, 1);

		if (p == NULL || !all_zero(p, n))
			return (void *)1;
		memset(p, i, n);
		free(p);
	}
	return NULL;
}

static void threads_and_fork(void)
{
	pthread_t t[2];
	void *ret;
	int status;
	pid_t pid;

	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, thread_main,
				     (void *)(uintptr_t)((size_t)(2 + i) * MiB)) == 0,
		      "pthread_create");
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], &ret);
		CHECK(ret == NULL, "thread %d saw a non-zero calloc", i);
	}
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		unsigned char *p = calloc(1, 8 * MiB);

		_exit(p && all_zero(p, 8 * MiB) ? 0 : 1);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "fork child");
}

/* hz_clear from libhugezero.so (loaded with the preload): each kernel this
 * CPU offers, as Valgrind's CPU model shows it. A kernel offered but not
 * emulated would end the run with SIGILL. */
static void clear_kernels(void)
{
	unsigned (*count)(void) = (unsigned (*)(void))dlsym(RTLD_DEFAULT, "hz_clear_kernel_count");
	const char *(*name)(unsigned) =
		(const char *(*)(unsigned))dlsym(RTLD_DEFAULT, "hz_clear_kernel_name");
	int (*supported)(unsigned, const char **) =
		(int (*)(unsigned, const char **))dlsym(RTLD_DEFAULT, "hz_clear_kernel_supported");
	int (*clear_with)(const char *, void *, size_t) =
		(int (*)(const char *, void *, size_t))dlsym(RTLD_DEFAULT, "hz_clear_with");
	const char *(*auto_for)(size_t) =
		(const char *(*)(size_t))dlsym(RTLD_DEFAULT, "hz_clear_kernel_for");
	size_t len = 3 * MiB + 123;
	unsigned char *buf = malloc(len + 64);

	CHECK(count && name && supported && clear_with && auto_for && buf,
	      "libhugezero.so's clearing API not found (is the preload loaded?)");
	if (!(count && name && supported && clear_with && auto_for && buf))
		return;
	printf("hz_clear picks %s for 3 MiB\n", auto_for(len));
	for (unsigned i = 0; i < count(); i++) {
		const char *why = NULL;

		if (!supported(i, &why)) {
			printf("kernel %s not offered: %s\n", name(i), why ? why : "?");
			continue;
		}
		memset(buf, 0xff, len + 64);
		CHECK(clear_with(name(i), buf + 5, len) == 0, "hz_clear_with(%s)", name(i));
		CHECK(buf[4] == 0xff && all_zero(buf + 5, len) && buf[len + 5] == 0xff,
		      "kernel %s cleared the wrong bytes", name(i));
		printf("kernel %s ran\n", name(i));
	}
	free(buf);
}

/* Run one part and print how long it took (Valgrind is 10-50x slower). */
static void part(const char *what, void (*fn)(void))
{
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fn();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s: %.2f s\n", what,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
}

int main(void)
{
	part("reuse", reuse);
	part("aligned and realloc", aligned_and_realloc);
	part("mmap", anonymous_mmap);
	part("threads and fork", threads_and_fork);
	part("hz_clear kernels", clear_kernels);
	return failures ? 1 : 0;
}
