/* `hugezero stats`: the report of a running process, read from outside. */
#ifndef HZ_TOOLS_STATS_CMD_H
#define HZ_TOOLS_STATS_CMD_H

#include <sys/types.h>

#include "stats.h"

/* argv[0] is "stats". Returns the exit status (0, 1 or 2). */
int hz_cmd_stats(int argc, char **argv);

/* The stats header of process pid, found as `hugezero stats PID` finds it
 * (for `hugezero run --record`). 0 and *h set; -ENOENT: no header (not
 * under the preload, or not started yet); -ESRCH: no such process, or it
 * exited; -EACCES or -EPERM: not ours to read; -EPROTO: another hugezero
 * version's counters; or another negative errno value. */
int hz_stats_find(pid_t pid, struct hz_stats_header *h);

/* Process pid's counters now, through the header hz_stats_find gave. 0;
 * -ENOENT when the header is no longer there (the process called exec:
 * find it again), -ESRCH when the process exited, or another negative
 * errno value. */
int hz_stats_read(pid_t pid, const struct hz_stats_header *h, struct hz_stats *s);

#endif
