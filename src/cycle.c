/* How a size class's callocs follow its frees. See cycle.h. */
#include "cycle.h"

#include "stats.h"
#include "times.h"

/* "At once" is counted from the end of the program's last free, not from
 * the class's time of free: that free's wake of the thread is no time
 * the thread could clear in, and it cost up to 50 us on a VM where a wake
 * crosses to the other vCPU (the Xeon AMX VM), so counted from the free
 * no calloc ever came at once there, and every free woke the thread. */
void hz_cycle_calloc(struct hz_class_cycle *k, uint64_t now, uintptr_t start,
		     uint64_t after_free_ns)
{
	bool freed = k->freed_at > k->last;
	bool at_once = freed && after_free_ns < HZ_THREAD_WAKE_NS;
	/* Only the block freed last: many blocks freed in turn also leave
	 * spans in the table, and clearing those in the cache would fill it
	 * for nothing. */
	bool took = start != 0 && start == k->freed;

	if (freed && !at_once)
		hz_stats_add(callocs_late, 1);
	k->at_once = hz_cycle_run(k->at_once, at_once);
	k->took = hz_cycle_run(k->took, took);
	k->last = now;
}

enum hz_cycle_free hz_cycle_freed(struct hz_class_cycle *k, uintptr_t start, uint64_t now,
				  bool program_at_once)
{
	k->freed = start;
	k->freed_at = now;
	return k->at_once >= HZ_CYCLE_RUN || program_at_once ? HZ_CYCLE_AT_ONCE : HZ_CYCLE_KEEP;
}
