/* The recycler as a library: hz_preload_* called directly with the
 * process's own allocator as "next", so the same code the preload runs can
 * be checked under AddressSanitizer and ThreadSanitizer (the preload itself
 * cannot run under them: they interpose malloc).
 *
 * Every block's contents are shadowed: a stamp (one byte per 512 and the
 * last byte) written when it is handed out and checked when it is freed or
 * resized; freed blocks are first filled with a dirty pattern, so a calloc
 * that returns a recycled block without zeroing all of it fails. Counts
 * come from HZ_OPS and HZ_THREAD_OPS (operations, per thread for the
 * latter), options from the HUGEZERO_* variables that
 * tests/library/meson.build sets; the threshold is 256 KiB. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "blocks.h"
#include "classes.h"
#include "recycle.h"
#include "cycle.h"
#include "prim/prim.h"
#include "promote_density.h"
#include "stats.h"
#include "libc_next.h"
#include "../util.h"

/* Some tests ask for sizes no allocator can serve (realloc to SIZE_MAX),
 * which the recycler hands on to the next allocator: under Address- or
 * ThreadSanitizer, whose malloc that is, such a request fails with NULL
 * as glibc's does, instead of stopping the test (scripts/sanitize.sh's
 * options leave this one to the program). */
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#endif
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#endif

#define THRESHOLD (256 * KiB)
#define DIRTY 0xdb
#define THREADS 8
#define SLOTS 24        /* blocks one thread holds at most */
#define THREAD_SLOTS 8  /* per thread in the 8-thread test */

struct slot {
	unsigned char *p;
	size_t size;
	unsigned char seed;
};

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v ? strtol(v, NULL, 10) : def;
}

/* Mostly around the 256 KiB threshold, some below it (the next allocator's
 * blocks, which realloc moves across), some of several MiB. */
static size_t pick_size(struct hz_test_rng *r)
{
	uint64_t x = hz_test_rng_next(r);

	switch (x % 16) {
	case 0:
		return 2 * MiB + (x >> 8) % (6 * MiB);
	case 1:
		return 1 + (x >> 8) % (64 * KiB);
	case 2:
		return THRESHOLD - 2 + (x >> 8) % 4; /* both sides of the edge */
	default:
		return 192 * KiB + (x >> 8) % (512 * KiB);
	}
}

/* Make the compiler keep stores to p: it may drop a memset into memory
 * that is freed right after. */
static void escape(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

static const unsigned char zero_page[4096];

static void assert_zero(const unsigned char *p, size_t n, const char *what)
{
	for (size_t off = 0; off < n; off += sizeof(zero_page)) {
		size_t len = n - off < sizeof(zero_page) ? n - off : sizeof(zero_page);

		if (memcmp(p + off, zero_page, len) != 0)
			fail_msg("%s of %zu bytes at %p: non-zero byte near offset %zu",
				 what, n, (void *)p, off);
	}
}

static void stamp(const struct slot *s)
{
	if (s->size == 0)
		return;
	for (size_t i = 0; i < s->size - 1; i += 512)
		s->p[i] = (unsigned char)(s->seed + i / 512);
	s->p[s->size - 1] = s->seed;
}

/* Is s's stamp intact in its first upto bytes? */
static bool stamped(const struct slot *s, size_t upto)
{
	if (s->size == 0)
		return true;
	for (size_t i = 0; i < upto && i < s->size - 1; i += 512)
		if (s->p[i] != (unsigned char)(s->seed + i / 512))
			return false;
	return upto < s->size || s->p[s->size - 1] == s->seed;
}

/* Large requests are hugezero's blocks, small ones the next allocator's:
 * otherwise the test would not be testing the recycler at all. */
static void check_owner(const void *p, size_t size, const char *what)
{
	if (hz_blocks_owns(p) != (size >= THRESHOLD))
		fail_msg("%s(%zu) = %p is %s hugezero block", what, size, p,
			 hz_blocks_owns(p) ? "a" : "not a");
	if (hz_preload_malloc_usable_size((void *)p) < size)
		fail_msg("%s(%zu): usable size %zu", what, size,
			 hz_preload_malloc_usable_size((void *)p));
}

static void release(struct slot *s)
{
	if (!stamped(s, s->size))
		fail_msg("block %p (%zu bytes) changed while live: handed out twice?",
			 (void *)s->p, s->size);
	memset(s->p, DIRTY, s->size);
	escape(s->p);
	hz_preload_free(s->p);
	s->p = NULL;
}

static void resize(struct slot *s, size_t size)
{
	size_t keep = size < s->size ? size : s->size;
	unsigned char *q = hz_preload_realloc(s->p, size);

	if (q == NULL)
		fail_msg("realloc(%p, %zu) failed", (void *)s->p, size);
	s->p = q;
	if (!stamped(&(struct slot){ q, s->size, s->seed }, keep))
		fail_msg("realloc %zu -> %zu lost data", s->size, size);
	check_owner(q, size, "realloc");
	s->size = size;
	stamp(s);
}

/* A new block for an empty slot, through one of the entry points; returns
 * the entry point's name. */
static const char *fill(struct slot *s, struct hz_test_rng *r, uint64_t op)
{
	void *p = NULL;
	const char *what;

	s->size = pick_size(r);
	s->seed = (unsigned char)hz_test_rng_next(r);
	if (op % 4 == 1) {
		what = "calloc";
		p = hz_preload_calloc(1, s->size);
		if (p)
			assert_zero(p, s->size, "calloc");
	} else if (op % 4 == 2) {
		size_t align = (size_t)8 << (hz_test_rng_next(r) % 20); /* 8 B .. 4 MiB */

		what = "posix_memalign";
		if (hz_preload_posix_memalign(&p, align, s->size) != 0)
			p = NULL;
		if (p && (uintptr_t)p % align != 0)
			fail_msg("posix_memalign(%zu, %zu) = %p", align, s->size, p);
	} else {
		what = "malloc";
		p = hz_preload_malloc(s->size);
	}
	if (p == NULL)
		fail_msg("%s(%zu) failed", what, s->size);
	s->p = p;
	check_owner(p, s->size, what);
	return what;
}

/* Does [p, p + size) overlap another live block of slots? */
static void check_alone(const struct slot *slots, unsigned n, const struct slot *s)
{
	uintptr_t a = (uintptr_t)s->p, b = a + s->size;

	for (unsigned i = 0; i < n; i++) {
		uintptr_t c = (uintptr_t)slots[i].p, d = c + slots[i].size;

		if (&slots[i] != s && slots[i].p && a < d && c < b)
			fail_msg("block %p (%zu bytes) overlaps live block %p (%zu bytes)",
				 (void *)s->p, s->size, (void *)slots[i].p, slots[i].size);
	}
}

static void single_thread_sequence_keeps_contents(void **state)
{
	long ops = env_long("HZ_OPS", 20000);
	struct slot slots[SLOTS] = { { 0 } };
	struct hz_test_rng r = { 0x2545f4914f6cdd1dull };
	uint64_t hits0 = __atomic_load_n(&hz_stats.cache_hits, __ATOMIC_RELAXED);

	(void)state;
	for (long i = 0; i < ops; i++) {
		struct slot *s = &slots[hz_test_rng_next(&r) % SLOTS];
		uint64_t op = hz_test_rng_next(&r) % 8;

		if (s->p && op < 3) {
			release(s);
			continue;
		}
		if (s->p && op < 5)
			resize(s, pick_size(&r));
		else if (!s->p)
			fill(s, &r, op);
		else
			continue;
		check_alone(slots, SLOTS, s);
		stamp(s);
	}
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].p)
			release(&slots[i]);
	/* The sequence must have reused freed blocks, or it proved nothing
	 * about recycling. */
	assert_true(__atomic_load_n(&hz_stats.cache_hits, __ATOMIC_RELAXED) > hits0);
}

