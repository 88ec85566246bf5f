/* What prezero.c shares with prezero_guard.c, prezero_fork.c and
 * prezero_start.c: the guard, the table, the job slots and the thread's
 * flags. Internal to the pre-zero thread; the rest of the library uses
 * prezero.h. */
#ifndef HZ_PREZERO_IMPL_H
#define HZ_PREZERO_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blocks.h"
#include "cache.h"
#include "lock.h"

/* 200 us for the thread's turn at the table: a scan of at most 1024
 * entries, microseconds on a CPU; if it has not ended, the thread was
 * preempted inside it. */
#define GUARD_WAIT_NS 200000
/* Job slots: one span being zeroed, a batch being released, and finished
 * ones the program has not collected yet. */
#define JOBS 16

enum { JOB_FREE, JOB_ZEROING, JOB_CLAIMED, JOB_HANDED, JOB_RELEASING, JOB_DONE };

struct job {
	struct hz_span span;   /* what the thread took; written while FREE */
	struct hz_span result; /* what it leaves; written before HANDED or DONE */
	size_t dirty;          /* bytes from result's start still dirty */
	int state;
	bool released;         /* its memory is gone: release the span */
	/* A job that makes an idle span reclaimable instead of zeroing it
	 * (prezero.c): the entry's state, kept through the job, and whether
	 * the result is lazy (every page MADV_FREE'd). Written while FREE. */
	bool lazify, clean, lazy;
	/* Cleared with cached stores: its class's next calloc takes it
	 * (hz_classes_clear_in_cache). Written while FREE. */
	bool in_cache;
	uint64_t idle_since;   /* ns; 0: the span is idle from its collection */
};

extern struct hz_cache pz_cache;
extern pthread_once_t pz_cache_once;
/* The guard: the lock program threads take, and the Dekker pair of flags. */
extern struct hz_lock pz_lock;
extern int pz_program_in, pz_thread_in;
extern unsigned pz_stalled_turn; /* the turn a program thread gave up on */
extern unsigned pz_turns;        /* the thread's tries at the table */
extern struct job pz_jobs[JOBS];
/* The thread: started; asked to stop; its kernel id while it runs; left
 * its loop; its wake-up sequence and whether it sleeps on it. */
extern int pz_thread_started, pz_stop, pz_tid, pz_exited, pz_wake_seq, pz_sleeping;
/* Starting it failed: calloc zeroes instead. */
extern int pz_thread_failed;
/* hz_prezero_retire ran, or the main thread left: the thread never
 * starts again. */
extern int pz_thread_retired;
/* Until when (ns) a starved thread rests, and calloc zeroes meanwhile. */
extern uint64_t pz_paused_until;

/* The thread's body (prezero.c), started by prezero_start.c. */
void *hz_pz_main(void *arg);

/* The thread, at most once a tick: when the program's threads have all
 * left, it exits with the main thread's status (prezero_start.c). */
void hz_pz_leave_if_alone(uint64_t now);
/* Fork child: its thread, the process's main now, is watched as the
 * parent's main thread was (prezero_start.c). */
void hz_pz_fork_child_watch(void);
/* pthread_once routine: the table, from the cache policy. */
void hz_pz_init_cache(void);
/* Out of the guard without reading the table, which the thread may still
 * hold (a fork that stopped waiting for it). */
void hz_pz_guard_open(void);
/* The table's byte count into the stats. */
void hz_pz_publish_bytes(void);
/* Inside the guard: what finished jobs left goes to the table, or b. */
void hz_pz_collect(struct hz_cache_batch *b);
/* The first job slot in state, or NULL. */
struct job *hz_pz_job_in(int state);
/* The thread is done with j: s remains, dirty bytes of it from its start,
 * its memory released or not. */
void hz_pz_job_done(struct job *j, const struct hz_span *s, size_t dirty, bool released);

#endif /* HZ_PREZERO_IMPL_H */
