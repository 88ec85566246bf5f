/* What promote.c (the table of tracked ranges) shares with
 * promote_first.c (the first touches) and promote_collapse.c (the
 * collapse): the slots and the visit that holds one busy. Internal to the
 * promoter; the rest of the library uses promote.h. */
#ifndef HZ_PROMOTE_IMPL_H
#define HZ_PROMOTE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 512 ranges: cc1 makes about a hundred 2 MiB mmaps (issue "real
 * programs"); a range that finds the table full stays on 4 KiB pages. */
#define SLOTS 512
/* Segments per range: a bit each in the range's done mask. */
#define SEG_MAX 256

/* A slot's word: state, a "dead" bit and a generation (promote.c). */
enum { ST_FREE, ST_CLAIMED, ST_LIVE, ST_BUSY };
#define ST_MASK 3u
#define ST_DEAD 4u
#define GEN_ONE 8u

struct hz_promote_slot {
	uint32_t word;
	uint8_t kind;
	bool done;       /* nothing left to do: every segment collapsed, or given up */
	bool first_touch; /* first touches still watched (promote_density.h) */
	bool whole;      /* every segment found dense and collapsed (or refused) */
	bool taken_back; /* THP advice taken back, MADV_NOHUGEPAGE since
			  * (promote_first.c): a collapse lifts it for its pages */
	uint16_t failures;
	uint16_t refused; /* 2 MiB pages refused (EINVAL), left on 4 KiB pages */
	uint16_t strided_level; /* first touches: pages per 2 MiB page when
				 * seen even (promote_density.h), or 0 */
	uintptr_t start;
	size_t len;      /* whole 2 MiB pages */
	size_t class_len; /* a block's length, the size class its evidence is for */
	size_t map_len;  /* the range as tracked, to its last page (promote_first.c) */
	uint64_t since;  /* tracked at (ns) */
	uint64_t strided_since; /* first touches: seen even at (ns) */
	uint32_t ahead;  /* first touches: the 2 MiB page faulted ahead of the
			  * writer, plus 1, once advised; or 0 (promote_first.c) */
	bool ahead_down; /* that writer goes down */
	uint32_t seg_hp; /* 2 MiB pages per segment */
	uint32_t nseg, cursor, resume;
	uint64_t seg_done[SEG_MAX / 64];
};

extern struct hz_promote_slot hz_promote_slots[SLOTS];

/* One pass of the promoter over the slots. */
struct hz_promote_budget {
	uint64_t now;
	uint64_t until;
	uint64_t born_by;    /* ranges tracked after this are too young */
	uint64_t ripe_in;    /* ns until the first too young one is not */
	bool stop;    /* budget spent, or backing off */
	bool backoff; /* a collapse failed for a while or was slow */
	bool worked;  /* something was collapsed */
};

typedef void hz_promote_work_fn(struct hz_promote_slot *s, struct hz_promote_budget *b);

/* Run work on s, live and not done, holding it busy. */
void hz_promote_visit(struct hz_promote_slot *s, hz_promote_work_fn *work,
		      struct hz_promote_budget *b);

/* Whether s, a block range, is still a block of ours as tracked. */
bool hz_promote_block_still_ours(const struct hz_promote_slot *s);

/* ---- the collapse (promote_collapse.c) ---- */

/* Collapse what is dense, within a tick's budget, when a tick is due.
 * Returns the ns until the next one is due. */
uint64_t hz_promote_collapse_pass(uint64_t now);

/* A range was tracked: the next pass is due at once. */
void hz_promote_collapse_soon(void);

/* ---- the first touches (promote_first.c) ---- */

/* A range was tracked at since: watch the first touches from then on. */
void hz_promote_watch_from(uint64_t since);

/* Look at every range whose first touches are watched. Returns the ns
 * until the next look, or UINT64_MAX when none is watched. */
uint64_t hz_promote_first_touch_pass(uint64_t now);

#endif /* HZ_PROMOTE_IMPL_H */
