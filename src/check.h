/* Consistency checks of the block tables and the cache, and draining the
 * cache: for tests only. They are compiled into the test core alone
 * (HZ_TEST_CORE: tests/meson.build), never into libhugezero.so. */
#ifndef HZ_CHECK_H
#define HZ_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "blocks.h"

/* ---- blocks (blocks_check.c) ---- */

struct hz_blocks_census {
	size_t live_blocks;
	size_t live_granules;
	/* Live blocks, spans the recycler holds, and granules kept claimed
	 * because giving them back to the reservation failed. */
	size_t claimed_granules;
};

/* Walk the metadata: every live block lies in the reservation, starts on
 * its backing's alignment, is a whole number of its pages, sits on claimed
 * granules and overlaps no other; hz_stats.live_bytes equals the live
 * blocks' bytes. Fills c and returns 0, or prints the first inconsistency
 * (hz_warn) and returns -EUCLEAN. Call while no other thread allocates. */
int hz_blocks_check(struct hz_blocks_census *c);

/* 0 when span lies in the reservation on claimed granules that no live
 * block uses, else -EUCLEAN (printed as by hz_blocks_check). */
int hz_blocks_check_span(const struct hz_span *span);

/* ---- the cache (check.c) ---- */

/* Release every cached span, waiting for those the pre-zero thread holds
 * to come back (at most one unit of work). */
void hz_recycle_drain(void);

struct hz_recycle_census {
	size_t spans;
	size_t cached_bytes;
	size_t clean_bytes;
	size_t in_flight_bytes; /* spans the pre-zero thread holds */
};

/* Check the cache: every span (and those the pre-zero thread holds) lies on
 * claimed granules that no live block uses (hz_blocks_check_span), no two
 * overlap, the byte counts and hz_stats.cache_bytes match the spans, and
 * the table holds no more than the policy's cache_max. Then visit, when not
 * NULL, is called with each cached span, inside the guard (so the test can
 * read a clean span, which must read zero). Fills c and returns 0, or
 * prints the first inconsistency and returns -EUCLEAN. */
int hz_recycle_check(struct hz_recycle_census *c,
		     void (*visit)(const struct hz_span *span, bool clean, void *ctx),
		     void *ctx);

#endif /* HZ_CHECK_H */
