/* The cache policy and the one budget. See cache.h.
 *
 * Containers. Freed blocks in the cache are resident memory charged to the
 * process's memory cgroup, and without swap the kernel cannot reclaim
 * them: when a cgroup at its limit must fault in more, it kills. glibc
 * gives a large block back at free, so a program that fits under its
 * limit with glibc must fit with the cache too. So the cache keeps
 * HEADROOM below the cgroup's limit (the lowest of its and its ancestors',
 * against their usage less inactive page cache, os.h):
 *  - at each insert (free) the budget becomes what fits in the room left,
 *    read at most every MEMCG_READ_NS;
 *  - before a fresh block is mapped (a miss), the cache drops the oldest
 *    blocks it must so that the block, written in full, still fits: the
 *    room is read again, or estimated from the last read less the fresh
 *    bytes handed out since;
 *  - the pre-zero thread, on its tick, drops what no longer fits (memory
 *    taken by other means: small allocations, page cache, other processes
 *    of the cgroup).
 * A limit that cannot be read (/proc or the cgroup filesystem hidden, as
 * in minimal and hardened containers) is not taken as no limit: glibc's
 * program may be running a hair below one. The cache then behaves as under
 * the tightest: every miss drops the whole cache before a fresh block is
 * mapped (so the peak is glibc's: the live blocks and the new one), and
 * calloc zeroes its own blocks (hz_cache_memory_limited).
 * Headroom, and not PSI or memory.events: both are cgroup v2 only (this
 * project's machines run v1 memory controllers too), and both report
 * pressure after reclaim has started; with anonymous memory and no swap
 * the kill follows within milliseconds (README, "Containers"). */
#include "cache.h"

#include <pthread.h>

#include "config.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "stats.h"

/* 10 ms between reads of the cgroup's usage: one read is 3-12 small file
 * reads, 25-90 us here (2 vCPUs, loaded); a fresh large block costs more
 * than that to fault in, and every read in between is estimated. */
#define MEMCG_READ_NS 10000000ull
/* Headroom: 1/4 of the limit, at least 16 MiB, at most 512 MiB. It covers
 * what the cgroup charges besides our blocks between two reads (kernel
 * memory, page tables, the program's small allocations, page cache
 * reclaim cannot take at once) and what zeroing a cached span faults in
 * (its never-written tail). Measured in a 1 GiB v1 cgroup
 * (memory_cgroup_1g_two_live_blocks_replaced_40_times_finishes): usage
 * peaked 24-45 MiB above the last reading, so 1/16 (64 MiB) left as
 * little as 24 MiB; 1/8 left about 80 on a quiet machine, but with the
 * test suite running beside it the case was still killed in 2 runs of 4,
 * so 1/4. */
#define HEADROOM_DIV 4
#define HEADROOM_MIN ((uint64_t)16 << 20)
#define HEADROOM_MAX ((uint64_t)512 << 20)

static struct hz_cache_policy policy;
static struct hz_cache_budget budget;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The memory cgroup, read by one thread at a time (busy: others use the
 * last values, in the atomics below). */
static struct {
	int busy;
	struct hz_os_cgroup cg;
	bool found;
	bool strict;                /* vm.overcommit_memory 2, as last found */
	uint64_t found_at, read_at; /* ns */
	uint64_t limit, room;       /* of the last read */
	uint64_t headroom;          /* kept free below it */
	uint64_t fresh_since;       /* fresh bytes handed out since it */
	bool unknown;               /* the last read failed */
} memcg;

/* Every option the caches use, read in one place. */
static void build(struct hz_cache_policy *p)
{
	const struct hz_config *c = hz_config();
	uint64_t ram = 0, swap = 0;

	p->cache_max = c->cache_max;
	/* Never more than a quarter of RAM, whatever the option says. */
	if (hz_prim_memory(&ram, &swap) == 0 && p->cache_max > ram / 4)
		p->cache_max = (size_t)(ram / 4);
	p->decay_ns = c->decay_ms * 1000000ull;
	p->prezero = c->prezero;
	p->unit = c->prezero_unit;
	p->split_min = c->prezero_split_min;
	p->zero_on_free = c->zero_on_free;
	p->adapt = c->cache_adapt;
}

static void init(void)
{
	build(&policy);
	budget.max = policy.cache_max;
}

const struct hz_cache_policy *hz_cache_policy(void)
{
	pthread_once(&once, init);
	return &policy;
}

struct hz_cache_budget *hz_cache_budget(void)
{
	pthread_once(&once, init);
	return &budget;
}

/* ---- the memory cgroup ---- */

