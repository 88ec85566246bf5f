/* Limits a program sets on itself at run time, and what it can see of its
 * own address space. glibc takes address space as it needs it, so a limit
 * with ample room for what the program uses works, and VmSize is about
 * what is mapped. No root needed. */
#include "hostile.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static void *thread_main(void *arg)
{
	return arg;
}

/* setrlimit(RLIMIT_AS, 4 GiB) with a few MiB in use: small and large
 * blocks and a thread (an 8 MiB stack) still fit. */
static int as_lowered(void)
{
	struct rlimit rl;
	char *small;
	pthread_t t;
	void *ret;
	int err;

	CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit");
	rl.rlim_cur = 4 * GiB;
	CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
	small = malloc(MiB);
	CHECK(small != NULL, "malloc(1 MiB) under a 4 GiB RLIMIT_AS: %s", strerror(errno));
	memset(small, 1, MiB);
	err = pthread_create(&t, NULL, thread_main, small);
	CHECK(err == 0, "pthread_create under a 4 GiB RLIMIT_AS: %s", strerror(err));
	CHECK(pthread_join(t, &ret) == 0 && ret == small, "pthread_join");
	free(small);
	hostile_use_new_block(64 * MiB, false);
	hostile_use_new_block(256 * MiB, true);
	return 0;
}

/* VmSize right after start-up, against the glibc run's. */
static int vmsize(void)
{
	long long size = hostile_status_bytes("VmSize:"), glibc = hostile_baseline("vmsize");

	CHECK(size > 0, "no VmSize in /proc/self/status");
	if (glibc < 0) {
		hostile_print_baseline("vmsize", size);
		return 0;
	}
	CHECK(llabs(size - glibc) <= (long long)(16 * MiB),
	      "VmSize %lld MiB right after start-up, glibc's %lld MiB", size >> 20, glibc >> 20);
	return 0;
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	CHECK(d != NULL, "opendir: %s", strerror(errno));
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2; /* . and .. */
}

/* Every descriptor used up: large allocations still work and take no
 * descriptor of the program's, and none is left open afterwards. */
static int nofile_exhausted(void)
{
	struct rlimit rl = { 32, 32 };
	int fds[32], n = 0, fd;
	char *p;

	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	while (n < 32 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		fds[n++] = fd;
	CHECK(n < 32 && errno == EMFILE, "expected EMFILE after %d opens: %s", n, strerror(errno));
	for (size_t mib = 4; mib <= 64; mib *= 2)
		hostile_use_new_block(mib * MiB, mib % 8 == 0);
	p = malloc(4 * MiB);
	CHECK(p != NULL, "malloc");
	hz_test_fill(p, 4 * MiB, 3);
	p = realloc(p, 40 * MiB);
	CHECK(p != NULL && hz_test_check(p, 4 * MiB, 3) == 4 * MiB, "realloc");
	free(p);
	close(fds[n - 1]);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd == fds[n - 1], "the freed descriptor %d went elsewhere (%d)", fds[n - 1], fd);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	printf("open descriptors at the end: %d\n", count_open_fds());
	return 0;
}

/* RLIMIT_NOFILE at 64 and stdin closed, as a daemon does: reused blocks,
 * written in part (their zeroing asks which pages were touched), take no
 * descriptor, so the program's next open gets 0. */
static int nofile_low_stdin_closed(void)
{
	struct rlimit rl = { 64, 64 };
	int fd;

	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	CHECK(close(0) == 0, "close(0): %s", strerror(errno));
	for (int i = 0; i < 8; i++) {
		char *p = malloc(32 * MiB), *c;

		CHECK(p != NULL, "malloc");
		memset(p, 1, (size_t)(i % 4 + 1) * 4 * MiB);
		free(p);
		c = calloc(1, 32 * MiB);
		CHECK(c != NULL && hz_test_first_nonzero(c, 32 * MiB) == 32 * MiB, "calloc");
		free(c);
	}
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd == 0, "open after close(0) gave %d, not 0", fd);
	printf("open descriptors at the end: %d\n", count_open_fds());
	return 0;
}

/* What malloc(size) did, as a line of the result. */
static void *try_malloc(size_t size)
{
	void *p = malloc(size);

	printf("malloc(%zu MiB): %s\n", size / MiB, p ? "ok" : strerror(errno));
	if (p)
		memset(p, 1, MiB);
	return p;
}

