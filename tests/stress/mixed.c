/* 16 threads, a fixed number of operations each, under the preload (and
 * without it as a glibc baseline): small, medium and large blocks from
 * malloc, calloc, posix_memalign, aligned_alloc and realloc(NULL); realloc
 * across the threshold both ways; blocks handed to another thread, which
 * checks and frees (or reallocs, or keeps) them. Every block carries a
 * stamp (stress.h) checked before it is freed, after each realloc (the
 * prefix) and when another thread receives it, so a block handed out twice,
 * moved without its data or freed into the wrong place shows; every calloc
 * is checked zero, although freed blocks are dirty. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "stress.h"

#define THREADS 16
#define SLOTS 32
#define MAILBOX 64

struct block {
	unsigned char *p;
	size_t size;
	uint64_t seed;
};

struct mailbox {
	pthread_mutex_t mutex;
	struct block items[MAILBOX];
	unsigned count;
};

struct counts {
	unsigned long ops, large, callocs, sent, received, up, down, errors;
};

struct worker {
	unsigned id;
	unsigned long ops;
	struct stress_rng rng;
	struct block slots[SLOTS];
	struct counts n;
	uint64_t next_seed;
};

static struct mailbox mailboxes[THREADS];
static struct worker workers[THREADS];
static pthread_barrier_t barrier;
static size_t threshold;

static void error(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void error(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	if (w->n.errors++ < 5) {
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
}

/* Half small, a fifth below the threshold, the rest 1-4x and 4-16x it. */
static size_t pick_size(struct stress_rng *r)
{
	uint64_t x = stress_next(r);
	size_t v = (size_t)(x >> 8);

	switch (x % 10) {
	case 0: case 1: case 2: case 3: case 4:
		return 8 + v % 4096;
	case 5: case 6:
		return 4096 + v % (threshold - 4096);
	case 7: case 8:
		return threshold + v % (3 * threshold);
	default:
		return 4 * threshold + v % (12 * threshold);
	}
}

static void *allocate(struct worker *w, size_t size)
{
	uint64_t x = stress_next(&w->rng);
	void *p = NULL;

	switch (x % 6) {
	case 0: {
		unsigned char *c = calloc(1, size);

		w->n.callocs++;
		if (c && stress_check_zero(c, size, "calloc") != 0)
			error(w, "thread %u: calloc(%zu) not zero\n", w->id, size);
		return c;
	}
	case 1: {
		size_t align = (size_t)64 << ((x >> 8) % 16); /* 64 B .. 2 MiB */

		if (posix_memalign(&p, align, size) != 0)
			return NULL;
		if ((uintptr_t)p % align)
			error(w, "thread %u: posix_memalign(%zu) gave %p\n", w->id, align, p);
		return p;
	}
	case 2: {
		size_t align = (size_t)4096 << ((x >> 8) % 10); /* 4 KiB .. 2 MiB */

		p = aligned_alloc(align, (size + align - 1) / align * align);
		if (p && (uintptr_t)p % align)
			error(w, "thread %u: aligned_alloc(%zu) gave %p\n", w->id, align, p);
		return p;
	}
	case 3:
		return realloc(NULL, size);
	default:
		return malloc(size);
	}
}

static void fill(struct worker *w, struct block *b)
{
	b->seed = ((uint64_t)w->id << 48) | w->next_seed++;
	stress_stamp(b->p, b->size, b->seed);
}

static void new_block(struct worker *w, struct block *b)
{
	b->size = pick_size(&w->rng);
	b->p = allocate(w, b->size);
	if (b->p == NULL) {
		error(w, "thread %u: no block of %zu bytes\n", w->id, b->size);
		return;
	}
	w->n.large += b->size >= threshold;
	if (malloc_usable_size(b->p) < b->size)
		error(w, "thread %u: usable size %zu < %zu\n", w->id,
		      malloc_usable_size(b->p), b->size);
	fill(w, b);
}

static void check(struct worker *w, const struct block *b, const char *what)
{
	if (stress_check(b->p, b->size, b->size, b->seed, what) != 0)
		error(w, "thread %u: %s: block of %zu bytes changed\n", w->id, what, b->size);
}

static void release(struct worker *w, struct block *b, const char *what)
{
	check(w, b, what);
	free(b->p); /* dirty: every page stamped */
	b->p = NULL;
}

/* realloc to a size on the other side of the threshold half the time. */
static void resize(struct worker *w, struct block *b)
{
	size_t old = b->size, size = pick_size(&w->rng);
	unsigned char *q;

	if ((old >= threshold) == (size >= threshold) && stress_next(&w->rng) % 2)
		size = old >= threshold ? 16 + size % (threshold / 2) : threshold + size % threshold;
	q = realloc(b->p, size);
	if (q == NULL) {
		error(w, "thread %u: realloc(%zu -> %zu) failed\n", w->id, old, size);
		return;
	}
	w->n.up += old < threshold && size >= threshold;
	w->n.down += old >= threshold && size < threshold;
	if (stress_check(q, old, size, b->seed, "realloc") != 0)
		error(w, "thread %u: realloc(%zu -> %zu) lost data\n", w->id, old, size);
	b->p = q;
	b->size = size;
	fill(w, b);
}

