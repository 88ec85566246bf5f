/* Helpers for the real resource-failure tests (tests/resources).
 *
 * A resource limit matters most at start-up (the reservation is sized from
 * RLIMIT_AS, prctl flags are inherited across exec), so each check runs as a
 * "scenario" in a fresh process: the cmocka test forks, the child applies
 * the limit (setrlimit, prctl) and execs this same program with
 * "--scenario NAME" under LD_PRELOAD, so hugezero starts up under it. The
 * scenario checks what it can see from inside and exits; the test then
 * reads its exit status, its stderr and hugezero's JSON stats
 * (HUGEZERO_STATS_FILE), and asserts on them.
 *
 * System settings (vm.max_map_count, vm.nr_hugepages) are changed only by
 * the cmocka process, as root, and put back at the end of the test, at exit,
 * and on the signals a timeout or an interrupt sends. */
#ifndef HZ_TEST_RESOURCES_HARNESS_H
#define HZ_TEST_RESOURCES_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <cmocka.h>

#include "../check.h"
#include "../util.h"

/* ---- inside a scenario ---- */

struct scenario {
	const char *name;
	int (*run)(void); /* 0 on success; a failed CHECK exits by itself */
};

/* main() of a test program: with "--scenario NAME" run that scenario (under
 * a 60 s alarm) and return its result; returns -1 otherwise, and main runs
 * the cmocka tests. */
int res_scenario_main(int argc, char **argv, const struct scenario *list);

/* Keep an allocation the compiler could otherwise remove (gcc drops a
 * malloc whose result is only compared with NULL). */
static inline void *res_keep(void *p)
{
	__asm__ __volatile__("" : "+r"(p) : : "memory");
	return p;
}

/* Resident bytes of [p, p + len) according to mincore. */
size_t res_resident(const void *p, size_t len);

/* KernelPageSize of the mapping holding p, in bytes (2 MiB for hugetlb,
 * even before a page is touched; 4 KiB for THP and 4 KiB memory), or 0. */
uint64_t res_page_size(const void *p);

/* The mapping holding addr in /proc/self/maps: 0 with its bounds and
 * permissions ("rw-p"), or -1 when addr is not mapped. */
int res_mapping_at(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, char perms[5]);

/* Mappings the process has: lines of /proc/self/maps, less [vsyscall],
 * which the kernel does not count against vm.max_map_count. */
long res_map_count(void);

/* Address space the process uses now, in bytes (/proc/self/statm). */
uint64_t res_address_space(void);

/* Whether p lies in a hugezero block: 2 MiB aligned, as no glibc chunk is.
 * Only the address is read, never the memory: access(none) says so to gcc,
 * which otherwise takes a const pointer to a fresh (uninitialised) malloc
 * block for a read of it and warns at -O0, where this is not inlined. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((access(none, 1)))
#endif
static inline bool res_is_block(const void *p)
{
	return p != NULL && ((uintptr_t)p & (2 * MiB - 1)) == 0;
}

/* ---- in the cmocka test ---- */

struct child {
	pid_t pid;
	int status;  /* from waitpid */
	char *err;   /* everything it wrote to stderr, "" if nothing */
	char *stats; /* hugezero's JSON stats, or NULL when none was written */
};

/* Fail the test unless LD_PRELOAD holds libhugezero-preload.so. */
void res_require_preload(void);

/* Run scenario name of this program in a new process. setup, when not
 * NULL, runs in the child between fork and exec; env is a NULL-terminated
 * list of "NAME=value" added to the environment (or NULL). */
void res_spawn(const char *name, void (*setup)(void), const char *const *env,
	       struct child *c);

/* Fail the test, showing the child's stderr, unless it exited with 0. */
void res_expect_success(const struct child *c);

/* A number from the child's JSON stats, by a dotted path:
 * "large_requests", "fallbacks.map_failed", "blocks.thp.count". Fails the
 * test when the stats or the key are missing. */
uint64_t res_stat(const struct child *c, const char *path);

void res_child_free(struct child *c);

/* Read and write a file holding one number (/proc/sys, /sys). */
long res_read_long(const char *path);
int res_write_long(const char *path, long value);

/* Set a /proc/sys or /sys value for the rest of the test. The value it had
 * the first time goes back in res_sysctl_restore, at exit, and on SIGTERM,
 * SIGINT, SIGHUP, SIGQUIT or SIGALRM. Returns 0 or -1. */
int res_sysctl_set(const char *path, long value);
void res_sysctl_restore(void);

/* Print the skip reason the way scripts/test collects them, then skip. */
#define RES_SKIP(...)                                                         \
	do {                                                                  \
		print_message("[  SKIP    ] " __VA_ARGS__);                   \
		skip();                                                       \
	} while (0)

#endif /* HZ_TEST_RESOURCES_HARNESS_H */
