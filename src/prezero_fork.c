/* The pre-zero thread across fork (prezero.h): the parent waits for the
 * thread to leave the table, the child resets every flag and takes back
 * what the thread held. */
#include "prezero.h"

#include "blocks.h"
#include "cache.h"
#include "prezero_impl.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "stats.h"

static bool fork_skipped, fork_suspect;

void hz_prezero_fork_prepare(void)
{
	pthread_once(&pz_cache_once, hz_pz_init_cache);
	/* fork from a signal handler that interrupted this thread inside the
	 * guard: waiting would deadlock, so the child just resets it. */
	fork_skipped = hz_lock_held_here(&pz_lock);
	if (!fork_skipped) {
		hz_lock(&pz_lock);
		__atomic_store_n(&pz_program_in, 1, __ATOMIC_SEQ_CST);
	}
	/* The table is the child's only if the thread is out of it. */
	fork_suspect = __atomic_load_n(&pz_thread_in, __ATOMIC_SEQ_CST) &&
		       !hz_prezero_wait(&pz_thread_in, ~0, 0, GUARD_WAIT_NS);
}

void hz_prezero_fork_parent(void)
{
	if (fork_skipped)
		return;
	/* A thread preempted in its turn past the wait still holds the
	 * table: its byte count is not ours to read; the next request
	 * publishes it. */
	if (fork_suspect)
		hz_pz_guard_open();
	else
		hz_prezero_leave();
}

/* What the thread held at the fork: a span it was zeroing goes back dirty
 * (to its claimer, told to zero all of it, if a calloc in the child claimed
 * it: possible only when fork ran in a signal handler), one it was
 * releasing is released. */
static void fork_child_jobs(void)
{
	for (unsigned i = 0; i < JOBS; i++) {
		struct job *j = &pz_jobs[i];

		switch (j->state) {
		case JOB_ZEROING:
			hz_pz_job_done(j, &j->span, hz_span_bytes(&j->span), false);
			break;
		case JOB_CLAIMED:
			j->result = j->span;
			j->dirty = hz_span_bytes(&j->span);
			j->state = JOB_HANDED;
			break;
		case JOB_RELEASING:
			hz_pz_job_done(j, &j->span, hz_span_bytes(&j->span), true);
			break;
		default:
			break;
		}
	}
}

/* A cached span the child did not inherit whole: the program advised it
 * MADV_DONTFORK with a raw system call (the wrapper marks the block, and
 * its free releases it), then freed it. malloc hands cached spans out
 * without looking, so the child forgets them here: a mincore walk over
 * the cache (at most HUGEZERO_CACHE_MAX, microseconds per GiB) once per
 * fork, beside the fork's own copy of the page tables. */
static void drop_holes(struct hz_cache_batch *b)
{
	for (unsigned i = pz_cache.count; i-- > 0;) {
		const struct hz_span *s = &pz_cache.entries[i].span;

		if (hz_prim_all_mapped(s->range.start, hz_span_bytes(s)))
			continue;
		struct hz_span gone = hz_cache_remove(&pz_cache, i).span;

		hz_blocks_mark_foreign(gone.range.start, hz_span_bytes(&gone));
		hz_cache_batch_put(&pz_cache, b, &gone);
	}
	hz_pz_publish_bytes();
}

/* The child has one thread: every flag is down whatever it was copied in,
 * and the thread is re-created on the next free. A table the thread was
 * changing at the fork (it stayed preempted in its turn past the deadline)
 * may be torn: the child forgets it and its spans, rather than release
 * spans it cannot trust. */
void hz_prezero_fork_child(void)
{
	struct hz_cache_batch b = { .count = 0 };
	struct hz_span kept;

	hz_lock_reset(&pz_lock);
	pz_program_in = 0;
	pz_thread_in = 0;
	pz_stalled_turn = ~0u;
	pz_thread_started = 0;
	pz_stop = pz_tid = pz_exited = 0;
	pz_wake_seq = 0;
	pz_sleeping = 0;
	if (fork_suspect) {
		size_t used = hz_cache_budget_used(pz_cache.budget);

		hz_cache_budget_charge(pz_cache.budget, 0, used < pz_cache.bytes ? used : pz_cache.bytes);
		hz_cache_init(&pz_cache, pz_cache.decay_ns, pz_cache.budget, hz_prezero_release);
		hz_cache_adapt(&pz_cache, hz_cache_policy()->adapt);
		hz_cache_hold_probes(&pz_cache, hz_prezero_holds_probes);
	}
	fork_child_jobs();
	if (hz_prezero_share_fork_child(&kept))
		hz_cache_add(&pz_cache,
			     (struct hz_cache_entry){ .span = kept, .idle_since = hz_prim_now_ns() }, &b);
	hz_pz_collect(&b);
	drop_holes(&b);
	hz_prezero_release(&b);
	/* Last: with 32 keys or more before ours, it allocates. */
	hz_pz_fork_child_watch();
}

#ifdef HZ_TEST_CORE
unsigned hz_prezero_each_held(void (*fn)(const struct hz_span *span, void *ctx), void *ctx)
{
	struct hz_span kept;
	unsigned n = 0;

	for (unsigned i = 0; i < JOBS; i++) {
		const struct job *j = &pz_jobs[i];
		int state = __atomic_load_n(&j->state, __ATOMIC_ACQUIRE);

		if (state == JOB_FREE)
			continue;
		n++;
		if (fn)
			fn(state == JOB_DONE || state == JOB_HANDED ? &j->result : &j->span, ctx);
	}
	return n + hz_prezero_share_kept(&kept, false);
}
#endif
