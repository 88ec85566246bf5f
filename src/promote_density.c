/* See promote_density.h. */
#include "promote_density.h"

#include <errno.h>

#include "prim/memory.h"
#include "range.h"
#include "sizes.h"

struct density {
	uintptr_t start;
	size_t unit;     /* bytes counted together: a 2 MiB page, or less */
	uint16_t *pages; /* per unit: 4 KiB pages counted */
};

/* Count run's 4 KiB pages in the units they fall in. */
static void count_pages(struct density *d, struct hz_range run)
{
	for (uintptr_t a = run.start; a < run.end;) {
		size_t i = (a - d->start) / d->unit;
		uintptr_t unit_end = d->start + (i + 1) * d->unit;
		uintptr_t to = unit_end < run.end ? unit_end : run.end;

		d->pages[i] += (uint16_t)((to - a) / HZ_SZ_4K);
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
	struct density d = { start, HZ_SZ_2M, missing };
	int ret;

	for (size_t i = 0; i < n; i++)
		missing[i] = 0;
	ret = hz_prim_residency(start, n * HZ_SZ_2M, count_missing, &d);
	*yes = ret == 0;
	for (size_t i = 0; i < n && *yes; i++)
		*yes = missing[i] <= HZ_SPARSE_PAGES;
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
		if (hz_promote_page_whole(resident[i]))
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
	struct density d = { start, HZ_SZ_2M, resident };
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

uint16_t hz_promote_front_level(const uint16_t *resident, size_t n, bool touched)
{
	uint16_t least[HZ_FRONT_EDGES + 1]; /* the least counts, ascending */
	size_t counted = 0;

	for (size_t i = 0; i < n; i++) {
		size_t j;

		if (touched && resident[i] == 0)
			continue;
		if (counted < HZ_FRONT_EDGES + 1)
			j = counted++;
		else if (resident[i] < least[HZ_FRONT_EDGES])
			j = HZ_FRONT_EDGES;
		else
			continue;
		for (; j > 0 && least[j - 1] > resident[i]; j--)
			least[j] = least[j - 1];
		least[j] = resident[i];
	}
	return counted == HZ_FRONT_EDGES + 1 ? least[HZ_FRONT_EDGES] : 0;
}

enum hz_front hz_promote_front_strided(const uint16_t *resident, size_t n, uint16_t *level)
{
	uint16_t most = 0;
	size_t reached = 0;

	*level = hz_promote_front_level(resident, n, true);
	if (*level < HZ_SPARSE_PAGES)
		return *level == 0 ? HZ_FRONT_WAIT : HZ_FRONT_SPARSE;
	for (size_t i = 0; i < n; i++) {
		if (resident[i] < *level)
			continue;
		reached++;
		if (resident[i] > most)
			most = resident[i];
	}
	if (reached <= HZ_FRONT_EDGES)
		return HZ_FRONT_WAIT;
	return (size_t)(most - *level) <=
			       1 + (size_t)*level * HZ_SPARSE_PAGES /
					   (HZ_SZ_2M / HZ_SZ_4K)
		       ? HZ_FRONT_DENSE
		       : HZ_FRONT_SPARSE;
}

/* The rule of promote_density.h on whole and partly touched units. */
static enum hz_front used_judge(size_t whole, size_t partial)
{
	if (whole > 0 && partial <= 1)
		return HZ_FRONT_DENSE;
	return whole + partial == 0 ? HZ_FRONT_WAIT : HZ_FRONT_SPARSE;
}

enum hz_front hz_promote_used(uintptr_t start, size_t len, uint16_t *resident, size_t units)
{
	size_t unit = len < HZ_SZ_2M ? len : HZ_SZ_2M;
	size_t n, may_miss, whole = 0, partial = 0;
	struct density d = { start, unit, resident };
	int ret;

	if (len < HZ_SZ_4K)
		return HZ_FRONT_WAIT;
	n = len / unit < units ? len / unit : units;
	for (size_t i = 0; i < n; i++)
		resident[i] = 0;
	ret = hz_prim_residency(start, n * unit, count_resident, &d);
	if (ret == -ENOMEM)
		return HZ_FRONT_WAIT; /* unmapped since: no evidence */
	if (ret != 0)
		return HZ_FRONT_SPARSE; /* unreadable: never a guess for huge pages */
	may_miss = HZ_SPARSE_PAGES * unit / HZ_SZ_2M;
	for (size_t i = 0; i < n; i++) {
		if (resident[i] == 0)
			continue;
		if (unit / HZ_SZ_4K - resident[i] <= may_miss)
			whole++;
		else
			partial++;
	}
	return used_judge(whole, partial);
}
