/* The counter table (src/stats.def) and the reports laid out from it: the
 * table covers struct hz_stats exactly once, and the text and JSON reports
 * are what scripts, tests and the README read. The expected text is the
 * output of the report as it was before the table (same counters), so a
 * change here is a change of format, to be made on purpose. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "report.h"
#include "stats.h"

static struct hz_stats s;
static char buf[8192];
static const struct hz_report_facts facts = { .pid = 4242, .exec_mode = "off" };

static void fill(void)
{
	static const uint64_t blocks[] = { 1, 2, 30, 4 };
	static const uint64_t bytes[] = { 1u << 30, 4u << 20, 3u << 29, 8u << 20 };
	static const uint64_t fallbacks[] = { 1, 0, 3, 4, 5, 6 };

	memset(&s, 0, sizeof(s));
	memcpy(s.blocks, blocks, sizeof(blocks));
	memcpy(s.bytes, bytes, sizeof(bytes));
	memcpy(s.fallbacks, fallbacks, sizeof(fallbacks));
	s.mallocs = 1234, s.peak_bytes = 3ull << 30, s.live_bytes = 1 << 20;
	s.callocs = 17, s.calloc_bytes = 123456789, s.cleared_bytes = 987654321;
	s.clear_ns = 123456789;
	s.realloc_moved = 5, s.realloc_in_place = 6, s.realloc_copied = 7;
	s.cache_hits = 1000, s.cache_misses = 234, s.cache_grown = 5, s.cache_bytes = 64 << 20;
	s.cache_released_bytes = 5000000000ull, s.prezeroed_bytes = 777777777;
	s.cache_lazy_bytes = 128 << 20;
	s.prezero_ns = 0, s.takeovers = 3, s.prezero_starved = 4;
	s.takeovers_abandoned = 1, s.cache_passed_by = 2, s.assisted_bytes = 32 << 20;
	s.lock_waits = 8, s.lock_wait_ns = 2500000;
	s.thp_demoted = 2, s.thp_promoted = 9, s.thp_program_advised = 3;
	s.mmaps_aligned = 11, s.mmap_bytes = 44 << 20;
	s.mmap_pieces = 300;
	s.promote_tracked = 13, s.promote_collapsed_bytes = 64 << 20, s.promote_ns = 32000000;
	s.promote_failed = 2, s.promote_share_waits = 5, s.promote_left_4k = 3;
	s.thp_up_front = 1, s.promote_advised_bytes = 6 << 20;
	s.exec.segments = 12, s.exec.text_bytes = 24 << 20, s.exec.advised_bytes = 20 << 20;
	s.exec.unaligned_bytes = 65536, s.exec.prewarmed_bytes = 10 << 20;
	s.exec.prewarm_ns = 4567890, s.exec.collapsed_bytes = 2 << 20;
	s.exec.remapped_bytes = 6 << 20, s.exec.remap_ns = 12345678;
	s.exec.remap_skipped = 2, s.exec.dlopens = 3, s.exec.perfmap_lines = 456;
}

static unsigned row_words(const struct hz_stat_row *r)
{
	switch (r->kind) {
	case HZ_STAT_KIND_VALUE:
		return 1;
	case HZ_STAT_KIND_BACKINGS:
		return 2 * HZ_BACKING_COUNT;
	case HZ_STAT_KIND_FALLBACKS:
		return HZ_FB_COUNT;
	default:
		return 0;
	}
}

static void table_covers_every_counter_once(void **state)
{
	unsigned char seen[sizeof(struct hz_stats) / sizeof(uint64_t)] = { 0 };
	unsigned words = 0;

	(void)state;
	assert_int_equal(hz_stat_rows[0].kind, HZ_STAT_KIND_LINE);
	for (unsigned i = 0; i < hz_stat_row_count; i++) {
		const struct hz_stat_row *r = &hz_stat_rows[i];
		unsigned n = row_words(r);

		for (unsigned k = 0; k < n; k++) {
			unsigned at = (r->kind == HZ_STAT_KIND_BACKINGS && k >= HZ_BACKING_COUNT)
				? r->at2 + (k - HZ_BACKING_COUNT) * 8 : r->at + k * 8;

			assert_int_equal(at % 8, 0);
			assert_true(at / 8 < sizeof(seen));
			assert_int_equal(seen[at / 8]++, 0);
		}
		words += n;
		/* Keys unique inside a group's JSON object. */
		for (unsigned j = 0; j < i && r->kind != HZ_STAT_KIND_LINE; j++)
			if (hz_stat_rows[j].kind != HZ_STAT_KIND_LINE &&
			    hz_stat_rows[j].group == r->group)
				assert_string_not_equal(hz_stat_rows[j].key, r->key);
	}
	assert_int_equal(words, sizeof(seen));
}

