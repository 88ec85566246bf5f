/* `hugezero run --record FILE` and `hugezero plot FILE`: a run's counters
 * over time, written by the one and drawn by the other. */
#ifndef HZ_TOOLS_RECORD_H
#define HZ_TOOLS_RECORD_H

/* The recording's first line: tab-separated column names, one row per
 * sample below it. Bytes and counts are since the program started, but
 * for live_bytes and cache_bytes, which are now. The new_* columns are the
 * bytes of the blocks mapped fresh on each page size; zeroed_by_thread is
 * the pre-zero thread's writing (prezeroed_bytes + assisted_bytes),
 * zeroed_by_calloc what calloc cleared itself (cleared_bytes less
 * assisted_bytes), as src/stats.def splits them. The other names are
 * stats.def's keys. */
#define HZ_RECORD_HEADER                                                    \
	"elapsed_s\tlive_bytes\tcache_bytes\tnew_hugetlb_bytes\tnew_thp_bytes\t" \
	"new_4k_bytes\tzeroed_by_thread_bytes\tzeroed_by_calloc_bytes\t"     \
	"cache_hits\tcache_misses\tthp_promoted\tpromote_collapsed_bytes"
#define HZ_RECORD_COLUMNS 12

/* 100 ms between samples: ten rows a second draw a run of a few seconds
 * smoothly, and a sample (two process_vm_readv calls) costs microseconds. */
#define HZ_RECORD_INTERVAL_NS 100000000ull

/* Runs cmd (LD_PRELOAD already set) in a child and writes its counters to
 * file while it runs; forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
 * and SIGUSR2 sent to this process. Returns what `hugezero run` exits
 * with: the child's status, 128 + the signal that ended it, 126 or 127 if
 * it could not be executed; 1 when file cannot be written. */
int hz_record_run(const char *file, char **cmd);

/* `hugezero plot`; argv[0] is "plot". Returns the exit status. */
int hz_cmd_plot(int argc, char **argv);

#endif
