#include "plan.h"

/* The neighbourhood is the hint's page plus radius_pages pages on each side,
 * (2R + 1) pages in all. Near an edge of the range it is shifted inward
 * rather than cut: the kernel clips it at the folio edge, but in user space
 * the common first touch is the block start (calloc) followed by a forward
 * walk, so the pages after the hint are the ones worth having hot; shifting
 * keeps the hot amount the same wherever the hint falls. */
void hz_clear_plan_make(struct hz_range r, uintptr_t hint,
			unsigned radius_pages, struct hz_clear_plan *plan)
{
	size_t width = ((size_t)2 * radius_pages + 1) * HZ_SZ_4K;
	size_t before = (size_t)radius_pages * HZ_SZ_4K;
	uintptr_t page, start;

	plan->left = (struct hz_range){ r.start, r.start };
	plan->hot = plan->left;
	plan->right = r;
	if (!hz_range_contains(r, hint))
		return;
	if (hz_range_len(r) <= width) {
		plan->hot = r;
		plan->right = (struct hz_range){ r.end, r.end };
		return;
	}
	page = hz_align_down(hint, HZ_SZ_4K);
	start = (page > r.start && page - r.start > before) ? page - before
							   : r.start;
	if (start > r.end - width)
		start = r.end - width;
	plan->hot = hz_range_make(start, width);
	plan->left = (struct hz_range){ r.start, plan->hot.start };
	plan->right = (struct hz_range){ plan->hot.end, r.end };
}