/* One placeholder at most; "{rate}" only on an NS row with a BYTES row
 * before it on the same line. */
static void text_fragments_are_well_formed(void **state)
{
	bool bytes_before = false;

	(void)state;
	for (unsigned i = 0; i < hz_stat_row_count; i++) {
		const struct hz_stat_row *r = &hz_stat_rows[i];
		const char *open;

		if (r->kind == HZ_STAT_KIND_LINE)
			bytes_before = false;
		if (r->kind != HZ_STAT_KIND_VALUE || r->text == NULL)
			continue;
		open = strchr(r->text, '{');
		if (open != NULL) {
			assert_null(strchr(open + 1, '{'));
			assert_true(strncmp(open, "{}", 2) == 0 || strncmp(open, "{rate}", 6) == 0);
		}
		if (open != NULL && strncmp(open, "{rate}", 6) == 0) {
			assert_int_equal(r->unit, HZ_STAT_UNIT_NS);
			assert_true(bytes_before);
		}
		bytes_before = bytes_before || r->unit == HZ_STAT_UNIT_BYTES;
		assert_non_null(r->doc);
	}
}

static void text_report_is_the_format_scripts_read(void **state)
{
	static const char want[] =
	"hugezero: stats for pid 4242\n"
	"hugezero:   large requests  1234 served, peak 3072.0 MiB live\n"
	"hugezero:   new blocks      hugetlb1g 1 (1024.0 MiB), hugetlb2m 2 (4.0 MiB), thp 30 (1536.0 MiB), 4k 4 (8.0 MiB)\n"
	"hugezero:   fallbacks       hugetlb_pool_short 1, hugetlb_mmap_failed 0, thp_unavailable 3, fresh_thp_slow 4, reservation_full 5, map_failed 6\n"
	"hugezero:   calloc          17 calls, 117.7 MiB; zeroed by calloc 941.9 MiB at 8.0 GB/s\n"
	"hugezero:   recycling       1000 reused, 234 fresh (5 grown from a smaller cached block); cache 64.0 MiB now, 4768.4 MiB given back, 128.0 MiB made reclaimable; pre-zeroed 741.7 MiB at 0.0 GB/s, 3 takeovers, 1 given up, 2 times the cache was passed by, 4 pauses when starved of CPU; 32.0 MiB of calloc's clears done by the thread beside it\n"
	"hugezero:   locks           8 waits for a lock another thread held, 2.5 ms in all\n"
	"hugezero:   page size      2 blocks moved to 4 KiB pages after sparse use, 9 to THP after dense reuse, 3 advised THP whole at the program's MADV_HUGEPAGE\n"
	"hugezero:   lazy huge pages 13 ranges watched, 64.0 MiB collapsed at 2.1 GB/s, 2 collapses failed, 5 ticks waited for CPU share, 3 ranges left on 4 KiB pages, 1 blocks THP at once, 6.0 MiB advised THP at first dense writes\n"
	"hugezero:   realloc         5 moved by mremap, 6 in place, 7 copied\n"
	"hugezero:   mmap            11 aligned for THP (44.0 MiB), 300 small ones in shared windows\n"
	"hugezero:   exec text       mode off: 12 segments, 24.0 MiB; advised 20.0 MiB, left unaligned 0.1 MiB, prewarmed 10.0 MiB in 4.6 ms, collapsed 2.0 MiB, remapped 6.0 MiB in 12.3 ms (2 left in place), perf map 456 lines\n";
	size_t n;

	(void)state;
	fill();
	n = hz_report_format(HZ_REPORT_TEXT, &s, &facts, buf, sizeof(buf));
	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
}

