/* Unit tests of the exec module's arithmetic and discovery: chunk rounding,
 * congruence, options, the maps reader and segment discovery. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/exec.h"
#include "exec/maps.h"
#include "options.h"
#include "report.h"

#define K64 (64u << 10)
#define M2 (2u << 20)

static void chunks_round_out_and_clamp_to_mapping(void **state)
{
	struct hz_range map = { 0x10003000, 0x10431000 };
	struct hz_range out, in;

	(void)state;
	/* The kernel's exec readahead: start down, end up, never past the
	 * mapping. */
	out = hz_range_align_out((struct hz_range){ 0x10005000, 0x10015000 }, K64, map);
	assert_int_equal(out.start, 0x10003000); /* 0x10000000 clamped */
	assert_int_equal(out.end, 0x10020000);
	out = hz_range_align_out((struct hz_range){ 0x10421000, 0x10429000 }, K64, map);
	assert_int_equal(out.start, 0x10420000);
	assert_int_equal(out.end, 0x10430000);
	out = hz_range_align_out((struct hz_range){ 0x10429000, 0x10431000 }, K64, map);
	assert_int_equal(out.start, 0x10420000);
	assert_int_equal(out.end, 0x10431000); /* 0x10440000 clamped */
	/* Interiors: whole aligned chunks only. */
	in = hz_range_align_in(map, K64);
	assert_int_equal(in.start, 0x10010000);
	assert_int_equal(in.end, 0x10430000);
	in = hz_range_align_in(map, M2);
	assert_int_equal(in.start, 0x10200000);
	assert_int_equal(in.end, 0x10400000);
	/* Too small for one chunk: empty, never inverted. */
	in = hz_range_align_in((struct hz_range){ 0x10001000, 0x1000f000 }, K64);
	assert_true(hz_range_empty(in));
	assert_int_equal(in.start, in.end);
}

static void congruence_decides_large_folio_mapping(void **state)
{
	struct hz_exec_segment s = { .map = { 0x7f0000202000, 0x7f0000800000 },
				     .file_off = 0x2000 };

	(void)state;
	assert_true(hz_exec_congruent(&s, M2));
	assert_true(hz_exec_congruent(&s, K64));
	s.map.start = 0x7f0000213000; /* shifted by 68 KiB against the file */
	assert_false(hz_exec_congruent(&s, K64));
	s.map.start = 0x7f0000212000; /* 64 KiB, not 2 MiB */
	assert_true(hz_exec_congruent(&s, K64));
	assert_false(hz_exec_congruent(&s, M2));
}

static void exec_mode_option_parses_and_defaults(void **state)
{
	(void)state;
	unsetenv("HUGEZERO_EXEC");
	hz_exec_options_reload();
#if defined(__aarch64__)
	assert_true(hz_exec_mode() == HZ_EXEC_ADVISE || hz_exec_mode() == HZ_EXEC_REPORT);
#else
	assert_int_equal(hz_exec_mode(), HZ_EXEC_ADVISE);
#endif
	setenv("HUGEZERO_EXEC", "remap", 1);
	hz_exec_options_reload();
	assert_int_equal(hz_exec_mode(), HZ_EXEC_REMAP);
	setenv("HUGEZERO_EXEC", "OFF", 1);
	hz_exec_options_reload();
	assert_int_equal(hz_exec_mode(), HZ_EXEC_OFF);
	setenv("HUGEZERO_EXEC", "sometimes", 1); /* one warning, the default */
	hz_exec_options_reload();
	assert_true(hz_exec_mode() == HZ_EXEC_ADVISE || hz_exec_mode() == HZ_EXEC_REPORT);
	/* HUGEZERO_DISABLE=1 turns everything off, exec text included. */
	setenv("HUGEZERO_EXEC", "remap", 1);
	setenv("HUGEZERO_DISABLE", "1", 1);
	hz_options_reload();
	hz_exec_options_reload();
	assert_int_equal(hz_exec_mode(), HZ_EXEC_OFF);
	unsetenv("HUGEZERO_DISABLE");
	hz_options_reload();
	hz_exec_options_reload();
	assert_int_equal(hz_exec_mode(), HZ_EXEC_REMAP);
	setenv("HUGEZERO_EXEC_PERFMAP", "0", 1);
	hz_exec_options_reload();
	assert_false(hz_exec_perfmap_enabled());
	unsetenv("HUGEZERO_EXEC_PERFMAP");
	unsetenv("HUGEZERO_EXEC");
	hz_exec_options_reload();
	assert_true(hz_exec_perfmap_enabled());
}

