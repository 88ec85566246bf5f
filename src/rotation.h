/* The two-block rotation, per size class (floor of log2 of the bytes).
 *
 * A program that frees a block and at once asks for one of its size again
 * finds it mid-zeroing: its calloc takes the clear over (recycle.c), and
 * the clear is on its critical path. With a second block of the size
 * (a spare), each calloc gets the one the pre-zero thread cleared while the
 * program wrote the other. The spare costs a block of memory and a fresh
 * block's faults, and the thread's stores share the memory with the
 * program's, so it does not always win. Only classes of blocks up to
 * HZ_GUESS_MAX get one (the ledger's rule, classes.h), and each is tried:
 * after callocs in a row that had to clear (32 before the first trial, 8
 * before a later one), the next maps a spare, and the time from one
 * calloc of the class to the next (a median of 8) with the spare, against
 * that before it, decides whether the spare stays (rotation.c says by how
 * much). A lost trial gives the spare back at the class's next free; a won
 * one is checked again, without the spare, after twice as many callocs
 * each time. Only callocs are timed. The ledger's events make the calls
 * here (classes.h: hz_classes_request, hz_classes_free), one per calloc
 * and one per free, inside the cache's guard (prezero.h), which
 * serialises them. */
#ifndef HZ_ROTATION_H
#define HZ_ROTATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The trial's state of a size class: a row of the ledger (classes.h). */
#define HZ_ROTATION_RUN 8 /* periods in a sample */
struct hz_class_rotation {
	uint64_t last;        /* ns of the class's last calloc */
	uint64_t freed_at;    /* ns of the class's last free */
	uintptr_t freed;      /* start of the class's last freed block */
	uint32_t run;         /* callocs in a row that cleared */
	uint32_t at_once;     /* callocs in a row right after a free */
	uint32_t without;     /* median period without the spare */
	uint32_t cycles;      /* callocs since the last change of state */
	uint32_t recheck;     /* kept: callocs before the next check */
	uint32_t retry;       /* watching: callocs before the next trial */
	uint32_t sample[HZ_ROTATION_RUN]; /* periods, microseconds */
	uint8_t state;        /* rotation.c's enum */
	uint8_t n;            /* periods in sample */
	bool tried;           /* a trial was made */
	bool skip;            /* the next period holds the spare's first faults */
};

/* How a calloc is served. */
enum hz_rotation_served {
	HZ_ROT_CLEARS, /* the span the thread was zeroing, taken over: the
			* calloc clears on its critical path */
	HZ_ROT_DIRTY,  /* a dirty span from the table: counted as a clear on
			* the critical path only when it is the block its class
			* freed last, as in a tight cycle (many blocks freed in
			* turn also leave dirty spans, which a spare does not
			* help), else as HZ_ROT_OTHER */
	HZ_ROT_CLEAN,  /* a clean span from the table */
	HZ_ROT_OTHER,  /* a fresh block */
};

/* A calloc of k's class at now (ns), served so (start: the dirty span's,
 * for HZ_ROT_DIRTY), after_free_ns after the calling thread's last free
 * returned (UINT64_MAX: none). One that would clear on its critical path,
 * in pre-zero mode thread (thread), may be told to map a fresh block, the
 * spare, instead: true, and the span is left to the thread. */
bool hz_rotation_calloc(struct hz_class_rotation *k, uint64_t now, enum hz_rotation_served how,
			uintptr_t start, uint64_t after_free_ns, bool thread);

/* What the free of a block is to do, by its class's rotation. */
enum hz_rotation_free {
	HZ_ROT_FREE_KEEP,    /* keep it, for the thread to clear */
	HZ_ROT_FREE_AT_ONCE, /* keep it and leave the thread asleep: the
			      * class keeps no spare, and each of its last
			      * HZ_ROTATION_RUN callocs (a sample's length)
			      * came within HZ_THREAD_WAKE_NS of its free
			      * (classes.h), before a woken thread could
			      * clear much of the block. A wake would only
			      * make the calloc take the clear over (it made
			      * a 64 MiB first-byte cycle 1.1-1.9x slower:
			      * bench/RESULTS.md, "The first-byte cycle: the
			      * free's wake"); the calloc clears the block
			      * alone (or shares a large clear, prezero.h). */
	HZ_ROT_FREE_DROP,    /* release it: the class gives its spare back,
			      * once */
};

/* A block of k's class at start is being freed, at now (ns): what to do
 * with it. program_at_once: the program's last HZ_ROTATION_RUN callocs,
 * of any class, each took the block freed just before (classes.c, the
 * program's rhythm), which counts as the class's own run. */
enum hz_rotation_free hz_rotation_freed(struct hz_class_rotation *k, uintptr_t start, uint64_t now,
					bool program_at_once);

#endif /* HZ_ROTATION_H */
