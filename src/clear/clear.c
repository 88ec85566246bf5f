/* hz_clear and the public kernel-listing API. */
#include <errno.h>
#include <stdint.h>

#include "../../include/hugezero.h"
#include "plan.h"
#include "policy.h"

static void run(const struct hz_clear_kernel *k, struct hz_range r)
{
	if (!hz_range_empty(r))
		k->fn((void *)r.start, hz_range_len(r));
}

HZ_API void hz_clear(void *dst, size_t len, const void *hint)
{
	const struct hz_clear_kernel *far;
	struct hz_clear_policy p;
	struct hz_clear_plan plan;

	if (len == 0)
		return;
	hz_clear_policy_load(&p);
	/* The far parts take the kernel for the whole call's length, not
	 * their own: a 64 KiB call with a 20 KiB neighbourhood would otherwise
	 * clear its 44 KiB rest with cached stores (bench/RESULTS.md: 0.57x
	 * the best kernel at 64 KiB). Below the threshold everything is cached
	 * stores, so the order does not matter and the plan is skipped: that
	 * is most of hz_clear's cost on 4 KiB calls. */
	far = hz_clear_policy_pick(&p, len);
	if (far == p.cached) {
		p.cached->fn(dst, len);
	} else {
		hz_clear_plan_make(hz_range_make((uintptr_t)dst, len), (uintptr_t)hint,
				   p.radius, &plan);
		run(far, plan.right);
		run(far, plan.left);
		run(p.cached, plan.hot);
	}
	/* One fence per call, never per page: see kernel.h. */
	if (far->nontemporal || p.cached->nontemporal)
		hz_clear_fence();
}

void hz_clear_cached(void *dst, size_t len)
{
	struct hz_clear_policy p;

	hz_clear_policy_load(&p);
	p.cached->fn(dst, len);
	if (p.cached->nontemporal)
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