/* A cycle of one size whose block is rounded up past a power of two (a 3
 * MiB request gets a 4 MiB block) reuses that block: the reuse policy
 * counts the request's misses and the block's frees in one size class.
 * Counted apart, every free was given back unreused and every calloc
 * faulted a fresh block. Learning costs a fresh block or two: not more
 * than five of forty. */
#define ROUNDED_CYCLES 40

static void a_cycle_of_a_rounded_up_size_reuses_its_block(void **state)
{
	uint64_t hits0 = __atomic_load_n(&hz_stats.cache_hits, __ATOMIC_RELAXED);
	uint64_t misses0 = __atomic_load_n(&hz_stats.cache_misses, __ATOMIC_RELAXED);
	size_t size = 3 * MiB;

	(void)state;
	for (int i = 0; i < ROUNDED_CYCLES; i++) {
		unsigned char *p = hz_preload_calloc(1, size);

		assert_non_null(p);
		assert_true(hz_blocks_owns(p));
		assert_zero(p, size, "calloc in a 3 MiB cycle");
		memset(p, DIRTY, size);
		escape(p);
		hz_preload_free(p);
	}
	uint64_t misses = __atomic_load_n(&hz_stats.cache_misses, __ATOMIC_RELAXED) - misses0;
	uint64_t hits = __atomic_load_n(&hz_stats.cache_hits, __ATOMIC_RELAXED) - hits0;

	print_message("# %llu of %d callocs reused a block, %llu fresh\n",
		      (unsigned long long)hits, ROUNDED_CYCLES, (unsigned long long)misses);
	assert_true(misses <= 5);
	assert_true(hits >= ROUNDED_CYCLES - 5);
}

/* Bytes of fresh memory mapped for blocks so far, of every backing. */
static uint64_t fresh_bytes(void)
{
	uint64_t sum = 0;

	for (int b = 0; b < HZ_BACKING_COUNT; b++)
		sum += __atomic_load_n(&hz_stats.bytes[b], __ATOMIC_RELAXED);
	return sum;
}

/* Whether the mapping holding p has flag (" nh": MADV_NOHUGEPAGE, " hg":
 * MADV_HUGEPAGE) in its VmFlags; fails the test when smaps cannot say. */
static bool mapping_has(const void *p, const char *flag)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false, has = false, found = false;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line */
			in = lo <= (uintptr_t)p && (uintptr_t)p < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			has = strstr(line, flag) != NULL;
			found = true;
		}
	}
	fclose(f);
	if (!found)
		fail_msg("no VmFlags for %p in /proc/self/smaps", p);
	return has;
}

