/* The pre-zero thread and its hand-off with the program. See prezero.h.
 *
 * The thread runs at idle priority (SCHED_IDLE), so the scheduler may stop
 * it for a long time at any instruction. It therefore holds nothing that a
 * program thread waits for without a deadline, and it never waits for a
 * program thread:
 *
 *  - The table. Program threads take a mutex among themselves; the thread
 *    never does. The thread and the mutex's holder exclude each other with
 *    two flags, program_in and thread_in: each side raises its own, then
 *    reads the other's (sequentially consistent, as in Dekker's algorithm),
 *    so they are never both in. The thread only tries: when a program
 *    thread is in, it backs off and comes back later. A program thread that
 *    finds the thread in waits at most GUARD_WAIT_NS (the thread's turn is
 *    table work of a few microseconds, no system call, no lock), then
 *    serves its request without the cache: a fresh block, or a free that
 *    releases. Until that turn ends, later requests do so at once.
 *  - Spans. Each span the thread holds is in a job slot with an atomic state
 *    word; every change of state by two parties is a compare-and-swap, so
 *    exactly one of them wins. The thread fills free slots. It zeroes one
 *    span at a time (ZEROING), then marks it DONE; whoever enters the table
 *    next puts DONE spans back. A calloc claims the span being zeroed
 *    (ZEROING -> CLAIMED), and so does a malloc that finds no other span
 *    of its size; the thread stops at its next unit and hands it over
 *    (CLAIMED -> HANDED); the caller waits for that with a deadline and
 *    withdraws when late (CLAIMED -> ZEROING), then looks elsewhere.
 *  - Decay. Its turn also takes spans idle too long out of the table; it
 *    gives their memory back outside it (hz_prim_decommit, no lock) and
 *    marks them DONE "released": the program thread that collects them
 *    returns their granules (the blocks lock is the program's).
 *  - Wake-up. A counter the thread sleeps on with a futex: a free bumps it
 *    and makes the system call only when the thread sleeps (flags again).
 *  - A calloc's own clear, shared with the thread chunk by chunk (two
 *    cores). The calloc waits for the chunk the thread is in with a
 *    deadline; when late it leaves the whole block to the thread, which
 *    gives it back to the cache once out of its chunk, and takes a fresh
 *    block. Clearing the rest itself instead would let the thread's late
 *    stores zero memory the program already owns. */
#include "prezero.h"

#include <sys/mman.h>

#include "classes.h"
#include "clear/policy.h"
#include "config.h"
#include "cpu/relax.h"
#include "lock.h"
#include "log.h"
#include "prim/memory.h"
#include "prezero_impl.h"
#include "prim/prim.h"
#include "promote.h"
#include "sizes.h"
#include "stats.h"
#include "zero.h"

#ifdef HZ_TEST_CORE
void (*hz_prezero_test_hook)(enum hz_prezero_point point);
#endif

/* ---- state ---- */

struct hz_cache pz_cache;
pthread_once_t pz_cache_once = PTHREAD_ONCE_INIT;

/* The guard. */
struct hz_lock pz_lock = HZ_LOCK_INIT;
int pz_program_in, pz_thread_in;
unsigned pz_turns;                  /* the thread's tries at the table */
unsigned pz_stalled_turn = ~0u;    /* the turn a program thread gave up on */

struct job pz_jobs[JOBS];

/* The thread. stop asks it to end (hz_prezero_stop); tid is its kernel id
 * while it runs, exited set once it has left its loop. */
int pz_thread_started;
int pz_thread_failed;
int pz_thread_retired;
int pz_stop, pz_tid, pz_exited;
int pz_wake_seq, pz_sleeping;
/* Until when (ns) a starved thread (a unit cleared slower than prezero.h's
 * slowest rate) rests, HZ_THREAD_STUCK_NS, while calloc zeroes. */
uint64_t pz_paused_until;
/* When the table's first stay ends (ns), as of the thread's last turn. */
static uint64_t pz_next_decay = UINT64_MAX;

void hz_pz_init_cache(void)
{
	hz_cache_init(&pz_cache, hz_cache_policy()->decay_ns, hz_cache_budget(), hz_prezero_release);
	hz_cache_adapt(&pz_cache, hz_cache_policy()->adapt);
	hz_cache_hold_probes(&pz_cache, hz_prezero_holds_probes);
	/* What MADV_DONTNEED and mincore do is probed now, at the first
	 * large request, on two scratch pages: a program that later reaches
	 * vm.max_map_count or RLIMIT_AS would refuse them, and until a probe
	 * succeeds every span is cleared in full, never dropped. */
	(void)hz_zero_residency_trusted();
}

