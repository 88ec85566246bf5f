/* When a call may enter the library's large paths, which take the cache's
 * and the blocks' locks. Two cases must not:
 *
 * - A signal handler. malloc and free are not async-signal-safe, but
 *   under glibc a large block is an mmap'ed chunk: a handler that frees
 *   one, or asks for a large one, takes no lock for it, and programs rely
 *   on that (a handler that frees a buffer and exits, one that reports
 *   with a large allocation). A handler re-entering our paths on the
 *   thread that holds a lock would wait for itself forever. So each
 *   thread marks itself inside them, and a call that finds the mark set
 *   is a handler's.
 * - A fork under way on this thread (hz_preload_forking, start.c): our
 *   locks are held from our prepare handler to our parent or child one,
 *   which hold the mark meanwhile, so a signal handler then is one too.
 *
 * Such a call's large request goes to the next allocator (malloc.c), and
 * its free of a block waits in one lock-free list until a call leaves,
 * the fork handlers' own leave among them (in the parent and in the
 * child alike: each frees its own copy). */
#include "reentry.h"

#include <errno.h>
#include <stddef.h>

#include "../blocks.h"
#include "../log.h"
#include "../recycle.h"
#include "preload.h"

/* Frees waiting at once: a handler or a fork handler frees a few blocks,
 * not hundreds. */
#define DEFERRED_MAX 64

int hz_preload_active;
__thread bool hz_preload_forking;

static __thread bool inside;
static void *deferred[DEFERRED_MAX];
static unsigned deferred_count; /* a hint: leave looks only when nonzero */

bool hz_reentry_enter(void)
{
	if (inside)
		return false;
	inside = true;
	/* Set before any lock is taken, as a handler on this thread sees it. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return true;
}

/* Inside: to the recycler, or, once hugezero stepped aside (start.c),
 * back to the kernel as munmap would. */
static void free_now(void *p)
{
	if (__atomic_load_n(&hz_preload_active, __ATOMIC_RELAXED))
		hz_recycle_free(p);
	else
		hz_blocks_free(p);
}

/* Inside: the frees that wait. A handler's free meanwhile waits too. */
static void free_deferred(void)
{
	for (unsigned i = 0; i < DEFERRED_MAX; i++) {
		void *p = __atomic_exchange_n(&deferred[i], NULL, __ATOMIC_ACQ_REL);

		if (p) {
			__atomic_sub_fetch(&deferred_count, 1, __ATOMIC_RELAXED);
			free_now(p);
		}
	}
}

static bool waiting(void)
{
	return __atomic_load_n(&deferred_count, __ATOMIC_RELAXED) != 0;
}

/* A free that came while the mark was still on is seen after it is off,
 * and made then: none waits for a later call. */
void hz_reentry_leave(void)
{
	do {
		if (waiting())
			free_deferred();
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		inside = false;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	} while (waiting() && hz_reentry_enter());
}

static bool defer(void *p)
{
	for (unsigned i = 0; i < DEFERRED_MAX; i++) {
		void *none = NULL;

		if (__atomic_compare_exchange_n(&deferred[i], &none, p, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_add_fetch(&deferred_count, 1, __ATOMIC_RELAXED);
			return true;
		}
	}
	return false;
}

void hz_reentry_free(void *p)
{
	int saved = errno;

	if (hz_preload_forking || !hz_reentry_enter()) {
		if (!defer(p))
			hz_info("free(%p) in a signal or fork handler: %d such frees are "
				"waiting already, so this block stays allocated", p, DEFERRED_MAX);
	} else {
		free_now(p);
		hz_reentry_leave();
	}
	errno = saved;
}
