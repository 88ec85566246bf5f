/* Helpers shared by the jemalloc hook tests: byte checks, /proc/self/smaps
 * sums, the hugetlb pool, and a recording wrapper around hugezero's hooks in
 * the manner of jemalloc's own pass-through test harness
 * (test/include/test/extent_hooks.h): every call is logged, then forwarded,
 * and dalloc, decommit or purge_forced can be made to opt out so that
 * jemalloc takes its fallback paths through the rest of our hooks. */
#ifndef HZ_TEST_JEMALLOC_UTIL_H
#define HZ_TEST_JEMALLOC_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hugezero/jemalloc.h>

#include "../util.h"

/* Index of the first byte of [p, p + len) that is not c, or len. */
static inline size_t first_not(const void *p, size_t len, unsigned char c)
{
	const unsigned char *b = p;
	uint64_t pat = 0x0101010101010101ull * c;
	size_t i = 0;

	while (i < len && ((uintptr_t)(b + i) & 7))
		if (b[i++] != c)
			return i - 1;
	for (; i + 8 <= len; i += 8)
		if (*(const uint64_t *)(const void *)(b + i) != pat)
			break;
	for (; i < len; i++)
		if (b[i] != c)
			return i;
	return len;
}

static inline bool all_bytes(const void *p, size_t len, unsigned char c)
{
	return first_not(p, len, c) == len;
}

/* Keep stores into memory that is freed right after. */
static inline void escape(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

/* The tests run under the default options and, from tests/jemalloc/
 * meson.build, under variants; these say which promises the variant
 * changes. */
static inline bool option_set(const char *name)
{
	return getenv(name) != NULL && getenv(name)[0] != '\0';
}

/* Freed extents stay dirty in hugezero's cache (not purged or zeroed at
 * once). A decay of 0 purges a free at once whenever the last look for
 * decay was over 100 ms before (extents.c): that depends on the timing. */
static inline bool frees_stay_dirty(void)
{
	const char *decay = getenv("HUGEZERO_DECAY_MS");

	return !option_set("HUGEZERO_CACHE_MAX") && !option_set("HUGEZERO_ZERO_ON_FREE") &&
	       !(decay != NULL && strcmp(decay, "0") == 0);
}


/* Huge pages are allowed (HUGEZERO_BACKING is not none). */
static inline bool huge_pages_allowed(void)
{
	return !option_set("HUGEZERO_BACKING") || strcmp(getenv("HUGEZERO_BACKING"), "none") != 0;
}

static inline bool thp_usable(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	char buf[128] = "";

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

static inline long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static inline int write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static inline int arena_ctl(unsigned ind, const char *what)
{
	char name[64];

	snprintf(name, sizeof(name), "arena.%u.%s", ind, what);
	return mallctl(name, NULL, NULL, NULL, 0);
}

static inline int arena_set_ssize(unsigned ind, const char *what, ssize_t v)
{
	char name[64];

	snprintf(name, sizeof(name), "arena.%u.%s", ind, what);
	return mallctl(name, NULL, NULL, &v, sizeof(v));
}

/* ---- recording hooks ---- */

enum rec_op { OP_ALLOC, OP_DALLOC, OP_DESTROY, OP_COMMIT, OP_DECOMMIT,
	      OP_PURGE_LAZY, OP_PURGE_FORCED, OP_SPLIT, OP_MERGE, OP_COUNT };

struct rec_call {
	enum rec_op op;
	uintptr_t addr;   /* alloc: the result */
	size_t size;
	size_t a, b;      /* commit/purge: offset, length; split: size_a, size_b;
			   * merge: addr_b, size_b */
	bool result;      /* what the hook returned (alloc: non-NULL) */
};

#define REC_MAX 4096

struct recorder {
	pthread_mutex_t mutex;
	struct rec_call call[REC_MAX];
	unsigned count;
	bool opt_out[OP_COUNT]; /* answer "true" without calling hugezero */
};

static struct recorder rec = { .mutex = PTHREAD_MUTEX_INITIALIZER };

static inline void rec_log(enum rec_op op, uintptr_t addr, size_t size, size_t a,
			   size_t b, bool result)
{
	pthread_mutex_lock(&rec.mutex);
	if (rec.count < REC_MAX)
		rec.call[rec.count++] = (struct rec_call){ op, addr, size, a, b, result };
	pthread_mutex_unlock(&rec.mutex);
}

static inline void rec_reset(void)
{
	pthread_mutex_lock(&rec.mutex);
	rec.count = 0;
	memset(rec.opt_out, 0, sizeof(rec.opt_out));
	pthread_mutex_unlock(&rec.mutex);
}

/* The first call of op (after from) covering exactly [addr, addr + size)
 * for dalloc/destroy, or the target range [addr + a, + b) for commit and
 * purges; NULL when there is none. */
static inline const struct rec_call *rec_find(enum rec_op op, uintptr_t addr, size_t size)
{
	for (unsigned i = 0; i < rec.count; i++) {
		const struct rec_call *c = &rec.call[i];
		uintptr_t at = c->addr;
		size_t len = c->size;

		if (c->op != op)
			continue;
		if (op == OP_COMMIT || op == OP_DECOMMIT || op == OP_PURGE_LAZY ||
		    op == OP_PURGE_FORCED) {
			at += c->a;
			len = c->b;
		}
		if (at == addr && len == size)
			return c;
	}
	return NULL;
}

static inline unsigned rec_count(enum rec_op op)
{
	unsigned n = 0;

	for (unsigned i = 0; i < rec.count; i++)
		n += rec.call[i].op == op;
	return n;
}

static inline extent_hooks_t *hz(void)
{
	return hz_jemalloc_hooks();
}

static void *rec_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t align,
		       bool *zero, bool *commit, unsigned ind)
{
	void *p = hz()->alloc(hz(), new_addr, size, align, zero, commit, ind);

	(void)h;
	rec_log(OP_ALLOC, (uintptr_t)p, size, align, 0, p != NULL);
	return p;
}

static bool rec_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed,
		       unsigned ind)
{
	bool r = rec.opt_out[OP_DALLOC] ? true : hz()->dalloc(hz(), addr, size, committed, ind);

	(void)h;
	rec_log(OP_DALLOC, (uintptr_t)addr, size, 0, 0, r);
	return r;
}

