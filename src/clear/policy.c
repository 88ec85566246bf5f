#include "policy.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../config.h"
#include "../cpu/cpu.h"
#include "../log.h"

struct choice {
	const struct hz_clear_kernel *cached, *nt;
	bool forced;
};

/* The kernels chosen for the configuration snapshot of generation
 * chosen_generation (0: none yet): from HUGEZERO_CLEAR and the CPU, or
 * forced by hz_clear_set_kernel until the snapshot is replaced. nt_min and
 * radius are not kept: hz_clear_policy_load reads them from the snapshot. */
static struct choice chosen;
static uint64_t chosen_generation;

const struct hz_clear_kernel *hz_clear_kernel_find(const char *name)
{
	for (unsigned i = 0; i < hz_clear_kernel_total; i++)
		if (strcmp(hz_clear_kernels[i].name, name) == 0)
			return &hz_clear_kernels[i];
	return NULL;
}

const char *hz_clear_kernel_missing_for(const struct hz_clear_kernel *k,
					unsigned features)
{
	if (!k->built)
		return "not built: the compiler or assembler lacks it";
	if ((features & k->needs) != k->needs)
		return k->missing;
	return NULL;
}

const char *hz_clear_kernel_missing(const struct hz_clear_kernel *k)
{
	return hz_clear_kernel_missing_for(k, hz_cpu_get()->features);
}

/* The runnable kernel of highest rank in one role; memset, ranked in both,
 * runs everywhere. */
static const struct hz_clear_kernel *best(unsigned features, bool nt)
{
	const struct hz_clear_kernel *pick = &hz_clear_kernels[0];
	unsigned char pick_rank = 0;

	for (unsigned i = 0; i < hz_clear_kernel_total; i++) {
		const struct hz_clear_kernel *k = &hz_clear_kernels[i];
		unsigned char rank = nt ? k->rank_nt : k->rank_cached;

		if (rank > pick_rank && hz_clear_kernel_missing_for(k, features) == NULL) {
			pick = k;
			pick_rank = rank;
		}
	}
	return pick;
}

void hz_clear_auto_for(unsigned features, const struct hz_clear_kernel **cached,
		       const struct hz_clear_kernel **nt)
{
	*cached = best(features, false);
	*nt = best(features, true);
}

static void store(const struct choice *k, uint64_t generation)
{
	__atomic_store_n(&chosen.cached, k->cached, __ATOMIC_RELAXED);
	__atomic_store_n(&chosen.nt, k->nt, __ATOMIC_RELAXED);
	__atomic_store_n(&chosen.forced, k->forced, __ATOMIC_RELAXED);
	__atomic_store_n(&chosen_generation, generation, __ATOMIC_RELEASE);
}

static void make_auto(struct choice *k)
{
	hz_clear_auto_for(hz_cpu_get()->features, &k->cached, &k->nt);
	k->forced = false;
}

static void force_kernel(struct choice *k, const struct hz_clear_kernel *kernel)
{
	k->cached = kernel;
	k->nt = kernel;
	k->forced = true;
}

/* The automatic choice, overridden by HUGEZERO_CLEAR when that names a
 * kernel this CPU runs; otherwise one warning and auto. */
static void choose_from(const struct hz_config *c)
{
	const struct hz_clear_kernel *k;
	struct choice p;

	make_auto(&p);
	if (strcmp(c->clear, "auto") != 0) {
		k = hz_clear_kernel_find(c->clear);
		if (k == NULL)
			hz_warn("HUGEZERO_CLEAR=%s is not a clearing kernel of this "
				"architecture (see `hugezero status`); using auto", c->clear);
		else if (hz_clear_kernel_missing(k))
			hz_warn("HUGEZERO_CLEAR=%s cannot run here: %s; using auto",
				c->clear, hz_clear_kernel_missing(k));
		else
			force_kernel(&p, k);
	}
	hz_debug("clear: cached kernel %s, non-temporal kernel %s from %zu bytes",
		 p.cached->name, p.nt->name, c->clear_nt_min);
	store(&p, c->generation);
}

void hz_clear_policy_load(struct hz_clear_policy *out)
{
	const struct hz_config *c = hz_config();

	/* Racing first callers choose the same kernels; the warning for a bad
	 * HUGEZERO_CLEAR may then appear twice, which is acceptable. */
	if (__atomic_load_n(&chosen_generation, __ATOMIC_ACQUIRE) != c->generation)
		choose_from(c);
	out->cached = __atomic_load_n(&chosen.cached, __ATOMIC_RELAXED);
	out->nt = __atomic_load_n(&chosen.nt, __ATOMIC_RELAXED);
	out->forced = __atomic_load_n(&chosen.forced, __ATOMIC_RELAXED);
	out->nt_min = c->clear_nt_min;
	out->radius = (unsigned)c->clear_radius;
}

int hz_clear_policy_force(const char *name)
{
	const struct hz_clear_kernel *k = NULL;
	struct choice p;

	if (name != NULL && strcmp(name, "auto") != 0) {
		k = hz_clear_kernel_find(name);
		if (k == NULL)
			return -EINVAL;
		if (hz_clear_kernel_missing(k))
			return -ENOTSUP;
	}
	make_auto(&p);
	if (k)
		force_kernel(&p, k);
	store(&p, hz_config()->generation);
	return 0;
}

void hz_clear_policy_reset(void)
{
	choose_from(hz_config());
}