/* A request no kept block fits takes the largest smaller one as its front,
 * and only the rest is fresh: kept beside a fresh block, it held memory
 * the program might never ask for at its size again. The front of a
 * calloc reads zero like the rest. Run with every freed block kept
 * (HUGEZERO_CACHE_ADAPT=0) and calloc zeroing for itself
 * (HUGEZERO_PREZERO=sync), so the kept block waits in the table. */
static void a_miss_grows_the_largest_smaller_kept_block(void **state)
{
	uint64_t grown0 = __atomic_load_n(&hz_stats.cache_grown, __ATOMIC_RELAXED), fresh;
	/* The block between keeps the two kept ones apart: adjacent, the
	 * table would merge them. */
	unsigned char *small = hz_preload_malloc(2 * MiB), *between = hz_preload_malloc(2 * MiB);
	unsigned char *p = hz_preload_malloc(6 * MiB), *q;

	(void)state;
	assert_non_null(small);
	assert_non_null(between);
	assert_non_null(p);
	memset(small, DIRTY, 2 * MiB);
	memset(p, DIRTY, 6 * MiB);
	escape(small);
	escape(p);
	hz_preload_free(small);
	hz_preload_free(p);
	fresh = fresh_bytes();
	q = hz_preload_calloc(1, 10 * MiB);
	assert_non_null(q);
	assert_int_equal(__atomic_load_n(&hz_stats.cache_grown, __ATOMIC_RELAXED), grown0 + 1);
	assert_int_equal(fresh_bytes() - fresh, 4 * MiB); /* 6 MiB kept, not 2 */
	assert_zero(q, 10 * MiB, "calloc grown from a dirty kept block");
	memset(q, DIRTY, 10 * MiB);
	escape(q);
	hz_preload_free(q);

	/* malloc too, and the block is whole: its free keeps all of it. */
	fresh = fresh_bytes();
	q = hz_preload_malloc(16 * MiB);
	assert_non_null(q);
	assert_int_equal(__atomic_load_n(&hz_stats.cache_grown, __ATOMIC_RELAXED), grown0 + 2);
	assert_int_equal(fresh_bytes() - fresh, 6 * MiB);
	assert_true(hz_preload_malloc_usable_size(q) >= 16 * MiB);
	memset(q, 1, 16 * MiB);
	escape(q);
	hz_preload_free(q);
	hz_preload_free(between);
}

/* A calloc served by a larger dirty block clears the bytes it asked for,
 * in whole pages, not the whole block: glibc's calloc clears as much.
 * 4 MiB + 4 KiB gets a 6 MiB block, whose last 2 MiB - 4 KiB keep what
 * the last owner wrote. Run as library_grow_kept is, so the block waits
 * dirty in the table and this call clears it. */
static void a_calloc_clears_only_what_it_asked_for(void **state)
{
	const size_t size = 4 * MiB + 4 * KiB + 100, asked = 4 * MiB + 8 * KiB;
	uint64_t cleared0;
	unsigned char *p = hz_preload_malloc(6 * MiB), *q;

	(void)state;
	assert_non_null(p);
	memset(p, DIRTY, 6 * MiB);
	escape(p);
	hz_preload_free(p);
	cleared0 = __atomic_load_n(&hz_stats.cleared_bytes, __ATOMIC_RELAXED);
	q = hz_preload_calloc(1, size);
	assert_ptr_equal(q, p); /* the kept block, dirty */
	assert_zero(q, size, "calloc of a dirty kept block larger than asked");
	assert_int_equal(__atomic_load_n(&hz_stats.cleared_bytes, __ATOMIC_RELAXED) - cleared0,
			 asked);
	assert_int_equal(q[asked], DIRTY); /* past the pages asked for: as it was */
	assert_int_equal(q[6 * MiB - 1], DIRTY);
	memset(q, 1, 6 * MiB); /* the whole usable size is the program's */
	escape(q);
	hz_preload_free(q);
}

/* A request served by a larger kept span puts the rest back in the table;
 * a realloc that grows the block then claims that rest in place, its
 * pages kept, instead of moving the block to fresh memory. Run as
 * library_grow_kept is, so the rest waits in the table. */