static uint64_t headroom(uint64_t limit)
{
	uint64_t h = limit / HEADROOM_DIV;

	return h < HEADROOM_MIN ? HEADROOM_MIN : h > HEADROOM_MAX ? HEADROOM_MAX : h;
}

/* Strict overcommit (vm.overcommit_memory 2) is a limit as well, the
 * machine's: every cached block stays in the commit charge, and a mapping
 * that would take it over CommitLimit fails, in this program or in any
 * other. glibc's free gives the charge back with the block. So the cache
 * keeps the same share of CommitLimit free (HEADROOM_DIV), uncapped: the
 * charge is every process's, not only this cgroup's, and near the limit
 * it gives way first. Whichever of the cgroup and the commit charge leaves
 * less room above its headroom decides. */

static void limit_by_commit(struct hz_os_memcg *m, uint64_t *h)
{
	struct hz_os_memcg commit;
	uint64_t hc, mine;

	if (!memcg.strict || hz_os_commit_read(&commit) != 0)
		return;
	hc = commit.limit / HEADROOM_DIV;
	mine = m->room == HZ_OS_UNLIMITED ? HZ_OS_UNLIMITED : m->room > *h ? m->room - *h : 0;
	if ((commit.room > hc ? commit.room - hc : 0) < mine) {
		m->limit = commit.limit;
		m->room = commit.room;
		*h = hc;
	}
}

/* Read the cgroup again if due (or when force), with memcg held. */
static void read_memcg(uint64_t now, bool force)
{
	struct hz_os_memcg m;
	uint64_t h;
	bool unknown;

	if (!memcg.found || now - memcg.found_at >= HZ_OS_CGROUP_FIND_NS) {
		uint64_t mode;

		memcg.found = hz_os_cgroup_find("memory", &memcg.cg) == 0;
		/* The mode changes as rarely as the cgroup: looked up with it. */
		memcg.strict = hz_os_overcommit_mode(&mode) == 0 && mode == 2;
		memcg.found_at = now;
		force = true;
	}
	/* Without a limit, only a new one can matter: checked as rarely as
	 * the lookup. */
	if (!force && now - memcg.read_at <
			      (memcg.limit == HZ_OS_UNLIMITED ? HZ_OS_CGROUP_FIND_NS : MEMCG_READ_NS))
		return;
	unknown = !memcg.found || hz_os_memcg_read(&memcg.cg, &m) != 0;
	if (unknown)
		m.limit = m.room = HZ_OS_UNLIMITED;
	h = m.limit == HZ_OS_UNLIMITED ? 0 : headroom(m.limit);
	limit_by_commit(&m, &h);
	memcg.headroom = h;
	__atomic_store_n(&memcg.unknown, unknown, __ATOMIC_RELAXED);
	__atomic_store_n(&memcg.limit, m.limit, __ATOMIC_RELAXED);
	memcg.room = m.room;
	memcg.fresh_since = 0;
	memcg.read_at = now;
}

static bool memcg_enter(void)
{
	return !__atomic_exchange_n(&memcg.busy, 1, __ATOMIC_ACQUIRE);
}

static void memcg_leave(void)
{
	__atomic_store_n(&memcg.busy, 0, __ATOMIC_RELEASE);
}

/* What the cgroup can still take, estimated, with memcg held. */
static uint64_t room_now(void)
{
	return memcg.room > memcg.fresh_since ? memcg.room - memcg.fresh_since : 0;
}

/* The budget's max: the policy's, or less when cached + adding bytes
 * would leave less than the headroom in the cgroup. */
static void set_max(size_t adding)
{
	uint64_t cached = hz_cache_budget_used(&budget), fits, room = room_now();
	uint64_t h = memcg.headroom;

	if (memcg.limit == HZ_OS_UNLIMITED || room == HZ_OS_UNLIMITED) {
		__atomic_store_n(&budget.max, policy.cache_max, __ATOMIC_RELAXED);
		return;
	}
	/* The blocks are charged already: keeping them costs no room. */
	fits = cached + adding + room > h ? cached + adding + room - h : 0;
	__atomic_store_n(&budget.max, fits < policy.cache_max ? (size_t)fits : policy.cache_max,
			 __ATOMIC_RELAXED);
}

void hz_cache_budget_refresh(size_t adding)
{
	uint64_t now;

	pthread_once(&once, init);
	if (!memcg_enter())
		return;
	now = hz_prim_now_ns();
	read_memcg(now, false);
	set_max(adding);
	memcg_leave();
}

