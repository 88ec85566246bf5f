/* A program linked with jemalloc: large requests through jemalloc itself.
 *
 * jemalloc's extended API (sallocx, xallocx, rallocx, dallocx, sdallocx,
 * and its own free, realloc, operator delete and malloc_usable_size) looks
 * every pointer up in jemalloc's extent map. A block of ours is not in it:
 * folly's fbvector and fbstring call sallocx and xallocx on what malloc
 * returned, and crashed. So when the next allocator is jemalloc, hugezero
 * makes no blocks of its own. Large requests become mallocx/rallocx calls
 * on an arena of jemalloc's that carries hugezero's extent hooks (two:
 * oversize requests apart, create_oversize_arena)
 * (src/jemalloc/): huge-page backing and zeroing come from the hooks, and
 * every pointer is jemalloc's, so every jemalloc API works on every pointer.
 *
 * Why arenas of our own rather than the hooks on jemalloc's automatic
 * arenas, and why no interposed *allocx family:
 *  - The automatic arenas (4 per CPU) are created lazily, and jemalloc's
 *    "huge" arena for requests of 8 MiB and more (opt.oversize_threshold)
 *    only when first used: "arena.<i>.extent_hooks" cannot reach an arena
 *    that does not exist yet (EFAULT past narenas), and initialising them
 *    all at start-up costs each its metadata. Hooks on them would also
 *    serve every small slab, where hugezero must not change anything.
 *  - An explicit arena (MALLOCX_ARENA) is honoured for every size, so the
 *    threshold keeps its meaning: small requests reach jemalloc untouched.
 *  - Interposing sallocx and friends would have to answer for our blocks
 *    in jemalloc's internal callers too (its operator delete, its realloc
 *    moving a block across arenas), which no interposition reaches.
 * If the arena cannot be made (no mallctl, or jemalloc's 4095 arenas are
 * used up), large requests go to jemalloc as they came: still every
 * pointer is jemalloc's.
 *
 * The arena is created at the first large request, not at start-up:
 * start-up can run inside jemalloc's own initialisation (its
 * pthread_atfork calls malloc while jemalloc is half set up), where
 * "arenas.create" is not safe. Requests that arrive while another thread
 * creates it go to jemalloc as they came, so nothing waits. */
#include "jemalloc_next.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../config.h"
#include "../log.h"
#include "../prim/prim.h"
#include "../stats.h"
#include "../times.h"

#ifdef HZ_HAVE_JEMALLOC
#include "../../include/hugezero/jemalloc.h"
#include "../jemalloc/extents.h"
#include "../jemalloc/hooks.h"
#include "../prezero.h"
#include "../promote.h"
#endif

/* jemalloc's flag encoding (jemalloc/jemalloc.h, unchanged since 4.0), so
 * that a build without jemalloc's headers still recognises it. */
#define JE_ZERO 0x40
#define JE_LG_ALIGN(lg) ((int)(lg))
#define JE_TCACHE_NONE (1 << 8)
#define JE_ARENA(a) ((int)(((unsigned)(a) + 1) << 20))
#ifdef HZ_HAVE_JEMALLOC
_Static_assert(JE_ZERO == MALLOCX_ZERO && JE_TCACHE_NONE == MALLOCX_TCACHE_NONE &&
		       JE_ARENA(7) == MALLOCX_ARENA(7) && JE_LG_ALIGN(21) == MALLOCX_LG_ALIGN(21),
	       "jemalloc's mallocx flags");
#endif

typedef void *(*mallocx_fn)(size_t, int);
typedef void *(*rallocx_fn)(void *, size_t, int);
typedef size_t (*nallocx_fn)(size_t, int);
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);

static struct hz_next je; /* jemalloc's own entry points */
static mallocx_fn je_mallocx;
static rallocx_fn je_rallocx;
static nallocx_fn je_nallocx; /* NULL: sizes are compared as asked for */
static mallctl_fn je_mallctl; /* NULL: our arena decays on jemalloc's ticks only */

enum { ARENA_NEW, ARENA_CREATING, ARENA_READY, ARENA_NONE };
static int arena_state = ARENA_NEW;
/* Set before arena_state becomes ARENA_READY: the flags for requests
 * below oversize_from, and for the others. */
static int arena_flags, oversize_flags;
static size_t oversize_from = SIZE_MAX;
static char arena_decay[32]; /* "arena.<i>.decay" of the first arena */

#ifdef HZ_HAVE_JEMALLOC
/* The arena's extents start on 4 KiB pages and get THP on their rest once
 * their first writes are dense, watched until jemalloc purges them or
 * gives them back (jemalloc/extents.h, promote.h). Evidence from a class's
 * earlier ranges does not give them THP at once: judged as the program's
 * mmaps are (the class's last range at its next), it gave THP to redis'
 * query buffers, allocated at a value's size and barely touched, and its
 * 60k-key load peaked at 93.5-95.6 MB against 89.4-91.4 without and 86.5
 * under jemalloc alone (bench/RESULTS.md). */