static void a_realloc_grows_into_the_kept_span_after_it(void **state)
{
	uint64_t moved0 = __atomic_load_n(&hz_stats.realloc_moved, __ATOMIC_RELAXED);
	uint64_t in_place0 = __atomic_load_n(&hz_stats.realloc_in_place, __ATOMIC_RELAXED);
	unsigned char *p = hz_preload_malloc(8 * MiB), *q, *r;
	uint64_t fresh;

	(void)state;
	assert_non_null(p);
	memset(p, DIRTY, 8 * MiB);
	escape(p);
	hz_preload_free(p);
	q = hz_preload_malloc(5 * MiB); /* 6 MiB of the kept 8: 2 MiB go back */
	assert_ptr_equal(q, p);
	assert_int_equal(__atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED), 2 * MiB);
	for (size_t off = 0; off < 5 * MiB; off += 4096)
		q[off] = (unsigned char)(off >> 12);
	fresh = fresh_bytes();
	r = hz_preload_realloc(q, 8 * MiB);
	assert_ptr_equal(r, q);
	assert_int_equal(__atomic_load_n(&hz_stats.realloc_in_place, __ATOMIC_RELAXED),
			 in_place0 + 1);
	assert_int_equal(__atomic_load_n(&hz_stats.realloc_moved, __ATOMIC_RELAXED), moved0);
	assert_int_equal(fresh_bytes(), fresh); /* no new memory */
	assert_int_equal(__atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED), 0);
	assert_true(hz_preload_malloc_usable_size(r) >= 8 * MiB);
	for (size_t off = 0; off < 5 * MiB; off += 4096)
		if (r[off] != (unsigned char)(off >> 12))
			fail_msg("realloc into the kept span lost the byte at %zu", off);
	memset(r, 1, 8 * MiB);
	escape(r);
	hz_preload_free(r); /* the whole block is kept again */
	assert_int_equal(__atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED), 8 * MiB);
}

/* A realloc whose block is followed by a live one moves the block onto
 * the front of a kept span that holds the new size: the span's tail keeps
 * its pages (they still hold what its last owner wrote), no fresh memory
 * is mapped, and the wasteful rest of the span stays in the table. Run as
 * library_grow_kept is. */
static void a_realloc_moves_onto_a_kept_span_that_fits(void **state)
{
	uint64_t moved0 = __atomic_load_n(&hz_stats.realloc_moved, __ATOMIC_RELAXED), fresh;
	unsigned char *q = hz_preload_malloc(4 * MiB), *guard = hz_preload_malloc(2 * MiB);
	unsigned char *kept = hz_preload_malloc(10 * MiB), *r;

	(void)state;
	assert_non_null(q);
	assert_non_null(guard);
	assert_non_null(kept);
	if (guard != q + 4 * MiB)
		fail_msg("the test's layout: the 2 MiB block is at %p, not right after %p",
			 (void *)guard, (void *)q);
	memset(kept, DIRTY, 10 * MiB);
	escape(kept);
	hz_preload_free(kept);
	for (size_t off = 0; off < 4 * MiB; off += 4096)
		q[off] = (unsigned char)(off >> 12);
	fresh = fresh_bytes();
	r = hz_preload_realloc(q, 8 * MiB);
	assert_ptr_equal(r, kept);
	assert_int_equal(__atomic_load_n(&hz_stats.realloc_moved, __ATOMIC_RELAXED), moved0 + 1);
	assert_int_equal(fresh_bytes(), fresh);
	assert_int_equal(__atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED), 2 * MiB);
	for (size_t off = 0; off < 4 * MiB; off += 4096)
		if (r[off] != (unsigned char)(off >> 12))
			fail_msg("the moved block lost the byte at %zu", off);
	assert_int_equal(r[6 * MiB], DIRTY); /* the span's tail kept its pages */
	memset(r, 1, 8 * MiB);
	escape(r);
	/* A size no block can have fails, block and table unchanged (rounded
	 * up to granules it would wrap to one the kept span fits). */
	errno = 0;
	assert_null(hz_preload_realloc(r, SIZE_MAX));
	assert_int_equal(errno, ENOMEM);
	assert_null(hz_preload_realloc(r, SIZE_MAX - 4 * MiB));
	assert_int_equal(__atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED), 2 * MiB);
	assert_true(hz_preload_malloc_usable_size(r) >= 8 * MiB);
	assert_int_equal(r[8 * MiB - 1], 1);
	q = hz_preload_malloc(2 * MiB); /* the kept rest, whole */
	assert_ptr_equal(q, r + 8 * MiB);
	hz_preload_free(q);
	hz_preload_free(r);
	hz_preload_free(guard);
}

static unsigned char *written(size_t size, int byte)
{
	unsigned char *p = hz_preload_malloc(size);

	assert_non_null(p);
	memset(p, byte, size);
	escape(p);
	return p;
}

/* A realloc to a size no block can have fails and leaves the table as it
 * was. Rounded up to granules such a size wraps to one every kept span
 * fits: the realloc took a span, split off an empty front, and put that
 * back; beside a lazily freed rest it could not merge, and a later miss
 * handed the empty span out, which stopped the program. The kept span is
 * made lazy by the thread once idle a second (HZ_UNREUSED_NS). */