static void rec_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed,
			unsigned ind)
{
	(void)h;
	hz()->destroy(hz(), addr, size, committed, ind);
	rec_log(OP_DESTROY, (uintptr_t)addr, size, 0, 0, false);
}

#define REC_RANGE_HOOK(name, op, field)                                             \
	static bool name(extent_hooks_t *h, void *addr, size_t size, size_t off,      \
			 size_t len, unsigned ind)                                    \
	{                                                                             \
		bool r = rec.opt_out[op] ? true                                       \
					 : hz()->field(hz(), addr, size, off, len, ind); \
		(void)h;                                                              \
		rec_log(op, (uintptr_t)addr, size, off, len, r);                      \
		return r;                                                             \
	}
REC_RANGE_HOOK(rec_commit, OP_COMMIT, commit)
REC_RANGE_HOOK(rec_decommit, OP_DECOMMIT, decommit)
REC_RANGE_HOOK(rec_purge_lazy, OP_PURGE_LAZY, purge_lazy)
REC_RANGE_HOOK(rec_purge_forced, OP_PURGE_FORCED, purge_forced)

static bool rec_split(extent_hooks_t *h, void *addr, size_t size, size_t a, size_t b,
		      bool committed, unsigned ind)
{
	bool r = hz()->split(hz(), addr, size, a, b, committed, ind);

	(void)h;
	rec_log(OP_SPLIT, (uintptr_t)addr, size, a, b, r);
	return r;
}

static bool rec_merge(extent_hooks_t *h, void *a, size_t sa, void *b, size_t sb,
		      bool committed, unsigned ind)
{
	bool r = hz()->merge(hz(), a, sa, b, sb, committed, ind);

	(void)h;
	rec_log(OP_MERGE, (uintptr_t)a, sa, (size_t)(uintptr_t)b, sb, r);
	return r;
}

static extent_hooks_t recording_hooks __attribute__((unused)) = {
	rec_alloc, rec_dalloc, rec_destroy, rec_commit, rec_decommit,
	rec_purge_lazy, rec_purge_forced, rec_split, rec_merge,
};

/* A new arena on the given hooks. */
static inline unsigned new_arena(extent_hooks_t *hooks)
{
	unsigned ind = 0;
	size_t len = sizeof(ind);

	if (mallctl("arenas.create", &ind, &len, &hooks, sizeof(hooks)) != 0) {
		fprintf(stderr, "arenas.create failed\n");
		abort();
	}
	return ind;
}

#endif /* HZ_TEST_JEMALLOC_UTIL_H */
