/* What the exit report (src/report.c) reads of executable text: the
 * counters and the folios at start-up (report.c). */
#ifndef HZ_EXEC_REPORT_H
#define HZ_EXEC_REPORT_H

#include "../stats.h"
#include "folios.h"

/* A copy of the counters (struct hz_exec_stats, stats.def). */
void hz_exec_stats_get(struct hz_exec_stats *out);

/* The text's folios at start-up, measured when stats were asked for:
 * returns 0 and fills *out, or -ENODATA when they were not measured. */
int hz_exec_folios_at_start(struct hz_folio_counts *out);

/* Keep the folios measured at start-up (start.c) for the report. */
void hz_exec_keep_folios_at_start(const struct hz_folio_counts *counts);

#endif /* HZ_EXEC_REPORT_H */
