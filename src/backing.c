/* Getting huge-page memory for a block. See backing.h.
 *
 * Blocks live inside the PROT_NONE reservation (blocks.c); backing a block
 * means mapping read-write memory over its part of the reservation with
 * MAP_FIXED, and releasing means putting the reservation back. */
#include "backing.h"

#include <errno.h>
#include <sys/mman.h>

#include "classes.h"
#include "config.h"
#include "log.h"
#include "prim/memory.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "range.h"
#include "sizes.h"
#include "stats.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static const struct {
	enum hz_os_pool pool;
	enum hz_prim_pages pages;
} pools[] = {
	[HZ_BACKING_HUGETLB1G] = { HZ_OS_POOL_1G, HZ_PAGES_HUGETLB_1G },
	[HZ_BACKING_HUGETLB2M] = { HZ_OS_POOL_2M, HZ_PAGES_HUGETLB_2M },
};

size_t hz_backing_page(enum hz_backing b)
{
	switch (b) {
	case HZ_BACKING_HUGETLB1G: return HZ_SZ_1G;
	case HZ_BACKING_HUGETLB2M:
	case HZ_BACKING_THP: return HZ_SZ_2M;
	default: return HZ_SZ_4K;
	}
}

/* The pool's free, unreserved pages, read now (hz_os_pool_available). */
static int pool_fits(enum hz_backing b, size_t len)
{
	size_t page = hz_backing_page(b);

	return hz_os_pool_available(pools[b].pool) >= (len + page - 1) / page;
}

/* THP is usable unless the system mode is "never" (or unreadable). Read
 * once, by hz_os(): the library never changes sysfs and administrators
 * rarely do while programs run. */
static int thp_enabled(void)
{
	return hz_os_thp_on(hz_os()->thp.mode);
}

/* prctl(PR_SET_THP_DISABLE) gives the process 4 KiB pages everywhere, yet
 * MADV_HUGEPAGE still succeeds (Linux 6.18; tests/resources/thp_disabled.c),
 * so ask for the flag itself. Bit 1 (PR_THP_DISABLE_EXCEPT_ADVISED) keeps
 * THP for MADV_HUGEPAGE regions, which ours are. Not cached: a program may
 * set it at any time, and a prctl costs little next to mapping a block. */
static int thp_disabled_here(void)
{
	int flags = hz_prim_thp_disable_flags();

	return flags > 0 && (flags & 1) && !(flags & 2);
}

int hz_backing_thp_usable(void)
{
	return thp_enabled() && !thp_disabled_here();
}

bool hz_backing_thp_allowed(void)
{
	return hz_backing_first() <= HZ_BACKING_THP && hz_backing_thp_usable();
}

/* auto never picks hugetlb. hugetlb memory differs from what glibc gives
 * in ways a program can see: a private hugetlb block shared with a fork
 * child copies on write from the pool, and when the pool is short the
 * kernel sends SIGBUS (to the child, or unmaps the page from it when the
 * parent writes first); MADV_DONTNEED, mprotect and munmap work only in
 * whole huge pages (EINVAL on a 4 KiB range); the hugetlb cgroup charges
 * at fault time (Kubernetes sets hugetlb.<size>.max = 0 for every pod
 * that requests no huge pages). So hugetlb is used only when asked for
 * (HUGEZERO_BACKING=hugetlb2m or hugetlb1g); README, "Containers". */
enum hz_backing hz_backing_first(void)
{
	switch (hz_config()->backing) {
	case HZ_BACKING_OPT_NONE:
		return HZ_BACKING_SMALL;
	case HZ_BACKING_OPT_HUGETLB2M:
		return HZ_BACKING_HUGETLB2M;
	case HZ_BACKING_OPT_HUGETLB1G:
		return HZ_BACKING_HUGETLB1G;
	case HZ_BACKING_OPT_THP:
	case HZ_BACKING_OPT_AUTO:
	default:
		return HZ_BACKING_THP;
	}
}

/* The hugetlb cgroup, found again at most every HZ_OS_CGROUP_FIND_NS; one
 * thread at a time updates the copy, others find their own. */
static int find_hugetlb_cgroup(struct hz_os_cgroup *out)
{
	static struct hz_os_cgroup cg;
	static uint64_t found_at;
	static int busy, found;
	uint64_t now = hz_prim_now_ns();
	int ret = 0;

	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return hz_os_cgroup_find("hugetlb", out);
	if (found_at == 0 || now - found_at >= HZ_OS_CGROUP_FIND_NS) {
		found = hz_os_cgroup_find("hugetlb", &cg) == 0;
		found_at = now;
	}
	if (found)
		*out = cg;
	else
		ret = -ENOENT;
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	return ret;
}

/* Whether the hugetlb cgroup allows len more bytes of b's pages (fault and
 * reservation limits, every ancestor): read now, limits change. No cgroup
 * with the controller: allowed. */
