/* What the jemalloc arenas behind the hooks demand lately: the bytes they
 * hold, and the most they held in the last one to two half-windows (the
 * window is HUGEZERO_DECAY_MS). The dirty pages the hooks keep for reuse
 * stay within the difference (hz_demand_room), so that the arenas' memory
 * stays within their recent peak, as it would without the hooks' cache:
 * jemalloc alone gets fresh pages for every extent.
 *
 * Scaling the room by the share of given-back bytes that held data was
 * tried: on values half of them barely touched, 4% less memory for 40%
 * more time (bench/RESULTS.md, "A jemalloc program's freed values").
 *
 * Pure: no system call, no lock (the caller's, extents.c), times passed
 * in, so that tests run it on a clock of their own. */
#ifndef HZ_JEMALLOC_DEMAND_H
#define HZ_JEMALLOC_DEMAND_H

#include <stddef.h>
#include <stdint.h>

struct hz_demand {
	size_t active;    /* bytes handed out and not given back */
	size_t peak;      /* the most active since since */
	size_t last_peak; /* the most active in the half-window before */
	uint64_t since;   /* ns: the start of this half-window */
};

/* bytes were handed out, or given back, at now (ns), with a window of
 * window_ns. */
void hz_demand_handed_out(struct hz_demand *d, size_t bytes, uint64_t now, uint64_t window_ns);
void hz_demand_given_back(struct hz_demand *d, size_t bytes, uint64_t now, uint64_t window_ns);

/* Dirty bytes worth keeping now: the recent peak less what is held. */
size_t hz_demand_room(const struct hz_demand *d);

#endif /* HZ_JEMALLOC_DEMAND_H */
