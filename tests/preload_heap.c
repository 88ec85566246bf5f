/* glibc's main heap on huge pages (src/preload/heap.c), on real programs:
 * preload_heap_grow grows its heap under the preload, with and without
 * what must leave the heap alone, and reports what the kernel made of it.
 *
 * Usage: preload_heap PRELOAD GROWER. Skipped, with the reason, where THP
 * is not in "madvise" mode (the preload then leaves the heap alone, which
 * heap_is_left_alone_without_thp_madvise checks) or under an emulator. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

static const char *preload, *grower;

struct heap {
	int vmas, advised, refused;
	long huge_kib, heap_mib;
	long least_heap_mib; /* the smallest of the lines' */
	long own_kib;        /* ownsbrk's line, or -1 */
	int lines;
};

/* Run the grower with the preload (or without: preload_path NULL), extra
 * environment words and arguments; parse its last report line. Fails the
 * test unless it exits 0. */
static struct heap run(const char *preload_path, const char *const *env_extra,
		       const char *const *args)
{
	const char *argv[16] = { grower };
	char *envp[32], ld[4096], out[4096] = "";
	int fds[2], status, n = 0, a = 1;
	ssize_t got = 0, r;
	struct heap h = { .own_kib = -1 };
	pid_t pid;

	for (; args[a - 1] != NULL && a < 15; a++)
		argv[a] = args[a - 1];
	argv[a] = NULL;
	if (preload_path != NULL) {
		snprintf(ld, sizeof(ld), "LD_PRELOAD=%s", preload_path);
		envp[n++] = ld;
	}
	envp[n++] = "PATH=/usr/bin:/bin";
	/* The heap's advice whatever fresh huge pages cost to fault on this
	 * machine: where they are slower than 4 KiB pages the heap keeps
	 * glibc's (src/backing.c; tests/fault/degrade.c tests the check). */
	envp[n++] = "HUGEZERO_THP_CHECK=0";
	for (int i = 0; env_extra != NULL && env_extra[i] != NULL && n < 30; i++)
		envp[n++] = (char *)env_extra[i];
	envp[n] = NULL;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execve(grower, (char *const *)argv, envp);
		_exit(127);
	}
	close(fds[1]);
	while ((r = read(fds[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
		got += r;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s %s exited with status %#x; it said: %s", grower, args[0], status, out);
	for (char *line = out; line != NULL && *line != '\0';) {
		if (sscanf(line, "vmas=%d advised=%d refused=%d huge_kib=%ld heap_mib=%ld", &h.vmas,
			   &h.advised, &h.refused, &h.huge_kib, &h.heap_mib) == 5 &&
		    (h.lines++ == 0 || h.heap_mib < h.least_heap_mib))
			h.least_heap_mib = h.heap_mib;
		(void)sscanf(line, "own_kib=%ld", &h.own_kib);
		line = strchr(line, '\n');
		line = line != NULL ? line + 1 : NULL;
	}
	assert_true(h.lines >= 1);
	print_message("  %s: vmas=%d advised=%d refused=%d huge=%ld KiB heap=%ld MiB\n", args[0],
		      h.vmas, h.advised, h.refused, h.huge_kib, h.heap_mib);
	return h;
}

static void need_madvise(void)
{
	if (getenv("HZ_UNDER_EMULATOR") != NULL || !hz_test_thp_mode_is("[madvise]")) {
		print_message("[  SKIP    ] THP is not in \"madvise\" mode here, or the test runs "
			      "under an emulator\n");
		skip();
	}
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* 200 MiB of 4000-byte requests: the heap passes the 32 MiB floor, and
 * from there on its faults are huge ones: the range below the break where
 * they happen is advised MADV_HUGEPAGE, what lies below it
 * MADV_NOHUGEPAGE (khugepaged must not fill in what the program gives
 * back); the advice runs contiguously, so the heap stays in at most four
 * mappings. */
static void heap_past_the_floor_gets_huge_pages(void **state)
{
	struct heap plain, h;

	(void)state;
	need_madvise();
	plain = run(NULL, NULL, ARGS("200"));
	assert_int_equal(plain.advised, 0);
	assert_int_equal(plain.refused, 0);
	h = run(preload, NULL, ARGS("200"));
	assert_int_equal(h.advised, 1);
	assert_int_equal(h.refused, 1);
	assert_true(h.vmas <= 4);
	/* Most of the 168 MiB past the floor: the first pad's worth is
	 * faulted before the advice comes. */
	assert_true(h.huge_kib >= 100 * 1024);
	/* The pad is address space, not memory: 8 MiB at most beyond. */
	assert_true(h.heap_mib <= plain.heap_mib + 10);
}

static void heap_grown_by_calloc_and_realloc_gets_huge_pages(void **state)
{
	(void)state;
	need_madvise();
	assert_int_equal(run(preload, NULL, ARGS("100", "calloc")).advised, 1);
	assert_int_equal(run(preload, NULL, ARGS("100", "realloc")).advised, 1);
}

static void heap_below_the_floor_is_left_alone(void **state)
{
	(void)state;
	need_madvise();
	assert_int_equal(run(preload, NULL, ARGS("24")).advised, 0);
	/* Trimmed below the break first seen, it is not 32 MiB larger. */
	assert_int_equal(run(preload, NULL, ARGS("24", "shrinkfirst")).advised, 0);
}

/* Freed from the top, the heap shrinks; grown again, the advice covers
 * it again, still in at most four mappings. */
static void heap_that_shrinks_and_grows_again_stays_advised_in_four_mappings(void **state)
{
	struct heap h;

	(void)state;
	need_madvise();
	h = run(preload, NULL, ARGS("100", "regrow"));
	assert_int_equal(h.lines, 2);
	assert_true(h.least_heap_mib < 32); /* it did shrink */
	assert_int_equal(h.advised, 1);
	assert_true(h.vmas <= 4);
	assert_true(h.huge_kib > 0);
}

/* Trimmed back into the advised range and grown again, 40 times, a
 * little higher each time: each trim leaves a new mapping behind where
 * the heap grows back into advised ground (44 mappings when the advice
 * followed it), so the advice does not follow it below the heap's peak. */
static void heap_that_seesaws_stays_in_few_mappings(void **state)
{
	struct heap h;

	(void)state;
	need_madvise();
	h = run(preload, NULL, ARGS("100", "seesaw"));
	assert_int_equal(h.advised, 1);
	assert_true(h.vmas <= 8);
	assert_true(h.huge_kib >= 32 * 1024);
}

/* What a user or program tuned stays as they set it. */
static void tuned_malloc_is_left_alone(void **state)
{
	static const char *const pad[] = { "MALLOC_TOP_PAD_=131072", NULL };
	static const char *const tunable[] = { "GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072",
					       NULL };
	static const char *const off[] = { "HUGEZERO_HEAP=0", NULL };

	(void)state;
	need_madvise();
	assert_int_equal(run(preload, pad, ARGS("100")).advised, 0);
	assert_int_equal(run(preload, tunable, ARGS("100")).advised, 0);
	assert_int_equal(run(preload, off, ARGS("100")).advised, 0);
	assert_int_equal(run(preload, NULL, ARGS("100", "mallopt")).advised, 0);
}

/* Memory the program takes with sbrk next to glibc's heap is its own:
 * touched sparsely, it stays on 4 KiB pages (one per 64 KiB touched:
 * 1 MiB of 16). */
static void program_break_is_left_alone(void **state)
{
	(void)state;
	need_madvise();
	assert_true(run(preload, NULL, ARGS("60", "ownsbrk")).own_kib <= 2048);
}

/* A limit set in a signal handler that interrupted glibc's malloc: the
 * watch ends at the next request, not in the handler (glibc's mallopt
 * there hung one child in two). */
static void limit_set_in_a_signal_handler_neither_hangs_nor_crashes(void **state)
{
	(void)state;
	need_madvise();
	assert_int_equal(run(preload, NULL, ARGS("40", "sigrlimit")).advised, 1);
}

/* The pad could make a request that fits the limit fail. */
static void heap_under_a_data_limit_is_left_alone(void **state)
{
	struct rlimit old, rl;
	struct heap h;

	(void)state;
	need_madvise();
	assert_int_equal(getrlimit(RLIMIT_DATA, &old), 0);
	rl = old;
	rl.rlim_cur = (rlim_t)1 << 40;
	if (old.rlim_max != RLIM_INFINITY && old.rlim_max < rl.rlim_cur)
		rl.rlim_cur = old.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_DATA, &rl), 0);
	h = run(preload, NULL, ARGS("100"));
	assert_int_equal(setrlimit(RLIMIT_DATA, &old), 0);
	assert_int_equal(h.advised, 0);
}

/* A fork after the heap went huge: the child's heap keeps its advice
 * and grows on; the threads case races glibc's arenas and the main heap. */
static void fork_and_threads_keep_the_heap_sound(void **state)
{
	struct heap h;

	(void)state;
	need_madvise();
	h = run(preload, NULL, ARGS("60", "fork"));
	assert_int_equal(h.lines, 2);
	assert_int_equal(h.advised, 1);
	h = run(preload, NULL, ARGS("100", "threads"));
	assert_int_equal(h.advised, 1);
}

#define THP_MODE "/sys/kernel/mm/transparent_hugepage/enabled"

static int write_thp_mode(const char *mode)
{
	FILE *f = fopen(THP_MODE, "w");
	int ok;

	if (f == NULL)
		return -1;
	ok = fputs(mode, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* Set while the test below has the mode changed: the teardown puts
 * "madvise" back whatever failed. */
static bool thp_mode_changed;

static int restore_thp_mode(void **state)
{
	(void)state;
	if (thp_mode_changed && write_thp_mode("madvise") != 0) {
		fprintf(stderr, "could not put THP back in madvise mode (%s)\n", THP_MODE);
		return -1;
	}
	thp_mode_changed = false;
	return 0;
}

/* Without THP in madvise mode the preload never advises the heap: under
 * "never" the advice would do nothing but the pad would still cost. */
static void heap_is_left_alone_without_thp_madvise(void **state)
{
	(void)state;
	need_madvise();
	if (geteuid() != 0 || access(THP_MODE, W_OK) != 0) {
		print_message("[  SKIP    ] changing the THP mode needs root and a writable %s\n",
			      THP_MODE);
		skip();
	}
	thp_mode_changed = true;
	assert_int_equal(write_thp_mode("never"), 0);
	assert_int_equal(run(preload, NULL, ARGS("60")).advised, 0);
	assert_int_equal(restore_thp_mode(NULL), 0);
}

#define OVERCOMMIT "/proc/sys/vm/overcommit_memory"

/* The mode before the test below changed it, or "" while unchanged. */
static char overcommit_was[16];

static int restore_overcommit(void **state)
{
	FILE *f;
	int ok;

	(void)state;
	if (overcommit_was[0] == '\0')
		return 0;
	f = fopen(OVERCOMMIT, "w");
	ok = f != NULL && fputs(overcommit_was, f) >= 0;
	if (f != NULL && fclose(f) != 0)
		ok = 0;
	if (!ok) {
		fprintf(stderr, "could not put %s back to %s\n", OVERCOMMIT, overcommit_was);
		return -1;
	}
	overcommit_was[0] = '\0';
	return 0;
}

/* Under strict overcommit the pad would be charged as committed memory. */
static void heap_under_strict_overcommit_is_left_alone(void **state)
{
	char was[16] = "";
	FILE *f;

	(void)state;
	need_madvise();
	if (geteuid() != 0 || access(OVERCOMMIT, W_OK) != 0) {
		print_message("[  SKIP    ] changing %s needs root\n", OVERCOMMIT);
		skip();
	}
	f = fopen(OVERCOMMIT, "r");
	assert_non_null(f);
	assert_non_null(fgets(was, sizeof(was), f));
	fclose(f);
	memcpy(overcommit_was, was, sizeof(was));
	f = fopen(OVERCOMMIT, "w");
	assert_non_null(f);
	assert_true(fputs("2", f) >= 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(run(preload, NULL, ARGS("60")).advised, 0);
	assert_int_equal(restore_overcommit(NULL), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(heap_past_the_floor_gets_huge_pages),
		cmocka_unit_test(heap_grown_by_calloc_and_realloc_gets_huge_pages),
		cmocka_unit_test(heap_below_the_floor_is_left_alone),
		cmocka_unit_test(heap_that_shrinks_and_grows_again_stays_advised_in_four_mappings),
		cmocka_unit_test(heap_that_seesaws_stays_in_few_mappings),
		cmocka_unit_test(limit_set_in_a_signal_handler_neither_hangs_nor_crashes),
		cmocka_unit_test(program_break_is_left_alone),
		cmocka_unit_test(tuned_malloc_is_left_alone),
		cmocka_unit_test(heap_under_a_data_limit_is_left_alone),
		cmocka_unit_test(fork_and_threads_keep_the_heap_sound),
		cmocka_unit_test_teardown(heap_is_left_alone_without_thp_madvise, restore_thp_mode),
		cmocka_unit_test_teardown(heap_under_strict_overcommit_is_left_alone,
					  restore_overcommit),
	};

	if (argc != 3) {
		fprintf(stderr, "usage: preload_heap PRELOAD GROWER\n");
		return 2;
	}
	preload = argv[1];
	grower = argv[2];
	return cmocka_run_group_tests(all, NULL, NULL);
}
