/* glibc's main heap on huge pages (HUGEZERO_HEAP).
 *
 * Requests under HUGEZERO_THRESHOLD stay with glibc, which grows its main
 * heap with brk 128 KiB past each request at a time. In THP madvise mode
 * that heap never gets huge pages, and under `always` rarely: the 2 MiB
 * range being filled always reaches past the break. glibc's own
 * glibc.malloc.hugetlb=1, which aligns the break to 2 MiB and advises the
 * whole heap, made ld 1.38x faster, but cost peak memory on every program
 * (git 1.14x, ld 1.10x: bench/RESULTS.md, "glibc's own heap on huge
 * pages").
 *
 * So hugezero waits until the heap has grown past HEAP_FLOOR, which
 * programs that use their heap briefly or sparsely rarely reach, then asks
 * glibc (mallopt) to grow it HEAP_PAD ahead of use and advises
 * MADV_HUGEPAGE on the range below the break where the program's next
 * requests fault (advise below): those faults are huge ones. The advice
 * runs contiguously, so the kernel merges a growing heap back into at
 * most four mappings (advising each growth alone split a 200 MiB heap
 * into 51), and one trimmed and grown again gains few (shrunk).
 *
 * The break is glibc's __curbrk, which the shim compares with the value
 * seen last on its medium path (shim_abi.h): a changed break costs one
 * call here; no thread watches it, because a second thread turns off
 * glibc's single-thread fast paths.
 *
 * Left alone: a program or user that tuned glibc's malloc (MALLOC_*_
 * variables, glibc.malloc.* tunables, the program's own mallopt of a value
 * we set), a next allocator that is not glibc's, THP not in madvise mode
 * or disabled for the process, a limit on data or address space, strict
 * overcommit, mlockall(MCL_FUTURE), a program that moves the break
 * itself, and a process under a seccomp filter (start.c steps aside
 * before this starts, or calls hz_heap_end when a filter comes later). */

#include <dlfcn.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../backing.h"
#include "../config.h"
#include "../log.h"
#include "../options.h"
#include "../prim/os.h"
#include "../prim/prim.h"
#include "../range.h"
#include "../sizes.h"
#include "heap.h"
#include "preload.h"

/* 32 MiB: with the pad from the first growth on, git's peak memory was
 * 1.15x glibc's; from 32 MiB of heap on, 1.00-1.02x on every program of
 * bench/run-apps while ld kept 1.09x (bench/RESULTS.md). */
#define HEAP_FLOOR ((uintptr_t)32 << 20)
/* 8 MiB: with 2 MiB the ranges beyond the break's 2 MiB boundary were
 * never whole, and the heap stayed on 4 KiB pages; 8 MiB put 75% of ld's
 * heap on huge pages. glibc keeps the pad on every growth. */
#define HEAP_PAD ((int)(8 << 20))
/* Twice the pad: the advice covers the range the program's next requests
 * fault in, between the break less the pad and the break, with room for
 * requests larger than the gap between its checks. */
#define HEAP_WINDOW ((uintptr_t)2 * HEAP_PAD)
/* Twice the pad: a heap trimmed back to its pad is not trimmed again at
 * the next free. */
#define HEAP_TRIM (2 * HEAP_PAD)
/* glibc's M_MMAP_THRESHOLD: its default, and its largest on 64-bit
 * systems (HEAP_MAX_SIZE / 2). */
#define GLIBC_MMAP_THRESHOLD_MIN ((size_t)128 << 10)
#define GLIBC_MMAP_THRESHOLD_MAX ((size_t)32 << 20)

enum heap_state { HEAP_OFF, HEAP_WATCHING, HEAP_ACTIVE };

static int state = HEAP_OFF;
static const uintptr_t *curbrk; /* glibc's __curbrk */
static uintptr_t floor_break;   /* the lowest nonzero break seen */
static uintptr_t floor_advice;  /* where the advice started at the floor */
static uintptr_t advise_from;   /* where it starts now (shrunk) */
static uintptr_t advised_to;    /* the highest end advised */
static uintptr_t advised_last;  /* the end advised last */
static uintptr_t high_water;    /* the highest break seen */
static int busy;                /* one thread acts at a time; others go on */
/* The program set a value this module sets, before or after it did. */
static int program_tuned;
/* The watch is to end (hz_heap_end). */
static int ending;
static struct hz_shim_fast *fast;

/* Whether the environment tuned glibc's heap: then its settings stay. */
static bool tuned_by_environment(void)
{
	static const char *const names[] = { "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_",
					     "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_" };
	const char *tunables = getenv("GLIBC_TUNABLES");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (getenv(names[i]) != NULL)
			return true;
	return tunables != NULL && strstr(tunables, "glibc.malloc.") != NULL;
}