static bool watching_extents(void)
{
	return hz_prezero_mode() == HZ_PREZERO_OPT_THREAD && hz_promote_enabled();
}

static void watch_extent(uintptr_t start, size_t len)
{
	hz_prezero_watch(start, len, HZ_PROMOTE_MMAP);
}

static const struct hz_extents_watcher extent_watcher = { watching_extents, watch_extent,
							  hz_promote_forget };
#endif

/* jemalloc alone serves requests of opt.oversize_threshold (8 MiB) and
 * more from an arena of their own that purges them once freed. Ours keep
 * that split: one arena keeps freed extents as jemalloc's arenas do (its
 * decay), and the oversize one gives them to hugezero's extents at once,
 * which keep them for reuse only within the program's recent demand
 * (jemalloc/extents.c). With one arena for both, jemalloc held every freed
 * value for its decay (10 s) beside the new ones: values of 8-16 MiB
 * cycled in 4 slots peaked at 1.94x the memory of jemalloc alone, 1.13x
 * with the split (bench/RESULTS.md). As jemalloc does, the threshold is
 * compared with the size class a request gets (nallocx). No second arena
 * (none can be made, the program disabled the threshold, or its decay
 * cannot be set): one serves all. */
#ifdef HZ_HAVE_JEMALLOC
static void create_oversize_arena(void)
{
	size_t from = hz_jemalloc_oversize_threshold();
	unsigned ind;

	if (from == 0 || hz_jemalloc_create_arena(&ind) != 0)
		return;
	if (hz_jemalloc_purge_at_once(ind) != 0) {
		hz_jemalloc_destroy_arena(ind);
		return;
	}
	oversize_flags = JE_ARENA(ind) | JE_TCACHE_NONE;
	oversize_from = from;
}
#endif

static void create_arena(void)
{
	int state = ARENA_NONE;
	int saved = errno;
#ifdef HZ_HAVE_JEMALLOC
	unsigned ind;
	/* TCACHE_NONE: the thread cache would hand a block freed to our arena
	 * to a request for another (only sizes below opt.tcache_max, 32 KiB by
	 * default, but a program may raise it). */
	int ret = hz_jemalloc_create_arena(&ind);

	if (ret == 0) {
		arena_flags = oversize_flags = JE_ARENA(ind) | JE_TCACHE_NONE;
		snprintf(arena_decay, sizeof(arena_decay), "arena.%u.decay", ind);
		create_oversize_arena();
		state = ARENA_READY;
	} else {
		hz_warn("could not create a jemalloc arena with hugezero's hooks (error %d); "
			"jemalloc serves every request",
			ret);
	}
#endif
	errno = saved;
	__atomic_store_n(&arena_state, state, __ATOMIC_RELEASE);
}

