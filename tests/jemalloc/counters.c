/* The hooks count what they do into the counter table (hz_stats.jemalloc),
 * and the exit report shows it: extents handed out, growth refused, failed
 * requests, bytes given back and purged; ranges that are not ours are not
 * counted. The hooks are called directly, as jemalloc would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include <hugezero/jemalloc.h>

#include "report.h"
#include "stats.h"
#include "../util.h"

#define ARENA 3100

static void hooks_count_into_the_table_and_the_report(void **state)
{
	extent_hooks_t *h = hz_jemalloc_hooks();
	struct hz_report_facts f = { .pid = 1, .exec_mode = "off" };
	static struct hz_stats before, after;
	static char text[8192];
	bool zero = false, commit = false;
	void *p, *foreign;

	(void)state;
	hz_stats_snapshot(&before);
	/* Retained growth (uncommitted): refused. */
	assert_null(h->alloc(h, NULL, 10 * MiB, 4 * KiB, &zero, &commit, ARENA));
	/* An address that is not ours: fails. */
	commit = true;
	assert_null(h->alloc(h, (void *)(64 * KiB), 2 * MiB, 4 * KiB, &zero, &commit, ARENA));
	p = h->alloc(h, NULL, 6 * MiB, 4 * KiB, &zero, &commit, ARENA);
	assert_non_null(p);
	assert_false(h->purge_forced(h, p, 6 * MiB, 0, 2 * MiB, ARENA));
	assert_false(h->decommit(h, p, 6 * MiB, 2 * MiB, 2 * MiB, ARENA));
	assert_false(h->dalloc(h, p, 6 * MiB, true, ARENA));
	/* jemalloc's own memory: the defaults, uncounted. */
	foreign = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(foreign != MAP_FAILED);
	assert_false(h->purge_forced(h, foreign, 2 * MiB, 0, 2 * MiB, ARENA));
	assert_true(h->dalloc(h, foreign, 2 * MiB, true, ARENA));
	h->destroy(h, foreign, 2 * MiB, true, ARENA);
	hz_stats_snapshot(&after);

	assert_int_equal(after.jemalloc.growth_refused - before.jemalloc.growth_refused, 1);
	assert_int_equal(after.jemalloc.alloc_failed - before.jemalloc.alloc_failed, 1);
	assert_int_equal(after.jemalloc.extents - before.jemalloc.extents, 1);
	assert_int_equal(after.jemalloc.extent_bytes - before.jemalloc.extent_bytes, 6 * MiB);
	assert_int_equal(after.jemalloc.purged_bytes - before.jemalloc.purged_bytes, 4 * MiB);
	assert_int_equal(after.jemalloc.returned_bytes - before.jemalloc.returned_bytes, 6 * MiB);
	/* The region behind the extent is a new block like the preload's. */
	assert_true(after.blocks[HZ_BACKING_THP] + after.blocks[HZ_BACKING_SMALL] +
		    after.blocks[HZ_BACKING_HUGETLB2M] + after.blocks[HZ_BACKING_HUGETLB1G] >
		    before.blocks[HZ_BACKING_THP] + before.blocks[HZ_BACKING_SMALL] +
		    before.blocks[HZ_BACKING_HUGETLB2M] + before.blocks[HZ_BACKING_HUGETLB1G]);

	memset(&before, 0, sizeof(before));
	before.jemalloc = after.jemalloc;
	hz_report_format(HZ_REPORT_TEXT, &before, &f, text, sizeof(text));
	assert_non_null(strstr(text, "\nhugezero:   jemalloc hooks  1 extents (6.0 MiB), 1 retained "
				     "growths refused, 1 failed; 6.0 MiB returned, 4.0 MiB purged\n"));
	hz_report_format(HZ_REPORT_JSON, &before, &f, text, sizeof(text));
	assert_non_null(strstr(text, "\"jemalloc\": {\"extents\": 1, \"extent_bytes\": 6291456, "
				     "\"growth_refused\": 1, \"alloc_failed\": 1, "
				     "\"returned_bytes\": 6291456, \"purged_bytes\": 4194304}}\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hooks_count_into_the_table_and_the_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
