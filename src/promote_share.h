/* The promoter's share of the program's CPU time (HUGEZERO_COLLAPSE_CPU).
 *
 * A collapse pays only for memory the program goes on using, and the
 * promoter sees residency, not use: sort, zstd, gcc, ld and ImageMagick
 * write their memory densely and finish within seconds, and collapsing it
 * cost them 0.6-1 s of system time and 6-9% of wall time on a VM whose host
 * backs fresh memory lazily (bench/run-apps, 2026-12-01). So collapses take
 * at most a share of the CPU time the program's own threads have used: a
 * short program pays at most that share, and a long-lived one, whose memory
 * stays in use, earns the time to collapse all of it.
 *
 * Called by the promoter (the pre-zero thread) alone, but for the tests'
 * reset. */
#ifndef HZ_PROMOTE_SHARE_H
#define HZ_PROMOTE_SHARE_H

#include <stdint.h>

/* Collapse CPU time still allowed now, in ns: UINT64_MAX for no limit
 * (100), 0 when the share is spent or is 0. Measured against the threads
 * of the process other than the caller's (the promoter also zeroes). */
uint64_t hz_promote_share_left_ns(void);

/* A collapse (or a failed one) took cpu_ns of the caller's CPU time. */
void hz_promote_share_spend(uint64_t cpu_ns);

/* With the share spent: how long until the program, on one CPU, has
 * earned back what is overspent, between min_ns and max_ns (max_ns for a
 * share of 0). */
uint64_t hz_promote_share_wait_ns(uint64_t min_ns, uint64_t max_ns);

/* A fork's child: its CPU clock starts at 0, and so does what it spent. */
void hz_promote_share_reset(void);

#endif /* HZ_PROMOTE_SHARE_H */
