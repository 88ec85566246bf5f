/* Start-up of the interposer: safe before main, from constructors of other
 * libraries, from several threads at once, and while dlsym calls calloc. */
#include <pthread.h>
#include <stdbool.h>

#include "../blocks.h"
#include "../cpu/relax.h"
#include "../exec/exec.h"
#include "../log.h"
#include "../options.h"
#include "../recycle.h"
#include "../stats.h"
#include "preload.h"

enum { NEW, STARTING, READY };

int hz_preload_active;
size_t hz_preload_threshold = (size_t)-1;

static int state = NEW;
/* This thread is running start-up: its nested calls use the bootstrap. */
static __thread bool starting_here;

/* Locks are taken in the order the code nests them: recycle, then blocks. */
static void fork_prepare(void)
{
	hz_recycle_fork_prepare();
	hz_blocks_fork_prepare();
}

static void fork_parent(void)
{
	hz_blocks_fork_parent();
	hz_recycle_fork_parent();
}

static void fork_child(void)
{
	hz_blocks_fork_child();
	hz_recycle_fork_child();
}

static void start(hz_resolve_fn resolve)
{
	struct hz_next found = { 0 };
	int ret;

	hz_next_use_bootstrap(&hz_next);
	resolve(&found);
	hz_next_complete(&found);
	hz_next = found;
	if (hz_option_u64(HZ_OPT_DISABLE))
		return;
	/* Text first: before threads exist (remap needs that), and whatever
	 * becomes of the reservation. */
	hz_exec_start();
	ret = hz_blocks_init();
	if (ret != 0) {
		hz_warn("could not reserve %llu bytes of address space (error %d); "
			"passing every request to the system allocator",
			(unsigned long long)hz_option_u64(HZ_OPT_RESERVE), -ret);
		return;
	}
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	hz_stats_keep_stderr();
	hz_preload_threshold = (size_t)hz_option_u64(HZ_OPT_THRESHOLD);
	__atomic_store_n(&hz_preload_active, 1, __ATOMIC_RELEASE);
}

int hz_preload_ready(hz_resolve_fn resolve)
{
	int expected = NEW;

	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == READY)
		return 1;
	if (starting_here)
		return 0;
	if (__atomic_compare_exchange_n(&state, &expected, STARTING, false,
					__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
		starting_here = true;
		start(resolve);
		starting_here = false;
		__atomic_store_n(&state, READY, __ATOMIC_RELEASE);
		return 1;
	}
	/* Another thread is starting up: it takes microseconds. */
	while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != READY)
		hz_cpu_relax();
	return 1;
}

HZ_PRIVATE_API void hz_preload_start(hz_resolve_fn resolve)
{
	hz_preload_ready(resolve);
}

HZ_PRIVATE_API void hz_preload_exit(void)
{
	if (__atomic_load_n(&hz_preload_active, __ATOMIC_ACQUIRE))
		hz_stats_report();
}
