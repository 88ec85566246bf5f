/* The cache policy and the one budget. See cache.h. */
#include "cache.h"

#include <pthread.h>

#include "options.h"
#include "prim/prim.h"

static struct hz_cache_policy policy;
static struct hz_cache_budget budget;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Every option the caches use, read in one place. */
static void build(struct hz_cache_policy *p)
{
	uint64_t ram = 0, swap = 0;

	p->cache_max = (size_t)hz_option_u64(HZ_OPT_CACHE_MAX);
	/* Never more than a quarter of RAM, whatever the option says. */
	if (hz_prim_memory(&ram, &swap) == 0 && p->cache_max > ram / 4)
		p->cache_max = (size_t)(ram / 4);
	p->decay_ns = hz_option_u64(HZ_OPT_DECAY_MS) * 1000000ull;
	p->prezero = (enum hz_prezero_mode)hz_option_u64(HZ_OPT_PREZERO);
	p->unit = (size_t)hz_option_u64(HZ_OPT_PREZERO_UNIT);
	p->split_min = (size_t)hz_option_u64(HZ_OPT_PREZERO_SPLIT_MIN);
	p->zero_on_free = hz_option_u64(HZ_OPT_ZERO_ON_FREE) != 0;
}

static void init(void)
{
	build(&policy);
	budget.max = policy.cache_max;
}

const struct hz_cache_policy *hz_cache_policy(void)
{
	pthread_once(&once, init);
	return &policy;
}

struct hz_cache_budget *hz_cache_budget(void)
{
	pthread_once(&once, init);
	return &budget;
}
