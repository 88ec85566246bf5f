/* The pre-zero thread, and the guard that decides who may use the cache's
 * table: a low-priority thread zeroes freed dirty spans ahead of calloc,
 * helps a calloc that must clear a large block itself, and gives idle spans'
 * memory back (decay) while the program is not calling. The program never
 * waits for it beyond a deadline (prezero.c says how). */
#ifndef HZ_PREZERO_H
#define HZ_PREZERO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "promote.h" /* enum hz_promote_kind */
#include "zero.h"

/* ---- the guard (program threads) ---- */

/* The cache's table, for this thread alone until hz_prezero_leave; spans
 * the pre-zero thread finished are back in it, and those it released the
 * memory of are in b, for release once the table is let go. NULL when the
 * pre-zero thread was stopped inside its own use of the table for longer
 * than a deadline (the scheduler preempted it): serve this request
 * without the cache. */
struct hz_cache *hz_prezero_enter(struct hz_cache_batch *b);
void hz_prezero_leave(void);

/* The effective mode: the policy's, or sync once the thread could not be
 * started. */
enum hz_prezero_opt hz_prezero_mode(void);

/* Outside the guard: dirty spans are waiting (starts the thread the first
 * time). Never waits. */
void hz_prezero_wake(void);

/* Start the thread if it does not run, without waking it. Never waits. */
void hz_prezero_start(void);

/* Whether starting the thread costs the program nothing more: it runs, or
 * the program has threads of its own (prezero_start.c says why). */
bool hz_prezero_welcome(void);

/* Whether the cache keeps a cold span for its short stay (cache.h's
 * hz_cache_hold_probes): not while the thread that would give it back in
 * time does not run and is not welcome yet. */
bool hz_prezero_holds_probes(void);

/* [start, start + len) may be collapsed to huge pages once dense: the
 * promoter watches it when it runs (hz_promote_enabled, and the thread in
 * mode thread), and the thread starts now when welcome, else once the
 * oldest such range has waited the collapse delay, at this call or a later
 * hz_prezero_poke. The backing reports its lazy blocks here (installed by
 * recycle.c), the preload its aligned mmaps. */
void hz_prezero_watch(uintptr_t start, size_t len, enum hz_promote_kind kind);

/* A large request or free: starts the thread if a range has waited the
 * collapse delay for it. Never waits. */
void hz_prezero_poke(void);

/* Outside the guard: end the thread and wait, at most a second, until it
 * has left its loop, and at most a second more until the kernel has
 * released its task (before unshare or setns, which need a
 * single-threaded process, before a change of credentials, and when a
 * call that makes a task met RLIMIT_NPROC or pids.max, src/preload/tasks.c);
 * the next hz_prezero_wake starts it again. 1 when a thread ended, 0 when
 * none ran, -EBUSY when it did not end in time. Keeps errno. */
int hz_prezero_stop(void);

/* As hz_prezero_stop, and the thread never starts again: calloc zeroes
 * its blocks itself from now on. For a program that installed a seccomp
 * filter: a new thread would make calls (clone3, sched_setscheduler,
 * prctl...) the filter may kill the process for. */
void hz_prezero_retire(void);

/* In the main thread: its pthread_exit (or cancellation) retires the
 * thread before glibc counts the main thread out, so that the program's
 * last thread ends the process (prezero_start.c). Elsewhere: nothing. */
void hz_prezero_watch_main_thread(void);

/* Inside the guard: the span the thread is zeroing, if any (true). One
 * much larger than a request (adjacent frees merge in the table) is
 * trimmed by its claimer, which puts the rest back. */
bool hz_prezero_zeroing(struct hz_span *span);

/* Inside the guard, which it leaves: take the span the thread is zeroing.
 * Waits, with a deadline, for the thread to stop at its next unit. Returns
 * 0 with the span and the bytes from its start still dirty, or -EAGAIN (the
 * thread was too slow, or had just finished: try the cache again). */
int hz_prezero_claim(struct hz_span *span, size_t *dirty);

/* How to zero a span: hugetlb pages are only ever cleared (dropping them
 * would hand them back to the pool, and MADV_DONTNEED there rounds up to
 * whole huge pages). */
static inline enum hz_zero_how hz_span_zero_how(const struct hz_span *s)
{
	return s->backing <= HZ_BACKING_HUGETLB2M ? HZ_ZERO_WRITE_ONLY : HZ_ZERO_ANY;
}

