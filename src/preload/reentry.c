/* malloc and free are not async-signal-safe, but under glibc a large block
 * is an mmap'ed chunk: a signal handler that frees one, or asks for a
 * large one, takes no lock for it, and programs rely on that (a handler
 * that frees a buffer and exits, one that reports with a large
 * allocation). The library's large paths take the cache's and the
 * blocks' locks: a handler re-entering them on the thread that holds one
 * would wait for itself forever. So each thread marks itself inside
 * them, and a call that finds the mark set is a handler's: its large
 * request goes to the next allocator (malloc.c), and its free of a block
 * waits in a lock-free list until the interrupted call leaves. */
#include "reentry.h"

#include <stddef.h>

#include "../log.h"
#include "preload.h"

/* Frees deferred at once: a handler frees a few blocks, not hundreds. */
#define DEFERRED_MAX 64

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

static void free_deferred(void)
{
	for (unsigned i = 0; i < DEFERRED_MAX; i++) {
		void *p = __atomic_exchange_n(&deferred[i], NULL, __ATOMIC_ACQ_REL);

		if (p) {
			__atomic_sub_fetch(&deferred_count, 1, __ATOMIC_RELAXED);
			hz_preload_free(p);
		}
	}
}

void hz_reentry_leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	inside = false;
	if (__atomic_load_n(&deferred_count, __ATOMIC_RELAXED) != 0)
		free_deferred();
}

bool hz_reentry_defer_free(void *p)
{
	for (unsigned i = 0; i < DEFERRED_MAX; i++) {
		void *none = NULL;

		if (__atomic_compare_exchange_n(&deferred[i], &none, p, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_add_fetch(&deferred_count, 1, __ATOMIC_RELAXED);
			return true;
		}
	}
	hz_info("free(%p) in a signal handler that interrupted hugezero: %d such frees are "
		"waiting already, so this block stays allocated", p, DEFERRED_MAX);
	return false;
}