/* Whether the next allocator is the C library's, whose heap __curbrk is. */
static bool next_is_glibc(const struct hz_next *next)
{
	Dl_info info;
	const char *base;

	if (dladdr((const void *)(uintptr_t)next->next_malloc, &info) == 0 || info.dli_fname == NULL)
		return false;
	base = strrchr(info.dli_fname, '/');
	base = base != NULL ? base + 1 : info.dli_fname;
	return strncmp(base, "libc.so", 7) == 0;
}

/* Why the heap is left alone, or NULL, at start-up, which makes no
 * system call for it (tests/fault/walk.c checks what start-up calls). */
static const char *reason_to_leave(const struct hz_next *next)
{
	if (!hz_option_u64(HZ_OPT_HEAP))
		return "HUGEZERO_HEAP=0";
	if (next->next_mallopt == NULL || !next_is_glibc(next))
		return "the next allocator is not glibc's";
	if (tuned_by_environment())
		return "glibc's malloc is tuned by the environment";
	return NULL;
}

/* A limit on data or address space; read at the floor and at each move
 * from then on, for a limit set where the shim does not see it (another
 * process's prlimit, a raw system call). */
static bool limited(void)
{
	return hz_prim_data_limited() || hz_prim_address_space_limit() != UINT64_MAX;
}

/* Why the heap is left alone, or NULL, when it reaches the floor: THP is
 * not in madvise mode (under "always" the kernel decides alone) or off
 * for the process; or the pad, memory glibc asks for ahead of use, could
 * turn a request glibc would have served into a failure: under a limit on
 * data or address space (a limit set later ends the watch: hz_heap_end),
 * or when strict overcommit charges it. hz_os() is read here, not at
 * start-up: its facts are kept from the first call, which must come as
 * late as it did without this module (a program may set
 * vm.overcommit_memory first). These calls are the ones the first large
 * block makes too. */
static const char *reason_at_floor(void)
{
	const struct hz_os *os = hz_os();

	if (os->thp.mode != HZ_THP_MADVISE || os->pmd_size != HZ_SZ_2M)
		return "THP is not in madvise mode";
	if (hz_prim_thp_disable_flags() == 1)
		return "THP is disabled for this process";
	if (limited())
		return "RLIMIT_DATA or RLIMIT_AS is set";
	if (!os->overcommits)
		return "vm.overcommit_memory is 2";
	if (__atomic_load_n(&program_tuned, __ATOMIC_RELAXED))
		return "the program tunes glibc's malloc";
	return NULL;
}

void hz_heap_start(const struct hz_next *next, struct hz_shim_fast *shim)
{
	const char *why = reason_to_leave(next);

	if (why == NULL)
		curbrk = dlsym(RTLD_DEFAULT, "__curbrk");
	if (why == NULL && curbrk == NULL)
		why = "glibc does not export __curbrk";
	if (why != NULL || shim == NULL) {
		if (why != NULL)
			hz_debug("glibc's heap stays on 4 KiB pages: %s", why);
		return;
	}
	fast = shim;
	floor_break = __atomic_load_n(curbrk, __ATOMIC_RELAXED);
	__atomic_store_n(&state, HEAP_WATCHING, __ATOMIC_RELAXED);
	__atomic_store_n(&fast->heap_seen, floor_break, __ATOMIC_RELAXED);
	__atomic_store_n(&fast->heap_break, curbrk, __ATOMIC_RELEASE);
}

static bool watching(void)
{
	return __atomic_load_n(&state, __ATOMIC_RELAXED) != HEAP_OFF;
}

/* 1 KiB: a tcache-hot loop of smaller requests (bench/alloc.c's
 * small-churn) pays nothing for the watch, while heaps grow through
 * larger ones too: ld's object chunks and gcc's obstacks are 4 KiB. */
#define HEAP_WATCH_FROM ((size_t)1 << 10)

size_t hz_heap_quiet_below(size_t small_below)
{
	if (!watching())
		return small_below;
	if (__atomic_load_n(&ending, __ATOMIC_SEQ_CST))
		return 0;
	return small_below > HEAP_WATCH_FROM ? HEAP_WATCH_FROM : small_below;
}

/* The shim stops looking at the break: its fast path is as without this
 * module. */
