/* Which kernel clears what: chosen from the CPU and the configuration
 * snapshot (config.h) once per snapshot, or forced by HUGEZERO_CLEAR /
 * hz_clear_set_kernel. */
#ifndef HZ_CLEAR_POLICY_H
#define HZ_CLEAR_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "kernel.h"

struct hz_clear_policy {
	const struct hz_clear_kernel *cached; /* passes < nt_min, neighbourhood */
	const struct hz_clear_kernel *nt;     /* passes >= nt_min */
	size_t nt_min;                        /* HUGEZERO_CLEAR_NT_MIN */
	unsigned radius;                      /* HUGEZERO_CLEAR_RADIUS, pages */
	bool forced;                          /* one kernel for everything */
};

/* The policy in effect: the kernels chosen for the current configuration
 * snapshot (on first use, and again once hz_options_reload replaced it),
 * with the snapshot's nt_min and radius. */
void hz_clear_policy_load(struct hz_clear_policy *out);

/* The kernel for one pass of len bytes under policy p. */
static inline const struct hz_clear_kernel *
hz_clear_policy_pick(const struct hz_clear_policy *p, size_t len)
{
	return len >= p->nt_min ? p->nt : p->cached;
}

/* Force a kernel by name, or NULL/"auto" for the automatic choice, until
 * the configuration snapshot is replaced. Returns 0, -EINVAL (unknown
 * name) or -ENOTSUP (not runnable here). */
int hz_clear_policy_force(const char *name);

/* Choose again from the options now, dropping a forced kernel (tests:
 * hz_clear_policy_load would do it after hz_options_reload anyway, but
 * this prints a bad HUGEZERO_CLEAR's warning at once). */
void hz_clear_policy_reset(void);

const struct hz_clear_kernel *hz_clear_kernel_find(const char *name);

/* Zero [dst, dst + len) in one pass with the policy's cached kernel, for
 * memory the caller is about to use (see zero.c). */
void hz_clear_cached(void *dst, size_t len);

/* NULL when k runs here, else the reason it does not. */
const char *hz_clear_kernel_missing(const struct hz_clear_kernel *k);

/* The same for a CPU with these features (enum hz_cpu_feature bits). */
const char *hz_clear_kernel_missing_for(const struct hz_clear_kernel *k,
					unsigned features);

/* The automatic choice for a CPU with these features: in each role the
 * runnable kernel of highest rank (kernel.h). Pure, so tests can pin it for
 * CPUs other than their own. */
void hz_clear_auto_for(unsigned features, const struct hz_clear_kernel **cached,
		       const struct hz_clear_kernel **nt);

#endif /* HZ_CLEAR_POLICY_H */