static void a_realloc_too_large_leaves_the_table_whole(void **state)
{
	uint64_t lazy0;
	unsigned char *a, *g, *b, *g2, *c, *d;

	(void)state;
	for (int i = 0; i < 6; i++) /* a class that shows reuse: the thread runs */
		hz_preload_free(written(10 * MiB, 9));
	a = written(4 * MiB, 1);
	g = written(2 * MiB, 1);
	b = written(10 * MiB, 2);
	g2 = written(2 * MiB, 1);
	lazy0 = __atomic_load_n(&hz_stats.cache_lazy_bytes, __ATOMIC_RELAXED);
	hz_preload_free(b);
	for (int ms = 0; ms < 5000 && __atomic_load_n(&hz_stats.cache_lazy_bytes,
						      __ATOMIC_RELAXED) == lazy0; ms += 10)
		hz_prim_sleep_ns(10 * 1000 * 1000);
	if (__atomic_load_n(&hz_stats.cache_lazy_bytes, __ATOMIC_RELAXED) == lazy0) {
		print_message("[  SKIP    ] the kept block was not made lazy within 5 s\n");
		skip();
	}
	errno = 0;
	assert_null(hz_preload_realloc(a, SIZE_MAX));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(a[4 * MiB - 1], 1);
	c = written(10 * MiB, 3);
	d = written(20 * MiB, 4); /* a miss: grown from the largest smaller span */
	hz_preload_free(c);
	hz_preload_free(d);
	hz_preload_free(written(40 * MiB, 5));
	hz_preload_free(a);
	hz_preload_free(g);
	hz_preload_free(g2);
}

/* The earlier peak leaves room for the calloc's block only where the
 * process holds little besides its blocks: ThreadSanitizer's shadow
 * memory, resident beside every byte written, is the process's memory too
 * (CI's ThreadSanitizer run held more than the earlier peak). */
static void need_room_below(uint64_t bytes)
{
	uint64_t rss;

	assert_int_equal(hz_prim_resident(&rss), 0);
	if (rss > bytes) {
		print_message("[  SKIP    ] the process holds %llu MiB now (a sanitizer's shadow "
			      "memory?), more than the %llu MiB the test's earlier peak leaves "
			      "room for\n",
			      (unsigned long long)(rss / MiB), (unsigned long long)(bytes / MiB));
		skip();
	}
}

/* The cache never takes the process past the most it held without it
 * (cache_policy.c, "the program's own peak"). A kept 32 MiB block, then a
 * 96 MiB calloc that it cannot serve: it is dirty, and no thread clears
 * it (HUGEZERO_PREZERO=off). Under glibc the program's peak would be the
 * calloc's block, so the kept one goes before that block is mapped;
 * after the program held 288 MiB, it stays. The kept block's size shows
 * reuse first: a block of a size that shows none goes at any miss. Returns
 * the bytes still cached once the calloc's block is mapped. */
static uint64_t kept_beside_a_calloc(size_t held_before)
{
	unsigned char *before = NULL, *a = NULL, *b;
	uint64_t kept;

	if (held_before > 0) {
		before = hz_preload_malloc(held_before);
		assert_non_null(before);
		memset(before, DIRTY, held_before);
		escape(before);
	}
	for (int reuse = 0; reuse < 2; reuse++) {
		if (reuse > 0)
			hz_preload_free(a);
		a = hz_preload_malloc(32 * MiB);
		assert_non_null(a);
		memset(a, DIRTY, 32 * MiB);
		escape(a);
	}
	if (before != NULL)
		hz_preload_free(before); /* a size that shows no reuse: given back */
	hz_preload_free(a);
	assert_int_equal(__atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED), 32 * MiB);
	if (held_before > 0)
		need_room_below(held_before + 32 * MiB - 96 * MiB);
	b = hz_preload_calloc(1, 96 * MiB);
	assert_non_null(b);
	kept = __atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED);
	hz_preload_free(b);
	return kept;
}

static void a_kept_block_goes_before_a_new_peak(void **state)
{
	uint64_t dropped = __atomic_load_n(&hz_stats.cache_peak_bytes, __ATOMIC_RELAXED);

	(void)state;
	assert_int_equal(kept_beside_a_calloc(0), 0);
	assert_int_equal(__atomic_load_n(&hz_stats.cache_peak_bytes, __ATOMIC_RELAXED) - dropped,
			 32 * MiB);
}

static void a_kept_block_stays_below_an_earlier_peak(void **state)
{
	(void)state;
	assert_int_equal(kept_beside_a_calloc(256 * MiB), 32 * MiB);
	assert_int_equal(__atomic_load_n(&hz_stats.cache_peak_bytes, __ATOMIC_RELAXED), 0);
}

/* The grown tail of a block started on 4 KiB pages (lazily) is fresh
 * memory. After a front written densely (a vector grown when full) it
 * takes THP at once, up to 64 MiB of it (HZ_GUESS_MAX); after a sparse
 * one, or larger, it starts as a fresh block does, lazily. None is
 * advised MADV_NOHUGEPAGE, which would keep it on 4 KiB pages for good.
 * Fresh THP counts as fast here (HUGEZERO_THP_CHECK=0), each block is
 * fresh, and its class holds no evidence. */
/* Whether the last front read dense, as the library judges it, and
 * whether its tail was mapped THP at once (a THP mapping more: VmFlags
 * cannot show it under qemu-user, which ignores madvise). */
static bool front_read_dense, tail_thp;