void hz_pz_publish_bytes(void)
{
	__atomic_store_n(&hz_stats.cache_bytes, pz_cache.bytes, __ATOMIC_RELAXED);
}

/* ---- the thread's state, as both sides see it ---- */

/* A program thread waiting for the thread spins for as long as a sleep
 * and its wake cost (HZ_THREAD_WAKE_NS), then sleeps that long at a time:
 * spinning longer could cost more than the sleep it saves. */
bool hz_prezero_wait(int *word, int mask, int want, uint64_t ns)
{
	uint64_t start = hz_prim_now_ns(), waited;

	while ((__atomic_load_n(word, __ATOMIC_ACQUIRE) & mask) != want) {
		waited = hz_prim_now_ns() - start;
		if (waited > ns)
			return false;
		if (waited < HZ_THREAD_WAKE_NS)
			hz_cpu_relax();
		else
			hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
	}
	return true;
}

bool hz_prezero_can_help(void)
{
	return hz_prezero_mode() == HZ_PREZERO_OPT_THREAD &&
	       __atomic_load_n(&pz_thread_started, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&pz_stop, __ATOMIC_ACQUIRE) &&
	       hz_prim_now_ns() >= __atomic_load_n(&pz_paused_until, __ATOMIC_RELAXED);
}

enum hz_prezero_opt hz_prezero_mode(void)
{
	enum hz_prezero_opt m = hz_cache_policy()->prezero;

	if (m == HZ_PREZERO_OPT_THREAD && (__atomic_load_n(&pz_thread_failed, __ATOMIC_ACQUIRE) ||
					   __atomic_load_n(&pz_thread_retired, __ATOMIC_ACQUIRE) ||
					   hz_cache_memory_limited()))
		return HZ_PREZERO_OPT_SYNC;
	return m;
}

/* ---- job slots ---- */

struct job *hz_pz_job_in(int state)
{
	for (unsigned i = 0; i < JOBS; i++)
		if (__atomic_load_n(&pz_jobs[i].state, __ATOMIC_ACQUIRE) == state)
			return &pz_jobs[i];
	return NULL;
}

/* The thread alone turns a free slot into a used one. */
static struct job *free_job(void)
{
	return hz_pz_job_in(JOB_FREE);
}

/* Free slots, and clean bytes finished but not collected yet. */
static unsigned count_jobs(size_t *done_clean)
{
	unsigned n = 0;

	*done_clean = 0;
	for (unsigned i = 0; i < JOBS; i++) {
		int state = __atomic_load_n(&pz_jobs[i].state, __ATOMIC_ACQUIRE);

		n += state == JOB_FREE;
		if (state == JOB_DONE && !pz_jobs[i].released && pz_jobs[i].dirty == 0)
			*done_clean += hz_span_bytes(&pz_jobs[i].result);
	}
	return n;
}

void hz_pz_job_done(struct job *j, const struct hz_span *s, size_t dirty, bool released)
{
	j->result = *s;
	j->dirty = dirty;
	j->released = released;
	j->lazy = false;
	j->idle_since = 0;
	__atomic_store_n(&j->state, JOB_DONE, __ATOMIC_RELEASE);
}

/* ---- the thread ---- */

/* Did clearing bytes take so long (ns) that the thread is starved? */
static bool starved(size_t bytes, uint64_t ns)
{
	return bytes > 0 && ns > hz_prezero_patience_ns(bytes);
}

/* Zero the span of job j (a copy, s) from the end down, unit by unit,
 * until done, claimed, or starved (a sparse span is dropped at once).
 * The span's start is the hint of a span to clear in the cache: its
 * calloc's first writes come there (zero.h). Returns the bytes from the
 * start still dirty. */
