/* The size-class ledger: one table of what each size class of blocks
 * (hz_size_class: the floor of log2 of the bytes) has shown, and the
 * decisions drawn from it. The mechanisms report events to it and ask it;
 * it makes no system call and calls no other module but the calloc
 * cycle (cycle.h), which runs on the rows it is handed.
 *
 * Besides the rows, one figure for all sizes: the clean bytes the pre-zero
 * thread keeps ready for calloc. A row holds three kinds of evidence:
 *  - reuse: frees, hits, misses and the time from a free to its reuse,
 *    from which a freed block's stay in the cache comes (classes.c);
 *  - how its callocs follow its frees (cycle.c runs on the row:
 *    cycle.h), which says how the thread clears its blocks;
 *  - page size: whether the class's last block was used densely, which
 *    lets its next fresh block take huge pages at once (backing.c), and
 *    the same for the program's own mmaps (preload/mmap.c, pieces.c),
 *    with the last of them left on 4 KiB pages, to be judged.
 * Reuse, the cycle and the clean target are read and written inside the
 * cache's guard (prezero.h), which serialises them; the page-size evidence
 * is written by the promoter and the pre-zero thread and read by any
 * thread that maps a block, so it is one atomic byte. */
#ifndef HZ_CLASSES_H
#define HZ_CLASSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cycle.h" /* a row's cycle */
#include "times.h"

/* One per bit of a size_t's size. */
#define HZ_CLASSES 64

/* 64 MiB: the most memory a guess may cost. A freed block whose class
 * shows no reuse yet is kept, as a probe, only within this room (cache.c):
 * two of numpy's 32 MiB temporaries, or the recycle benchmark's 64 MiB
 * block, get their first reuse, and a 1 GiB one-shot block is never kept
 * (a program that frees a touched 1 GiB block, then works 2 s on small
 * allocations, kept 1025 MiB resident all that time before, 1 MiB after,
 * as under glibc). And the program's mmaps get huge pages at map time on
 * their class's evidence only up to this size (preload/mmap.c): a larger
 * one used sparsely would cost more on a wrong guess. */
#define HZ_GUESS_MAX ((size_t)64 << 20)

/* Reuse of a class's blocks. Counts are halved as they grow, so they weigh
 * the recent past. */
struct hz_class_reuse {
	uint32_t frees;     /* blocks the program freed into the cache */
	uint32_t hits;      /* requests the cache served, or that a block
			     * released for no reuse would have served */
	uint32_t misses;    /* requests that found nothing */
	uint32_t unreused;  /* blocks that left the cache unused, each a hit
			     * for one miss soon after */
	uint64_t reuse_ns;  /* moving average of free-to-reuse time */
	uint64_t last_free; /* ns of the last free */
	size_t bytes;       /* cached now */
	size_t low;         /* the fewest cached since low_since */
	uint64_t low_since; /* ns */
};

struct hz_class {
	struct hz_class_reuse reuse;
	struct hz_class_cycle cycle;
	uint8_t dense; /* atomic: the last block was used densely */
	uint8_t mmap_dense;     /* atomic: the last mmap judged was used densely */
	uint8_t mmap_confirmed; /* atomic: dense verdicts since, in a row */
	int32_t mmaps_trusted;  /* atomic: mmaps left to take THP at once before
				 * the next sample */
	uintptr_t mmap_lazy;    /* atomic: hz_class_keep_lazy_mmap's range, packed */
};

/* The row of blocks of bytes' size, and the row of class k. */
struct hz_class *hz_class_of(size_t bytes);
struct hz_class *hz_class_at(unsigned k);

/* ---- reuse: a freed block's stay in the cache ---- */

/* The stay of a block of bytes' size entering the cache now, at most
 * decay_ns; probe: its class shows no reuse yet, and the cache keeps it
 * only briefly and within a small room (cache.c). */
uint64_t hz_class_stay(size_t bytes, uint64_t decay_ns, bool *probe);

/* Whether bytes' class shows reuse: its blocks stay, and its free wakes
 * the pre-zero thread. */
bool hz_class_warm(size_t bytes);

/* A block of bytes was freed into the cache at now (ns). */
void hz_class_freed(size_t bytes, uint64_t now);

/* A request of bytes at now was served by a block cached since idle_since
 * (0: unknown). */
void hz_class_hit(size_t bytes, uint64_t now, uint64_t idle_since);

/* A request of bytes at now found no block. Returns true when it is a
 * reuse the cache let go: the class gave a block back unused and had a
 * free within decay_ns; it then counts as a hit, once per block. */
bool hz_class_missed(size_t bytes, uint64_t now, uint64_t decay_ns);

/* A block of bytes left the cache unused. */
void hz_class_let_go(size_t bytes);

/* bytes entered (add) or left the cache. */
void hz_class_cached(size_t bytes, bool add);

/* Bytes of class k cached throughout the last stay that no request took
 * (its spare beyond the program's cycle), at now; 0 before a whole stay
 * has passed since the last look. Starts the next look. */
