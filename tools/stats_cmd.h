/* `hugezero stats`: the report of a running process, read from outside. */
#ifndef HZ_TOOLS_STATS_CMD_H
#define HZ_TOOLS_STATS_CMD_H

/* argv[0] is "stats". Returns the exit status (0, 1 or 2). */
int hz_cmd_stats(int argc, char **argv);

#endif
