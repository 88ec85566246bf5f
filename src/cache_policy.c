/* The cache policy and the one budget. See cache.h. */
#include "cache.h"

#include <pthread.h>

#include "config.h"
#include "prim/prim.h"

static struct hz_cache_policy policy;
static struct hz_cache_budget budget;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Every option the caches use, read in one place. */
static void build(struct hz_cache_policy *p)
{
	const struct hz_config *c = hz_config();
	uint64_t ram = 0, swap = 0;

	p->cache_max = c->cache_max;
	/* Never more than a quarter of RAM, whatever the option says. */
	if (hz_prim_memory(&ram, &swap) == 0 && p->cache_max > ram / 4)
		p->cache_max = (size_t)(ram / 4);
	p->decay_ns = c->decay_ms * 1000000ull;
	p->prezero = c->prezero;
	p->unit = c->prezero_unit;
	p->split_min = c->prezero_split_min;
	p->zero_on_free = c->zero_on_free;
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
