/* The slow path of hz_lock. See lock.h. */
#include "lock.h"

#include "prim/prim.h"
#include "stats.h"

void hz_lock_wait(struct hz_lock *l)
{
	uint64_t t0 = hz_prim_now_ns();

	pthread_mutex_lock(&l->mutex);
	hz_stats_add(lock_waits, 1);
	hz_stats_add(lock_wait_ns, hz_prim_now_ns() - t0);
}
