/* The program's side of the hand-off with the pre-zero thread: the
 * guard around the table (enter, leave, and putting back what the thread
 * finished) and claiming the span the thread is zeroing. prezero.c has
 * the protocol, the thread's side and the thread's state (its mode, the
 * bounded wait both sides use). */
#include "prezero.h"

#include <errno.h>

#include "blocks.h"
#include "cache.h"
#include "lock.h"
#include "log.h"
#include "prezero_impl.h"
#include "prim/prim.h"
#include "stats.h"

/* Program threads only (the blocks lock); also the table's flush. */
void hz_prezero_release(struct hz_cache_batch *b)
{
	for (unsigned i = 0; i < b->count; i++) {
		hz_stats_add(cache_released_bytes, hz_span_bytes(&b->spans[i]));
		hz_blocks_release_span(&b->spans[i]);
	}
	b->count = 0;
}

/* ---- the guard ---- */

/* Put what the thread finished back: zeroed spans into the table, released
 * ones into b. */
void hz_pz_collect(struct hz_cache_batch *b)
{
	uint64_t now = 0;

	for (unsigned i = 0; i < JOBS; i++) {
		struct job *j = &pz_jobs[i];

		if (__atomic_load_n(&j->state, __ATOMIC_ACQUIRE) != JOB_DONE)
			continue;
		if (j->released) {
			hz_cache_batch_put(&pz_cache, b, &j->result);
		} else {
			/* Partly dirty (starved) is dirty as a whole: its clean
			 * top is one unit, not worth a split. */
			now = now ? now : hz_prim_now_ns();
			hz_cache_add(&pz_cache,
				     (struct hz_cache_entry){
					     .span = j->result,
					     .idle_since = j->idle_since ? j->idle_since : now,
					     .clean = j->dirty == 0,
					     .lazy = j->lazy },
				     b);
		}
		__atomic_store_n(&j->state, JOB_FREE, __ATOMIC_RELEASE);
	}
	hz_pz_publish_bytes();
}

/* The thread is in its turn: wait for it to end, at most GUARD_WAIT_NS,
 * and not at all for a turn another request already gave up on. */
static bool wait_thread_out(void)
{
	unsigned turn = __atomic_load_n(&pz_turns, __ATOMIC_ACQUIRE);

	if (turn == __atomic_load_n(&pz_stalled_turn, __ATOMIC_RELAXED))
		return false;
	if (hz_prezero_wait(&pz_thread_in, ~0, 0, GUARD_WAIT_NS))
		return true;
	__atomic_store_n(&pz_stalled_turn, turn, __ATOMIC_RELAXED);
	hz_debug("the pre-zero thread was preempted at the cache's table; serving without "
		 "the cache until it runs again");
	return false;
}

struct hz_cache *hz_prezero_enter(struct hz_cache_batch *b)
{
	pthread_once(&pz_cache_once, hz_pz_init_cache);
	hz_lock(&pz_lock);
	__atomic_store_n(&pz_program_in, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pz_thread_in, __ATOMIC_SEQ_CST) && !wait_thread_out()) {
		hz_stats_add(cache_passed_by, 1);
		__atomic_store_n(&pz_program_in, 0, __ATOMIC_SEQ_CST);
		hz_unlock(&pz_lock);
		return NULL;
	}
	hz_pz_collect(b);
	return &pz_cache;
}

void hz_prezero_leave(void)
{
	hz_pz_publish_bytes();
	hz_pz_guard_open();
}

void hz_pz_guard_open(void)
{
	__atomic_store_n(&pz_program_in, 0, __ATOMIC_SEQ_CST);
	hz_unlock(&pz_lock);
}

/* ---- claiming the span being zeroed ---- */

static struct job *zeroing_job(void)
{
	return hz_pz_job_in(JOB_ZEROING);
}

bool hz_prezero_zeroing(struct hz_span *span)
{
	const struct job *j = zeroing_job();

	if (j)
		*span = j->span;
	return j != NULL;
}

int hz_prezero_claim(struct hz_span *span, size_t *dirty)
{
	struct job *j = zeroing_job();
	int state = JOB_ZEROING;

	if (!j || !__atomic_compare_exchange_n(&j->state, &state, JOB_CLAIMED, false,
					       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		hz_prezero_leave(); /* it just finished: the cache has it next time */
		return -EAGAIN;
	}
	hz_prezero_leave();
	if (!hz_prezero_wait(&j->state, ~0, JOB_HANDED,
			     hz_prezero_patience_ns(hz_cache_policy()->unit))) {
		state = JOB_CLAIMED;
		if (__atomic_compare_exchange_n(&j->state, &state, JOB_ZEROING, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			hz_stats_add(takeovers_abandoned, 1);
			return -EAGAIN;
		}
		/* handed over meanwhile */
	}
	*span = j->result;
	*dirty = j->dirty;
	__atomic_store_n(&j->state, JOB_FREE, __ATOMIC_RELEASE);
	hz_stats_add(takeovers, 1);
	return 0;
}
