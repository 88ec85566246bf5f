/* The exit report's view of executable text: the counters and the text's
 * folios at start-up. See report.h. */
#include "report.h"

#include <errno.h>

/* The text's folios at start-up, for the exit report; text_at_start_set
 * (release) says it is filled. */
static struct hz_folio_counts text_at_start;
static int text_at_start_set;

void hz_exec_keep_folios_at_start(const struct hz_folio_counts *counts)
{
	text_at_start = *counts;
	__atomic_store_n(&text_at_start_set, 1, __ATOMIC_RELEASE);
}

void hz_exec_stats_get(struct hz_exec_stats *out)
{
	struct hz_stats all;

	hz_stats_snapshot(&all);
	*out = all.exec;
}

int hz_exec_folios_at_start(struct hz_folio_counts *out)
{
	if (!__atomic_load_n(&text_at_start_set, __ATOMIC_ACQUIRE))
		return -ENODATA;
	*out = text_at_start;
	return 0;
}