static bool send(struct worker *w, struct block *b)
{
	struct mailbox *m = &mailboxes[(w->id + 1 + stress_next(&w->rng) % (THREADS - 1)) % THREADS];
	bool sent = false;

	pthread_mutex_lock(&m->mutex);
	if (m->count < MAILBOX) {
		m->items[m->count++] = *b;
		sent = true;
	}
	pthread_mutex_unlock(&m->mutex);
	if (sent) {
		w->n.sent++;
		b->p = NULL;
	}
	return sent;
}

/* Blocks other threads sent: checked, then freed, resized and freed, or
 * kept in a free slot. */
static void receive(struct worker *w)
{
	struct mailbox *m = &mailboxes[w->id];
	struct block got[MAILBOX];
	unsigned n;

	pthread_mutex_lock(&m->mutex);
	n = m->count;
	memcpy(got, m->items, n * sizeof(got[0]));
	m->count = 0;
	pthread_mutex_unlock(&m->mutex);
	for (unsigned i = 0; i < n; i++) {
		struct block *b = &got[i], *slot = &w->slots[stress_next(&w->rng) % SLOTS];

		w->n.received++;
		check(w, b, "received");
		if (slot->p == NULL && i % 2) {
			*slot = *b;
			continue;
		}
		if (i % 3 == 0)
			resize(w, b);
		release(w, b, "received");
	}
}

static void one_op(struct worker *w)
{
	struct block *b = &w->slots[stress_next(&w->rng) % SLOTS];
	uint64_t x = stress_next(&w->rng);

	if (b->p == NULL) {
		new_block(w, b);
		return;
	}
	switch (x % 8) {
	case 0: case 1: case 2:
		release(w, b, "free");
		break;
	case 3: case 4:
		resize(w, b);
		break;
	case 5: case 6:
		if (!send(w, b))
			release(w, b, "free");
		break;
	default:
		check(w, b, "kept");
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (unsigned long i = 0; i < w->ops; i++) {
		one_op(w);
		if (i % 16 == 0)
			receive(w);
		w->n.ops++;
	}
	/* Nobody sends once everyone is here. */
	pthread_barrier_wait(&barrier);
	receive(w);
	for (unsigned i = 0; i < SLOTS; i++)
		if (w->slots[i].p)
			release(w, &w->slots[i], "final free");
	return NULL;
}

static void sum(struct counts *total, const struct counts *c)
{
	total->ops += c->ops;
	total->large += c->large;
	total->callocs += c->callocs;
	total->sent += c->sent;
	total->received += c->received;
	total->up += c->up;
	total->down += c->down;
	total->errors += c->errors;
}

static void sixteen_threads_mixed_sizes_cross_thread_frees(void **state)
{
	unsigned long ops = stress_env("HZ_OPS", 20000);
	struct counts total = { 0 };
	pthread_t threads[THREADS];
	struct timespec a, b;

	(void)state;
	threshold = stress_threshold();
	assert_int_equal(pthread_barrier_init(&barrier, NULL, THREADS), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	stress_phase(240, "16 threads x %lu mixed operations", ops);
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_mutex_init(&mailboxes[i].mutex, NULL);
		workers[i] = (struct worker){ .id = i, .ops = ops, .rng = { 0x2545f4914f6cdd1dull * (i + 1) } };
		assert_int_equal(pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(threads[i], NULL);
	stress_phase_end();
	clock_gettime(CLOCK_MONOTONIC, &b);
	for (unsigned i = 0; i < THREADS; i++)
		sum(&total, &workers[i].n);
	printf("%lu operations in %.1f s: %lu large blocks, %lu callocs, %lu sent to another "
	       "thread (%lu received), realloc across the threshold %lu up, %lu down; %lu errors\n",
	       total.ops, (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9,
	       total.large, total.callocs, total.sent, total.received, total.up, total.down,
	       total.errors);
	pthread_barrier_destroy(&barrier);
	assert_int_equal(total.errors, 0);
	assert_int_equal(total.ops, ops * THREADS);
	assert_int_equal(total.sent, total.received);
	/* The mix did what it says. */
	assert_true(total.large > 0 && total.up > 0 && total.down > 0 && total.sent > 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(sixteen_threads_mixed_sizes_cross_thread_frees),
	};

	return stress_main(all, sizeof(all) / sizeof(all[0]), NULL, NULL, argc, argv);
}
