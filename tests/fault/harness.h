/* Shared by the fault-injection tests: the resolver that gives hugezero
 * glibc as its next allocator, the scripted workload, the consistency and
 * leak checks, and running one scenario in a child process.
 *
 * The tests link the core built with -DHZ_FAULT_INJECTION and call the
 * hz_preload_* entry points directly, so every prim call hugezero makes can
 * be made to fail (src/prim/fault.h). Each scenario runs in a fork child:
 * hugezero's state (options, probes, the reservation) is per process, and a
 * crash or hang becomes a failed scenario instead of a dead test. */
#ifndef HZ_FAULT_HARNESS_H
#define HZ_FAULT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "preload/preload.h"
#include "prim/fault.h"
#include "../util.h"

/* Starts hugezero with glibc's functions as the next ones (the test is
 * not preloaded), as the shim does with what dlsym(RTLD_NEXT) finds. */
void fault_start(void);

/* ---- the workload ---- */

struct workload_result {
	unsigned ops;          /* allocation-type operations made */
	unsigned failed;       /* NULL / MAP_FAILED with ENOMEM: allowed */
	unsigned next_served;  /* large requests the next allocator served */
	unsigned wrong;        /* broken promises: each printed */
};

/* Run the scripted workload through hz_preload_*: large malloc, calloc,
 * realloc across and above the threshold, aligned allocations up to 1 GiB,
 * reuse from the cache (calloc after free must read zero), dense and sparse
 * use, anonymous mmap/mremap/munmap, and cache decay (by moving the clock).
 * Every result is checked: right contents, alignment and size, or NULL with
 * errno ENOMEM. With strict, every large request must also be served by
 * hugezero when it is active. Frees everything it allocated. */
void workload_run(bool strict, struct workload_result *r);

#ifdef HZ_HAVE_JEMALLOC
/* The jemalloc extent hooks called directly: odd sizes, a 1 GiB alignment,
 * purge, decommit, split and merge, reuse, every extent freed (see
 * jemalloc_workload.c). strict is unused: the hooks have no fallback. */
void jemalloc_workload_run(bool strict, struct workload_result *r);
#endif

/* ---- checks ---- */

/* What the process holds outside hugezero's regions and in them. */
struct footprint {
	size_t outside_bytes;   /* mappings outside the regions and their
				 * tables, but the heap, stack, vdso and vvar */
	size_t glibc_mmapped;   /* mallinfo2().hblkhd */
};

void footprint_take(struct footprint *f);

/* Bytes resident anywhere in the regions (mincore per 2 MiB granule). */
size_t reservation_resident(void);

/* The metadata checks (hz_blocks_check, hz_recycle_check, every clean
 * cached span reads zero), then: nothing live, the cache drained, the
 * claimed granules only those a failed release had to keep (allowed only
 * when orphans_allowed), nothing resident in the reservation, and the
 * footprint back to base, plus at most extra_outside bytes. Prints each problem;
 * returns the number found. */
unsigned check_quiescent(const struct footprint *base, size_t extra_outside,
			 bool orphans_allowed, size_t *orphans);

/* Threads of this process ("Threads:" in /proc/self/status). */
unsigned thread_count(void);

/* What a thread adds to outside_bytes: the pre-zero thread's 256 KiB stack
 * (src/recycle.c) and glibc's guard page below it. */
#define THREAD_MAPPING_BYTES (256 * KiB + 4 * KiB)

/* ---- scenarios in child processes ---- */

enum child_status {
	CHILD_OK = 0,
	CHILD_BROKEN = 1,      /* a check failed */
	CHILD_NOT_REACHED = 3, /* the armed call never happened */
	CHILD_SKIPPED = 4,
};

/* Run fn(arg) in a child with a 20 s alarm; its stderr is captured and
 * printed when it does not exit with CHILD_OK, CHILD_NOT_REACHED or
 * CHILD_SKIPPED. Returns the exit status, or -signal. */
int child_run(int (*fn)(void *arg), void *arg, const char *what);

/* Environment every scenario starts from (HUGEZERO_* for small sizes);
 * extra is a NULL-terminated list of "NAME=value" overrides. */
void scenario_env(const char *const *extra);

#endif /* HZ_FAULT_HARNESS_H */
