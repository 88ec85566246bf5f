/* The exit report: what hugezero did, as text on stderr (HUGEZERO_STATS=1)
 * or JSON in a new file (HUGEZERO_STATS_FILE), both laid out by the
 * counter table (stats.def). It sits above everything it reports on
 * (stats, exec, backing); the preload's exit path calls it. */
#ifndef HZ_REPORT_H
#define HZ_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "stats.h"

enum hz_report_form { HZ_REPORT_TEXT, HZ_REPORT_JSON };

/* What the report says besides the counters. */
struct hz_report_facts {
	int pid;
	const char *exec_mode; /* HUGEZERO_EXEC in effect: "off", "advise"... */
	bool folios;           /* text: add the text's folio lines (a page-table
				* scan; the JSON never has them) */
};

/* The facts of this process now. */
void hz_report_facts_now(struct hz_report_facts *f);

/* Lay out the report of s into buf (NUL-terminated, cut at size - 1).
 * Returns its length. Never allocates. */
size_t hz_report_format(enum hz_report_form form, const struct hz_stats *s,
			const struct hz_report_facts *f, char *buf, size_t size);

/* Keep a private copy of stderr for the exit report: programs such as
 * coreutils close stderr in their atexit handlers, which run before
 * shared-library destructors. Call once at start-up. */
void hz_report_keep_stderr(void);

/* Make the counters readable from outside (`hugezero stats PID`): fills
 * the stats header with this process's facts. Call once at start-up, after
 * the exec mode is known. */
void hz_report_publish(void);

/* Write the report HUGEZERO_STATS / HUGEZERO_STATS_FILE ask for, if any. */
void hz_report_exit(void);

#endif /* HZ_REPORT_H */
