/* The cache of freed large blocks: its policy, the one budget every cache
 * of freed memory shares, and the table of spans.
 *
 * The table is single-threaded and makes no system call and takes no
 * lock. Outside its own file (cache.c) it calls only what is as plain:
 * the inline helpers of range.h and sizes.h, the size-class ledger
 * (classes.h: the reuse evidence a span's stay comes from, kept under the
 * same exclusion as the table), backing's page size of a
 * backing (hz_backing_page, a table lookup), span.h's
 * hz_blocks_same_region (atomic loads of the region map, so that no merge
 * crosses two regions), the stats' atomic counters and the shared budget's
 * (below), and the probes' hold function its owner installed
 * (hz_cache_hold_probes: the pre-zero thread's). The caller excludes every
 * other user (prezero.h's guard) and releases, once it has let the table
 * go, the spans a function hands back in a batch. So the table is
 * unit-tested without a thread (tests/test_cache.c). */
#ifndef HZ_CACHE_H
#define HZ_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "span.h"
#include "options.h" /* enum hz_prezero_opt, generated from options.def */

/* ---- the policy (cache_policy.c) ---- */

struct hz_cache_policy {
	size_t cache_max;   /* HUGEZERO_CACHE_MAX, at most a quarter of RAM */
	uint64_t decay_ns;  /* HUGEZERO_DECAY_MS */
	enum hz_prezero_opt prezero; /* HUGEZERO_PREZERO */
	size_t unit;        /* HUGEZERO_PREZERO_UNIT */
	size_t split_min;   /* HUGEZERO_PREZERO_SPLIT_MIN */
	bool zero_on_free;  /* HUGEZERO_ZERO_ON_FREE */
	bool adapt;         /* HUGEZERO_CACHE_ADAPT: stays from observed reuse */
};

/* The policy, built from the options once, on first use. */
const struct hz_cache_policy *hz_cache_policy(void);

/* Bytes of freed memory kept for reuse by every cache in the process (the
 * preload's table and the jemalloc extents' dirty pages), against one
 * maximum: a process using both holds cache_max, not twice that. Each cache
 * charges what it holds with hz_cache_budget_charge (atomic: the caches
 * have locks of their own). */
struct hz_cache_budget {
	size_t max;
	size_t used;
};

/* The process's budget, its max the policy's cache_max. */
struct hz_cache_budget *hz_cache_budget(void);

static inline void hz_cache_budget_charge(struct hz_cache_budget *b, size_t add, size_t sub)
{
	if (add > sub)
		__atomic_add_fetch(&b->used, add - sub, __ATOMIC_RELAXED);
	else if (sub > add)
		__atomic_sub_fetch(&b->used, sub - add, __ATOMIC_RELAXED);
}

static inline size_t hz_cache_budget_used(const struct hz_cache_budget *b)
{
	return __atomic_load_n(&b->used, __ATOMIC_RELAXED);
}

/* The max, which the memory cgroup's room lowers (cache_policy.c). */
static inline size_t hz_cache_budget_max(const struct hz_cache_budget *b)
{
	return __atomic_load_n(&b->max, __ATOMIC_RELAXED);
}

/* Memory cgroups (cache_policy.c says how). At a cache insert of adding
 * bytes, outside the table: the budget's max becomes what fits below the
 * cgroup's limit less a headroom (read at most every 10 ms; never more
 * than cache_max). */
void hz_cache_budget_refresh(size_t adding);

/* Before a fresh block of fresh bytes is mapped, outside the table: how
 * many cached bytes must be dropped first for it to fit below the limit
 * with the headroom left (0: none); the budget's max is lowered to match.
 * Cached bytes need not be resident, so after dropping the caller asks
 * again (again: the cgroup is read now). Never blocks: 0 while another
 * thread reads the cgroup. */
size_t hz_cache_budget_excess(size_t fresh, bool again);

/* The program's own peak (cache_policy.c): before a fresh block of fresh
 * bytes is mapped, with live bytes in live blocks, outside the table: how
 * many cached bytes must be dropped first so that the process's resident
 * memory stays within the most it held without the cache, plus a slack.
 * 0 where /proc is hidden. At a hit: live bytes in live blocks now. */
size_t hz_cache_peak_excess(size_t fresh, size_t live);
void hz_cache_peak_note(size_t live);

