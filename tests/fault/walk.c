/* The fault walk (issue 8): for each kind of kernel call hugezero makes and
 * n = 1, 2, 3..., a child process makes the n-th call of that kind fail
 * (or every call from the n-th on), runs the scripted workload, and checks
 * the outcome: each allocation correct or NULL with ENOMEM, the metadata
 * consistent, nothing leaked, and the same workload run again without
 * faults fully served by hugezero. The walk of a kind ends at the first n
 * the workload never reaches. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <cmocka.h>

#include "harness.h"

/* Far more calls of one kind than the workload makes: a walk that gets
 * here does not end. */
#define MAX_N 600

struct point {
	enum hz_prim_call call;
	unsigned long nth;
	int error;
	bool every;
	bool startup; /* fail during hz_preload_start instead */
	/* Keep the pre-zero thread at normal priority: at idle priority, on a
	 * loaded machine, a calloc waiting for its span can wait a second. */
	bool busy_thread;
};

/* What a child reports back, through shared memory. */
struct report {
	unsigned failed;      /* NULL results (ENOMEM) */
	unsigned next_served; /* large requests glibc served instead */
	unsigned inactive;    /* start-up left hugezero off */
	size_t orphans;       /* granules kept claimed after a failed release */
	unsigned long calls[HZ_CALL_COUNT]; /* made in the phase walked */
};

static struct report *shared;

static void record_calls(void)
{
	for (int k = 0; k < HZ_CALL_COUNT; k++)
		shared->calls[k] = hz_prim_fault_calls((enum hz_prim_call)k);
}


/* The errno value each kind fails with: what the kernel answers when it
 * runs out (ENOMEM) or what the call's real failure is. */
static int error_of(enum hz_prim_call call)
{
	switch (call) {
	case HZ_CALL_MPROTECT: return EACCES;
	case HZ_CALL_PRCTL: return EINVAL;
	case HZ_CALL_SYSINFO:
	case HZ_CALL_GETRLIMIT:
	case HZ_CALL_UNAME: return EFAULT;
	case HZ_CALL_SCHED: return EPERM;
	case HZ_CALL_READ_FILE: return ENOENT;
	case HZ_CALL_OPEN:
	case HZ_CALL_DUP: return EMFILE;
	case HZ_CALL_READ:
	case HZ_CALL_WRITE:
	case HZ_CALL_CLOSE:
	case HZ_CALL_FSTAT: return EIO;
	case HZ_CALL_CACHESTAT: return ENOSYS;
	case HZ_CALL_FADVISE: return EINVAL;
	default: return ENOMEM;
	}
}

static int arm(const struct point *p)
{
	struct hz_prim_fault_rule rule = {
		.call = p->call, .nth = p->nth, .error = p->error, .every = p->every,
	};

	return hz_prim_fault_arm(&rule);
}

