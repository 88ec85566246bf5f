/* The promoter's share of the program's CPU time. See promote_share.h. */
#include "promote_share.h"

#include "config.h"
#include "prim/prim.h"

/* Written by the promoter, reset by a fork's child or a test: atomic. */
static uint64_t spent_ns;

/* The share of the CPU time of every thread but the caller's. */
static uint64_t allowed_ns(uint64_t share)
{
	uint64_t all = hz_prim_process_cpu_ns(), own = hz_prim_thread_cpu_ns();

	return all > own ? (all - own) / 100 * share : 0;
}

uint64_t hz_promote_share_left_ns(void)
{
	uint64_t share = hz_config()->collapse_cpu, allowed, spent;

	if (share >= 100)
		return UINT64_MAX;
	allowed = allowed_ns(share);
	spent = __atomic_load_n(&spent_ns, __ATOMIC_RELAXED);
	return allowed > spent ? allowed - spent : 0;
}

void hz_promote_share_spend(uint64_t cpu_ns)
{
	__atomic_add_fetch(&spent_ns, cpu_ns, __ATOMIC_RELAXED);
}

uint64_t hz_promote_share_wait_ns(uint64_t min_ns, uint64_t max_ns)
{
	uint64_t share = hz_config()->collapse_cpu, allowed, spent, wait;

	if (share == 0)
		return max_ns;
	if (share >= 100)
		return min_ns;
	allowed = allowed_ns(share);
	spent = __atomic_load_n(&spent_ns, __ATOMIC_RELAXED);
	wait = spent > allowed ? (spent - allowed) / share * 100 : 0;
	return wait < min_ns ? min_ns : wait > max_ns ? max_ns : wait;
}

void hz_promote_share_reset(void)
{
	__atomic_store_n(&spent_ns, 0, __ATOMIC_RELAXED);
}