/* Fork child: a read another thread had in progress is over. */
void hz_cache_policy_fork_child(void);

/* ---- the table ---- */

/* 1024 spans: the default 1 GiB cache holds at most 512 blocks of 2 MiB. */
#define HZ_CACHE_ENTRIES 1024
/* Spans a batch holds for release once the table is let go. */
#define HZ_CACHE_BATCH 8

struct hz_cache_entry {
	struct hz_span span;
	uint64_t idle_since; /* ns, when it entered the cache */
	bool clean;          /* reads zero */
	/* Made reclaimable (MADV_FREE) by the pre-zero thread once idle: the
	 * kernel may take its pages back under memory pressure, and a page it
	 * took reads zero again, so clean stays true. */
	bool lazy;
	/* Set by hz_cache_add from the span's size class: */
	bool probe;          /* its class shows no reuse yet (classes.c) */
	uint64_t stay_ns;    /* idle this long, it decays */
};

struct hz_cache_batch {
	struct hz_span spans[HZ_CACHE_BATCH];
	unsigned count;
};

struct hz_cache {
	struct hz_cache_entry entries[HZ_CACHE_ENTRIES];
	unsigned count;
	size_t bytes, clean_bytes;
	uint64_t decay_ns;
	struct hz_cache_budget *budget;
	/* Stays from observed reuse (hz_cache_adapt); off: every span stays
	 * decay_ns, as long as the budget has room. */
	bool adapt;
	size_t probe_bytes; /* of entries with probe set */
	/* Whether probes are kept at all, asked as one enters the table (NULL:
	 * always; hz_cache_hold_probes). */
	bool (*hold_probes)(void);
	/* Called with a full batch, with the table still held (rare: an
	 * eviction run over many small spans), to release its spans at once
	 * and empty it. */
	void (*flush)(struct hz_cache_batch *b);
};

void hz_cache_init(struct hz_cache *c, uint64_t decay_ns, struct hz_cache_budget *budget,
		   void (*flush)(struct hz_cache_batch *b));

/* Size stays and the cache from observed reuse (cache.c), or not. */
void hz_cache_adapt(struct hz_cache *c, bool on);

/* Who says, as a probe (a cold span, cache.c) enters the table, whether it
 * is kept for its short stay or let go at once, as glibc's munmap would
 * (no thread to give it back later). Either way a miss soon after counts
 * as a reuse let go. NULL: always kept. */
void hz_cache_hold_probes(struct hz_cache *c, bool (*hold)(void));

/* Put s in b for release, flushing b first when it is full. */
void hz_cache_batch_put(const struct hz_cache *c, struct hz_cache_batch *b,
			const struct hz_span *s);

/* Granules a span of this backing must give for size bytes; more than any
 * span has for a size above HZ_BLOCK_MAX. */
size_t hz_cache_granules_for(size_t size, enum hz_backing backing);

/* Whether s can serve size bytes aligned to align (0: any). */
bool hz_cache_fits(const struct hz_span *s, size_t size, size_t align);

/* Bounded waste: a span of have granules for a request of need is split
 * when it is more than 12.5% larger. */
bool hz_cache_wasteful(size_t have, size_t need);

/* The best span for a request: an entry that fits, in the preferred state
 * (clean when want_clean) first, then the smallest; dirty ones only when
 * dirty_allowed. zeroing, when not NULL, is the span the pre-zero thread
 * is zeroing (prezero.h): when it fits, it comes before a dirty entry for
 * a calloc (want_clean: the thread has cleared part of it), and serves a
 * malloc only when no entry does (waiting for the thread's unit beats
 * faulting a fresh block in). Returns the entry's index, HZ_CACHE_ZEROING
 * for the thread's span, or -1. */
#define HZ_CACHE_ZEROING (-2)
int hz_cache_pick(const struct hz_cache *c, size_t size, size_t align, bool want_clean,
		  bool dirty_allowed, const struct hz_span *zeroing);

/* What a request asks of the table: size bytes aligned to align (0:
 * any), clean spans first for a calloc (want_clean), dirty ones only when
 * dirty_allowed, and the span the pre-zero thread is zeroing as a
 * candidate (zeroing, or NULL), as hz_cache_pick weighs them. */