static unsigned char *grown_after(size_t stride, size_t to)
{
	uint16_t resident[2];
	unsigned char *p, *q;
	uint64_t thp;

	hz_recycle_trim(); /* fresh blocks, not kept ones */
	hz_class_note_dense(4 * MiB, false);
	hz_class_note_dense(to, false);
	p = hz_preload_malloc(4 * MiB);
	assert_non_null(p);
	assert_false(mapping_has(p, " hg")); /* lazy: no evidence for the class */
	for (size_t off = 0; off < 4 * MiB; off += stride)
		p[off] = 1;
	escape(p);
	front_read_dense = hz_promote_used((uintptr_t)p, 4 * MiB, resident, 2) == HZ_FRONT_DENSE;
	thp = __atomic_load_n(&hz_stats.blocks[HZ_BACKING_THP], __ATOMIC_RELAXED);
	q = hz_preload_realloc(p, to);
	tail_thp = __atomic_load_n(&hz_stats.blocks[HZ_BACKING_THP], __ATOMIC_RELAXED) > thp;
	assert_non_null(q);
	assert_true(q[4 * MiB - stride] == 1);
	assert_false(mapping_has(q + to - 1, " nh"));
	return q;
}

static void a_grown_tail_follows_its_front(void **state)
{
	unsigned char *q;

	(void)state;
	if (!hz_backing_lazy()) {
		print_message("[  SKIP    ] blocks do not start lazily here (THP not in madvise mode, "
			      "or unusable)\n");
		skip();
	}
	setenv("HUGEZERO_THP_CHECK", "0", 1);
	hz_options_reload();
	q = grown_after(MiB, 8 * MiB); /* a byte per MiB: sparse */
	assert_false(tail_thp);
	assert_false(mapping_has(q + 8 * MiB - 1, " hg"));
	hz_preload_free(q);
	q = grown_after(1, 8 * MiB); /* every byte: dense */
	if (!front_read_dense) { /* qemu-user: no PAGEMAP_SCAN, residency unread */
		hz_preload_free(q);
		unsetenv("HUGEZERO_THP_CHECK");
		hz_options_reload();
		print_message("[  SKIP    ] a front's residency cannot be read here, so none is "
			      "judged dense\n");
		skip();
	}
	assert_true(tail_thp);
	hz_preload_free(q);
	q = grown_after(1, 4 * MiB + HZ_GUESS_MAX + 2 * MiB); /* dense, but too large a guess */
	assert_false(tail_thp);
	assert_false(mapping_has(q + 4 * MiB + HZ_GUESS_MAX, " hg"));
	hz_preload_free(q);
	unsetenv("HUGEZERO_THP_CHECK");
	hz_options_reload();
}

/* calloc 64 MiB, write its first byte, free, and again at once, in a
 * program with threads (whose frees wake the pre-zero thread, as a
 * single-threaded one's do only once its class shows reuse). The thread
 * woken at each free came too late to clear anything, and the wake cost
 * the cycle more than the calloc's own clear of the page. Once the
 * class's callocs come right after its frees (HZ_CYCLE_AT_ONCE, cycle.h),
 * a free leaves the thread asleep: after the first FIRST_BYTE_LEARN
 * cycles, all but 2 of the rest.
 *
 * "Right after" is a time, HZ_THREAD_WAKE_NS, and a free plus the
 * next calloc can take longer than that on a slow CPU (qemu-user: CI once
 * saw 12 of 20), or when either is preempted. The library counts each
 * calloc that came later by its own clock (callocs_late): one may break
 * the class's run, and the next HZ_CYCLE_RUN frees wake the thread.
 * Those are allowed for; past half the frees the rule cannot be seen,
 * and the test skips. (Timing the cycle here instead missed a calloc
 * preempted between its call and its pick.) */
#define FIRST_BYTE_CYCLES 30
#define FIRST_BYTE_LEARN 10

static void *no_work(void *arg)
{
	return arg;
}

static void a_first_byte_cycle_leaves_the_thread_asleep(void **state)
{
	const size_t size = 64 * MiB;
	const int rest = FIRST_BYTE_CYCLES - FIRST_BYTE_LEARN;
	uint64_t skipped0 = 0, skipped, late0, late;
	int expected;
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, no_work, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	late0 = __atomic_load_n(&hz_stats.callocs_late, __ATOMIC_RELAXED);
	for (int i = 0; i < FIRST_BYTE_CYCLES; i++) {
		unsigned char *p;

		if (i == FIRST_BYTE_LEARN)
			skipped0 = __atomic_load_n(&hz_stats.wakes_skipped, __ATOMIC_RELAXED);
		p = hz_preload_calloc(1, size);
		assert_non_null(p);
		assert_int_equal(p[0], 0);
		p[0] = DIRTY;
		escape(p);
		hz_preload_free(p);
	}
	skipped = __atomic_load_n(&hz_stats.wakes_skipped, __ATOMIC_RELAXED) - skipped0;
	late = __atomic_load_n(&hz_stats.callocs_late, __ATOMIC_RELAXED) - late0;
	print_message("# %llu of the last %d frees left the thread asleep; %llu of %d "
		      "callocs came late\n",
		      (unsigned long long)skipped, rest, (unsigned long long)late,
		      FIRST_BYTE_CYCLES - 1);
	expected = rest - 2 - (int)late * HZ_CYCLE_RUN;
	if (expected < rest / 2) {
		print_message("[  SKIP    ] %llu callocs of %d came %d us or more after their free "
			      "(a slow or emulated CPU), too many to see the rule\n",
			      (unsigned long long)late, FIRST_BYTE_CYCLES - 1,
			      HZ_THREAD_WAKE_NS / 1000);
		skip();
	}
	assert_true(skipped >= (uint64_t)expected);
}

