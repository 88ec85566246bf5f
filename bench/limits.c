/* bench-limits: what bounds zeroing on this machine, each case measured in
 * one process, the cases of a test interleaved round by round, every figure
 * a median over the rounds (issue "Zeroing at the limit"; figures in
 * bench/RESULTS.md). Memory is faulted in before timing ("kept", as a
 * recycled block is), except where a test says otherwise.
 *
 *   bench-limits stores SIZE ROUNDS
 *       On huge pages and on 4 KiB pages: hz_clear (the dispatched kernel),
 *       a read of every byte (what a pass skipping pages that already read
 *       zero would cost at least) and memset to 1 (the program's own write
 *       of the block: the limit a recycled calloc is measured against).
 *   bench-limits pair SIZE ROUNDS
 *       memset of SIZE alone, then the same memset while a second thread
 *       runs hz_clear over another SIZE: the best cycle two blocks per
 *       size could reach, in which the pre-zero thread clears one block
 *       while the program writes the other, since both cores share the
 *       memory.
 *   bench-limits direction SIZE ROUNDS
 *       memset front to back and back to front in 64 KiB steps: the cost of
 *       the direction itself, which no clearing order takes away.
 *   bench-limits uffd-wp SIZE ROUNDS
 *       memset of SIZE of huge-page memory under userfaultfd asynchronous
 *       write-protect (Linux 6.7; needs CAP_SYS_PTRACE or
 *       vm.unprivileged_userfaultfd), against the same write unprotected,
 *       with the minor faults and PMD splits it took: the price of learning
 *       which pages a program wrote.
 *   bench-limits collapse SIZE ROUNDS
 *       MADV_COLLAPSE of SIZE of written 4 KiB memory, and memset of the
 *       range before and after: the price of moving a kept block to huge
 *       pages, and what each later write gains.
 *
 * Output: one row per case,
 *   limit,TEST,CASE,SIZE,median_ms,M,min_ms,A,max_ms,B,gb_per_s,G
 * and for uffd-wp and collapse extra "limit,TEST,CASE,...,count,N" rows. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <hugezero.h>

#include "util.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif

#define ROUNDS_MAX 101
#define STEP (64u << 10)

struct series {
	const char *name;
	double ms[ROUNDS_MAX];
};

static size_t size;
static int rounds;
static char size_name[32];

static void die(const char *what)
{
	fprintf(stderr, "bench-limits: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double ms_since(uint64_t t0)
{
	return (double)(bench_now_ns() - t0) / 1e6;
}

static void report(const char *test, struct series *s, int n)
{
	struct bench_stat st = bench_stat_of(s->ms, (size_t)n);

	printf("limit,%s,%s,%s,median_ms,%.3f,min_ms,%.3f,max_ms,%.3f,gb_per_s,%.1f\n", test,
	       s->name, size_name, st.median, st.min, st.max,
	       st.median > 0 ? (double)size / st.median / 1e6 : 0.0);
}

static void report_count(const char *test, const char *what, long n)
{
	printf("limit,%s,%s,%s,count,%ld\n", test, what, size_name, n);
}

/* Kept memory on 4 KiB pages, 2 MiB aligned so that it can be collapsed:
 * MADV_NOHUGEPAGE (whatever THP's mode), written once. */