static void stop(void)
{
	__atomic_store_n(&state, HEAP_OFF, __ATOMIC_RELAXED);
	__atomic_store_n(&fast->heap_break, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&fast->quiet_below,
			 __atomic_load_n(&fast->small_below, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

/* glibc grows the heap HEAP_PAD ahead from its next growth on, keeps
 * HEAP_TRIM of free top, and serves every request it sees from the heap
 * (hugezero takes those at or above the threshold). Each mallopt also
 * freezes glibc's dynamic mmap threshold, hence the explicit one. */
static bool tune_glibc(void)
{
	size_t threshold = __atomic_load_n(&hz_config_threshold, __ATOMIC_RELAXED);
	int (*set)(int, int) = hz_next.next_mallopt;

	threshold = threshold < GLIBC_MMAP_THRESHOLD_MIN ? GLIBC_MMAP_THRESHOLD_MIN : threshold;
	threshold = threshold > GLIBC_MMAP_THRESHOLD_MAX ? GLIBC_MMAP_THRESHOLD_MAX : threshold;
	return set(M_MMAP_THRESHOLD, (int)threshold) == 1 && set(M_TRIM_THRESHOLD, HEAP_TRIM) == 1 &&
	       set(M_TOP_PAD, HEAP_PAD) == 1;
}

static void activate(uintptr_t brk)
{
	const char *why = reason_at_floor();

	if (why == NULL && !tune_glibc())
		why = "glibc refused a setting";
	if (why != NULL) {
		hz_debug("glibc's heap stays on 4 KiB pages: %s", why);
		stop();
		return;
	}
	floor_advice = advise_from = hz_align_up(brk, HZ_SZ_2M);
	high_water = brk;
	__atomic_store_n(&state, HEAP_ACTIVE, __ATOMIC_RELAXED);
	hz_info("glibc's heap passed %zu MiB: its growth from %p on gets huge pages",
		(size_t)(HEAP_FLOOR >> 20), (void *)advise_from);
}

/* Where fresh huge pages fault slower than 4 KiB pages (backing_fresh.c),
 * the heap's growth keeps glibc's pages; a later verdict may advise it.
 * The verdict is asked once for each growth past the highest end asked. */
static bool fresh_thp_fast(uintptr_t end)
{
	static uintptr_t asked_to;
	static bool fast;

	if (end > asked_to) {
		fast = hz_backing_fresh_thp_fast(end - (asked_to > advise_from ? asked_to
									     : advise_from));
		asked_to = end;
	}
	return fast;
}

/* Advise the window below the last 2 MiB boundary under the break
 * MADV_HUGEPAGE and what lies between advise_from and the window
 * MADV_NOHUGEPAGE. Faults happen in the window, which the pad keeps ahead
 * of use; below it the heap is on the pages it faulted in and stays so:
 * khugepaged, which collapses a range of advised memory with a single
 * page present, never fills in what the program gave back below
 * (malloc_trim) or never touched. Each flag keeps one mapping, so a
 * growing heap is at most four (before the floor, below the window, the
 * window, the top) however long it grows; see shrunk for one that also
 * shrinks. The top, up to the break, keeps glibc's flags (a break on a
 * 2 MiB boundary leaves its last 2 MiB out): brk extends it. A heap
 * trimmed meanwhile makes part of a range unmapped (ENOMEM: the rest is
 * advised all the same); a refusal (EINVAL, EPERM) ends the watch. */
static void advise(uintptr_t brk)
{
	uintptr_t end = hz_align_down(brk - 1, HZ_SZ_2M), window;
	int ret = 0;

	if (end <= advise_from || end == advised_last)
		return;
	if (!fresh_thp_fast(end))
		return;
	advised_last = end;
	window = end - advise_from > HEAP_WINDOW ? end - HEAP_WINDOW : advise_from;
	if (window > advise_from)
		ret = hz_prim_madvise((void *)advise_from, window - advise_from, MADV_NOHUGEPAGE);
	if (ret == 0 || ret == -ENOMEM)
		ret = hz_prim_madvise((void *)window, end - window, MADV_HUGEPAGE);
	/* The window's newest 2 MiB, which the top chunk hands out after what
	 * lies below it: timed (backing.h) unless the program got there. */
	if (ret == 0)
		(void)hz_backing_time_fresh_page(end - HZ_SZ_2M);
	if (ret != 0 && ret != -ENOMEM) {
		hz_debug("glibc's heap: madvise refused (error %d); no more advice", -ret);
		stop();
	}
	advised_to = end > advised_to ? end : advised_to;
}

/* glibc trimmed the heap to brk. Into an advised range, it leaves an
 * advised mapping on top, which brk cannot extend: the next growth makes
 * a mapping of its own, whose first fault (glibc's own, before this sees
 * the break) gives it an anon_vma of its own, and the kernel never merges
 * mappings with different ones. Advised again, ground given back and
 * grown again would split anew at each trim (a heap trimmed and regrown
 * 40 times, a little higher each time, was in 44 mappings; in 6 so), so
 * the advice starts over above the highest break seen: the heap gains
 * mappings only where it grows past its peak. Below the floor's advice
 * no advised mapping is left, and the heap is as it was at the floor.
 * Real programs rarely trim here (twice in one round of bench/run-apps);
 * a trim this never sees, grown back through requests under 1 KiB alone,
 * leaves one mapping more. */
static void shrunk(uintptr_t brk)
{
	advised_last = 0;
	if (brk <= floor_advice) {
		advise_from = floor_advice;
		advised_to = 0;
		high_water = brk;
	} else if (brk < advised_to) {
		uintptr_t above = hz_align_up(high_water, HZ_SZ_2M);

		advise_from = above > advise_from ? above : advise_from;
		hz_debug("glibc trimmed its heap to %p: advice from %p on", (void *)brk,
			 (void *)advise_from);
	}
}

/* The break moved from seen to brk, the heap being active. */
static void look(uintptr_t brk, uintptr_t seen)
{
	if (limited()) {
		__atomic_store_n(&ending, 1, __ATOMIC_SEQ_CST);
		return;
	}
	if (brk < seen)
		shrunk(brk);
	high_water = brk > high_water ? brk : high_water;
	advise(brk);
}

/* A break glibc never has: the shim's next look is certain. */
#define UNSEEN UINTPTR_MAX

/* 128 KiB: glibc's own growth step, which it keeps with top_pad 0. */
#define GLIBC_TOP_PAD ((int)(128 << 10))

/* Called holding busy, once ending is set, from a request's entry. */
static void end_watch(void)
{
	if (__atomic_load_n(&state, __ATOMIC_RELAXED) == HEAP_ACTIVE &&
	    !__atomic_load_n(&program_tuned, __ATOMIC_RELAXED))
		(void)hz_next.next_mallopt(M_TOP_PAD, GLIBC_TOP_PAD);
	if (watching()) {
		hz_debug("glibc's heap grows as glibc grows it from now on");
		stop();
	}
}

HZ_PRIVATE_API void hz_preload_heap_moved(void)
{
	uintptr_t brk;

	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return;
	brk = __atomic_load_n(curbrk, __ATOMIC_RELAXED);
	/* The growth is counted from the lowest break: a heap trimmed below
	 * the first one seen must not look 32 MiB larger (unsigned wrap). */
	if (floor_break == 0 || brk < floor_break)
		floor_break = brk;
	if (!__atomic_load_n(&ending, __ATOMIC_SEQ_CST) && watching() && !hz_preload_forking) {
		if (__atomic_load_n(&state, __ATOMIC_RELAXED) == HEAP_WATCHING &&
		    brk - floor_break >= HEAP_FLOOR)
			activate(brk);
		if (__atomic_load_n(&state, __ATOMIC_RELAXED) == HEAP_ACTIVE)
			look(brk, __atomic_load_n(&fast->heap_seen, __ATOMIC_RELAXED));
	}
	if (__atomic_load_n(&ending, __ATOMIC_SEQ_CST))
		end_watch();
	__atomic_store_n(&fast->heap_seen, brk, __ATOMIC_SEQ_CST);
	/* hz_heap_end came after the look above: the next request looks. */
	if (__atomic_load_n(&ending, __ATOMIC_SEQ_CST) && watching())
		__atomic_store_n(&fast->heap_seen, UNSEEN, __ATOMIC_SEQ_CST);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}

void hz_heap_program_tunes(int param)
{
	if (param == M_TOP_PAD || param == M_TRIM_THRESHOLD || param == M_MMAP_THRESHOLD)
		__atomic_store_n(&program_tuned, 1, __ATOMIC_RELAXED);
}

/* Only flags the end, which the next request of any size carries out
 * (quiet_below 0, a break never seen) before glibc serves it: setrlimit
 * or prctl may come from a signal handler that interrupted glibc's malloc
 * in this thread, and mallopt takes the arena's lock and consolidates the
 * heap (a handler's setrlimit hung one process in two). */
void hz_heap_end(void)
{
	if (!watching())
		return;
	__atomic_store_n(&ending, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&fast->quiet_below, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&fast->heap_seen, UNSEEN, __ATOMIC_SEQ_CST);
}

HZ_PRIVATE_API void hz_preload_program_moves_break(void)
{
	if (watching())
		hz_debug("the program moves the break itself");
	hz_heap_end();
}

void hz_heap_fork_child(void)
{
	__atomic_store_n(&busy, 0, __ATOMIC_RELAXED);
}