size_t hz_cache_budget_excess(size_t fresh, bool again)
{
	uint64_t cached, room, need, now;
	size_t excess = 0;

	pthread_once(&once, init);
	cached = hz_cache_budget_used(&budget);
	/* Another thread is reading the cgroup (the pre-zero thread, at idle
	 * priority, may stay preempted there): under a limit, drop the whole
	 * cache rather than wait, or map the block on a stale estimate. */
	if (!memcg_enter())
		return hz_cache_memory_limited() ? cached : 0;
	now = hz_prim_now_ns();
	read_memcg(now, again);
	if (memcg.unknown && cached > 0) {
		excess = cached;
		if (!again) /* once per request: the caller asks again in rounds */
			hz_stats_add(cache_limit_unknown, 1);
	}
	/* Nothing to drop: only the estimate needs the block. */
	if (cached > 0 && memcg.limit != HZ_OS_UNLIMITED) {
		need = fresh + memcg.headroom;
		if (room_now() < need && !again)
			read_memcg(now, true); /* sure before dropping */
		room = room_now();
		/* Cached bytes need not be resident (a span the pre-zero
		 * thread dropped): the caller drops, and asks again. */
		if (room < need)
			excess = (size_t)(need - room < cached ? need - room : cached);
	}
	memcg.fresh_since += fresh;
	if (excess)
		__atomic_store_n(&budget.max, (size_t)(cached - excess), __ATOMIC_RELAXED);
	memcg_leave();
	return excess;
}

/* ---- the program's own peak ----
 *
 * glibc gives a large block back at its free, so a program's peak memory
 * under glibc is its live memory at its fullest. A kept block is memory
 * glibc would not hold: kept while the program's other memory grows, it
 * adds to a new peak (pandas: 880-910 MB against glibc's 812, with 258 MiB
 * kept while its frames were sorted). So the cache keeps the most the
 * process would have held without it: at a miss with blocks cached, what
 * it holds (resident, less the cached bytes) with the fresh block
 * written; at a hit, or a miss with nothing cached, the live blocks with
 * the other memory the last read saw (no read). Before a fresh block is
 * mapped, the cache drops what would take the process past that, plus
 * 1/PEAK_SLACK_DIV of it: a kept block that waits for its reuse costs at
 * most that share. Without the slack every miss at a new peak dropped the
 * whole cache: bench-recycle mixed missed 91 of 600 requests against 79,
 * 2-4% slower for 3% less memory, both under glibc's peak (bench/RESULTS.md,
 * "The program's own peak"). Cached bytes need not be resident (then the
 * measure is low, and more is dropped). */
#define PEAK_SLACK_DIV 32

static uint64_t own_peak, other_memory;

static uint64_t note_peak(uint64_t without)
{
	uint64_t seen = __atomic_load_n(&own_peak, __ATOMIC_RELAXED);

	while (without > seen &&
	       !__atomic_compare_exchange_n(&own_peak, &seen, without, true, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
	return without > seen ? without : seen;
}

void hz_cache_peak_note(size_t live)
{
	note_peak(__atomic_load_n(&other_memory, __ATOMIC_RELAXED) + live);
}

size_t hz_cache_peak_excess(size_t fresh, size_t live)
{
	uint64_t rss, cached = hz_cache_budget_used(&budget), held, peak, limit;

	/* Nothing to drop: noted as at a hit, without the read (8 us). */
	if (cached == 0) {
		hz_cache_peak_note(live + fresh);
		return 0;
	}
	if (hz_prim_resident(&rss) != 0)
		return 0;
	held = rss > cached ? rss - cached : 0;
	__atomic_store_n(&other_memory, held > live ? held - live : 0, __ATOMIC_RELAXED);
	peak = note_peak(held + fresh);
	limit = peak + peak / PEAK_SLACK_DIV;
	if (rss + fresh <= limit)
		return 0;
	return (size_t)(rss + fresh - limit < cached ? rss + fresh - limit : cached);
}

bool hz_cache_memory_limited(void)
{
	uint64_t limit = __atomic_load_n(&memcg.limit, __ATOMIC_RELAXED);

	if (__atomic_load_n(&memcg.unknown, __ATOMIC_RELAXED))
		return true;
	return limit != 0 && limit != HZ_OS_UNLIMITED; /* 0: not read yet */
}

void hz_cache_shrink(struct hz_cache *c, size_t keep, struct hz_cache_batch *b)
{
	while (c->count > 0 && c->bytes > keep && b->count < HZ_CACHE_BATCH) {
		unsigned oldest = 0;

		for (unsigned i = 1; i < c->count; i++)
			if (c->entries[i].idle_since < c->entries[oldest].idle_since)
				oldest = i;
		struct hz_cache_entry e = hz_cache_remove(c, oldest);

		b->spans[b->count++] = e.span;
	}
}

void hz_cache_policy_fork_child(void)
{
	memcg.busy = 0;
}