static int preload_scenario(void *arg)
{
	const struct point *p = arg;
	struct workload_result r1 = { 0 }, r2 = { 0 };
	struct footprint base;
	size_t orphans, orphans2, extra;
	unsigned problems = 0, threads;
	int slot = -1;
	bool reached = false;

	/* glibc's own large blocks: always mmapped, and unmapped on free,
	 * so its footprint returns to the baseline. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	if (p->startup)
		slot = arm(p);
	fault_start();
	if (p->startup) {
		reached = hz_prim_fault_seen(slot) >= p->nth;
		hz_prim_fault_disarm();
		record_calls();
		/* Only a failed reservation may turn hugezero off. */
		if (!hz_preload_active) {
			shared->inactive++;
			if (p->call != HZ_CALL_MMAP) {
				fprintf(stderr, "a failed %s at start-up turned hugezero off\n",
					hz_prim_fault_call_name(p->call));
				problems++;
			}
		}
	}
	footprint_take(&base);
	threads = thread_count();
	/* What failed during start-up is in the baseline already. */
	hz_prim_fault_reset_counts();
	if (p->startup && !reached && problems == 0)
		return CHILD_NOT_REACHED; /* a start-up like any other */
	if (!p->startup)
		slot = arm(p);
	if (p->busy_thread && p->call != HZ_CALL_SCHED) {
		const struct point sched = { HZ_CALL_SCHED, 1, EPERM, true, false, false };

		arm(&sched);
	}
	workload_run(false, &r1);
	if (!p->startup) {
		reached = hz_prim_fault_seen(slot) >= p->nth;
		hz_prim_fault_disarm();
		record_calls();
	}
	shared->failed += r1.failed;
	shared->next_served += r1.next_served;
	problems += r1.wrong;
	/* A munmap that "failed" leaves its range mapped; a new pre-zero
	 * thread leaves its stack. */
	extra = hz_prim_fault_failed_bytes(HZ_CALL_MUNMAP) +
		(thread_count() - threads) * THREAD_MAPPING_BYTES;
	problems += check_quiescent(&base, extra, p->call == HZ_CALL_MMAP && !p->startup,
				    &orphans);
	shared->orphans += orphans;
	/* The next allocations work, from hugezero. */
	workload_run(true, &r2);
	problems += r2.wrong;
	problems += check_quiescent(&base, extra, orphans > 0, &orphans2);
	/* Fewer is possible: the pre-zero thread may have been releasing
	 * spans during the first count. */
	if (orphans2 > orphans) {
		fprintf(stderr, "claimed granules went from %zu to %zu in a clean run\n",
			orphans, orphans2);
		problems++;
	}
	if (problems)
		return CHILD_BROKEN;
	return reached ? CHILD_OK : CHILD_NOT_REACHED;
}

/* The jemalloc hooks: no start-up, no reservation, no fallback. */
#ifdef HZ_HAVE_JEMALLOC
static int jemalloc_scenario(void *arg)
{
	const struct point *p = arg;
	struct workload_result r1 = { 0 }, r2 = { 0 };
	struct footprint base;
	size_t orphans, extra;
	unsigned problems = 0;
	bool reached;
	int slot;

	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	footprint_take(&base);
	slot = arm(p);
	jemalloc_workload_run(false, &r1);
	reached = hz_prim_fault_seen(slot) >= p->nth;
	hz_prim_fault_disarm();
	record_calls();
	shared->failed += r1.failed;
	problems += r1.wrong;
	extra = hz_prim_fault_failed_bytes(HZ_CALL_MUNMAP);
	problems += check_quiescent(&base, extra, false, &orphans);
	jemalloc_workload_run(true, &r2);
	problems += r2.wrong;
	problems += check_quiescent(&base, extra, false, &orphans);
	if (r2.failed) {
		fprintf(stderr, "%u hook calls refused with no fault armed\n", r2.failed);
		problems++;
	}
	if (problems)
		return CHILD_BROKEN;
	return reached ? CHILD_OK : CHILD_NOT_REACHED;
}
#endif

struct walk {
	bool every, startup;
	const char *const *env;
	int (*scenario)(void *arg);
	unsigned kinds; /* bit per enum hz_prim_call; 0: every kind */
	bool busy_thread;
};

#define KIND(k) (1u << (k))
/* The calls whose failure changes what hugezero holds or decides; the
 * others (naming, log writes) are ignored wherever they fail, which the
 * once-each walk shows. */
#define STATEFUL_KINDS                                                              \
	(KIND(HZ_CALL_MMAP) | KIND(HZ_CALL_MUNMAP) | KIND(HZ_CALL_MREMAP) |         \
	 KIND(HZ_CALL_MADVISE) | KIND(HZ_CALL_MINCORE) | KIND(HZ_CALL_SYSINFO) |    \
	 KIND(HZ_CALL_SCHED) | KIND(HZ_CALL_READ_FILE))