static size_t zero_span(struct job *j, struct hz_span *s, enum hz_zero_method m)
{
	size_t unit_max = hz_cache_policy()->unit;
	enum hz_zero_how how = hz_span_zero_how(s);
	size_t top = hz_span_bytes(s), written = 0;
	uintptr_t hint = j->in_cache && hz_zero_fits_cache(top) ? s->range.start : 0;
	uint64_t t0 = hz_prim_now_ns();

	if (m == HZ_ZERO_DROP) {
		hz_zero_with(s->range.start, top, 0, m, how);
		top = 0;
	}
	while (top > 0 && __atomic_load_n(&j->state, __ATOMIC_ACQUIRE) != JOB_CLAIMED &&
	       !__atomic_load_n(&pz_stop, __ATOMIC_ACQUIRE)) {
		size_t unit = top < unit_max ? top : unit_max;
		uint64_t u0 = hz_prim_now_ns();
		size_t w;

		top -= unit;
		w = hz_zero_with(s->range.start + top, unit, hint, m, how);
		written += w;
		if (top > 0 && starved(w, hz_prim_now_ns() - u0)) {
			__atomic_store_n(&pz_paused_until, hz_prim_now_ns() + HZ_THREAD_STUCK_NS,
					 __ATOMIC_RELAXED);
			hz_stats_add(prezero_starved, 1);
			break;
		}
		HZ_PREZERO_HOOK(HZ_PREZERO_AT_UNIT);
		hz_prezero_share_help(); /* a calloc waiting on its own clear comes first */
	}
	hz_prezero_adapt_backing(s, m);
	hz_stats_add(prezeroed_bytes, written);
	if (hint != 0)
		hz_stats_add(cleared_in_cache, written);
	hz_stats_add(prezero_ns, hz_prim_now_ns() - t0);
	return top;
}

/* After the thread wrote span s (or chose not to): still ours unless it
 * was not (marked foreign now) or the program marked it meanwhile (a
 * hole, mlockall). */
static bool still_ours(const struct hz_span *s, bool ours)
{
	if (!ours)
		hz_blocks_mark_foreign(s->range.start, hz_span_bytes(s));
	return ours && hz_blocks_reusable(s);
}

/* Job j is done with span s, dirty bytes of it from its start, its
 * memory released or not, lazy or not: hand it to its claimer, or leave
 * it DONE. */
