/* `hugezero stats --openmetrics` and `--textfile`: the counters of running
 * processes in the text formats Prometheus scrapes, one metric family per
 * row of src/stats.def. */
#ifndef HZ_TOOLS_OPENMETRICS_H
#define HZ_TOOLS_OPENMETRICS_H

#include <stddef.h>
#include <stdio.h>

#include "stats.h"

enum hz_metrics_form {
	/* OpenMetrics 1.0: counter families named without _total, # UNIT
	 * lines, an info family, and # EOF at the end. */
	HZ_METRICS_OPENMETRICS,
	/* The Prometheus text format 0.0.4, which node_exporter's textfile
	 * collector parses: TYPE names the sample (with _total), no # UNIT,
	 * no info type (a gauge of 1 instead) and no # EOF. */
	HZ_METRICS_PROMETHEUS,
};

/* One process read: its labels, already escaped, and its counters. */
struct hz_metrics_process {
	char labels[2304];  /* pid="1",comm="x"[,cgroup="/a"] */
	char version[64];   /* of the library the process runs */
	char exec_mode[32]; /* HUGEZERO_EXEC's word */
	struct hz_stats stats;
};

struct hz_metrics {
	struct hz_metrics_process *procs;
	size_t count, cap;
};

/* Add process pid with its header and counters; its comm and cgroup are
 * read from /proc now (left out when unreadable: a process gone
 * mid-scan still has its counters). Returns 0 or -ENOMEM. */
int hz_metrics_add(struct hz_metrics *m, int pid, const struct hz_stats_header *h,
		   const struct hz_stats *s);

void hz_metrics_free(struct hz_metrics *m);

/* Write every family, one sample line per process (none at all without a
 * process). Returns 0, or a negative errno value when out failed. */
int hz_metrics_write(FILE *out, const struct hz_metrics *m, enum hz_metrics_form form);

#endif