static bool arena_ready(void)
{
	int state = __atomic_load_n(&arena_state, __ATOMIC_ACQUIRE);
	int expected = ARENA_NEW;

	if (state == ARENA_READY)
		return true;
	if (state == ARENA_NEW &&
	    __atomic_compare_exchange_n(&arena_state, &expected, ARENA_CREATING, false,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		create_arena();
		return __atomic_load_n(&arena_state, __ATOMIC_ACQUIRE) == ARENA_READY;
	}
	return false;
}

/* jemalloc decays an arena's dirty pages on ticks of that arena's own
 * requests, about one in a thousand. Ours serves only large requests, so
 * the values a program freed there stayed dirty long past the decay time
 * (bench/values.c sparse: 2 decays in 300 rounds, against 31 for
 * jemalloc's own arena alone: bench/RESULTS.md). Its large requests make
 * it decay on time instead, at most once a stay tick, as jemalloc's
 * background thread would; the program's thread does it, never ours: the
 * purge takes the arena's locks, which an idle-priority thread must not
 * hold while the program waits. */
static void decay_on_time(void)
{
	static uint64_t last;
	uint64_t now = hz_prim_now_ns(), seen = __atomic_load_n(&last, __ATOMIC_RELAXED);
	int saved = errno;

	if (!je_mallctl || !arena_decay[0] || now - seen < HZ_STAY_TICK_NS ||
	    !__atomic_compare_exchange_n(&last, &seen, now, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	je_mallctl(arena_decay, NULL, NULL, NULL, 0);
	errno = saved;
}

/* The mallocx flags for a large request of size bytes, or -1 while there
 * is no arena of ours: the request then goes to jemalloc as it came. */
static int large_flags(size_t size)
{
	size_t usize;

	if (!arena_ready())
		return -1;
	usize = je_nallocx && size < oversize_from ? je_nallocx(size, arena_flags) : size;
	if (usize >= oversize_from)
		return oversize_flags;
	decay_on_time();
	return arena_flags;
}

static inline bool is_large(size_t size)
{
	return size >= __atomic_load_n(&hz_config_threshold, __ATOMIC_RELAXED);
}

/* mallocx on our arena, or NULL: the caller then asks jemalloc as the
 * program did, which also sets errno as jemalloc does. */
static void *arena_alloc(size_t size, int extra)
{
	int flags = large_flags(size);
	void *p;

	if (flags < 0)
		return NULL;
	p = je_mallocx(size, flags | extra);
	if (p)
		hz_stats_add(mallocs, 1);
	return p;
}

static void *routed_malloc(size_t size)
{
	void *p;

	if (is_large(size) && (p = arena_alloc(size, 0)))
		return p;
	return je.next_malloc(size);
}

static void *routed_calloc(size_t n, size_t size)
{
	size_t total;
	void *p;

	if (!__builtin_mul_overflow(n, size, &total) && is_large(total) &&
	    (p = arena_alloc(total, JE_ZERO))) {
		hz_stats_add(callocs, 1);
		hz_stats_add(calloc_bytes, total);
		return p;
	}
	return je.next_calloc(n, size);
}

/* Growing or moving into the large range: rallocx resizes in place where
 * it can and moves to our arena otherwise. Shrinking below the threshold
 * is jemalloc's realloc, as without hugezero. */
static void *routed_realloc(void *p, size_t size)
{
	int flags;
	void *q;

	if (p != NULL && is_large(size) && (flags = large_flags(size)) >= 0 &&
	    (q = je_rallocx(p, size, flags))) {
		hz_stats_add(mallocs, 1);
		return q;
	}
	return je.next_realloc(p, size);
}

/* A large aligned request (align a power of two): malloc.c routes the
 * aligned family here, and what this leaves to jemalloc's own entry points
 * (jemalloc has no pvalloc: the C library's, as without hugezero). */
static void *arena_aligned(size_t align, size_t size)
{
	if (!is_large(size))
		return NULL;
	return arena_alloc(size, JE_LG_ALIGN(__builtin_ctzll(align)));
}

/* Whether the object that defines fn also defines mallocx and rallocx. */
static int is_jemalloc(const void *fn, void **mallocx, void **rallocx)
{
	Dl_info a, b, c;

	*mallocx = dlsym(RTLD_DEFAULT, "mallocx");
	*rallocx = dlsym(RTLD_DEFAULT, "rallocx");
	/* A program's dlerror() must not see our lookup's failure, and
	 * dlerror() is not ours to call: it translates its message through
	 * gettext, which takes the locale locks, and this runs inside the
	 * program's first malloc, which bindtextdomain and newlocale make
	 * holding one of them for writing. gettext's read lock then fails and
	 * its unlock releases the caller's lock, whose own unlock corrupts it:
	 * postgres, curl and gpg hung at their next setlocale. A lookup that
	 * succeeds clears the thread's pending error instead (glibc's
	 * _dlerror_run drops it at every dl* call). */
	if (!*mallocx || !*rallocx)
		(void)dlsym(RTLD_DEFAULT, "malloc");
	return *mallocx && *rallocx && dladdr(fn, &a) && dladdr(*mallocx, &b) &&
	       dladdr(*rallocx, &c) && a.dli_fbase == b.dli_fbase && a.dli_fbase == c.dli_fbase;
}

int hz_jemalloc_next_start(struct hz_next *next)
{
	void *mallocx, *rallocx;

	if (!is_jemalloc((const void *)(uintptr_t)next->next_malloc, &mallocx, &rallocx))
		return 0;
#ifdef HZ_HAVE_JEMALLOC
	/* Every hooked arena of the process, ours or the program's. */
	hz_extents_watch_with(&extent_watcher);
#endif
	je = *next;
	je_mallocx = (mallocx_fn)(uintptr_t)mallocx;
	je_rallocx = (rallocx_fn)(uintptr_t)rallocx;
	je_nallocx = (nallocx_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "nallocx");
	je_mallctl = (mallctl_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "mallctl");
	if (!je_nallocx || !je_mallctl) /* clears the failed lookup's error (is_jemalloc) */
		(void)dlsym(RTLD_DEFAULT, "malloc");
	/* free and malloc_usable_size stay jemalloc's own: every pointer is. */
	next->next_malloc = routed_malloc;
	next->next_calloc = routed_calloc;
	next->next_realloc = routed_realloc;
	hz_preload_route_aligned(arena_aligned);
	return 1;
}