static bool cgroup_allows(enum hz_backing b, size_t len)
{
	struct hz_os_cgroup cg;
	uint64_t room;

	if (find_hugetlb_cgroup(&cg) != 0)
		return true;
	hz_os_hugetlb_room(&cg, hz_backing_page(b), &room); /* a failed read: 0 */
	return room >= len;
}

/* hugetlb is never mapped MAP_NORESERVE, and every page is faulted in at
 * map time (hz_prim_commit_populated): an empty pool or a cgroup limit
 * fails here, as an mmap or populate error, never later as a SIGBUS in the
 * program. Checking pool and cgroup first only saves the failed attempt. */
static int map_hugetlb(enum hz_backing b, uintptr_t start, size_t len)
{
	int ret;

	if (!pool_fits(b, len)) {
		hz_stats_fallback(HZ_FB_POOL_EMPTY);
		return -ENOMEM;
	}
	if (!cgroup_allows(b, len)) {
		hz_stats_fallback(HZ_FB_HUGETLB_FAILED);
		hz_debug("the hugetlb cgroup allows fewer than %zu bytes of %s; falling back", len,
			 hz_backing_name(b));
		return -ENOMEM;
	}
	ret = hz_prim_commit_populated(start, len, pools[b].pages);
	if (ret != 0) {
		hz_stats_fallback(HZ_FB_HUGETLB_FAILED);
		hz_debug("hugetlb %s mapping of %zu bytes failed (%d); falling back",
			 hz_backing_name(b), len, ret);
	}
	return ret;
}

/* ---- lazy huge pages (the promoter: promote.h) ----
 *
 * With the auto backing and THP in "madvise" mode, a fresh block gets no
 * advice: 4 KiB pages at first touch, as glibc's memory gets, and the
 * promoter collapses the 2 MiB ranges the program makes dense. Measured
 * here (issue "real programs"): THP at first touch gave xz's sparse match
 * finder 104 MB of RSS against glibc's 44, and on this VM a fresh huge
 * page faults 3-4 times slower than 4 KiB pages, which made zstd --long=31
 * and cc1 slower than under glibc. HUGEZERO_BACKING=thp, HUGEZERO_POPULATE
 * (dense by construction) and LAZY_THP=0 keep THP at first touch, and so
 * do the extents of a jemalloc arena a program makes with the library's
 * hooks (the preload's own arena starts lazy too: jemalloc/extents.h).
 *
 * A lazy block counts as 4 KiB pages (its backing, the stats, its name
 * in /proc/PID/maps), which it is until collapsed, so its first dense
 * reuse advises THP (prezero_share.c, hz_prezero_adapt_backing).
 *
 * Evidence: a block of a size class whose last block was collapsed whole,
 * or whose last recycled block was dense (cleared, not dropped), or whose
 * last block released at its free was (recycle.c), gets
 * MADV_HUGEPAGE at once, when fresh THP faults at least as fast as 4 KiB
 * pages here (hz_backing_fresh_thp_fast, backing_fresh.c): the
 * next one is likely dense too, and its faults then cost nothing extra (on
 * the Zen 5 VM a fresh 4 KiB page faults at 0.42 GB/s and a huge page
 * freed shortly before at 15). The evidence is used once: that block is
 * not tracked (mincore cannot tell a sparse use of huge pages from a dense
 * one), and the next block of the class starts lazy again unless a dense
 * reuse noted the class since. */

/* Whether a fresh block starts on 4 KiB pages (above). */
static bool starts_lazy(void)
{
	const struct hz_config *c = hz_config();

	return c->lazy_thp && c->backing == HZ_BACKING_OPT_AUTO && !c->populate &&
	       hz_os()->thp.mode == HZ_THP_MADVISE;
}

bool hz_backing_lazy(void)
{
	return hz_backing_first() == HZ_BACKING_THP && hz_backing_thp_usable() && starts_lazy();
}

static void (*lazy_watcher)(uintptr_t start, size_t len);

void hz_backing_on_lazy(void (*watch)(uintptr_t start, size_t len))
{
	__atomic_store_n(&lazy_watcher, watch, __ATOMIC_RELEASE);
}

/* A lazy block: no advice (or THP at once, on evidence), tracked for the
 * promoter when it runs. */
static int map_lazy(uintptr_t start, size_t len, const struct hz_lazy_block *lazy,
		    enum hz_backing *got)
{
	bool up_front = hz_class_dense(lazy->block_len) && hz_backing_fresh_thp_fast(len);
	bool advised;
	int ret = hz_prim_commit(start, len, up_front ? HZ_PAGES_THP : HZ_PAGES_DEFAULT, &advised);

