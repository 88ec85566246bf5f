/* See assist.h.
 *
 * The protocol, with sequentially consistent atomics: the thread raises
 * helpers, then checks the job is open; the caller closes the job, then
 * reads helpers. One of them sees the other's write, so either the thread
 * takes no chunk or the caller waits for it. Chunks are handed out by one
 * counter, so no chunk is cleared twice or missed; once the counter passes
 * the last chunk, whatever a late helper does is to take nothing. */
#include "assist.h"

#include "cpu/relax.h"
#include "prezero.h"
#include "prim/prim.h"

enum { IDLE, OPEN, CLOSING };

struct job {
	int state;          /* IDLE, OPEN, CLOSING */
	uintptr_t lo;
	size_t chunks;
	enum hz_zero_method method;
	enum hz_zero_how how;
	size_t next;        /* next chunk index, counted from the top */
	unsigned helpers;   /* threads inside hz_assist_help's chunk loop */
	size_t helped;      /* bytes the helpers wrote */
};

static struct job job;

bool hz_assist_open(uintptr_t lo, size_t chunks, enum hz_zero_method method,
		    enum hz_zero_how how)
{
	int idle = IDLE;

	if (!__atomic_compare_exchange_n(&job.state, &idle, CLOSING, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return false;
	job.lo = lo;
	job.chunks = chunks;
	job.method = method;
	job.how = how;
	job.helped = 0;
	__atomic_store_n(&job.next, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&job.state, OPEN, __ATOMIC_SEQ_CST);
	return true;
}

/* Clear chunks until the counter runs out; from the top down, so the
 * caller's last chunks are the ones nearest the block start. */
static size_t take_chunks(bool helper)
{
	size_t written = 0;

	for (;;) {
		size_t i = __atomic_fetch_add(&job.next, 1, __ATOMIC_SEQ_CST);

		if (i >= job.chunks)
			return written;
		uintptr_t at = job.lo + (job.chunks - 1 - i) * HZ_ASSIST_CHUNK;

		if (helper)
			HZ_PREZERO_HOOK(HZ_PREZERO_AT_CHUNK);

		written += hz_zero_with(at, HZ_ASSIST_CHUNK, 0, job.method, job.how);
	}
}

size_t hz_assist_finish(size_t *helped)
{
	size_t written = take_chunks(false);

	unsigned spins = 0;

	__atomic_store_n(&job.state, CLOSING, __ATOMIC_SEQ_CST);
	/* The thread finishes the chunk it holds (the last one it can take).
	 * It runs at the lowest priority: after a short spin, sleep, so a
	 * shared CPU goes to it. */
	while (__atomic_load_n(&job.helpers, __ATOMIC_SEQ_CST) != 0) {
		if (++spins < 1024)
			hz_cpu_relax();
		else
			hz_prim_sleep_ns(20000);
	}
	*helped = __atomic_load_n(&job.helped, __ATOMIC_SEQ_CST);
	__atomic_store_n(&job.state, IDLE, __ATOMIC_SEQ_CST);
	return written;
}

size_t hz_assist_help(void)
{
	size_t written = 0;

	if (__atomic_load_n(&job.state, __ATOMIC_SEQ_CST) != OPEN)
		return 0;
	__atomic_add_fetch(&job.helpers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&job.state, __ATOMIC_SEQ_CST) == OPEN) {
		written = take_chunks(true);
		__atomic_add_fetch(&job.helped, written, __ATOMIC_SEQ_CST);
	}
	__atomic_sub_fetch(&job.helpers, 1, __ATOMIC_SEQ_CST);
	return written;
}

void hz_assist_fork_child(void)
{
	job.state = IDLE;
	job.helpers = 0;
}
