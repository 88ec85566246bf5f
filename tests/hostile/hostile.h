/* Helpers for the hostile cases (tests/hostile): programs that do what real
 * programs legally do to their own memory and environment, run by run.sh
 * once under glibc and once under libhugezero-preload.so, whose outcomes
 * must match.
 *
 * A case's protocol with run.sh:
 * - exit 0 when every check held; a failed CHECK prints why on stderr and
 *   exits 1; a case that cannot run here prints "SKIP: reason" on stdout
 *   and exits 77 (run.sh then skips without running the other side). A
 *   skip in the preload run only is a difference, unless its reason starts
 *   "environment changed: " (another process took what the case needs);
 * - what it prints on stdout is its result, compared between the two runs;
 *   a line "baseline NAME VALUE" is the glibc run's measurement, handed to
 *   the preload run as HOSTILE_BASELINE_NAME (hostile_baseline) and not
 *   compared;
 * - stderr must match too (a library that prints into its host is harm),
 *   except lines that start with "note: ", which are information.
 * The case never asks whether it runs under the preload: both runs execute
 * the same code, so the glibc run proves the checks honest. */
#ifndef HZ_TESTS_HOSTILE_H
#define HZ_TESTS_HOSTILE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "../check.h"
#include "../util.h" /* hz_test_fill, hz_test_check, hz_test_first_nonzero */

#define SKIP(...)                                                             \
	do {                                                                  \
		printf("SKIP: " __VA_ARGS__);                                 \
		putchar('\n');                                                \
		exit(77);                                                     \
	} while (0)

#define NOTE(...)                                                             \
	do {                                                                  \
		fprintf(stderr, "note: " __VA_ARGS__);                        \
		fputc('\n', stderr);                                          \
	} while (0)

/* A case with variants: main() runs the one argv[1] names. */
struct hostile_variant {
	const char *name;
	int (*run)(void);
};
int hostile_main(int argc, char **argv, const struct hostile_variant *list);

/* Keep an allocation the compiler could otherwise drop. */
static inline void *hostile_keep(void *p)
{
	__asm__ __volatile__("" : "+r"(p) : : "memory");
	return p;
}

/* Allocate len with malloc (or calloc), check it is zero when calloc'd,
 * write every byte and read it back: the block a new owner gets is plain
 * memory. Exits through CHECK otherwise. */
void hostile_use_new_block(size_t len, bool zeroed);

/* Calloc len, write every byte and free it, times times: a size that is
 * reused, which starts the pre-zero thread under the preload; then sleep
 * settle_ms, for the thread to take the freed block. */
void hostile_recycle(size_t len, int times, unsigned settle_ms);

/* Whether any mapping overlapping [p, p + len) has VmFlags flag ("dd",
 * "mg", "nh", "lo", "dc", "wf", "sd"...). */
bool hostile_vmflag(const void *p, size_t len, const char *flag);
/* An smaps field ("Rss:") summed over the mappings overlapping the range. */
uint64_t hostile_smaps_sum(const void *p, size_t len, const char *field);
/* A "Name:  N kB" line of /proc/self/status, in bytes, or -1. */
long long hostile_status_bytes(const char *name);

/* The glibc run's measurement NAME (see above), or -1 in the glibc run. */
long long hostile_baseline(const char *name);
void hostile_print_baseline(const char *name, long long value);

/* Wait for a child: its exit code; for a child killed by a signal, print
 * that on stdout (so the outcome differs) and return 1. */
int hostile_wait(pid_t pid);

/* As root: become nobody (groups, gid, uid). Not root: nothing to do, the
 * process is unprivileged already. Exits through CHECK on failure. */
void hostile_drop_root(void);

/* An unlinked temporary file of len bytes of value byte; returns its fd. */
int hostile_temp_file(size_t len, unsigned char byte);

/* Undo a system change at the end, at exit and on SIGTERM, SIGINT,
 * SIGHUP, SIGQUIT and SIGALRM (a timeout): write text into path, or
 * remove directory path (text NULL). Run in reverse order, only by the
 * process that registered them (not by forked children). */
void hostile_undo_write(const char *path, const char *text);
void hostile_undo_rmdir(const char *path);
void hostile_undo_all(void);

/* Skip when the 2 MiB hugetlb pool has free pages: a block may then be
 * hugetlb memory, which takes madvise and mprotect only in whole 2 MiB
 * pages. For cases about something else; hugetlb.c covers the pool. */
void hostile_skip_if_hugetlb_pool(void);

/* Read a file holding one number; -1 on failure. Write text; 0 or -1. */
long long hostile_read_ll(const char *path);
int hostile_write(const char *path, const char *text);

#endif /* HZ_TESTS_HOSTILE_H */
