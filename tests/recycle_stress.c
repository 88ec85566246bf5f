/* The recycler's promises, under libhugezero-preload.so: calloc never
 * returns a non-zero byte, realloc never loses data, no block is handed out
 * twice, the cache respects its limits and decays, and the pre-zero thread
 * survives fork and exit. Sizes and counts come from the environment set by
 * tests/meson.build (HZ_OPS, HZ_THREADS). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

#define SLOTS 48

struct slot {
	unsigned char *p;
	size_t size;
	unsigned char seed;
};

/* Mostly sizes around the 256 KiB threshold the test runs with, some of
 * several MiB. */
static size_t pick_size(struct hz_test_rng *r)
{
	uint64_t x = hz_test_rng_next(r);

	if (x % 16 == 0)
		return 2 * MiB + (x >> 8) % (2 * MiB);
	return 192 * KiB + (x >> 8) % (512 * KiB);
}

static const unsigned char zero_page[4096];

/* Make the compiler keep stores to p: it may otherwise drop a memset into
 * memory that is freed right after, and with it the whole allocation. */
static void escape(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

static void assert_zero(const unsigned char *p, size_t n, const char *what)
{
	for (size_t off = 0; off < n; off += sizeof(zero_page)) {
		size_t len = n - off < sizeof(zero_page) ? n - off : sizeof(zero_page);

		if (memcmp(p + off, zero_page, len) != 0)
			fail_msg("%s of %zu bytes: non-zero byte near offset %zu", what, n, off);
	}
}

/* The pattern a slot holds: one byte per 512, plus the last byte. */
static void stamp(struct slot *s)
{
	for (size_t i = 0; i < s->size - 1; i += 512)
		s->p[i] = (unsigned char)(s->seed + i / 512);
	s->p[s->size - 1] = s->seed;
}

static int stamped(const struct slot *s, size_t upto)
{
	for (size_t i = 0; i < upto && i < s->size - 1; i += 512)
		if (s->p[i] != (unsigned char)(s->seed + i / 512))
			return 0;
	return upto < s->size || s->p[s->size - 1] == s->seed;
}

static void release(struct slot *s)
{
	if (!stamped(s, s->size))
		fail_msg("block %p (%zu bytes) changed while live: handed out twice?",
			 (void *)s->p, s->size);
	memset(s->p, 0xdb, s->size); /* dirty pattern before free */
	escape(s->p);
	free(s->p);
	s->p = NULL;
}

static void one_op(struct slot *slots, struct hz_test_rng *r)
{
	struct slot *s = &slots[hz_test_rng_next(r) % SLOTS];
	uint64_t op = hz_test_rng_next(r) % 8;

	if (s->p && op < 3) {
		release(s);
	} else if (s->p && op < 5) {
		size_t size = pick_size(r);
		size_t keep = size < s->size ? size : s->size;
		unsigned char *q = realloc(s->p, size);

		if (!q)
			fail_msg("realloc(%zu) failed", size);
		s->p = q;
		if (!stamped(&(struct slot){ q, s->size, s->seed }, keep & ~(size_t)511))
			fail_msg("realloc %zu -> %zu lost data", s->size, size);
		s->size = size;
		stamp(s);
	} else if (!s->p) {
		s->size = pick_size(r);
		s->seed = (unsigned char)hz_test_rng_next(r);
		if (op % 2) {
			s->p = calloc(1, s->size);
			if (!s->p)
				fail_msg("calloc(%zu) failed", s->size);
			assert_zero(s->p, s->size, "calloc");
		} else {
			s->p = malloc(s->size);
			if (!s->p)
				fail_msg("malloc(%zu) failed", s->size);
		}
		stamp(s);
	}
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v ? strtol(v, NULL, 10) : def;
}

struct worker {
	long ops, done;
	uint64_t seed;
	time_t until; /* 0: no time bound */
};

/* Operations between looks at the clock. */
#define CLOCK_EVERY 64

static void *run_ops(void *arg)
{
	struct worker *w = arg;
	struct slot slots[SLOTS];
	struct hz_test_rng r = { w->seed };

	memset(slots, 0, sizeof(slots));
	for (w->done = 0; w->done < w->ops; w->done++) {
		if (w->until && w->done % CLOCK_EVERY == 0 && time(NULL) >= w->until)
			break;
		one_op(slots, &r);
	}
	for (int i = 0; i < SLOTS; i++)
		if (slots[i].p)
			release(&slots[i]);
	return NULL;
}

/* HZ_OPS operations shared by HZ_THREADS threads, or as many as
 * HZ_SECONDS allow (0: no bound), whichever ends first; at least a tenth
 * of HZ_OPS must fit. The bound is for slow machines: 10^6 operations took
 * 75 s on the machines before, 380-560 s on an AMD EPYC VM whose fresh
 * memory faults 3x slower. The count done is printed. */
static void random_operations_against_shadow(void **state)
{
	long threads = env_long("HZ_THREADS", 1), ops = env_long("HZ_OPS", 100000);
	long seconds = env_long("HZ_SECONDS", 0), done = 0;
	pthread_t t[16];
	struct worker w[16];

	(void)state;
	if (threads > 16)
		threads = 16;
	for (long i = 0; i < threads; i++) {
		w[i] = (struct worker){ .ops = ops / threads,
					.seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1),
					.until = seconds > 0 ? time(NULL) + seconds : 0 };
		assert_int_equal(pthread_create(&t[i], NULL, run_ops, &w[i]), 0);
	}
	for (long i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		done += w[i].done;
	}
	print_message("# %ld of %ld operations in %ld thread(s)%s\n", done, ops, threads,
		      seconds > 0 ? ", bounded by HZ_SECONDS" : "");
	assert_true(done >= ops / 10);
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kb = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Rss: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Run with HUGEZERO_CACHE_MAX=64M and HUGEZERO_DECAY_MS=300. */
static void cache_limit_and_decay_bound_rss(void **state)
{
	unsigned char *p[12];
	long base, after_free, after_idle;

	(void)state;
	base = rss_kb();
	for (int i = 0; i < 12; i++) {
		p[i] = malloc(16 * MiB);
		assert_non_null(p[i]);
		memset(p[i], 1, 16 * MiB);
		escape(p[i]);
	}
	for (int i = 0; i < 12; i++)
		free(p[i]);
	after_free = rss_kb();
	/* at most the 64 MiB cache stays, plus slack for the program */
	if (after_free > base + 64 * 1024 + 16 * 1024)
		fail_msg("RSS %ld kB after free, base %ld kB: cache above its limit",
			 after_free, base);
	usleep(1500 * 1000); /* decay 300 ms, thread tick 250 ms */
	after_idle = rss_kb();
	if (after_idle > base + 16 * 1024)
		fail_msg("RSS %ld kB after idle, base %ld kB: the cache did not decay",
			 after_idle, base);
}

/* A big written block freed just before fork: the child must still get
 * zeroed memory and exit cleanly whatever the thread was doing. */
static void fork_while_prezeroing(void **state)
{
	(void)state;
	for (int i = 0; i < 20; i++) {
		unsigned char *big = malloc(96 * MiB);
		pid_t pid;
		int status;

		assert_non_null(big);
		memset(big, 0x5a, 96 * MiB);
		escape(big);
		free(big);
		big = calloc(1, 4 * MiB); /* raise calloc demand: the thread works */
		escape(big);
		free(big);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			unsigned char *c = calloc(1, 96 * MiB);

			for (size_t j = 0; c && j < 96 * MiB; j += 4096)
				if (c[j])
					_exit(3);
			_exit(c ? 0 : 2);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
}

/* A calloc that clears a large dirty block itself shares it with the
 * pre-zero thread, chunk by chunk (HUGEZERO_PREZERO_SPLIT_MIN, set low for
 * this test): every byte still reads zero, whichever side cleared it, and
 * the block is not written after calloc returns (the next round's pattern
 * survives until its free). */
static void calloc_split_with_prezeroing_thread_is_zero(void **state)
{
	const size_t size = 48 * MiB;

	(void)state;
	for (int i = 0; i < 30; i++) {
		unsigned char *p = malloc(size);

		assert_non_null(p);
		memset(p, 0x11 + i, size);
		escape(p);
		free(p);
		p = calloc(1, size);
		assert_non_null(p);
		assert_zero(p, size, "calloc shared with the thread");
		memset(p, 0x77, size);
		escape(p);
		usleep(2000); /* a late write by the thread would show below */
		for (size_t off = 0; off < size; off += 4096)
			if (p[off] != 0x77 || p[off + 4095] != 0x77)
				fail_msg("byte near offset %zu changed after calloc returned", off);
		free(p);
	}
}

/* exit() while the thread zeroes must not wait for it. */
static void exit_while_prezeroing_is_prompt(void **state)
{
	struct timespec a, b;
	pid_t pid;
	int status;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &a);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		unsigned char *p = calloc(1, 512 * MiB);

		memset(p, 1, 512 * MiB);
		escape(p);
		free(p);
		p = calloc(1, 256 * MiB);
		escape(p);
		free(p);
		exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (b.tv_sec - a.tv_sec > 20)
		fail_msg("exit took %ld s", (long)(b.tv_sec - a.tv_sec));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(random_operations_against_shadow),
		cmocka_unit_test(cache_limit_and_decay_bound_rss),
		cmocka_unit_test(fork_while_prezeroing),
		cmocka_unit_test(exit_while_prezeroing_is_prompt),
		cmocka_unit_test(calloc_split_with_prezeroing_thread_is_zero),
	};
	const char *only = argc > 1 ? argv[1] : NULL;

	if (getenv("LD_PRELOAD") == NULL || !strstr(getenv("LD_PRELOAD"), "hugezero")) {
		fprintf(stderr, "run under libhugezero-preload.so\n");
		return 1;
	}
	if (only)
		cmocka_set_test_filter(only);
	return cmocka_run_group_tests(all, NULL, NULL);
}
