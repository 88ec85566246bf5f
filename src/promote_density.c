/* See promote_density.h. */
#include "promote_density.h"

#include <errno.h>

#include "prim/memory.h"
#include "range.h"
#include "sizes.h"

struct density {
	uintptr_t start;
	uint16_t *missing; /* per 2 MiB page */
};

static void count_missing(void *ctx, struct hz_range run, bool resident)
{
	struct density *d = ctx;

	if (resident)
		return;
	for (uintptr_t a = run.start; a < run.end;) {
		uintptr_t page_end = hz_align_down(a, HZ_SZ_2M) + HZ_SZ_2M;
		uintptr_t to = page_end < run.end ? page_end : run.end;

		d->missing[(a - d->start) / HZ_SZ_2M] += (uint16_t)((to - a) / HZ_SZ_4K);
		a = to;
	}
}

int hz_promote_dense(uintptr_t start, size_t n, bool *yes)
{
	uint16_t missing[HZ_PROMOTE_DENSE_MAX];
	struct density d = { start, missing };
	int ret;

	for (size_t i = 0; i < n; i++)
		missing[i] = 0;
	ret = hz_prim_residency(start, n * HZ_SZ_2M, count_missing, &d);
	*yes = ret == 0;
	for (size_t i = 0; i < n && *yes; i++)
		*yes = missing[i] <= HZ_PROMOTE_DENSE_MISSING;
	return ret == -ENOMEM ? ret : 0;
}
