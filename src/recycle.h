/* Recycling of freed large blocks: they stay mapped, with their huge pages,
 * and are handed out again instead of being returned to the kernel. Each is
 * clean (reads zero) or dirty; calloc takes clean ones first, everything
 * else dirty ones first, and a pre-zero thread turns dirty into clean ahead
 * of demand. */
#ifndef HZ_RECYCLE_H
#define HZ_RECYCLE_H

#include <stdbool.h>
#include <stddef.h>

/* A large block of at least size bytes aligned to align (0 for none), from
 * the cache or fresh. With zero, every byte reads zero. Returns 0 or
 * -ENOMEM. */
int hz_recycle_alloc(size_t size, size_t align, bool zero, void **out);

/* Take a live block back into the cache (or release it when the cache is
 * full or disabled). Keeps errno. */
void hz_recycle_free(void *p);

/* fork handlers. */
void hz_recycle_fork_prepare(void);
void hz_recycle_fork_parent(void);
void hz_recycle_fork_child(void);

/* ---- draining and consistency checks (tests/fault) ---- */

struct hz_span;

/* Release every cached span, waiting for the one the pre-zero thread holds
 * to come back (at most one unit of work). */
void hz_recycle_drain(void);

struct hz_recycle_census {
	size_t spans;
	size_t cached_bytes;
	size_t clean_bytes;
	size_t in_flight_bytes; /* the span the pre-zero thread holds */
};

/* Check the cache: every span (and the one in flight) lies on claimed
 * granules that no live block uses (hz_blocks_check_span), no two overlap,
 * the byte counts and hz_stats.cache_bytes match the spans, and the cache
 * holds no more than HUGEZERO_CACHE_MAX. Then visit, when not NULL, is
 * called with each cached span, under the cache's lock (so the test can
 * read a clean span, which must read zero). Fills c and returns 0, or
 * prints the first inconsistency and returns -EUCLEAN. */
int hz_recycle_check(struct hz_recycle_census *c,
		     void (*visit)(const struct hz_span *span, bool clean, void *ctx),
		     void *ctx);

#endif /* HZ_RECYCLE_H */
