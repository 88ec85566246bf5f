/* How a size class's callocs follow its frees: a row of the ledger
 * (classes.h), whose events make the calls here, one per calloc and one
 * per free, inside the cache's guard (prezero.h), which serialises them.
 *
 * A free keeps its block for the pre-zero thread to clear with
 * non-temporal stores, which spare the program's cache, unless the class's
 * last HZ_CYCLE_RUN callocs show that its next calloc takes that block:
 *  - each came right after its free, before a woken thread could clear
 *    much (HZ_CYCLE_AT_ONCE): the thread stays asleep and the calloc
 *    clears the block alone, in the cache;
 *  - each took the block its class freed last, cleared, dirty or still
 *    being cleared (hz_cycle_soon): the thread clears it with cached stores
 *    (where it fits in half the last-level cache: zero.h), so the
 *    program's first writes and reads find it in the cache.
 * Either way the class keeps one block. A second one, a spare the thread
 * cleared while the program wrote the first, cost a block above the
 * program's own peak for less: numpy's loop ran in 0.80x the time with
 * the cached clear and no spare, at 158 MiB against 190, and the 64 MiB
 * calloc + write-all cycle in 0.90x at half the memory (bench/RESULTS.md,
 * "The thread clears in the cache for the next calloc"). Only callocs
 * count. */
#ifndef HZ_CYCLE_H
#define HZ_CYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Callocs in a row that make a rhythm. */
#define HZ_CYCLE_RUN 8

/* A run of callocs in a row, one more (saturating) or broken. */
static inline uint32_t hz_cycle_run(uint32_t run, bool more)
{
	return more ? run + (run < UINT32_MAX) : 0;
}

/* A size class's rhythm: a row of the ledger (classes.h). */
struct hz_class_cycle {
	uint64_t last;     /* ns of the class's last calloc */
	uint64_t freed_at; /* ns of the class's last free */
	uintptr_t freed;   /* start of the class's last freed block */
	uint32_t at_once;  /* callocs in a row right after a free */
	uint32_t took;     /* callocs in a row that took the block freed last */
};

/* A calloc of k's class at now (ns), served by the kept span at start,
 * from the table or the thread's (0: a fresh block), after_free_ns after
 * the calling thread's last free returned (UINT64_MAX: none). */
void hz_cycle_calloc(struct hz_class_cycle *k, uint64_t now, uintptr_t start,
		     uint64_t after_free_ns);

/* What the free of a block is to do, by its class's rhythm. */
enum hz_cycle_free {
	HZ_CYCLE_KEEP,    /* keep it, for the thread to clear */
	HZ_CYCLE_AT_ONCE, /* keep it and leave the thread asleep: a wake
			   * would only make the calloc take the clear over
			   * (it made a 64 MiB first-byte cycle 1.1-1.9x
			   * slower: bench/RESULTS.md, "The first-byte cycle:
			   * the free's wake"); the calloc clears the block
			   * alone (or shares a large clear, prezero.h) */
};

/* A block of k's class at start is being freed, at now (ns): what to do
 * with it. program_at_once: the program's last HZ_CYCLE_RUN callocs, of
 * any class, each took the block freed just before (classes.c, the
 * program's rhythm), which counts as the class's own run. */
enum hz_cycle_free hz_cycle_freed(struct hz_class_cycle *k, uintptr_t start, uint64_t now,
				  bool program_at_once);

/* Whether k's class's next calloc is likely to take the block it freed
 * last: its last HZ_CYCLE_RUN callocs each did. */
static inline bool hz_cycle_soon(const struct hz_class_cycle *k)
{
	return k->took >= HZ_CYCLE_RUN;
}

#endif /* HZ_CYCLE_H */