static void finish_job(struct job *j, const struct hz_span *s, size_t dirty, bool released,
		       bool lazy)
{
	int state = __atomic_load_n(&j->state, __ATOMIC_ACQUIRE);

	j->result = *s;
	j->dirty = dirty;
	j->released = released;
	j->lazy = lazy;
	while (!__atomic_compare_exchange_n(&j->state, &state,
					    state == JOB_CLAIMED ? JOB_HANDED : JOB_DONE, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

/* Zero job j's span, then hand it to its claimer or leave it DONE.
 *
 * The thread runs with every signal blocked: a fault in it kills the
 * process past the program's own handler. So it writes only spans that
 * are still plain memory of ours: the foreign mark is read again here,
 * after the span left the table (a cached span is never foreign when it
 * enters, but mlockall(MCL_CURRENT) marks every granule), and the hole
 * check of hz_zero_choose comes before any write. A span that fails
 * either is not touched: its claimer or collector releases it (its mark
 * makes both do so). What the thread cannot see is a change the program
 * made with a raw system call, not through the interposed wrappers, to
 * a block it then freed (see src/preload/foreign.c). */
static void zero_job(struct job *j)
{
	struct hz_span s = j->span;
	enum hz_zero_method m;
	bool ours = hz_blocks_reusable(&s) &&
		    hz_zero_choose(s.range.start, hz_span_bytes(&s), hz_span_zero_how(&s), &m) == 0;
	size_t dirty = ours ? zero_span(j, &s, m) : hz_span_bytes(&s);

	ours = still_ours(&s, ours);
	finish_job(j, &s, dirty, !ours, false);
}

/* Make job j's idle span reclaimable: MADV_FREE, unit by unit, until done
 * or claimed. Cached blocks are the program's memory to the kernel, and
 * without swap it can never take them back: a memory cgroup's limit could
 * not be lowered below the cache (v1: EBUSY; v2: the OOM killer), and
 * memory pressure anywhere could not reclaim them. Lazily freed pages go
 * to the file LRU, which reclaim frees without swap. A page the kernel
 * took reads zero when touched again, so a clean span stays clean, and a
 * dirty one needs its zeroing anyway; a page written again is the
 * writer's (the kernel keeps a lazily freed page that was written). So
 * only the idle ones: a reused page pays a dirty-bit update per 4 KiB and
 * a reclaimed one a fresh fault. The span left the table first: the
 * program's writes must not race the advice. A span with a hole is not
 * advised, as it is not zeroed (zero_job). */
static void lazy_job(struct job *j)
{
	struct hz_span s = j->span;
	size_t unit = hz_cache_policy()->unit, len = hz_span_bytes(&s), done = 0;
	bool ours = hz_blocks_reusable(&s) && hz_prim_all_mapped(s.range.start, len);

	while (ours && done < len &&
	       __atomic_load_n(&j->state, __ATOMIC_ACQUIRE) != JOB_CLAIMED &&
	       !__atomic_load_n(&pz_stop, __ATOMIC_ACQUIRE)) {
		size_t n = len - done < unit ? len - done : unit;

		if (hz_prim_madvise((void *)(s.range.start + done), n, MADV_FREE) != 0)
			break; /* Linux before 4.5, or not plain memory */
		done += n;
	}
	if (done == len)
		hz_stats_add(cache_lazy_bytes, len);
	ours = still_ours(&s, ours);
	finish_job(j, &s, j->clean ? 0 : len, !ours, done == len);
}

/* In the thread's turn: entry i out of the table into a job, to zero or
 * to make reclaimable (lazify); NULL when no slot is free. */
static struct job *take_job(int i, bool lazify)
{
	struct job *j = free_job();
	struct hz_cache_entry e;

	if (j == NULL)
		return NULL;
	e = hz_cache_remove(&pz_cache, (unsigned)i);
	j->span = e.span;
	j->lazify = lazify;
	j->clean = e.clean;
	j->in_cache = !lazify && hz_classes_clear_in_cache(hz_span_bytes(&e.span));
	j->idle_since = lazify ? e.idle_since : 0;
	__atomic_store_n(&j->state, JOB_ZEROING, __ATOMIC_RELEASE);
	return j;
}

/* The thread's turn at the table: table work only, bounded, no system
 * call and no lock. Fills *zero with a job to zero, or NULL, and release
 * with jobs whose memory to give back. Returns false when a program thread
 * was in. */
static bool take_turn(uint64_t now, struct job **zero, struct job **release, unsigned *n)
{
	struct hz_cache_batch decayed = { .count = 0 };
	size_t clean;
	unsigned spare;
	int i;

	__atomic_add_fetch(&pz_turns, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&pz_thread_in, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pz_program_in, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&pz_thread_in, 0, __ATOMIC_SEQ_CST);
		return false;
	}
	HZ_PREZERO_HOOK(HZ_PREZERO_AT_SECTION);
	/* A batch of slots for decay, one more for a span to zero. */
	spare = count_jobs(&clean);
	pz_next_decay = UINT64_MAX; /* no decay (jobs busy): the tick wakes */
	if (spare > HZ_CACHE_BATCH) {
		hz_cache_decay(&pz_cache, now, &decayed);
		/* Memory the cgroup needs for something else (cache_policy.c). */
		hz_cache_shrink(&pz_cache, hz_cache_budget_max(pz_cache.budget), &decayed);
		/* A full batch leaves more for the next turn, at once. */
		pz_next_decay = decayed.count == HZ_CACHE_BATCH ? now
								: hz_cache_next_decay(&pz_cache);
	}
	for (*n = 0; *n < decayed.count; ++*n) {
		release[*n] = free_job();
		release[*n]->span = decayed.spans[*n];
		__atomic_store_n(&release[*n]->state, JOB_RELEASING, __ATOMIC_RELEASE);
	}
	*zero = NULL;
	clean += pz_cache.clean_bytes;
	if (now < __atomic_load_n(&pz_paused_until, __ATOMIC_RELAXED)) {
		/* starved: rest */
	} else if (clean < hz_classes_clean_target() && !hz_cache_memory_limited()) {
		/* Not under a memory cgroup limit: a span held here could not
		 * be dropped for a fresh block (cache.h), and calloc zeroes its
		 * own. */
		i = hz_cache_first_dirty(&pz_cache);
		if (i >= 0)
			*zero = take_job(i, false);
	} else {
		hz_classes_clean_enough(); /* the target fades while it is met */
	}
	if (*zero == NULL && now >= __atomic_load_n(&pz_paused_until, __ATOMIC_RELAXED) &&
	    (i = hz_cache_first_idle(&pz_cache, now, HZ_UNREUSED_NS)) >= 0)
		*zero = take_job(i, true);
	hz_pz_publish_bytes();
	__atomic_store_n(&pz_thread_in, 0, __ATOMIC_SEQ_CST);
	return true;
}

/* Give back the memory of a span decayed in the thread's turn; a program
 * thread returns its granules. */
static void release_memory(struct job *j)
{
	size_t len = hz_span_bytes(&j->span);

	if (hz_blocks_drop_memory(j->span.range.start, len) != 0)
		hz_prim_madvise((void *)j->span.range.start, len, MADV_DONTNEED);
	hz_pz_job_done(j, &j->span, len, true);
}

/* A block a late calloc left: to the table, dirty, through a job. */
static void return_kept(void)
{
	struct hz_span kept;
	struct job *j;

	if (!hz_prezero_share_kept(&kept, false) || (j = free_job()) == NULL)
		return;
	hz_prezero_share_kept(&kept, true);
	hz_pz_job_done(j, &kept, hz_span_bytes(&kept), false);
}

/* Until the first stay in the table ends, the promoter's next tick (ns
 * from now, at most), or the decay's tick, whichever comes first: a block
 * leaves when its stay ends, not up to a tick later (a linker's peak RSS
 * held a probe block that much longer, bench/RESULTS.md, "The first
 * touches looked at less often"). */
static void sleep_until_woken(int seq, uint64_t ns)
{
	uint64_t now = hz_prim_now_ns();

	if (pz_next_decay <= now)
		return;
	if (pz_next_decay - now < ns)
		ns = pz_next_decay - now;
	HZ_PREZERO_HOOK(HZ_PREZERO_AT_SLEEP);
	__atomic_store_n(&pz_sleeping, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pz_wake_seq, __ATOMIC_SEQ_CST) == seq)
		hz_prim_futex_wait(&pz_wake_seq, seq, ns < HZ_STAY_TICK_NS ? ns : HZ_STAY_TICK_NS);
	__atomic_store_n(&pz_sleeping, 0, __ATOMIC_RELAXED);
}

/* A sanitizer build: its runtime reports what it finds in this thread
 * to stderr (the tests under ThreadSanitizer), which the thread keeps. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED true
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZED true
#endif
#endif
#ifndef SANITIZED
#define SANITIZED false
#endif

/* A file table of our own (hz_prim_files_unshare): an I/O-bound program
 * keeps the kernel's single-threaded file calls beside this thread. Its
 * stderr stays only for HUGEZERO_VERBOSE's messages (and a sanitizer's);
 * the one warning this thread could give (a bad HUGEZERO_CLEAR, when it
 * zeroes first) is given before. */
static void own_file_table(void)
{
	struct hz_clear_policy clear;
	int ret;

	hz_clear_policy_load(&clear);
	ret = hz_prim_files_unshare(SANITIZED || hz_config()->verbose >= HZ_LOG_INFO);
	if (ret != 0)
		hz_debug("the pre-zero thread shares the program's file table (error %d)", ret);
}

/* The thread never holds more privilege than it needs (confine.c): a
 * drop the program makes where the preload cannot see it leaves the
 * thread nothing worth taking over. */
static void confine(void)
{
	unsigned done = hz_prim_confine_thread();

	if (done != HZ_CONFINED_ALL)
		hz_debug("the pre-zero thread is confined in part: no_new_privs %d, "
			 "capabilities %d, landlock %d, seccomp %d",
			 !!(done & HZ_CONFINED_NO_NEW_PRIVS), !!(done & HZ_CONFINED_CAPABILITIES),
			 !!(done & HZ_CONFINED_LANDLOCK), !!(done & HZ_CONFINED_SECCOMP));
}

void *hz_pz_main(void *arg)
{
	(void)arg;
	__atomic_store_n(&pz_tid, hz_prim_gettid(), __ATOMIC_RELEASE);
	hz_prim_lower_thread_priority();
	own_file_table();
	/* Started for the promoter (hz_prezero_start), the table may be new. */
	pthread_once(&pz_cache_once, hz_pz_init_cache);
	confine();
	/* Stopped at the top of the loop only: no span is held there. */
	while (!__atomic_load_n(&pz_stop, __ATOMIC_ACQUIRE)) {
		int seq = __atomic_load_n(&pz_wake_seq, __ATOMIC_ACQUIRE);
		struct job *zero, *release[HZ_CACHE_BATCH];
		uint64_t promote_in;
		unsigned n;

		hz_pz_leave_if_alone(hz_prim_now_ns());
		hz_prezero_share_help();
		return_kept();
		hz_cache_budget_refresh(0); /* outside the turn: it reads files */
		if (!take_turn(hz_prim_now_ns(), &zero, release, &n)) {
			/* A program thread is in the table: try again soon. */
			hz_prim_sleep_ns(HZ_THREAD_WAKE_NS);
			continue;
		}
		for (unsigned i = 0; i < n; i++)
			release_memory(release[i]);
		/* Lazy huge pages (promote.c): bounded work, outside the turn. */
		promote_in = hz_promote_tick(hz_prim_now_ns());
		if (zero && zero->lazify)
			lazy_job(zero);
		else if (zero)
			zero_job(zero);
		else
			sleep_until_woken(seq, promote_in);
	}
	__atomic_store_n(&pz_exited, 1, __ATOMIC_RELEASE);
	return NULL;
}