/* RLIMIT_DATA at 1 GiB (a service's LimitDATA=, ulimit -d): a 2 GiB
 * request is refused with ENOMEM, and the program's other memory, large
 * blocks and its own mmaps, still fits below the limit. */
static int data_limited(void)
{
	struct rlimit rl = { 1 * GiB, 1 * GiB };
	void *big, *half, *m;

	free(try_malloc(64 * MiB)); /* a block cached, as a program's start-up leaves */
	CHECK(setrlimit(RLIMIT_DATA, &rl) == 0, "setrlimit: %s", strerror(errno));
	big = try_malloc(2 * GiB);
	half = try_malloc(512 * MiB);
	m = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("mmap(1 MiB): %s\n", m != MAP_FAILED ? "ok" : strerror(errno));
	free(big);
	free(half);
	free(try_malloc(256 * MiB));
	return 0;
}

/* A program frees 1 GiB of blocks, then sets RLIMIT_DATA to 512 MiB
 * (with a few MiB of its own in use): what it freed counts no more, so a
 * 256 MiB block and a 64 MiB mmap fit below the limit, as under glibc,
 * whose munmap gave the chunks back. (hugezero keeps freed ranges
 * read-write while no limit is set: blocks.c, hz_blocks_drop_memory.) */
static int data_limited_after_frees(void)
{
	struct rlimit rl = { 512 * MiB, 512 * MiB };
	void *blocks[16], *m;

	for (int i = 0; i < 16; i++) {
		blocks[i] = hostile_keep(malloc(64 * MiB));
		CHECK(blocks[i] != NULL, "malloc(64 MiB): %s", strerror(errno));
		memset(blocks[i], 1, MiB);
	}
	for (int i = 0; i < 16; i++)
		free(hostile_keep(blocks[i]));
	CHECK(setrlimit(RLIMIT_DATA, &rl) == 0, "setrlimit: %s", strerror(errno));
	free(try_malloc(256 * MiB));
	m = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("mmap(64 MiB): %s\n", m != MAP_FAILED ? "ok" : strerror(errno));
	if (m != MAP_FAILED)
		munmap(m, 64 * MiB);
	return 0;
}

/* Under an RLIMIT_AS set before the program started (ulimit -v), after a
 * large block was used and freed: the largest malloc that succeeds, in
 * MiB, within SLACK_MIB of glibc's (which gave the block back at its
 * free). The slack: in a multi-threaded process (the pre-zero thread
 * makes it one) glibc retries a failed request in a new arena, 64 MiB of
 * address space kept (2861 MiB against 2927 here). The run sets no limit
 * itself: meson runs it under bash's. */
#define SLACK_MIB 128

static bool fits(size_t mib)
{
	char *p = hostile_keep(malloc(mib * MiB));

	if (p == NULL)
		return false;
	p[0] = 1;
	free(p);
	return true;
}

static int largest_after_free(void)
{
	size_t lo = 0, hi = 1 << 16; /* fits(lo), not fits(hi) */
	long long glibc = hostile_baseline("largest_mib");
	struct rlimit rl;
	char *used = hostile_keep(malloc(100 * MiB));

	CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit: %s", strerror(errno));
	if (rl.rlim_cur == RLIM_INFINITY)
		SKIP("no RLIMIT_AS: run it under ulimit -v");
	CHECK(used != NULL, "malloc(100 MiB): %s", strerror(errno));
	memset(used, 1, 100 * MiB);
	free(used);
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		*(fits(mid) ? &lo : &hi) = mid;
	}
	NOTE("the largest malloc after the free: %zu MiB (glibc's %lld)", lo, glibc);
	if (glibc < 0)
		hostile_print_baseline("largest_mib", (long long)lo);
	else
		CHECK((long long)lo + SLACK_MIB >= glibc, "the largest malloc is %zu MiB, glibc's %lld",
		      lo, glibc);
	printf("the largest malloc after a free is within %d MiB of glibc's\n", SLACK_MIB);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "as_lowered", as_lowered },
		{ "vmsize", vmsize },
		{ "nofile", nofile_exhausted },
		{ "nofile_low_stdin_closed", nofile_low_stdin_closed },
		{ "data_limited", data_limited },
		{ "data_limited_after_frees", data_limited_after_frees },
		{ "largest_after_free", largest_after_free },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
