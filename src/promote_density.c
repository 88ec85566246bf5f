/* See promote_density.h. */
#include "promote_density.h"

#include <errno.h>

#include "prim/memory.h"
#include "range.h"
#include "sizes.h"

struct density {
	uintptr_t start;
	uint16_t *pages; /* per 2 MiB page: 4 KiB pages counted */
};

/* Count run's 4 KiB pages in the 2 MiB pages they fall in. */
static void count_pages(struct density *d, struct hz_range run)
{
	for (uintptr_t a = run.start; a < run.end;) {
		uintptr_t page_end = hz_align_down(a, HZ_SZ_2M) + HZ_SZ_2M;
		uintptr_t to = page_end < run.end ? page_end : run.end;

		d->pages[(a - d->start) / HZ_SZ_2M] += (uint16_t)((to - a) / HZ_SZ_4K);
		a = to;
	}
}

static void count_missing(void *ctx, struct hz_range run, bool resident)
{
	if (!resident)
		count_pages(ctx, run);
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

static void count_resident(void *ctx, struct hz_range run, bool resident)
{
	if (resident)
		count_pages(ctx, run);
}

enum hz_front hz_promote_front_judge(const uint16_t *resident, size_t n, size_t *frontier)
{
	size_t whole = 0, partial = 0, last = 0;
	bool touched = false;

	for (size_t i = 0; i < n; i++) {
		if (resident[i] == 0)
			continue;
		touched = true;
		last = i;
		if (HZ_SZ_2M / HZ_SZ_4K - resident[i] <= HZ_PROMOTE_DENSE_MISSING)
			whole++;
		else
			partial++;
	}
	*frontier = touched ? last + 1 : 0;
	if (whole > 0 && partial <= HZ_FRONT_EDGES)
		return HZ_FRONT_DENSE;
	if (partial > HZ_FRONT_EDGES && partial > whole)
		return HZ_FRONT_SPARSE;
	return HZ_FRONT_WAIT;
}

int hz_promote_front(uintptr_t start, size_t n, uint16_t *resident, enum hz_front *verdict,
		     size_t *frontier)
{
	struct density d = { start, resident };
	int ret;

	for (size_t i = 0; i < n; i++)
		resident[i] = 0;
	ret = hz_prim_residency(start, n * HZ_SZ_2M, count_resident, &d);
	if (ret == -ENOMEM)
		return ret;
	/* Another failure counts the pieces it hit as resident: a range
	 * that cannot be read is not advised on a guess. */
	*verdict = ret == 0 ? hz_promote_front_judge(resident, n, frontier) : HZ_FRONT_SPARSE;
	return 0;
}