size_t hz_class_spare(unsigned k, uint64_t now, uint64_t decay_ns);

/* Every class's reuse evidence forgotten (a new cache: at start-up, in a
 * fork child, in tests). */
void hz_classes_forget_reuse(void);

/* ---- one event per request ---- */

/* A request for a block, as recycle.c found the cache for it. */
struct hz_class_request {
	size_t size;         /* whole granules */
	uint64_t now;        /* ns */
	bool zero;           /* a calloc */
	bool adapt;          /* stays come from reuse (HUGEZERO_CACHE_ADAPT) */
	bool hit;            /* a cached span, or the thread's, fits it */
	uint64_t idle_since; /* the hit's time of free (0: unknown) */
	uint64_t decay_ns;   /* the cache's longest stay */
	uintptr_t start;     /* the span's, from the table or the thread's
			      * (0: a fresh block), for a calloc's cycle */
	uint64_t after_free_ns; /* since the calling thread's last free returned
				 * (UINT64_MAX: none) */
};

/* What the ledger answers a request. */
struct hz_class_answer {
	bool reuse_missed; /* a miss the cache let go (hz_class_missed) */
};

/* The one event of a request: its reuse (a hit or a miss, when the cache
 * adapts), a calloc's size for the clean target, and a calloc's cycle.
 * Inside the cache's guard. */
struct hz_class_answer hz_classes_request(const struct hz_class_request *r);

/* What the ledger answers the free of a block. */
struct hz_class_kept {
	enum hz_cycle_free cycle; /* by the class's cycle */
	bool warm; /* the class shows reuse: the thread may start for it */
};

/* The one event of a free: a block of size bytes at start, freed into the
 * cache at now, counted for its class's reuse (when the cache adapts)
 * and its cycle. Inside the cache's guard. */
struct hz_class_kept hz_classes_free(size_t size, uintptr_t start, uint64_t now, bool adapt);

/* ---- clean blocks: what the pre-zero thread prepares ---- */

/* A calloc of size bytes was asked for (hz_classes_request). */
void hz_classes_calloc_seen(size_t size);

/* Bytes of clean blocks the thread keeps ready: about eight of the
 * largest recent calloc's (classes.c). */
size_t hz_classes_clean_target(void);

/* The thread found the target met (or could not act on it): the target
 * fades, by an eighth a turn. */
void hz_classes_clean_enough(void);

/* Whether the thread clears a span of bytes with cached stores: its
 * class's next calloc is likely to take it (hz_cycle_soon), so the
 * program's first writes would find the lines the thread wrote. Inside
 * the cache's guard. */
bool hz_classes_clear_in_cache(size_t bytes);

/* ---- page size ---- */

/* Whether the last block of bytes' class was used densely: its next fresh
 * block may take huge pages at once. */
bool hz_class_dense(size_t bytes);

/* A block of bytes was found dense (collapsed whole, cleared on reuse) or
 * not (sparse, or handed out on the evidence, which is used once). */
void hz_class_note_dense(size_t bytes, bool dense);

/* A sample: one mmap of a class with dense evidence starts on 4 KiB pages
 * all the same, so that its use renews or revokes the evidence. The first
 * comes 2 mmaps after the evidence, and each dense verdict in a row
 * doubles the distance to the next, while the mmaps trusted between two
 * samples hold at most HZ_GUESS_MAX, the most a wrong guess may cost (a
 * class turning sparse): a class of 64 MiB is sampled at every mmap. At a
 * fixed distance of 4, CPython's arenas took windows 301 times in 406
 * (pieces), at a growing one 391, and python-work ran 4% faster; cc1's 46
 * GC mmaps of 2 MiB left 4 on 4 KiB pages instead of 12 (bench/RESULTS.md,
 * "samples of cc1's mmaps and CPython's arenas"). Starting at 2 rather
 * than 4 was a tie (bench/RESULTS.md, "The first sample"). */

/* Whether the program's next mmap of bytes takes huge pages at once: its
 * class's last mmap judged was used densely, and it is not a sample. */
bool hz_class_mmap_thp(size_t bytes);

/* The program's mmap of bytes was found used densely or not. */
void hz_class_note_mmap(size_t bytes, bool dense);

/* The program's last mmap of bytes' class left on 4 KiB pages, [start,
 * start + len), held until its next mmap of the class judges it
 * (preload/evidence.c): start 4 KiB aligned, len whole 64 KiB units. One
 * larger than HZ_GUESS_MAX is not held: it would not earn THP at map
 * time. It replaces the one held before, if any. */
void hz_class_keep_lazy_mmap(size_t bytes, uintptr_t start, size_t len);

/* Take the range held for bytes' class: false when none is. */
bool hz_class_take_lazy_mmap(size_t bytes, uintptr_t *start, size_t *len);

#ifdef HZ_TEST_CORE
/* Tests: every row back to its first state. */
void hz_classes_test_reset(void);
#endif

#endif /* HZ_CLASSES_H */
