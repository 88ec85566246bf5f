/* hugezero's jemalloc extent hooks: a jemalloc arena whose extents come from
 * hugezero's huge-page backing and are zeroed by hugezero.
 *
 * Built into libhugezero.so when jemalloc >= 5.3 (without a symbol prefix)
 * is found at build time. libhugezero.so does not link jemalloc: it uses the
 * program's own copy, looking mallctl up when hz_jemalloc_create_arena runs.
 *
 * Usage:
 *
 *     unsigned ind;
 *     if (hz_jemalloc_create_arena(&ind) == 0) {
 *             int flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
 *             void *p = mallocx(64 << 20, flags | MALLOCX_ZERO);
 *             ...
 *             dallocx(p, flags);
 *     }
 *
 * Pass MALLOCX_TCACHE_NONE (or a tcache of your own, from "tcache.create",
 * with MALLOCX_TCACHE(tc)) with every call: without it, jemalloc's thread
 * cache hands objects freed to one arena out to requests for another, so
 * small objects would not stay on this arena.
 *
 * What the hooks do (see the README for the reasons):
 *  - alloc: page-granular extents carved from huge-page-backed regions of at
 *    least 64 MiB (hugetlb when the pool has pages, else THP, else 4 KiB), so
 *    odd sizes such as 2.5 MiB still sit in huge pages. An extent asked
 *    for zeroed (*zero true on entry) reads zero; one that was not reads
 *    zero when no page of it was written since it was last freed, and *zero
 *    says which. Alignment up to 1 GiB and new_addr are honoured.
 *  - dalloc: any sub-range goes back to hugezero's cache as dirty; it is
 *    zeroed when handed out again for a zeroed request, paying only for
 *    pages that are resident.
 *  - purge_forced / decommit: the range reads zero afterwards (whole aligned
 *    transparent huge pages are dropped, partial ones and hugetlb pages are
 *    cleared). purge_lazy: MADV_FREE on whole huge pages, else opt out.
 *  - split always succeeds inside a region; merge only within one region.
 *  - destroy releases; an arena whose every extent came back (arena.<i>.
 *    destroy) gives all of its regions back to the system at once.
 * The hooks never allocate and never call into jemalloc, keep errno, and are
 * thread-safe. Ranges that did not come from these hooks (an arena whose
 * hooks were replaced while it held memory) get jemalloc's default
 * behaviour or an opt-out.
 */
#ifndef HUGEZERO_JEMALLOC_H
#define HUGEZERO_JEMALLOC_H

#include <stddef.h>

#ifndef JEMALLOC_VERSION
#include <jemalloc/jemalloc.h>
#endif

#include <hugezero.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The hooks table, valid for the life of the process. Pass it to
 * "arenas.create" or "arena.<i>.extent_hooks". Never fails. */
HZ_API extent_hooks_t *hz_jemalloc_hooks(void);

/* Create a jemalloc arena with hugezero's hooks ("arenas.create") and store
 * its index in *arena_ind. Returns 0, ENOSYS when the process has no jemalloc (no "mallctl" symbol),
 * or the error mallctl returned (EAGAIN: too many arenas). */
HZ_API int hz_jemalloc_create_arena(unsigned *arena_ind);

/* What the hooks hold, for one arena or for all (HZ_JEMALLOC_ALL_ARENAS). */
#define HZ_JEMALLOC_ALL_ARENAS (~0u)

struct hz_jemalloc_stats {
	size_t regions;         /* huge-page-backed regions mapped */
	size_t mapped_bytes;    /* their total size */
	size_t active_bytes;    /* of which jemalloc holds (extents handed out) */
	size_t dirty_bytes;     /* free, holding old data: zeroed before reuse */
	size_t hugetlb_bytes;   /* mapped_bytes backed by hugetlb pages (1G or 2M) */
	size_t thp_bytes;       /* ... by transparent huge pages */
	size_t small_bytes;     /* ... by 4 KiB pages (no huge page available) */
};

/* Fill *out for arena_ind (or every arena). Returns 0, or EINVAL when out
 * is NULL. */
HZ_API int hz_jemalloc_stats(unsigned arena_ind, struct hz_jemalloc_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* HUGEZERO_JEMALLOC_H */