static void maps_reader_finds_own_text_and_smaps_fields(void **state)
{
	static struct hz_maps maps;
	uintptr_t here = (uintptr_t)&maps_reader_finds_own_text_and_smaps_fields;
	struct hz_map m;
	int entries = 0, found = 0;
	bool emulated = getenv("HZ_UNDER_EMULATOR") != NULL;

	(void)state;
	if (emulated)
		print_message("[  SKIP    ] maps permissions and smaps fields: qemu-user "
			      "emulates /proc/self/maps\n");
	for (int smaps = 0; smaps < 2; smaps++) {
		assert_int_equal(hz_maps_open(&maps, 0, smaps), 0);
		while (hz_maps_next(&maps, &m) == 1) {
			entries++;
			assert_true(m.range.start < m.range.end);
			if (!hz_range_contains(m.range, here))
				continue;
			found++;
			assert_non_null(strstr(m.path, "exec_unit"));
			/* qemu-user makes up its own maps: the guest's text
			 * shows as r--p, without smaps fields. */
			if (emulated)
				continue;
			assert_int_equal(m.prot, PROT_READ | PROT_EXEC);
			assert_true(m.inode != 0);
			if (smaps)
				assert_true(m.rss > 0 && m.kernel_page == 4096);
		}
		hz_maps_close(&maps);
	}
	assert_int_equal(found, 2);
	assert_true(entries > 10);
}

static void segments_list_own_text_and_mark_mover(void **state)
{
	static struct hz_exec_segment segs[512];
	uintptr_t here = (uintptr_t)&segments_list_own_text_and_mark_mover;
	unsigned count, objects;
	bool own = false, vdso = false;

	(void)state;
	assert_int_equal(hz_exec_segments(segs, 512, 0, &count, &objects), 0);
	assert_true(count >= 2 && objects >= 2);
	assert_int_equal(hz_exec_segments_match_maps(segs, count), 0);
	for (unsigned i = 0; i < count; i++) {
		assert_true(segs[i].map.start < segs[i].map.end);
		assert_int_equal(segs[i].map.start % 4096, 0);
		if (i > 0) /* sorted by address */
			assert_true(segs[i - 1].map.start <= segs[i].map.start);
		if (hz_range_contains(segs[i].map, here)) {
			/* The test links hugezero statically: this program
			 * holds the remap code and must never be moved. */
			own = true;
			assert_true(segs[i].mover);
			assert_true(segs[i].main_program);
			if (getenv("HZ_UNDER_EMULATOR") == NULL)
				assert_true(segs[i].vma_private_file);
			assert_true(hz_exec_congruent(&segs[i], 4096));
			assert_string_equal(hz_exec_segment_path(&segs[i]), "/proc/self/exe");
		}
		vdso |= segs[i].vdso;
	}
	assert_true(own);
	(void)vdso; /* qemu-user has no vDSO */
}

static void anon_thp_unit_is_a_folio_size_or_off(void **state)
{
	size_t unit = hz_exec_anon_thp_unit();

	(void)state;
	assert_true(unit == 0 || (hz_is_pow2(unit) && unit >= K64 && unit <= M2));
}

static void report_names_mode_and_text(void **state)
{
	static char buf[8192];
	static struct hz_stats s;
	struct hz_report_facts f;
	const char *line, *end;

	(void)state;
	setenv("HUGEZERO_EXEC", "off", 1);
	hz_exec_options_reload();
	hz_stats_snapshot(&s);
	hz_report_facts_now(&f);
	hz_report_format(HZ_REPORT_TEXT, &s, &f, buf, sizeof(buf));
	unsetenv("HUGEZERO_EXEC");
	hz_exec_options_reload();
	/* The exec line always (the folio lines when pagemap is readable),
	 * naming the mode in effect. */
	line = strstr(buf, "hugezero:   exec text       mode off: ");
	assert_non_null(line);
	end = strchr(line, '\n');
	assert_non_null(end);
	assert_non_null(strstr(line, "segments"));
	assert_true(strstr(line, "segments") < end);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chunks_round_out_and_clamp_to_mapping),
		cmocka_unit_test(congruence_decides_large_folio_mapping),
		cmocka_unit_test(exec_mode_option_parses_and_defaults),
		cmocka_unit_test(maps_reader_finds_own_text_and_smaps_fields),
		cmocka_unit_test(segments_list_own_text_and_mark_mover),
		cmocka_unit_test(anon_thp_unit_is_a_folio_size_or_off),
		cmocka_unit_test(report_names_mode_and_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