struct hz_cache_want {
	size_t size, align;
	bool want_clean, dirty_allowed;
	const struct hz_span *zeroing;
};

/* A request's two visits to the table, both under the guard, with the
 * ledger asked in between (recycle.c). The look: entries whose stay ended
 * at now go into b (hz_cache_decay), then hz_cache_pick's choice. */
int hz_cache_look(struct hz_cache *c, uint64_t now, const struct hz_cache_want *w,
		  struct hz_cache_batch *b);

/* The serve, for a look's i other than HZ_CACHE_ZEROING: entry i, its
 * wasteful remainder back in the table (hz_cache_take). At a miss (-1)
 * every probe goes into b (hz_cache_missed), and the largest span too
 * small for the request is taken whole, to become the front of the new
 * block (recycle.c): only spans of granule pages (4 KiB or THP), only for
 * an alignment of a granule at most. false: nothing was taken. */
bool hz_cache_serve(struct hz_cache *c, int i, const struct hz_cache_want *w,
		    struct hz_cache_batch *b, struct hz_cache_entry *out);

/* A span wasteful for size bytes keeps the granules size needs, from its
 * start; the rest goes to *rest. Returns whether there is a rest. */
bool hz_cache_trim(struct hz_span *s, size_t size, struct hz_span *rest);

/* Take entry i out for a request of size bytes; a wasteful remainder is
 * split off and goes back into the table. */
struct hz_cache_entry hz_cache_take(struct hz_cache *c, unsigned i, size_t size,
				    struct hz_cache_batch *b);

/* The entry whose span starts at start with this backing, or -1: the
 * granules right after a live block, which its realloc may claim
 * (recycle.c). */
int hz_cache_find_at(const struct hz_cache *c, uintptr_t start, enum hz_backing backing);

/* Take entry i out whole. */
struct hz_cache_entry hz_cache_remove(struct hz_cache *c, unsigned i);

/* The first dirty entry that is not lazily freed, or -1. Clearing a lazily
 * freed span writes its pages, which the kernel can then no longer take
 * back: under a memory cgroup limit lowered at run time the pre-zero
 * thread's clears of such spans used up what reclaim had left, and the
 * program was killed (hostile lower_limit). Such a span is zeroed by the
 * calloc that takes it, which needs its memory anyway. */
int hz_cache_first_dirty(const struct hz_cache *c);

/* The first entry idle idle_ns or more at now and not lazy yet, on pages
 * MADV_FREE takes (not hugetlb), or -1. */
int hz_cache_first_idle(const struct hz_cache *c, uint64_t now, uint64_t idle_ns);

/* Add a span: merged with a neighbour of the same backing and state, else
 * appended. The oldest entries are evicted (into b) while the budget or
 * the table would overflow; when the budget is still short with the table
 * empty (another cache holds the rest), the span itself goes into b. */
void hz_cache_add(struct hz_cache *c, struct hz_cache_entry e, struct hz_cache_batch *b);

/* A request found nothing in c: every probe entry goes into b, as none
 * could serve it and the fresh block it gets adds to them. */
void hz_cache_missed(struct hz_cache *c, struct hz_cache_batch *b);

/* Whether the process's memory cgroup has a limit, or its limit could not
 * be read (as last read; false before the first read at a free). Under
 * one, the pre-zero thread zeroes
 * nothing: a span it holds, at idle priority and starved of CPU, could not
 * be dropped for a fresh block before the kernel kills at the limit
 * (measured: 3 runs in 8 of the 1 GiB cgroup case killed beside two busy
 * CPU-bound processes; none with calloc zeroing its own). Lock-free. */
bool hz_cache_memory_limited(void);

/* Move the oldest entries into b until the table holds keep bytes or
 * less, or b is full (never flushed: the pre-zero thread uses it too). */
void hz_cache_shrink(struct hz_cache *c, size_t keep, struct hz_cache_batch *b);

/* Move entries idle for their stay_ns or more at now into b, until b is
 * full. */
void hz_cache_decay(struct hz_cache *c, uint64_t now, struct hz_cache_batch *b);

/* When the first entry's stay ends (ns; UINT64_MAX: the table is empty). */
uint64_t hz_cache_next_decay(const struct hz_cache *c);

#endif /* HZ_CACHE_H */
