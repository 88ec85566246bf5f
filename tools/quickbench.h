#ifndef HZ_QUICKBENCH_H
#define HZ_QUICKBENCH_H

/* Rounds for "quick" (default) or "full"; -1 for anything else. */
int hz_quickbench_rounds(const char *mode);

/* Compare glibc and the preload at path preload; self is this program's
 * path, re-run as the worker. Returns an exit status. */
int hz_quickbench(const char *self, const char *preload, int rounds);

/* The worker side: run workload index, print ms per cycle. */
int hz_quickbench_worker(int index);

#endif