/* After zeroing s with m: sparse use (dropped) earns 4 KiB pages, dense
 * use (cleared) THP again. May change s->backing. */
void hz_prezero_adapt_backing(struct hz_span *s, enum hz_zero_method m);

/* Outside the guard: zero the first dirty bytes of s for calloc, the block
 * start last. Large clears are shared with the thread (two cores). Returns
 * 0 with the bytes written in *written, or -EAGAIN when the thread, holding
 * a chunk of it, did not finish that chunk within a deadline: s is then the
 * thread's (it gives s back to the cache) and the caller must take another
 * block. */
int hz_prezero_zero_for_calloc(const struct hz_span *s, size_t dirty, enum hz_zero_method m,
			       size_t *written);

/* Program threads, outside the guard: release the spans of b (it takes
 * the blocks lock). */
void hz_prezero_release(struct hz_cache_batch *b);

/* fork handlers. The child has no pre-zero thread until the next wake. */
void hz_prezero_fork_prepare(void);
void hz_prezero_fork_parent(void);
void hz_prezero_fork_child(void);

/* ---- between the other prezero_*.c files and prezero_share.c ---- */

/* The slowest the thread clears and still counts as running: 1 GB/s, 1 ns
 * a byte. On a free core it clears at 8-19 GB/s here, and at nice 19
 * beside two busy threads a 32 MiB unit took 0.1-1 s while a calloc waited
 * for it (bench/RESULTS.md, "pre-zero thread under load"). A unit cleared
 * slower means the thread is starved of CPU, and it pauses (prezero.c);
 * whoever waits for the thread to finish a unit (a calloc claiming the span
 * it zeroes or sharing its clear, a fresh block making room under a memory
 * limit) waits as long at most, then goes on without it: a starved thread
 * must not stall the program. */
#define HZ_PREZERO_SLOWEST_NS_PER_BYTE 1

/* The most a program thread waits for the thread to clear bytes. */
static inline uint64_t hz_prezero_patience_ns(size_t bytes)
{
	return (uint64_t)bytes * HZ_PREZERO_SLOWEST_NS_PER_BYTE;
}

/* Spin for HZ_THREAD_WAKE_NS, then sleep, until (*word & mask) == want
 * (true) or ns passed (false). Sleeping matters: the thread runs at the
 * lowest priority, and a waiter spinning on its CPU would keep it from
 * finishing. */
bool hz_prezero_wait(int *word, int mask, int want, uint64_t ns);

/* Whether the thread runs and is not resting, starved: worth sharing with. */
bool hz_prezero_can_help(void);

/* The thread: help with the open shared clear, if any. */
void hz_prezero_share_help(void);

/* The thread: a block a late caller left to it, if any (taken: forgotten
 * here). */
bool hz_prezero_share_kept(struct hz_span *span, bool take);

/* Fork child: reset the shared clear; true with *left set when the thread
 * held a caller's block, which goes back to the cache. */
bool hz_prezero_share_fork_child(struct hz_span *left);

/* ---- the test core only ---- */

/* Where a test can hold the pre-zero thread, as if the scheduler had
 * preempted it there (it runs at idle priority, so that can last seconds). */
enum hz_prezero_point {
	HZ_PREZERO_AT_SECTION, /* inside its use of the cache's table */
	HZ_PREZERO_AT_UNIT,    /* between two units of the span it zeroes */
	HZ_PREZERO_AT_CHUNK,   /* inside a chunk of a calloc's clear it shares */
	HZ_PREZERO_AT_SLEEP,   /* about to sleep until woken */
};

#ifdef HZ_TEST_CORE
/* Called by the thread at each point when set. */
extern void (*hz_prezero_test_hook)(enum hz_prezero_point point);
#define HZ_PREZERO_HOOK(point)                                                        \
	do {                                                                          \
		void (*hook_)(enum hz_prezero_point) =                                \
			__atomic_load_n(&hz_prezero_test_hook, __ATOMIC_ACQUIRE);     \
		if (hook_)                                                            \
			hook_(point);                                                 \
	} while (0)

/* Inside the guard: call fn with each span the thread holds (zeroing,
 * finished but not collected, releasing). Returns how many it holds, with
 * those it holds privately (a calloc's block it was left with) counted but
 * not visited. */
unsigned hz_prezero_each_held(void (*fn)(const struct hz_span *span, void *ctx), void *ctx);
#else
#define HZ_PREZERO_HOOK(point) ((void)0)
#endif

#endif /* HZ_PREZERO_H */
