/* The order in which hz_clear clears a range: the far parts first, the
 * neighbourhood of the hint last. Pure arithmetic, tested on its own. */
#ifndef HZ_CLEAR_PLAN_H
#define HZ_CLEAR_PLAN_H

#include "../range.h"
#include "../sizes.h"

struct hz_clear_plan {
	struct hz_range right; /* cleared first; may be empty */
	struct hz_range left;  /* cleared second; may be empty */
	struct hz_range hot;   /* cleared last, with cached stores; may be empty */
};

/* Split r for a first touch at hint with radius_pages pages on each side.
 * Without a usable hint (hint outside r) all of r is in right and hot is
 * empty. */
void hz_clear_plan_make(struct hz_range r, uintptr_t hint,
			unsigned radius_pages, struct hz_clear_plan *plan);

#endif /* HZ_CLEAR_PLAN_H */