/* What the pre-zero thread calls. */
#define THREAD_KINDS                                                                \
	(KIND(HZ_CALL_MMAP) | KIND(HZ_CALL_MADVISE) | KIND(HZ_CALL_MINCORE) |       \
	 KIND(HZ_CALL_SYSINFO) | KIND(HZ_CALL_SCHED))

/* Run one point in a child, adding its report to sum. nth 0 arms nothing:
 * a clean run. */
static int run_point(const struct walk *w, const struct point *p, struct report *sum)
{
	char what[96];
	int status;

	if (p->nth == 0)
		snprintf(what, sizeof(what), "the run without faults");
	else
		snprintf(what, sizeof(what), "%s #%lu%s fails with errno %d",
			 hz_prim_fault_call_name(p->call), p->nth, w->every ? " and after" : "",
			 p->error);
	memset(shared, 0, sizeof(*shared));
	status = child_run(w->scenario ? w->scenario : preload_scenario, (void *)p, what);
	sum->failed += shared->failed;
	sum->next_served += shared->next_served;
	sum->inactive += shared->inactive;
	sum->orphans += shared->orphans;
	return status;
}

/* Walk kind k for n = 1, 2... until the n-th call never happens. Returns
 * the points walked. */
static unsigned long walk_kind(const struct walk *w, enum hz_prim_call k, struct report *sum,
			       unsigned *broken)
{
	unsigned long n;

	for (n = 1; n <= MAX_N; n++) {
		struct point p = { k, n, error_of(k), w->every, w->startup, w->busy_thread };
		int status = run_point(w, &p, sum);

		if (status == CHILD_NOT_REACHED)
			return n - 1;
		if (status != CHILD_OK)
			++*broken;
	}
	/* A walk that does not end is a failure of its own. */
	fprintf(stderr, "%s: still reached after %d calls\n", hz_prim_fault_call_name(k), MAX_N);
	++*broken;
	return MAX_N;
}

static void print_walk(const unsigned long points[HZ_CALL_COUNT], const struct report *sum,
		       double seconds)
{
	unsigned long total = 0;

	for (int k = 0; k < HZ_CALL_COUNT; k++)
		total += points[k];
	printf("# %lu injection points in %.1f s:", total, seconds);
	for (int k = 0; k < HZ_CALL_COUNT; k++)
		if (points[k])
			printf(" %s %lu", hz_prim_fault_call_name((enum hz_prim_call)k), points[k]);
	printf("\n# results: %u NULL (ENOMEM), %u served by glibc instead, %u start-ups "
	       "left hugezero off, %zu granules kept after failed releases\n",
	       sum->failed, sum->next_served, sum->inactive, sum->orphans);
}

/* Walk every kind; returns the injection points walked per kind. A clean
 * run first counts the calls of each kind: the kinds it never makes are
 * not walked. */
