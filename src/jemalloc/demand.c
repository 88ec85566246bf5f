/* See demand.h. */
#include "demand.h"

/* A half-window ends at now: its peak becomes the last one, unless a whole
 * window passed with no event, which leaves no recent peak before now. */
static void note(struct hz_demand *d, uint64_t now, uint64_t window_ns)
{
	uint64_t half = window_ns / 2;

	if (now < d->since) /* a clock from before since: the same half-window */
		now = d->since;
	if (now - d->since >= half) {
		d->last_peak = now - d->since >= 2 * half ? 0 : d->peak;
		d->peak = 0;
		d->since = now;
	}
	if (d->active > d->peak)
		d->peak = d->active;
}

void hz_demand_handed_out(struct hz_demand *d, size_t bytes, uint64_t now, uint64_t window_ns)
{
	d->active = bytes > SIZE_MAX - d->active ? SIZE_MAX : d->active + bytes;
	note(d, now, window_ns);
}

void hz_demand_given_back(struct hz_demand *d, size_t bytes, uint64_t now, uint64_t window_ns)
{
	d->active = d->active > bytes ? d->active - bytes : 0;
	note(d, now, window_ns);
}

size_t hz_demand_room(const struct hz_demand *d)
{
	size_t peak = d->peak > d->last_peak ? d->peak : d->last_peak;

	return peak > d->active ? peak - d->active : 0;
}