/* ---- 8 threads ---- */

/* Every thread's live blocks, read by all threads with relaxed atomics:
 * they give no ordering, so ThreadSanitizer still sees every race inside
 * the recycler. A slot is cleared before its block is freed and set after
 * a block is handed out; the recycler's lock orders a free before the
 * reuse, so a stale entry can only mean a block handed out twice.
 *
 * An entry is one word, its block's pages: two words (start, end) could be
 * read torn, the start of a block the owner has since freed with the end
 * of the one it holds now, a range it never held (CI once failed on one,
 * 30 MiB long, larger than any block here). Pages are exact for
 * hugezero's blocks, which are whole pages; the next allocator's small
 * blocks may share a page, so two of them are not compared. */
#define LIVE_PAGE_SHIFT 12
#define LIVE_COUNT_BITS 27 /* pages in a block: up to 512 GiB */
#define LIVE_PAGE_BITS (64 - LIVE_COUNT_BITS - 1)

static uint64_t live[THREADS][THREAD_SLOTS];

struct live_pages {
	uint64_t first, count;
	bool small;
};

static uint64_t live_word(const struct slot *s)
{
	uint64_t first = (uintptr_t)s->p >> LIVE_PAGE_SHIFT;
	uint64_t last = ((uintptr_t)s->p + s->size - 1) >> LIVE_PAGE_SHIFT;

	if (s->p == NULL || s->size == 0)
		return 0;
	if (first >> LIVE_PAGE_BITS || (last - first + 1) >> LIVE_COUNT_BITS)
		fail_msg("block %p (%zu bytes) does not fit the live table", (void *)s->p,
			 s->size);
	return first << (LIVE_COUNT_BITS + 1) | (last - first + 1) << 1 | (s->size < THRESHOLD);
}

static struct live_pages live_pages(uint64_t w)
{
	return (struct live_pages){ .first = w >> (LIVE_COUNT_BITS + 1),
				    .count = (w >> 1) & ((1ull << LIVE_COUNT_BITS) - 1),
				    .small = w & 1 };
}

static void publish(uint64_t *e, const struct slot *s)
{
	__atomic_store_n(e, live_word(s), __ATOMIC_RELAXED);
}

static void check_unshared(unsigned self, unsigned slot, const struct slot *s)
{
	struct live_pages a = live_pages(live_word(s));

	for (unsigned t = 0; t < THREADS; t++) {
		for (unsigned i = 0; i < THREAD_SLOTS; i++) {
			uint64_t w = __atomic_load_n(&live[t][i], __ATOMIC_RELAXED);
			struct live_pages b = live_pages(w);

			if ((t != self || i != slot) && w && !(a.small && b.small) &&
			    a.first < b.first + b.count && b.first < a.first + a.count)
				fail_msg("thread %u got %p (%zu bytes) while thread %u holds "
					 "pages [%#llx, %#llx)", self, (void *)s->p, s->size, t,
					 (unsigned long long)(b.first << LIVE_PAGE_SHIFT),
					 (unsigned long long)((b.first + b.count) << LIVE_PAGE_SHIFT));
		}
	}
}

struct worker {
	unsigned id;
	long ops;
};

static void worker_op(const struct worker *w, struct slot *slots, struct hz_test_rng *r)
{
	unsigned i = (unsigned)(hz_test_rng_next(r) % THREAD_SLOTS);
	struct slot *s = &slots[i];
	uint64_t op = hz_test_rng_next(r) % 8;

	if (s->p && op < 4) {
		publish(&live[w->id][i], &(struct slot){ 0 });
		release(s);
		return;
	}
	if (s->p && op < 6) {
		publish(&live[w->id][i], &(struct slot){ 0 });
		resize(s, pick_size(r));
	} else if (!s->p) {
		/* Calloc-heavy: the calloc demand keeps the pre-zero thread
		 * busy, and callocs claim spans it is zeroing. */
		fill(s, r, op % 2 ? 1 : op);
	} else {
		return;
	}
	stamp(s);
	publish(&live[w->id][i], s);
	check_unshared(w->id, i, s);
}

static void *run_worker(void *arg)
{
	const struct worker *w = arg;
	struct slot slots[THREAD_SLOTS] = { { 0 } };
	struct hz_test_rng r = { 0x9e3779b97f4a7c15ull * (w->id + 1) };

	for (long n = 0; n < w->ops; n++) {
		worker_op(w, slots, &r);
		/* SCHED_IDLE gives the pre-zero thread only idle cores: leave
		 * some, so it works while callocs arrive. */
		if (n % 16 == 15)
			usleep(100);
	}
	for (unsigned i = 0; i < THREAD_SLOTS; i++) {
		publish(&live[w->id][i], &(struct slot){ 0 });
		if (slots[i].p)
			release(&slots[i]);
	}
	return NULL;
}

