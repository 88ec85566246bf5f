/* fork racing stdio's locks, under the preload and as a glibc baseline.
 *
 * glibc's fork takes the stream list lock after the atfork prepare
 * handlers, and stdio calls malloc with stream locks held: getline grows
 * its line with realloc while it holds its stream, and fflush(NULL) holds
 * the list while it waits for each stream. An allocator whose fork handler
 * takes its lock before the list closes a cycle (fork: allocator, list;
 * fflush: list, stream; getline: stream, allocator) that glibc alone does
 * not have. The first test builds that cycle on purpose, the second races
 * fork against busy streams at random. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "stress.h"

#define CHILD_SECONDS 20

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* write() all of buf; no stdio, no malloc. */
static int put(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- the cycle, built on purpose ---- */

/* 60 000 bytes first: getline's buffer stays below the threshold; the
 * megabyte that follows makes it realloc into a hugezero block. */
#define HEAD_BYTES 60000
#define TAIL_BYTES (1 << 20)

static char filler[TAIL_BYTES];

struct cycle {
	int pipe[2];
	FILE *in;
	ssize_t got;
	pid_t reader_tid, flusher_tid; /* 0 until the thread runs */
	int flushed;
	int forking; /* set by main right before fork */
};

static void *cycle_reader(void *arg)
{
	struct cycle *c = arg;
	char *line = NULL;
	size_t n = 0;

	__atomic_store_n(&c->reader_tid, gettid(), __ATOMIC_RELEASE);
	c->got = getline(&line, &n, c->in); /* holds in's lock while read() waits */
	free(line);
	return NULL;
}

static void *cycle_flusher(void *arg)
{
	struct cycle *c = arg;

	__atomic_store_n(&c->flusher_tid, gettid(), __ATOMIC_RELEASE);
	fflush(NULL); /* holds the list, waits for in's lock */
	__atomic_store_n(&c->flushed, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *cycle_feeder(void *arg)
{
	struct cycle *c = arg;

	/* Main blocked in fork (behind fflush(NULL), behind getline). */
	while (!__atomic_load_n(&c->forking, __ATOMIC_ACQUIRE))
		nap_us(100);
	nap_us(1000);
	stress_wait_blocked(getpid(), 2000);
	if (put(c->pipe[1], filler, TAIL_BYTES) != 0 || put(c->pipe[1], "\n", 1) != 0)
		abort();
	return NULL;
}

static void fork_while_fflush_waits_for_a_growing_getline(void **state)
{
	unsigned rounds = (unsigned)stress_env("HZ_STDIO_ROUNDS", 3), raced = 0;

	(void)state;
	memset(filler, 'x', sizeof(filler));
	fflush(NULL);
	for (unsigned r = 0; r < rounds; r++) {
		struct cycle c = { .got = 0 };
		pthread_t reader, flusher, feeder;
		unsigned slot = stress_child_slot();
		pid_t pid;

		assert_int_equal(pipe(c.pipe), 0);
		c.in = fdopen(c.pipe[0], "r");
		assert_non_null(c.in);
		assert_int_equal(put(c.pipe[1], filler, HEAD_BYTES), 0);
		stress_phase(20, "stdio cycle round %u: getline and fflush(NULL) set up", r + 1);
		/* getline blocked in read(), holding its stream; then
		 * fflush(NULL) blocked on that stream, holding the list. */
		assert_int_equal(pthread_create(&reader, NULL, cycle_reader, &c), 0);
		while (__atomic_load_n(&c.reader_tid, __ATOMIC_ACQUIRE) == 0)
			nap_us(100);
		stress_wait_blocked(c.reader_tid, 2000);
		assert_int_equal(pthread_create(&flusher, NULL, cycle_flusher, &c), 0);
		while (__atomic_load_n(&c.flusher_tid, __ATOMIC_ACQUIRE) == 0)
			nap_us(100);
		stress_wait_blocked(c.flusher_tid, 2000);
		if (!__atomic_load_n(&c.flushed, __ATOMIC_ACQUIRE))
			raced++; /* fflush(NULL) does wait behind getline */
		assert_int_equal(pthread_create(&feeder, NULL, cycle_feeder, &c), 0);
		stress_phase(20, "stdio cycle round %u: fork while fflush(NULL) waits for "
			     "a getline that grows past the threshold", r + 1);
		__atomic_store_n(&c.forking, 1, __ATOMIC_RELEASE);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(stress_child_work(slot));
		stress_child_track(pid, slot);
		stress_phase(20, "stdio cycle round %u: joining getline and fflush(NULL)", r + 1);
		pthread_join(feeder, NULL);
		pthread_join(reader, NULL);
		pthread_join(flusher, NULL);
		stress_phase_end();
		assert_int_equal(stress_child_reap(pid, slot, CHILD_SECONDS, "stdio cycle"), 0);
		assert_int_equal(c.got, HEAD_BYTES + TAIL_BYTES + 1);
		fclose(c.in);
		close(c.pipe[1]);
	}
	printf("fflush(NULL) was waiting behind getline in %u of %u rounds\n", raced, rounds);
	/* Otherwise the cycle was never built and the test proved nothing. */
	assert_true(raced > 0);
}

/* ---- fork against busy streams ---- */

static int storm_stop;
static unsigned storm_errors;

static void storm_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void storm_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	__atomic_add_fetch(&storm_errors, 1, __ATOMIC_RELAXED);
}

static bool stopping(void)
{
	return __atomic_load_n(&storm_stop, __ATOMIC_ACQUIRE);
}

/* Lines of 1 KiB .. 768 KiB, each of one letter: "<len>:<letters>\n". The
 * naps keep the stream threads to about a core in all, so forks and
 * children get CPU time on a 2-core machine. */
static void *storm_feeder(void *arg)
{
	int fd = *(int *)arg;
	struct stress_rng r = { 77 };
	char head[32];

	while (!stopping()) {
		size_t len = 1024 + stress_next(&r) % (768 * KiB);
		char letter = (char)('a' + len % 26);
		int n = snprintf(head, sizeof(head), "%zu:", len);

		memset(filler, letter, sizeof(filler));
		if (put(fd, head, (size_t)n) != 0)
			break;
		for (size_t done = 0; done < len;) {
			size_t k = len - done < sizeof(filler) ? len - done : sizeof(filler);

			if (put(fd, filler, k) != 0)
				return NULL;
			done += k;
		}
		if (put(fd, "\n", 1) != 0)
			break;
		nap_us(1000);
	}
	close(fd);
	return NULL;
}

static void *storm_reader(void *arg)
{
	FILE *in = arg;
	char *line = NULL;
	size_t n = 0;
	ssize_t got;

	while ((got = getline(&line, &n, in)) > 0) {
		char *colon = strchr(line, ':');
		size_t len = strtoul(line, NULL, 10);

		if (colon == NULL || (size_t)got != (size_t)(colon - line) + 1 + len + 1 ||
		    colon[1] != colon[len] || colon[len + 1] != '\n')
			storm_error("stdio storm: bad line of %zd bytes\n", got);
	}
	free(line);
	return NULL;
}

static void *storm_flusher(void *arg)
{
	(void)arg;
	while (!stopping()) {
		fflush(NULL);
		nap_us(1000);
	}
	return NULL;
}

/* A memory stream grown past the threshold (realloc under the stream's
 * lock), then checked. */
static int memstream_round(unsigned seed)
{
	static const char format[] = "%08u line of a memory stream\n";
	unsigned lines = 10000 + seed % 10000; /* 330-660 KB */
	size_t len = 0, line_len = (size_t)snprintf(NULL, 0, format, 0u);
	char *buf = NULL, last[64];
	FILE *f = open_memstream(&buf, &len);
	int ret = 0;

	if (f == NULL)
		return -1;
	for (unsigned i = 0; i < lines; i++)
		fprintf(f, format, i);
	snprintf(last, sizeof(last), format, lines - 1);
	if (fclose(f) != 0 || len != lines * line_len ||
	    memcmp(buf + len - line_len, last, line_len) != 0)
		ret = -1;
	free(buf);
	return ret;
}

static void *storm_writer(void *arg)
{
	(void)arg;
	for (unsigned i = 0; !stopping(); i++) {
		FILE *null = fopen("/dev/null", "w");

		if (memstream_round(i) != 0)
			storm_error("stdio storm: memory stream wrong\n");
		if (null == NULL) {
			storm_error("stdio storm: fopen /dev/null failed\n");
			continue;
		}
		for (unsigned j = 0; j < 1000; j++)
			fprintf(null, "%u %u\n", i, j);
		fclose(null);
		nap_us(1000);
	}
	return NULL;
}

static void stdio_child(unsigned slot)
{
	FILE *null;
	int rc;

	stress_child_step(slot, "memory stream");
	if (memstream_round(slot) != 0)
		_exit(20);
	stress_child_step(slot, "fopen /dev/null");
	null = fopen("/dev/null", "w");
	if (null == NULL || fprintf(null, "child %u\n", slot) < 0 || fclose(null) != 0)
		_exit(21);
	rc = stress_child_work(slot);
	/* _exit: streams other threads were using may be half-updated here. */
	_exit(rc);
}

static void fork_storm_races_busy_streams(void **state)
{
	unsigned forks = (unsigned)stress_env("HZ_STDIO_FORKS", 200), bad = 0;
	pthread_t feeder, reader, flusher, writers[2];
	int p[2];
	FILE *in;

	(void)state;
	fflush(NULL);
	assert_int_equal(pipe(p), 0);
	in = fdopen(p[0], "r");
	assert_non_null(in);
	assert_int_equal(pthread_create(&feeder, NULL, storm_feeder, &p[1]), 0);
	assert_int_equal(pthread_create(&reader, NULL, storm_reader, in), 0);
	assert_int_equal(pthread_create(&flusher, NULL, storm_flusher, NULL), 0);
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&writers[i], NULL, storm_writer, NULL), 0);
	for (unsigned i = 0; i < forks && bad < 5; i++) {
		unsigned slot = stress_child_slot();
		pid_t pid;

		stress_phase(CHILD_SECONDS + 20, "stdio storm: fork %u of %u against getline, "
			     "fflush(NULL), memory streams", i + 1, forks);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			stdio_child(slot);
		stress_child_track(pid, slot);
		if (stress_child_reap(pid, slot, CHILD_SECONDS, "stdio storm") != 0)
			bad++;
	}
	stress_phase(60, "stdio storm: stopping the stream threads");
	__atomic_store_n(&storm_stop, 1, __ATOMIC_RELEASE);
	pthread_join(feeder, NULL); /* closes the pipe: the reader sees its end */
	pthread_join(reader, NULL);
	pthread_join(flusher, NULL);
	for (unsigned i = 0; i < 2; i++)
		pthread_join(writers[i], NULL);
	stress_phase_end();
	fclose(in);
	assert_int_equal(bad, 0);
	assert_int_equal(storm_errors, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(fork_while_fflush_waits_for_a_growing_getline),
		cmocka_unit_test(fork_storm_races_busy_streams),
	};

	return stress_main(all, sizeof(all) / sizeof(all[0]), NULL, NULL, argc, argv);
}