static void walk(const struct walk *w, unsigned long points[HZ_CALL_COUNT])
{
	const struct point clean = { HZ_CALL_MMAP, 0, ENOMEM, w->every, w->startup,
				     w->busy_thread };
	unsigned long calls[HZ_CALL_COUNT];
	struct report sum;
	struct timespec t0, t1;
	unsigned broken = 0;
	int status;

	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(shared != MAP_FAILED);
	memset(&sum, 0, sizeof(sum));
	scenario_env(w->env);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	status = run_point(w, &clean, &sum);
	if (status != CHILD_OK && status != CHILD_NOT_REACHED)
		broken++;
	memcpy(calls, shared->calls, sizeof(calls));
	for (int k = 0; k < HZ_CALL_COUNT; k++) {
		points[k] = 0;
		if (calls[k] > 0 && (w->kinds == 0 || (w->kinds & KIND(k))))
			points[k] = walk_kind(w, (enum hz_prim_call)k, &sum, &broken);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_walk(points, &sum,
		   (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	munmap(shared, sizeof(*shared));
	assert_int_equal(broken, 0);
}

static void each_call_failing_once_keeps_allocations_correct(void **state)
{
	unsigned long points[HZ_CALL_COUNT];
	const struct walk w = { false, false, NULL, NULL, 0, false };

	(void)state;
	walk(&w, points);
	/* The workload reaches the memory calls and the sysfs reads, region
	 * growth (it reads RLIMIT_AS) and the interposed setrlimit (VmSize,
	 * a read_file). */
	assert_true(points[HZ_CALL_MMAP] > 0 && points[HZ_CALL_MADVISE] > 0 &&
		    points[HZ_CALL_MINCORE] > 0 && points[HZ_CALL_MREMAP] > 0 &&
		    points[HZ_CALL_MUNMAP] > 0 && points[HZ_CALL_READ_FILE] > 0 &&
		    points[HZ_CALL_GETRLIMIT] > 0);
}

/* The kernel refusing a kind of call for good, from the n-th on: the kinds
 * whose failure changes what hugezero holds or decides. */
static void each_call_failing_from_then_on_keeps_allocations_correct(void **state)
{
	unsigned long points[HZ_CALL_COUNT];
	const struct walk w = { true, false, NULL, NULL, STATEFUL_KINDS, false };

	(void)state;
	walk(&w, points);
	assert_true(points[HZ_CALL_MMAP] > 0 && points[HZ_CALL_MADVISE] > 0);
}

/* The pre-zero thread clears freed blocks behind the workload's back, and
 * new blocks are populated (HUGEZERO_POPULATE): other call sites, and
 * failures landing in the thread. The kinds the thread calls only. */
static void each_call_failing_once_with_prezero_thread_and_populate(void **state)
{
	static const char *const env[] = {
		"HUGEZERO_PREZERO=thread", "HUGEZERO_POPULATE=1", NULL,
	};
	unsigned long points[HZ_CALL_COUNT];
	const struct walk w = { false, false, env, NULL, THREAD_KINDS, true };

	(void)state;
	walk(&w, points);
	assert_true(points[HZ_CALL_SCHED] > 0 && points[HZ_CALL_MADVISE] > 0);
}

/* Start-up, with executable-text advice on: whatever fails, hugezero
 * works afterwards. Start-up reserves no address space any more (regions
 * come with the first block), so it makes no mmap and reads no limit. */
static void each_startup_call_failing_once_leaves_a_working_allocator(void **state)
{
	static const char *const env[] = { "HUGEZERO_EXEC=advise", NULL };
	unsigned long points[HZ_CALL_COUNT];
	const struct walk w = { false, true, env, NULL, 0, false };

	(void)state;
	walk(&w, points);
	assert_true(points[HZ_CALL_OPEN] > 0 && points[HZ_CALL_READ] > 0);
	assert_int_equal(points[HZ_CALL_MMAP], 0);
	assert_int_equal(points[HZ_CALL_GETRLIMIT], 0);
}

/* The jemalloc extent hooks: each call site failing once. */
static void each_call_failing_once_keeps_jemalloc_hooks_correct(void **state)
{
#ifdef HZ_HAVE_JEMALLOC
	static const char *const env[] = { "HUGEZERO_BACKING=thp", NULL };
	unsigned long points[HZ_CALL_COUNT];
	const struct walk w = { false, false, env, jemalloc_scenario, 0, false };

	(void)state;
	walk(&w, points);
	assert_true(points[HZ_CALL_MMAP] > 0 && points[HZ_CALL_MUNMAP] > 0 &&
		    points[HZ_CALL_MADVISE] > 0);
#else
	(void)state;
	printf("[  SKIP    ] built without jemalloc's headers\n");
	skip();
#endif
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(each_call_failing_once_keeps_allocations_correct),
		cmocka_unit_test(each_call_failing_from_then_on_keeps_allocations_correct),
		cmocka_unit_test(each_call_failing_once_with_prezero_thread_and_populate),
		cmocka_unit_test(each_startup_call_failing_once_leaves_a_working_allocator),
		cmocka_unit_test(each_call_failing_once_keeps_jemalloc_hooks_correct),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
