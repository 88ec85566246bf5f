/* hz_clear and the public kernel-listing API. */
#include <errno.h>
#include <stdint.h>

#include "../../include/hugezero.h"
#include "plan.h"
#include "policy.h"

/* One pass with the kernel for its length. Returns true when the pass used
 * weakly-ordered stores, so the caller must fence. */
static bool clear_pass(const struct hz_clear_policy *p, struct hz_range r)
{
	const struct hz_clear_kernel *k;

	if (hz_range_empty(r))
		return false;
	k = hz_clear_policy_pick(p, hz_range_len(r));
	k->fn((void *)r.start, hz_range_len(r));
	return k->nontemporal;
}

HZ_API void hz_clear(void *dst, size_t len, const void *hint)
{
	struct hz_clear_policy p;
	struct hz_clear_plan plan;
	bool fence = false;

	if (len == 0)
		return;
	hz_clear_policy_load(&p);
	hz_clear_plan_make(hz_range_make((uintptr_t)dst, len), (uintptr_t)hint,
			   p.radius, &plan);
	fence |= clear_pass(&p, plan.right);
	fence |= clear_pass(&p, plan.left);
	if (!hz_range_empty(plan.hot))
		p.cached->fn((void *)plan.hot.start, hz_range_len(plan.hot));
	fence |= p.cached->nontemporal && !hz_range_empty(plan.hot);
	/* One fence per call, never per page: see kernel.h. */
	if (fence)
		hz_clear_fence();
}

HZ_API unsigned hz_clear_kernel_count(void)
{
	return hz_clear_kernel_total;
}

HZ_API const char *hz_clear_kernel_name(unsigned i)
{
	return i < hz_clear_kernel_total ? hz_clear_kernels[i].name : NULL;
}

HZ_API int hz_clear_kernel_supported(unsigned i, const char **why)
{
	const char *missing = "no such kernel";

	if (i < hz_clear_kernel_total)
		missing = hz_clear_kernel_missing(&hz_clear_kernels[i]);
	if (why)
		*why = missing;
	return missing == NULL;
}

HZ_API int hz_clear_kernel_nontemporal(unsigned i)
{
	return i < hz_clear_kernel_total && hz_clear_kernels[i].nontemporal;
}

HZ_API int hz_clear_set_kernel(const char *name)
{
	return -hz_clear_policy_force(name);
}

HZ_API const char *hz_clear_kernel_for(size_t len)
{
	struct hz_clear_policy p;

	hz_clear_policy_load(&p);
	return hz_clear_policy_pick(&p, len)->name;
}

HZ_API int hz_clear_with(const char *name, void *dst, size_t len)
{
	const struct hz_clear_kernel *k = name ? hz_clear_kernel_find(name) : NULL;

	if (k == NULL)
		return EINVAL;
	if (hz_clear_kernel_missing(k))
		return ENOTSUP;
	k->fn(dst, len);
	if (k->nontemporal)
		hz_clear_fence();
	return 0;
}