static void map_small(struct bench_buf *b, size_t len)
{
	char *m = mmap(NULL, len + BENCH_HUGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		die("mmap");
	b->p = (char *)(((uintptr_t)m + BENCH_HUGE - 1) & ~(uintptr_t)(BENCH_HUGE - 1));
	b->len = len;
	if (b->p > m)
		munmap(m, (size_t)(b->p - m));
	if (m + len + BENCH_HUGE > b->p + len)
		munmap(b->p + len, (size_t)(m + len + BENCH_HUGE - (b->p + len)));
	if (madvise(b->p, len, MADV_NOHUGEPAGE) != 0)
		die("madvise(MADV_NOHUGEPAGE)");
	memset(b->p, 1, len);
}

/* Kept memory on huge pages, or exit: a figure "on huge pages" that was
 * not would mislead. */
static void map_huge(struct bench_buf *b, size_t len)
{
	bench_buf_map(b, len);
	if (bench_buf_thp_share(b, 1) < 0.99) {
		fprintf(stderr, "bench-limits: could not get %s of huge pages\n", size_name);
		exit(1);
	}
}

static double time_clear(char *p)
{
	uint64_t t0 = bench_now_ns();

	hz_clear(p, size, p);
	return ms_since(t0);
}

static double time_memset(char *p, int v)
{
	uint64_t t0 = bench_now_ns();

	memset(p, v, size);
	__asm__ __volatile__("" : : "r"(p) : "memory");
	return ms_since(t0);
}

static volatile uint64_t sink;

static double time_read(const char *p)
{
	uint64_t t0 = bench_now_ns();

	sink += bench_read(p, size);
	return ms_since(t0);
}

/* ---- stores ---- */

static void stores(void)
{
	struct bench_buf huge, small;
	struct series s[6] = { { .name = "clear_thp" }, { .name = "read_thp" }, { .name = "write_thp" },
			       { .name = "clear_4k" },  { .name = "read_4k" },  { .name = "write_4k" } };

	map_huge(&huge, size);
	map_small(&small, size);
	for (int r = 0; r < rounds; r++) {
		s[0].ms[r] = time_clear(huge.p);
		s[1].ms[r] = time_read(huge.p);
		s[2].ms[r] = time_memset(huge.p, 1);
		s[3].ms[r] = time_clear(small.p);
		s[4].ms[r] = time_read(small.p);
		s[5].ms[r] = time_memset(small.p, 1);
	}
	for (int i = 0; i < 6; i++)
		report("stores", &s[i], rounds);
}

/* ---- pair ---- */

struct clearer {
	char *p;
	pthread_barrier_t *go;
};

static void *clear_beside(void *arg)
{
	struct clearer *c = arg;

	pthread_barrier_wait(c->go);
	hz_clear(c->p, size, NULL);
	return NULL;
}

static void pair(void)
{
	struct bench_buf a, b;
	struct series s[2] = { { .name = "write_alone" }, { .name = "write_beside_clear" } };
	pthread_barrier_t go;

	map_huge(&a, size);
	map_huge(&b, size);
	for (int r = 0; r < rounds; r++) {
		struct clearer c = { b.p, &go };
		pthread_t t;
		uint64_t t0;

		s[0].ms[r] = time_memset(a.p, 1);
		pthread_barrier_init(&go, NULL, 2);
		if (pthread_create(&t, NULL, clear_beside, &c) != 0)
			die("pthread_create");
		pthread_barrier_wait(&go);
		t0 = bench_now_ns();
		memset(a.p, 2, size);
		pthread_join(t, NULL); /* the cycle ends when both are done */
		s[1].ms[r] = ms_since(t0);
		pthread_barrier_destroy(&go);
	}
	report("pair", &s[0], rounds);
	report("pair", &s[1], rounds);
}

/* ---- direction ---- */

static double time_steps(char *p, int backward)
{
	uint64_t t0 = bench_now_ns();

	for (size_t k = 0; k < size / STEP; k++) {
		size_t i = backward ? size / STEP - 1 - k : k;

		memset(p + i * STEP, 3, STEP);
	}
	__asm__ __volatile__("" : : "r"(p) : "memory");
	return ms_since(t0);
}

static void direction(void)
{
	struct bench_buf b;
	struct series s[2] = { { .name = "forward" }, { .name = "backward" } };

	map_huge(&b, size);
	for (int r = 0; r < rounds; r++) {
		s[0].ms[r] = time_steps(b.p, 0);
		s[1].ms[r] = time_steps(b.p, 1);
	}
	report("direction", &s[0], rounds);
	report("direction", &s[1], rounds);
}

/* ---- uffd-wp ----
 * Debian 12's headers predate asynchronous write-protect: the uapi values
 * (linux/userfaultfd.h, Linux 6.7) are spelt out here. */
#include <linux/userfaultfd.h>
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

static long vmstat(const char *key)
{
	char k[64];
	long v, found = -1;
	FILE *f = fopen("/proc/vmstat", "r");

	if (f == NULL)
		return -1;
	while (found < 0 && fscanf(f, "%63s %ld", k, &v) == 2)
		if (strcmp(k, key) == 0)
			found = v;
	fclose(f);
	return found;
}

static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static int uffd_open(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		fprintf(stderr, "bench-limits: userfaultfd: %s (needs root or "
			"vm.unprivileged_userfaultfd=1)\n", strerror(errno));
		exit(1);
	}
	if (ioctl(fd, UFFDIO_API, &api) != 0) {
		fprintf(stderr, "bench-limits: UFFDIO_API with UFFD_FEATURE_WP_ASYNC: %s "
			"(Linux 6.7 or later)\n", strerror(errno));
		exit(1);
	}
	return fd;
}

