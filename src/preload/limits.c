/* A program lowering its own RLIMIT_AS (setrlimit, prlimit; bash's
 * ulimit -v, Python's resource.setrlimit) must keep room for what it
 * really uses. The kernel counts every mapping against the limit, the
 * PROT_NONE of hugezero's regions and the memory of its cached blocks
 * included, and refuses new mappings once the total is above it. So
 * before the limit changes, hugezero shrinks to the rule it grows by (at
 * most half of RLIMIT_AS) and leaves the program a quarter of the limit
 * free: it drops its cached blocks and gives back every region without a
 * block. Regions with live blocks stay; new regions are only made within
 * the new limit (hz_blocks_reservation_size). */
#include "limits.h"

#include <errno.h>
#include <stdint.h>

#include "../blocks.h"
#include "../log.h"
#include "../prim/prim.h"
#include "../recycle.h"
#include "heap.h"
#include "reentry.h"

/* Whether hugezero, holding held bytes while the process maps used, must
 * shrink under a soft limit of limit bytes. */
static bool must_shrink(uint64_t limit, uint64_t held, uint64_t used)
{
	return held > limit / 2 || used > limit - limit / 4;
}

static void shrink_for(uint64_t limit)
{
	uint64_t held = hz_blocks_held(), used;
	size_t released;

	if (held == 0)
		return;
	/* Unknown use: shrink, which is always safe. */
	if (hz_prim_address_space_used(&used) != 0)
		used = UINT64_MAX;
	if (!must_shrink(limit, held, used))
		return;
	hz_recycle_drop();
	released = hz_blocks_release_unused();
	hz_debug("RLIMIT_AS lowered to %llu bytes: gave back %zu MiB of address space, "
		 "%zu MiB still hold blocks", (unsigned long long)limit, released >> 20,
		 hz_blocks_held() >> 20);
}

/* RLIMIT_DATA counts what is mapped private and writable, cached blocks
 * and the read-write ranges of freed ones (blocks.c) included, which glibc
 * would have unmapped: they go before the limit changes. Blocks are then
 * mapped only within it (backing.c). */
HZ_PRIVATE_API void hz_preload_setrlimit(int resource, const struct rlimit *rl)
{
	int saved = errno;

	if ((resource != RLIMIT_AS && resource != RLIMIT_DATA) || rl == NULL ||
	    rl->rlim_cur == RLIM_INFINITY || !__atomic_load_n(&hz_preload_active, __ATOMIC_ACQUIRE))
		return;
	hz_heap_end();
	if (resource == RLIMIT_AS) {
		shrink_for((uint64_t)rl->rlim_cur);
	} else {
		hz_recycle_drop();
		hz_blocks_reserve_free();
	}
	errno = saved;
}

/* The next allocator's or the kernel's ENOMEM under an RLIMIT_AS, after
 * hugezero held address space unused: its cached blocks and its regions
 * without a block, which the program would have had under glibc (a limit
 * set before the program started, ulimit -v, counts them: a 64 MiB block
 * freed kept a 1 GiB region, and a 3.4 GiB request then failed under a 4
 * GiB limit). They go, once per failure, and the caller tries again when
 * anything went. Without such a limit the ENOMEM is the mapping count's
 * or the memory's, which the cache serves without a new mapping. Not from
 * a signal handler inside the library (its locks may be held). Keeps
 * errno. */
HZ_PRIVATE_API bool hz_preload_give_back_for(int err)
{
	int saved = errno;
	size_t released;

	if (err != ENOMEM || hz_prim_address_space_limit() == UINT64_MAX ||
	    !hz_reentry_enter())
		return false;
	if (hz_blocks_held() == 0) {
		hz_reentry_leave();
		return false;
	}
	released = hz_recycle_trim();
	released += hz_blocks_release_unused();
	hz_reentry_leave();
	hz_debug("a request failed for want of memory: gave back %zu MiB hugezero held unused",
		 released >> 20);
	errno = saved;
	return released > 0;
}