static void json_report_has_every_key(void **state)
{
	static const char want[] =
	"{\"pid\": 4242, \"large_requests\": 1234, \"peak_bytes\": 3221225472, \"live_bytes\": 1048576,\n"
	" \"blocks\": {\"hugetlb1g\": {\"count\": 1, \"bytes\": 1073741824}, \"hugetlb2m\": {\"count\": 2, \"bytes\": 4194304}, \"thp\": {\"count\": 30, \"bytes\": 1610612736}, \"4k\": {\"count\": 4, \"bytes\": 8388608}},\n"
	" \"fallbacks\": {\"hugetlb_pool_short\": 1, \"hugetlb_mmap_failed\": 0, \"thp_unavailable\": 3, \"fresh_thp_slow\": 4, \"reservation_full\": 5, \"map_failed\": 6},\n"
	" \"callocs\": 17, \"calloc_bytes\": 123456789, \"cleared_bytes\": 987654321, \"clear_ns\": 123456789,\n"
	" \"cache_hits\": 1000, \"cache_misses\": 234, \"cache_grown\": 5, \"cache_bytes\": 67108864, \"cache_released_bytes\": 5000000000, \"cache_lazy_bytes\": 134217728, \"prezeroed_bytes\": 777777777, \"prezero_ns\": 0, \"takeovers\": 3, \"takeovers_abandoned\": 1, \"cache_passed_by\": 2, \"prezero_starved\": 4, \"assisted_bytes\": 33554432,\n"
	" \"lock_waits\": 8, \"lock_wait_ns\": 2500000,\n"
	" \"cleared_in_cache\": 0, \"wakes_skipped\": 0, \"callocs_late\": 0,\n"
	" \"cache_no_reuse\": 0, \"cache_no_reuse_bytes\": 0, \"cache_reuse_missed\": 0, \"cache_peak_bytes\": 0, \"cache_limit_unknown\": 0,\n"
	" \"zeroed_bytes\": 0, \"dropped_bytes\": 0, \"zero_page_bytes\": 0,\n"
	" \"thp_demoted\": 2, \"thp_promoted\": 9, \"thp_program_advised\": 3,\n"
	" \"promote_tracked\": 13, \"promote_collapsed_bytes\": 67108864, \"promote_ns\": 32000000, \"promote_failed\": 2, \"promote_share_waits\": 5, \"promote_left_4k\": 3, \"thp_up_front\": 1, \"promote_advised_bytes\": 6291456,\n"
	" \"realloc_moved\": 5, \"realloc_in_place\": 6, \"realloc_copied\": 7,\n"
	" \"mmaps_aligned\": 11, \"mmap_bytes\": 46137344, \"mmap_pieces\": 300,\n"
	" \"exec\": {\"mode\": \"off\", \"segments\": 12, \"text_bytes\": 25165824, \"advised_bytes\": 20971520, \"unaligned_bytes\": 65536, \"prewarmed_bytes\": 10485760, \"prewarm_ns\": 4567890, \"collapsed_bytes\": 2097152, \"remapped_bytes\": 6291456, \"remap_ns\": 12345678, \"remap_skipped\": 2, \"dlopens\": 3, \"perfmap_lines\": 456},\n"
	" \"jemalloc\": {\"extents\": 0, \"extent_bytes\": 0, \"growth_refused\": 0, \"alloc_failed\": 0, \"returned_bytes\": 0, \"purged_bytes\": 0}}\n";

	(void)state;
	fill();
	hz_report_format(HZ_REPORT_JSON, &s, &facts, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

/* Programs without hooked arenas keep the text they had. */
static void jemalloc_line_only_once_the_hooks_worked(void **state)
{
	(void)state;
	fill();
	hz_report_format(HZ_REPORT_TEXT, &s, &facts, buf, sizeof(buf));
	assert_null(strstr(buf, "jemalloc"));
	s.jemalloc.extents = 3, s.jemalloc.extent_bytes = 6 << 20, s.jemalloc.growth_refused = 1;
	s.jemalloc.returned_bytes = 4 << 20, s.jemalloc.purged_bytes = 1 << 20;
	hz_report_format(HZ_REPORT_TEXT, &s, &facts, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\nhugezero:   jemalloc hooks  3 extents (6.0 MiB), 1 retained "
				    "growths refused, 0 failed; 4.0 MiB returned, 1.0 MiB purged\n"));
}

static void report_is_cut_to_the_buffer(void **state)
{
	char small[64];
	size_t n;

	(void)state;
	fill();
	memset(small, 'x', sizeof(small));
	n = hz_report_format(HZ_REPORT_JSON, &s, &facts, small, sizeof(small));
	assert_int_equal(n, sizeof(small) - 1);
	assert_int_equal(small[sizeof(small) - 1], '\0');
	assert_int_equal(strncmp(small, "{\"pid\": 4242, ", 14), 0);
	assert_int_equal(hz_report_format(HZ_REPORT_TEXT, &s, &facts, small, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table_covers_every_counter_once),
		cmocka_unit_test(text_fragments_are_well_formed),
		cmocka_unit_test(text_report_is_the_format_scripts_read),
		cmocka_unit_test(json_report_has_every_key),
		cmocka_unit_test(jemalloc_line_only_once_the_hooks_worked),
		cmocka_unit_test(report_is_cut_to_the_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
