/* Start-up of the interposer: safe before main, from constructors of other
 * libraries, from several threads at once, and while dlsym calls calloc. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#ifdef __GLIBC__
#include <sys/single_threaded.h>
#endif

#include "../blocks.h"
#include "../config.h"
#include "../cpu/relax.h"
#include "../exec/start.h"
#include "../log.h"
#include "../options.h"
#include "../prezero.h"
#include "../prim/prim.h"
#include "../recycle.h"
#include "../report.h"
#include "heap.h"
#include "introspect.h"
#include "jemalloc_next.h"
#include "preload.h"
#include "reentry.h"

enum { NEW, STARTING, READY };

/* Large requests are routed somewhere (hugezero blocks or the jemalloc
 * arena): the threshold means something to the shim. */
static int routing;
/* The shim's fast-path copy (shim_abi.h), NULL for a program standing in
 * for the shim. */
static struct hz_shim_fast *shim_fast;

_Static_assert(HZ_SHIM_REGION_SHIFT == HZ_REGION_SHIFT && HZ_SHIM_REGION_GIBS == HZ_REGION_GIBS,
	       "the shim reads the region table as blocks.h lays it out");
/* Start-up ran (not HUGEZERO_DISABLE): the exit report is due. */
static int reporting;

static int state = NEW;
/* This thread is running start-up: its nested calls use the bootstrap. */
static __thread bool starting_here;

#ifdef __GLIBC__
/* glibc's fork takes the stdio list lock after the prepare handlers, but
 * code holding it may wait for a large malloc: fflush(NULL) holds it while
 * it waits for each stream's lock, and getline holds a stream's lock while
 * it grows the line with realloc. Our locks taken before it would close the
 * cycle (fork: ours, then the list; fflush: the list, then the stream;
 * getline: the stream, then ours), so the list lock is taken first, the
 * order glibc's own malloc keeps. Like glibc, only when threads exist (so
 * fork from a signal handler in a single-threaded program never waits);
 * it is recursive, so fork taking it again, or fork from a signal handler
 * that interrupted its holder, does not deadlock. Exported by glibc since
 * 2.2.5, without a header since 2.28. */
void _IO_list_lock(void);
void _IO_list_unlock(void);
void _IO_list_resetlock(void);

static bool stdio_list_locked;

static void stdio_list_lock(void)
{
	stdio_list_locked = !__libc_single_threaded;
	if (stdio_list_locked)
		_IO_list_lock();
}

static void stdio_list_unlock(void)
{
	if (stdio_list_locked)
		_IO_list_unlock();
}

/* glibc reset it too (the child has one thread): the same state, whatever
 * it held before. */
static void stdio_list_reset(void)
{
	if (stdio_list_locked)
		_IO_list_resetlock();
}
#else
static void stdio_list_lock(void) {}
static void stdio_list_unlock(void) {}
static void stdio_list_reset(void) {}
#endif

/* Fork handlers run in an order hugezero does not choose: prepare
 * handlers in the reverse order of registration, parent and child
 * handlers in that order. A library that registered before hugezero
 * started (from its constructor) has its prepare handler run after ours
 * and its parent and child handlers before ours, all while this thread
 * holds our locks; glibc's malloc takes its own locks inside fork after
 * every prepare handler and drops them before the others. So between our
 * prepare and our parent or child handler, this thread asks nothing of
 * the locked tables (hz_preload_forking): large requests go to the next
 * allocator (its locks are free then), and a block freed waits
 * (reentry.c) until our locks are given back, in the parent and in the
 * child alike (each frees its own copy).
 *
 * Locks are taken in the order the code nests them: stdio's list (see
 * above), recycle, then blocks. This thread is marked inside the library
 * (reentry.c) from before the first is taken to after the last is given
 * back: a signal handler's free or request on this thread in between
 * takes none of them, which it would wait for forever. */
static __thread bool fork_marked; /* the mark was off, and fork_prepare set it */

static void fork_prepare(void)
{
	fork_marked = hz_reentry_enter();
	stdio_list_lock();
	hz_recycle_fork_prepare();
	hz_blocks_fork_prepare();
	hz_preload_forking = true;
}

/* Both ends of a fork: leave the forking state, release the locks
 * fork_prepare took (release_locks, in reverse order), then free what was
 * freed meanwhile (hz_reentry_leave). A fork from a signal handler that
 * interrupted the library leaves that to the interrupted call. */
static void fork_finish(void (*release_locks)(void))
{
	hz_preload_forking = false;
	release_locks();
	if (fork_marked)
		hz_reentry_leave();
}

static void unlock_in_parent(void)
{
	hz_blocks_fork_parent();
	hz_recycle_fork_parent();
	stdio_list_unlock();
}

/* The child is single-threaded: every lock is free, whatever its state
 * was. */
static void reset_in_child(void)
{
	hz_blocks_fork_child();
	hz_recycle_fork_child();
	hz_heap_fork_child();
	stdio_list_reset();
}

static void fork_parent(void)
{
	fork_finish(unlock_in_parent);
}

static void fork_child(void)
{
	fork_finish(reset_in_child);
}

/* A seccomp filter, inherited through exec (systemd's SystemCallFilter=,
 * container runtimes, sandboxing launchers) or installed later by an
 * interposed call (creds.c), may kill the process at any call it does not
 * list, and such lists are written for what glibc's malloc calls. Which
 * calls a filter allows cannot be read back, and hugezero's own (sysinfo,
 * mincore, the thread's clone3 and sched_setscheduler, cgroup files) are
 * not on them. So under a filter hugezero steps aside: new large requests
 * go to the next allocator, the blocks that exist go back to the kernel
 * when freed, and no thread starts. Reading the mode opens and reads a
 * file, which the dynamic loader did before the program ran; without
 * /proc the mode is unknown, and a filter installed before exec goes
 * unseen. */