static void eight_threads_race_the_prezero_thread(void **state)
{
	long ops = env_long("HZ_THREAD_OPS", 3000);
	struct worker w[THREADS];
	pthread_t t[THREADS];
	uint64_t zeroed0 = __atomic_load_n(&hz_stats.prezeroed_bytes, __ATOMIC_RELAXED);

	(void)state;
	for (unsigned i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ i, ops };
		assert_int_equal(pthread_create(&t[i], NULL, run_worker, &w[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	printf("# pre-zeroed %llu MiB, %llu callocs took a block mid-zeroing\n",
	       (unsigned long long)((__atomic_load_n(&hz_stats.prezeroed_bytes,
						     __ATOMIC_RELAXED) - zeroed0) >> 20),
	       (unsigned long long)__atomic_load_n(&hz_stats.takeovers, __ATOMIC_RELAXED));
	/* The thread must have worked alongside the callers, or there was no
	 * race to test. */
	assert_true(__atomic_load_n(&hz_stats.prezeroed_bytes, __ATOMIC_RELAXED) > zeroed0);
}

/* ---- takeover ---- */

/* A buffer freed and calloc'd again, as programs do, after pauses of 0 to
 * 3 ms: the pre-zero thread is then often part-way through it, and the
 * calloc claims it and zeroes what is left. This is the thread's one
 * lock-free hand-over, so ThreadSanitizer must see it happen. */
static void calloc_takes_over_the_block_being_prezeroed(void **state)
{
	const size_t size = 32 * MiB;
	uint64_t takeovers0 = __atomic_load_n(&hz_stats.takeovers, __ATOMIC_RELAXED);
	uint64_t takeovers;

	(void)state;
	for (int i = 0; i < 30; i++) {
		unsigned char *p = hz_preload_calloc(1, size);

		assert_non_null(p);
		assert_zero(p, size, "calloc of a block freed dirty");
		memset(p, DIRTY, size);
		escape(p);
		hz_preload_free(p);
		usleep((useconds_t)(i % 7) * 500);
	}
	takeovers = __atomic_load_n(&hz_stats.takeovers, __ATOMIC_RELAXED) - takeovers0;
	/* How often the calloc caught the thread depends on the machine's
	 * load, so it is reported, not asserted. */
	printf("# %llu of 30 callocs took the block over from the pre-zero thread\n",
	       (unsigned long long)takeovers);
}

/* ---- fork ---- */

/* The child of a fork taken while the pre-zero thread zeroes a large dirty
 * block: calloc there is zero, and a free there re-creates the thread. */
static int child_checks(size_t big)
{
	unsigned char *c = hz_preload_calloc(1, big);

	if (c == NULL)
		return 2;
	for (size_t j = 0; j < big; j += 4096)
		if (c[j] || c[j + 4095])
			return 3;
	memset(c, DIRTY, big);
	escape(c);
	hz_preload_free(c);
	c = hz_preload_calloc(1, big);
	if (c == NULL)
		return 2;
	for (size_t j = 0; j < big; j += 4096)
		if (c[j] || c[j + 4095])
			return 4;
	hz_preload_free(c);
	return 0;
}

static void fork_while_prezeroing_keeps_calloc_zero(void **state)
{
	const size_t big = 48 * MiB;

	(void)state;
	for (int i = 0; i < 10; i++) {
		unsigned char *p = hz_preload_malloc(big);
		int status;
		pid_t pid;

		assert_non_null(p);
		memset(p, DIRTY, big);
		escape(p);
		hz_preload_free(p);
		/* A calloc raises the demand for clean memory: the thread now
		 * zeroes the dirty block, and fork catches it in flight. */
		p = hz_preload_calloc(1, 4 * MiB);
		assert_non_null(p);
		hz_preload_free(p);
		usleep((useconds_t)(i * 300));
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(child_checks(big));
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		if (WEXITSTATUS(status) != 0)
			fail_msg("child %d: exit status %d (3, 4: calloc not zero)", i,
				 WEXITSTATUS(status));
		p = hz_preload_calloc(1, big);
		assert_non_null(p);
		assert_zero(p, big, "calloc in the parent after fork");
		hz_preload_free(p);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(single_thread_sequence_keeps_contents),
		cmocka_unit_test(a_cycle_of_a_rounded_up_size_reuses_its_block),
		cmocka_unit_test(a_first_byte_cycle_leaves_the_thread_asleep),
		cmocka_unit_test(eight_threads_race_the_prezero_thread),
		cmocka_unit_test(calloc_takes_over_the_block_being_prezeroed),
		cmocka_unit_test(fork_while_prezeroing_keeps_calloc_zero),
		cmocka_unit_test(a_miss_grows_the_largest_smaller_kept_block),
		cmocka_unit_test(a_calloc_clears_only_what_it_asked_for),
		cmocka_unit_test(a_realloc_grows_into_the_kept_span_after_it),
		cmocka_unit_test(a_realloc_moves_onto_a_kept_span_that_fits),
		cmocka_unit_test(a_realloc_too_large_leaves_the_table_whole),
		cmocka_unit_test(a_grown_tail_follows_its_front),
		cmocka_unit_test(a_kept_block_goes_before_a_new_peak),
		cmocka_unit_test(a_kept_block_stays_below_an_earlier_peak),
	};

	hz_test_library_options();
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(all, NULL, NULL);
}