	if (ret != 0)
		return ret;
	*got = up_front ? HZ_BACKING_THP : HZ_BACKING_SMALL;
	if (up_front) {
		/* Its first page, which the program writes first: timed (above). */
		if (start % HZ_SZ_2M == 0 && len >= HZ_SZ_2M)
			(void)hz_backing_time_fresh_page(start);
		hz_class_note_dense(lazy->block_len, false); /* used once */
		hz_stats_add(thp_up_front, 1);
	} else {
		void (*watch)(uintptr_t, size_t) = __atomic_load_n(&lazy_watcher, __ATOMIC_ACQUIRE);

		if (watch)
			watch(start, lazy->used < len ? lazy->used : len);
	}
	return 0;
}

/* Map 4 KiB or THP memory. Returns the backing actually obtained. */
static int map_small_or_thp(uintptr_t start, size_t len, enum hz_backing want,
			    const struct hz_lazy_block *lazy, enum hz_backing *got)
{
	/* Under THP "always", 4 KiB is asked for explicitly (SMALL). */
	enum hz_prim_pages pages = HZ_PAGES_SMALL;
	bool usable = want == HZ_BACKING_THP && hz_backing_thp_usable();
	bool advised, slow = false;
	int ret;

	if (usable && lazy != NULL && lazy->used > 0 && starts_lazy())
		return map_lazy(start, len, lazy, got);
	if (usable)
		slow = !hz_backing_fresh_thp_fast(len);
	if (want == HZ_BACKING_THP && !slow)
		pages = usable ? HZ_PAGES_THP : HZ_PAGES_DEFAULT;
	ret = hz_prim_commit(start, len, pages, &advised);
	if (ret != 0)
		return ret;
	*got = pages == HZ_PAGES_THP && advised ? HZ_BACKING_THP : HZ_BACKING_SMALL;
	if (slow)
		hz_stats_fallback(HZ_FB_THP_SLOW);
	else if (want == HZ_BACKING_THP && *got != HZ_BACKING_THP)
		hz_stats_fallback(HZ_FB_THP_UNAVAILABLE);
	return 0;
}

static void populate(uintptr_t start, size_t len, enum hz_backing b)
{
	size_t step = hz_backing_page(b);

	if (hz_prim_madvise((void *)start, len, MADV_POPULATE_WRITE) != -EINVAL)
		return;
	/* Kernels before 5.14: one write per page. The memory is fresh, so
	 * writing zero changes nothing but residency. */
	for (size_t off = 0; off < len; off += step)
		*(volatile char *)(start + off) = 0;
}

void hz_backing_name_mapping(uintptr_t start, size_t len, enum hz_backing b)
{
	static const char *const names[HZ_BACKING_COUNT] = {
		[HZ_BACKING_THP] = "hugezero-thp",
		[HZ_BACKING_SMALL] = "hugezero-4k",
	};

	/* hugetlb mappings cannot be named; /proc/PID/smaps shows them as
	 * Private_Hugetlb inside our range. */
	if (names[b])
		hz_prim_name_mapping((void *)start, len, names[b]);
}

/* The kernel checks RLIMIT_DATA when a mapping adds private writable
 * memory, but counts a MAP_FIXED mapping net of what it replaces: a block
 * mapped over the PROT_NONE reservation adds nothing by that count (and
 * the program's next mmap fails instead). So the limit is checked here,
 * as the kernel would for glibc's mmap of the same block: a refused block
 * goes to the next allocator, which meets the kernel's check. */
int hz_backing_map(uintptr_t start, size_t len, enum hz_backing want,
		   const struct hz_lazy_block *lazy, enum hz_backing *got)
{
	int ret = -ENOMEM;

	if (!hz_prim_data_fits(len))
		return -ENOMEM;

	for (enum hz_backing b = want; b < HZ_BACKING_COUNT; b++) {
		if (b <= HZ_BACKING_HUGETLB2M) {
			if ((start | len) & (hz_backing_page(b) - 1))
				continue;
			ret = map_hugetlb(b, start, len);
			if (ret == -EEXIST)
				break; /* the range is not ours any more */
			if (ret != 0)
				continue;
			*got = b;
		} else {
			ret = map_small_or_thp(start, len, b, lazy, got);
			if (ret != 0)
				break;
		}
		hz_stats_add(blocks[*got], 1);
		hz_stats_add(bytes[*got], len);
		hz_backing_name_mapping(start, len, *got);
		if (hz_config()->populate)
			populate(start, len, *got);
		return 0;
	}
	return ret;
}

static const char *const backing_names[HZ_BACKING_COUNT] = {
	[HZ_BACKING_HUGETLB1G] = "hugetlb1g",
	[HZ_BACKING_HUGETLB2M] = "hugetlb2m",
	[HZ_BACKING_THP] = "thp",
	[HZ_BACKING_SMALL] = "4k",
};

const char *hz_backing_name(enum hz_backing b)
{
	return (unsigned)b < HZ_BACKING_COUNT ? backing_names[b] : "?";
}