static bool under_seccomp(void)
{
	unsigned mode;

	return hz_prim_seccomp_mode(&mode) == 0 && mode != 0;
}

static void say_stepped_aside(void)
{
	hz_info("a seccomp filter is in force: hugezero steps aside; large requests go to "
		"the system allocator from now on");
}

/* Runs once, in the thread hz_preload_begin chose, with the next
 * functions installed. */
static void start(void)
{
	int ret;

	if (hz_option_u64(HZ_OPT_DISABLE))
		return;
	if (under_seccomp()) {
		say_stepped_aside();
		return;
	}
	/* Text first: before threads exist (remap needs that), and whatever
	 * becomes of the reservation. */
	hz_exec_start();
	/* The exit report is written whatever becomes of the reservation:
	 * HUGEZERO_STATS_FILE users get a file either way. */
	hz_report_keep_stderr();
	hz_report_publish();
	__atomic_store_n(&reporting, 1, __ATOMIC_RELEASE);
	/* Whatever serves large requests may start the pre-zero thread. */
	hz_prezero_watch_main_thread();
	/* A jemalloc program: large requests go to a jemalloc arena with our
	 * hooks, so hugezero makes no blocks (jemalloc_next.c). */
	if (hz_jemalloc_next_start(&hz_next)) {
		__atomic_store_n(&routing, 1, __ATOMIC_RELAXED);
		return;
	}
	/* Nothing is reserved here: regions of address space are reserved as
	 * blocks need them (blocks.c), so start-up cannot run out of it. */
	ret = hz_blocks_init();
	if (ret != 0) {
		hz_warn("could not set up the block tables (error %d); passing every "
			"request to the system allocator", -ret);
		return;
	}
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	hz_preload_perturb_start();
	__atomic_store_n(&routing, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&hz_preload_active, 1, __ATOMIC_RELEASE);
	hz_heap_start(&hz_next, shim_fast);
}

static size_t small_below(void)
{
	return __atomic_load_n(&routing, __ATOMIC_RELAXED)
		       ? __atomic_load_n(&hz_config_threshold, __ATOMIC_RELAXED)
		       : SIZE_MAX;
}

/* A reload may have changed the threshold. */
static void republish(void)
{
	size_t below = small_below();

	__atomic_store_n(&shim_fast->small_below, below, __ATOMIC_RELEASE);
	__atomic_store_n(&shim_fast->quiet_below, hz_heap_quiet_below(below), __ATOMIC_RELEASE);
}

/* Open the shim's fast path, in the order shim_abi.h gives: small is what
 * serves small requests, the table as resolved (before jemalloc routing). */
static void publish(const struct hz_next *small)
{
	struct hz_shim_fast *f = shim_fast;
	uintptr_t boot_start;
	size_t boot_len;

	if (f == NULL)
		return;
	hz_boot_range(&boot_start, &boot_len);
	f->owned = hz_region_of_gib;
	f->next = *small;
	__atomic_store_n(&f->boot_start, boot_start, __ATOMIC_RELAXED);
	__atomic_store_n(&f->boot_len, boot_len, __ATOMIC_RELEASE);
	__atomic_store_n(&hz_config_on_reload, republish, __ATOMIC_RELEASE);
	republish();
}

/* The jemalloc route (active stays 0 there) is closed too: its arena's
 * hooks make hugezero's calls. */
HZ_PRIVATE_API void hz_preload_step_aside(void)
{
	bool active = __atomic_exchange_n(&hz_preload_active, 0, __ATOMIC_ACQ_REL);

	hz_heap_end();
	if (!__atomic_exchange_n(&routing, 0, __ATOMIC_ACQ_REL))
		return;
	if (shim_fast != NULL)
		republish();
	hz_prezero_retire();
	if (active)
		hz_recycle_drop();
	say_stepped_aside();
}

HZ_PRIVATE_API void hz_preload_attach(struct hz_shim_fast *fast)
{
	shim_fast = fast;
}

HZ_PRIVATE_API enum hz_start_step hz_preload_begin(void)
{
	int expected = NEW;

	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == READY)
		return HZ_START_DONE;
	if (starting_here)
		return HZ_START_NESTED;
	if (__atomic_compare_exchange_n(&state, &expected, STARTING, false,
					__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
		starting_here = true;
		return HZ_START_RESOLVE;
	}
	/* Another thread is starting up: it takes microseconds. */
	while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != READY)
		hz_cpu_relax();
	return HZ_START_DONE;
}

HZ_PRIVATE_API void hz_preload_start(const struct hz_next *found)
{
	/* Set by the starting thread only, and read only by it. */
	static bool installed;
	struct hz_next next = *found;

	/* The shim calls this after hz_preload_begin chose its thread; a
	 * direct call claims the start itself; a later or nested one does
	 * nothing. */
	if (starting_here ? installed : hz_preload_begin() != HZ_START_RESOLVE)
		return;
	installed = true;
	/* The resolver's own calls (dlsym allocates) went to the bootstrap,
	 * which hz_next still is; from here on the real functions serve. */
	hz_next_complete(&next);
	hz_next = next;
	hz_prim_use_pthread_create(next.next_pthread_create);
	start();
	publish(&next);
	starting_here = false;
	__atomic_store_n(&state, READY, __ATOMIC_RELEASE);
}

HZ_PRIVATE_API void hz_preload_exit(void)
{
	if (__atomic_load_n(&reporting, __ATOMIC_ACQUIRE))
		hz_report_exit();
}