static void protect(int fd, const struct bench_buf *b)
{
	struct uffdio_writeprotect wp = { .range = { (uintptr_t)b->p, b->len },
					  .mode = UFFDIO_WRITEPROTECT_MODE_WP };

	if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp) != 0)
		die("UFFDIO_WRITEPROTECT");
}

static void uffd_wp(void)
{
	struct bench_buf plain, tracked;
	struct series s[2] = { { .name = "write_plain" }, { .name = "write_protected" } };
	int fd = uffd_open();
	long faults = 0, splits = vmstat("thp_split_pmd");
	size_t huge_before, huge_after, mapped;

	map_huge(&plain, size);
	map_huge(&tracked, size);
	struct uffdio_register reg = { .range = { (uintptr_t)tracked.p, tracked.len },
				       .mode = UFFDIO_REGISTER_MODE_WP };

	if (ioctl(fd, UFFDIO_REGISTER, &reg) != 0)
		die("UFFDIO_REGISTER");
	bench_buf_thp(&tracked, &huge_before, &mapped);
	for (int r = 0; r < rounds; r++) {
		long f0;

		s[0].ms[r] = time_memset(plain.p, r + 1);
		protect(fd, &tracked);
		f0 = minor_faults();
		s[1].ms[r] = time_memset(tracked.p, r + 1);
		faults += minor_faults() - f0;
	}
	bench_buf_thp(&tracked, &huge_after, &mapped);
	report("uffd-wp", &s[0], rounds);
	report("uffd-wp", &s[1], rounds);
	report_count("uffd-wp", "faults_per_round", faults / rounds);
	report_count("uffd-wp", "pmd_splits", vmstat("thp_split_pmd") - splits);
	report_count("uffd-wp", "huge_kib_before", (long)(huge_before >> 10));
	report_count("uffd-wp", "huge_kib_after", (long)(huge_after >> 10));
	close(fd);
}

/* ---- collapse ---- */

static void collapse(void)
{
	struct series s[3] = { { .name = "write_4k" }, { .name = "collapse" }, { .name = "write_after" } };
	long failed = 0;

	for (int r = 0; r < rounds; r++) {
		struct bench_buf b;
		uint64_t t0;

		map_small(&b, size);
		s[0].ms[r] = time_memset(b.p, 2);
		/* Clears MADV_NOHUGEPAGE, which MADV_COLLAPSE refuses. */
		madvise(b.p, b.len, MADV_HUGEPAGE);
		t0 = bench_now_ns();
		failed += madvise(b.p, b.len, MADV_COLLAPSE) != 0;
		s[1].ms[r] = ms_since(t0);
		s[2].ms[r] = time_memset(b.p, 3);
		bench_buf_unmap(&b);
	}
	for (int i = 0; i < 3; i++)
		report("collapse", &s[i], rounds);
	report_count("collapse", "failed", failed);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(void);
	} tests[] = { { "stores", stores },   { "pair", pair },         { "direction", direction },
		      { "uffd-wp", uffd_wp }, { "collapse", collapse } };

	if (argc == 4) {
		size = bench_parse_size(argv[2]);
		rounds = atoi(argv[3]);
		for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
			if (strcmp(argv[1], tests[i].name) != 0)
				continue;
			if (size < BENCH_HUGE || size % BENCH_HUGE != 0 || rounds < 1 ||
			    rounds > ROUNDS_MAX)
				break;
			bench_size_str(size, size_name, sizeof size_name);
			tests[i].run();
			return 0;
		}
	}
	fprintf(stderr, "usage: %s stores|pair|direction|uffd-wp|collapse SIZE ROUNDS\n"
		"  SIZE: a multiple of 2M (64M, 256M); ROUNDS: 1..%d\n",
		argv[0], ROUNDS_MAX);
	return 2;
}
