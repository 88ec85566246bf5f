/* The options table: parsing, defaults, warnings for bad values, the
 * generated ENUM constants, the configuration snapshot and its reload, the
 * HUGEZERO_CLEAR override, and the README's table kept in step. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <cmocka.h>

#include <hugezero.h>

#include "clear/kernel.h"
#include "clear/policy.h"
#include "config.h"
#include "cpu/cpu.h"
#include "exec/exec.h"
#include "options.h"
#include "options_doc.h"

/* Run fn with stderr captured into buf. */
static void capture_stderr(void (*fn)(void), char *buf, size_t size)
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	size_t n;

	assert_non_null(tmp);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), 2) >= 0);
	fn();
	assert_true(dup2(saved, 2) >= 0);
	close(saved);
	rewind(tmp);
	n = fread(buf, 1, size - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
}

static void reload(void)
{
	hz_options_reload();
	hz_clear_policy_reset();
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void parse(enum hz_option_id id, const char *text, int want_ret,
		  uint64_t want)
{
	uint64_t v = 12345;
	int ret = hz_option_parse(hz_option_desc(id), text, &v, NULL);

	if (ret != want_ret)
		fail_msg("%s=\"%s\": returned %d, expected %d",
			 hz_option_desc(id)->env, text, ret, want_ret);
	if (ret == 0 && v != want)
		fail_msg("%s=\"%s\": parsed %llu, expected %llu",
			 hz_option_desc(id)->env, text, (unsigned long long)v,
			 (unsigned long long)want);
}

/* ---- the first snapshot (runs first: nothing has read the options yet) ---- */

#define RACERS 8

static pthread_barrier_t racers_ready;

static void *race_to_first_read(void *out)
{
	pthread_barrier_wait(&racers_ready);
	*(const struct hz_config **)out = hz_config();
	return NULL;
}

static void race_first_read(void)
{
	const struct hz_config *seen[RACERS];
	pthread_t threads[RACERS];

	assert_int_equal(pthread_barrier_init(&racers_ready, NULL, RACERS), 0);
	for (int i = 0; i < RACERS; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, race_to_first_read, &seen[i]), 0);
	for (int i = 0; i < RACERS; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);
	pthread_barrier_destroy(&racers_ready);
	for (int i = 1; i < RACERS; i++)
		assert_ptr_equal(seen[i], seen[0]);
	assert_int_equal(seen[0]->generation, 1);
	assert_int_equal(seen[0]->threshold, 2u << 20);
}

/* Threads racing to the first hz_config() get one snapshot, read once:
 * one warning for a bad value, whoever won. */
static void first_snapshot_is_read_once_by_racing_threads(void **state)
{
	char out[2048];

	(void)state;
	if (__atomic_load_n(&hz_config_current, __ATOMIC_ACQUIRE) != NULL) {
		print_message("[  SKIP    ] the options were read before this test\n");
		skip();
	}
	assert_int_equal(hz_config_threshold, SIZE_MAX);
	setenv("HUGEZERO_DECAY_MS", "soon", 1);
	capture_stderr(race_first_read, out, sizeof(out));
	unsetenv("HUGEZERO_DECAY_MS");
	assert_non_null(strstr(out, "HUGEZERO_DECAY_MS=soon is not valid"));
	assert_int_equal(count_lines(out), 1);
	assert_int_equal(hz_config_threshold, 2u << 20);
}

static void sizes_accept_suffixes_and_reject_garbage(void **state)
{
	(void)state;
	parse(HZ_OPT_CLEAR_NT_MIN, "65536", 0, 65536);
	parse(HZ_OPT_CLEAR_NT_MIN, "64K", 0, 65536);
	parse(HZ_OPT_CLEAR_NT_MIN, "64k", 0, 65536);
	parse(HZ_OPT_CLEAR_NT_MIN, "64KiB", 0, 65536);
	parse(HZ_OPT_CLEAR_NT_MIN, "2M", 0, 2u << 20);
	parse(HZ_OPT_CLEAR_NT_MIN, "1G", 0, 1u << 30);
	parse(HZ_OPT_CLEAR_NT_MIN, "1T", 0, 1ULL << 40);
	parse(HZ_OPT_CLEAR_NT_MIN, "", -EINVAL, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, "K", -EINVAL, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, "12Q", -EINVAL, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, "-1", -EINVAL, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, " 4K", -EINVAL, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, "2T", -ERANGE, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, "1024", -ERANGE, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, "99999999999999999999", -ERANGE, 0);
	parse(HZ_OPT_CLEAR_NT_MIN, "99999999999G", -ERANGE, 0);
}

static void ints_respect_their_range(void **state)
{
	(void)state;
	parse(HZ_OPT_CLEAR_RADIUS, "0", 0, 0);
	parse(HZ_OPT_CLEAR_RADIUS, "64", 0, 64);
	parse(HZ_OPT_CLEAR_RADIUS, "65", -ERANGE, 0);
	parse(HZ_OPT_CLEAR_RADIUS, "2x", -EINVAL, 0);
	parse(HZ_OPT_VERBOSE, "3", -ERANGE, 0);
}

static void enums_bools_and_paths_parse(void **state)
{
	(void)state;
	parse(HZ_OPT_BACKING, "auto", 0, 0);
	parse(HZ_OPT_BACKING, "hugetlb2m", 0, 2);
	parse(HZ_OPT_BACKING, "THP", 0, 3);
	parse(HZ_OPT_BACKING, "none", 0, 4);
	parse(HZ_OPT_BACKING, "hugetlb", -EINVAL, 0);
	parse(HZ_OPT_BACKING, "", -EINVAL, 0);
	parse(HZ_OPT_BACKING, "auto|thp", -EINVAL, 0);
	parse(HZ_OPT_DISABLE, "yes", 0, 1);
	parse(HZ_OPT_DISABLE, "On", 0, 1);
	parse(HZ_OPT_DISABLE, "off", 0, 0);
	parse(HZ_OPT_DISABLE, "0", 0, 0);
	parse(HZ_OPT_DISABLE, "2", -EINVAL, 0);
	parse(HZ_OPT_STATS_FILE, "/tmp/hz.%p.json", 0, 0);
	parse(HZ_OPT_STATS_FILE, "bad\nline", -EINVAL, 0);
}

static void every_default_in_the_table_is_valid(void **state)
{
	(void)state;
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		const struct hz_option_desc *d = hz_option_desc((enum hz_option_id)id);
		char name[HZ_OPTION_TEXT_MAX];
		uint64_t v;

		assert_int_equal(hz_option_parse(d, d->def, &v, name), 0);
		assert_true(strncmp(d->env, "HUGEZERO_", 9) == 0);
		assert_true(strlen(d->doc) > 10);
	}
}

/* Every word of every ENUM option's list, with the constant made for it. */
struct choice_row {
	enum hz_option_id id;
	unsigned constant;
	const char *word;
	const char *constant_name;
};

static const struct choice_row choice_rows[] = {
#define ROW(id, constant, word) { HZ_OPT_##id, HZ_##id##_OPT_##constant, word, #constant },
#define ROWS_ENUM(list) list(ROW)
#define ROWS_SIZE(choices)
#define ROWS_INT(choices)
#define ROWS_BOOL(choices)
#define ROWS_NAME(choices)
#define ROWS_PATH(choices)
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) ROWS_##type(choices)
#include "options.def"
#undef HZ_OPTION
};

/* The constants, the parser and the choices string all say the same: the
 * word at index HZ_<id>_OPT_<X> is X's, and it parses to that index. */
static void enum_constants_agree_with_the_choices(void **state)
{
	unsigned enums = 0, rows = sizeof(choice_rows) / sizeof(choice_rows[0]);

	(void)state;
	for (unsigned i = 0; i < rows; i++) {
		const struct choice_row *r = &choice_rows[i];
		const struct hz_option_desc *d = hz_option_desc(r->id);
		const char *c = d->choices;
		uint64_t v = 99;

		assert_int_equal(d->type, HZ_OPT_ENUM);
		assert_true(r->constant < d->word_count);
		assert_string_equal(d->words[r->constant], r->word);
		assert_true(strcasecmp(r->constant_name, r->word) == 0);
		assert_int_equal(hz_option_parse(d, r->word, &v, NULL), 0);
		assert_int_equal(v, r->constant);
		/* The constant-th word of "a|b|c". */
		for (unsigned k = 0; k < r->constant; k++) {
			c = strchr(c, '|');
			assert_non_null(c);
			c++;
		}
		assert_int_equal(strcspn(c, "|"), strlen(r->word));
		assert_memory_equal(c, r->word, strlen(r->word));
	}
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		const struct hz_option_desc *d = hz_option_desc((enum hz_option_id)id);
		unsigned words = 1, listed = 0;

		if (d->type != HZ_OPT_ENUM) {
			assert_null(d->words);
			continue;
		}
		enums++;
		for (const char *c = d->choices; *c; c++)
			words += *c == '|';
		for (unsigned i = 0; i < rows; i++)
			listed += choice_rows[i].id == id;
		assert_int_equal(words, d->word_count);
		assert_int_equal(listed, d->word_count);
	}
	assert_int_equal(enums, 3);
	assert_int_equal(HZ_BACKING_OPT_COUNT, 5);
	assert_int_equal(HZ_PREZERO_OPT_OFF, 2);
	assert_int_equal(HZ_EXEC_OPT_REMAP, 2);
}

/* The field column is the id in lower case, so hz_config()->cache_max is
 * HUGEZERO_CACHE_MAX. */
static void config_members_are_named_after_their_variables(void **state)
{
	static const char *const fields[HZ_OPT_COUNT] = {
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) [HZ_OPT_##id] = #field,
#include "options.def"
#undef HZ_OPTION
	};

	(void)state;
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		const char *env = hz_option_desc((enum hz_option_id)id)->env + 9;

		assert_int_equal(strlen(env), strlen(fields[id]));
		assert_true(strcasecmp(env, fields[id]) == 0);
		for (const char *f = fields[id]; *f; f++)
			assert_false(*f >= 'A' && *f <= 'Z');
	}
}

/* The snapshot's typed members hold what the by-id accessors say. */
static void config_snapshot_matches_the_accessors(void)
{
	const struct hz_config *c = hz_config();

	assert_int_equal(c->verbose, hz_option_u64(HZ_OPT_VERBOSE));
	assert_string_equal(c->clear, hz_option_str(HZ_OPT_CLEAR));
	assert_int_equal(c->clear_radius, hz_option_u64(HZ_OPT_CLEAR_RADIUS));
	assert_int_equal(c->clear_nt_min, hz_option_u64(HZ_OPT_CLEAR_NT_MIN));
	assert_int_equal(c->disable, hz_option_u64(HZ_OPT_DISABLE));
	assert_int_equal(c->threshold, hz_option_u64(HZ_OPT_THRESHOLD));
	assert_int_equal(c->backing, hz_option_u64(HZ_OPT_BACKING));
	assert_int_equal(c->populate, hz_option_u64(HZ_OPT_POPULATE));
	assert_int_equal(c->thp_check, hz_option_u64(HZ_OPT_THP_CHECK));
	assert_int_equal(c->reserve, hz_option_u64(HZ_OPT_RESERVE));
	assert_int_equal(c->mmap, hz_option_u64(HZ_OPT_MMAP));
	assert_int_equal(c->stats, hz_option_u64(HZ_OPT_STATS));
	assert_string_equal(c->stats_file, hz_option_str(HZ_OPT_STATS_FILE));
	assert_int_equal(c->cache_max, hz_option_u64(HZ_OPT_CACHE_MAX));
	assert_int_equal(c->decay_ms, hz_option_u64(HZ_OPT_DECAY_MS));
	assert_int_equal(c->prezero, hz_option_u64(HZ_OPT_PREZERO));
	assert_int_equal(c->prezero_unit, hz_option_u64(HZ_OPT_PREZERO_UNIT));
	assert_int_equal(c->prezero_split_min, hz_option_u64(HZ_OPT_PREZERO_SPLIT_MIN));
	assert_int_equal(c->zero_on_free, hz_option_u64(HZ_OPT_ZERO_ON_FREE));
	assert_int_equal(c->exec, hz_option_u64(HZ_OPT_EXEC));
	assert_int_equal(c->exec_perfmap, hz_option_u64(HZ_OPT_EXEC_PERFMAP));
	assert_int_equal(hz_config_threshold, c->threshold);
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		assert_int_equal(c->source[id], hz_option_source((enum hz_option_id)id));
}

/* A reload makes a new snapshot with the next generation and leaves the
 * one before it as it was: replaced as a whole, never changed in place. */
static void reload_replaces_the_snapshot_as_a_whole(void **state)
{
	const struct hz_config *before, *after;
	uint64_t generation;

	(void)state;
	hz_options_reload();
	before = hz_config();
	generation = before->generation;
	assert_true(generation > 0);
	assert_int_equal(before->backing, HZ_BACKING_OPT_AUTO);
	assert_int_equal(before->prezero, HZ_PREZERO_OPT_THREAD);
	config_snapshot_matches_the_accessors();
	assert_ptr_equal(hz_config(), before);

	setenv("HUGEZERO_BACKING", "thp", 1);
	setenv("HUGEZERO_PREZERO", "OFF", 1);
	setenv("HUGEZERO_THRESHOLD", "512K", 1);
	setenv("HUGEZERO_STATS_FILE", "/tmp/hz-%p.json", 1);
	setenv("HUGEZERO_POPULATE", "yes", 1);
	hz_options_reload();
	unsetenv("HUGEZERO_BACKING");
	unsetenv("HUGEZERO_PREZERO");
	unsetenv("HUGEZERO_THRESHOLD");
	unsetenv("HUGEZERO_STATS_FILE");
	unsetenv("HUGEZERO_POPULATE");
	after = hz_config();
	assert_ptr_not_equal(after, before);
	assert_int_equal(after->generation, generation + 1);
	assert_int_equal(after->backing, HZ_BACKING_OPT_THP);
	assert_int_equal(after->prezero, HZ_PREZERO_OPT_OFF);
	assert_int_equal(after->threshold, 512 * 1024);
	assert_true(after->populate);
	assert_string_equal(after->stats_file, "/tmp/hz-%p.json");
	assert_int_equal(after->source[HZ_OPT_BACKING], HZ_SRC_ENV);
	assert_int_equal(after->source[HZ_OPT_CACHE_MAX], HZ_SRC_DEFAULT);
	config_snapshot_matches_the_accessors();
	/* The previous snapshot is untouched. */
	assert_int_equal(before->generation, generation);
	assert_int_equal(before->backing, HZ_BACKING_OPT_AUTO);
	assert_int_equal(before->threshold, 2u << 20);
	assert_string_equal(before->stats_file, "");

	hz_options_reload();
	assert_int_equal(hz_config()->generation, generation + 2);
	assert_int_equal(hz_config_threshold, 2u << 20);
	config_snapshot_matches_the_accessors();
}

/* What modules derive from the options follows a reload alone, without
 * their own reset calls: the clear policy's switch point and the exec
 * mode. */
static void reload_alone_refreshes_derived_values(void **state)
{
	(void)state;
	setenv("HUGEZERO_CLEAR_NT_MIN", "1M", 1);
	setenv("HUGEZERO_EXEC", "remap", 1);
	hz_options_reload();
	unsetenv("HUGEZERO_CLEAR_NT_MIN");
	unsetenv("HUGEZERO_EXEC");
	assert_string_equal(hz_clear_kernel_for((1u << 20) - 1), hz_clear_kernel_for(1));
	assert_string_equal(hz_clear_kernel_for(1u << 20), hz_clear_kernel_for(1u << 30));
	assert_int_equal(hz_exec_mode(), HZ_EXEC_REMAP);
	setenv("HUGEZERO_EXEC", "off", 1);
	hz_options_reload();
	unsetenv("HUGEZERO_EXEC");
	assert_int_equal(hz_exec_mode(), HZ_EXEC_OFF);
	/* nt_min back at 64K: 1 MiB - 1 now takes the non-temporal kernel. */
	assert_string_equal(hz_clear_kernel_for((1u << 20) - 1), hz_clear_kernel_for(1u << 30));
	hz_options_reload();
}

/* A bad ENUM value's warning lists the table's words. */
static void bad_enum_value_warns_with_its_choices(void **state)
{
	char out[2048];

	(void)state;
	setenv("HUGEZERO_BACKING", "huge", 1);
	capture_stderr(reload, out, sizeof(out));
	unsetenv("HUGEZERO_BACKING");
	assert_non_null(strstr(out, "HUGEZERO_BACKING=huge is not valid "
				    "(valid: auto|hugetlb1g|hugetlb2m|thp|none); using the default auto"));
	assert_int_equal(count_lines(out), 1);
	assert_int_equal(hz_config()->backing, HZ_BACKING_OPT_AUTO);
	assert_int_equal(hz_config()->source[HZ_OPT_BACKING], HZ_SRC_INVALID_ENV);
	reload();
}

static void bad_value_warns_once_and_uses_default(void **state)
{
	char out[2048];

	(void)state;
	setenv("HUGEZERO_CLEAR_NT_MIN", "lots", 1);
	capture_stderr(reload, out, sizeof(out));
	unsetenv("HUGEZERO_CLEAR_NT_MIN");
	assert_non_null(strstr(out, "HUGEZERO_CLEAR_NT_MIN=lots"));
	assert_non_null(strstr(out, "using the default 64K"));
	assert_int_equal(count_lines(out), 1);
	assert_int_equal(hz_option_u64(HZ_OPT_CLEAR_NT_MIN), 65536);
	assert_int_equal(hz_option_source(HZ_OPT_CLEAR_NT_MIN), HZ_SRC_INVALID_ENV);
	reload();
	assert_int_equal(hz_option_source(HZ_OPT_CLEAR_NT_MIN), HZ_SRC_DEFAULT);
}

/* A value with terminal escapes or other control bytes is shown escaped,
 * and cut at 64 bytes, so it cannot write into the program's terminal. */
static void bad_value_is_shown_escaped_and_cut(void **state)
{
	char value[200], out[2048];

	(void)state;
	memset(value, 'x', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	memcpy(value, "1\x1b[31m\x01\xff", 8);
	setenv("HUGEZERO_THRESHOLD", value, 1);
	capture_stderr(reload, out, sizeof(out));
	unsetenv("HUGEZERO_THRESHOLD");
	assert_non_null(strstr(out, "HUGEZERO_THRESHOLD=1\\x1b[31m\\x01\\xffxxx"));
	assert_null(strchr(out, '\x1b'));
	assert_null(strchr(out, '\x01'));
	assert_null(strstr(out, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
	assert_int_equal(count_lines(out), 1);
	reload();
}

static void clear_override_forces_a_valid_kernel(void **state)
{
	char out[2048];

	(void)state;
	setenv("HUGEZERO_CLEAR", "memset", 1);
	capture_stderr(reload, out, sizeof(out));
	unsetenv("HUGEZERO_CLEAR");
	assert_string_equal(out, "");
	assert_string_equal(hz_clear_kernel_for(1), "memset");
	assert_string_equal(hz_clear_kernel_for(1u << 30), "memset");
	reload();
}

static void clear_override_unknown_name_warns_and_uses_auto(void **state)
{
	const char *auto_big, *auto_small;
	char out[2048];

	(void)state;
	reload();
	auto_big = hz_clear_kernel_for(1u << 30);
	auto_small = hz_clear_kernel_for(1);
	setenv("HUGEZERO_CLEAR", "turbo_zero", 1);
	capture_stderr(reload, out, sizeof(out));
	assert_non_null(strstr(out, "HUGEZERO_CLEAR=turbo_zero is not a clearing kernel"));
	assert_non_null(strstr(out, "using auto"));
	assert_int_equal(count_lines(out), 1);
	assert_string_equal(hz_clear_kernel_for(1u << 30), auto_big);
	assert_string_equal(hz_clear_kernel_for(1), auto_small);
	/* Characters a kernel name cannot have: rejected by the option parser. */
	setenv("HUGEZERO_CLEAR", "rep stosb; rm -rf /", 1);
	capture_stderr(reload, out, sizeof(out));
	assert_non_null(strstr(out, "HUGEZERO_CLEAR="));
	assert_non_null(strstr(out, "using the default auto"));
	assert_int_equal(count_lines(out), 1);
	assert_string_equal(hz_clear_kernel_for(1u << 30), auto_big);
	unsetenv("HUGEZERO_CLEAR");
	reload();
}

/* The index of the first kernel this CPU cannot run, and why; -1 if every
 * kernel runs anywhere. On a CPU that runs every kernel, the last one that
 * needs a feature is made unrunnable by hiding that feature (the test
 * core's mask): *hidden says what was hidden. */
static int an_unsupported_kernel(const char **why, unsigned *hidden)
{
	int last = -1;

	*hidden = 0;
	for (unsigned i = 0; i < hz_clear_kernel_total; i++) {
		if (!hz_clear_kernel_supported(i, why))
			return (int)i;
		if (hz_clear_kernels[i].needs != 0)
			last = (int)i;
	}
	if (last < 0)
		return -1;
	*hidden = hz_clear_kernels[last].needs;
	hz_cpu_test_mask(*hidden);
	print_message("this CPU runs every kernel: features %#x hidden\n", *hidden);
	hz_clear_kernel_supported((unsigned)last, why);
	return last;
}

static void clear_override_unsupported_kernel_warns_and_uses_auto(void **state)
{
	const char *unsupported, *why = NULL;
	unsigned hidden;
	char out[2048];
	int i;

	(void)state;
	i = an_unsupported_kernel(&why, &hidden);
	if (i < 0) {
		print_message("[  SKIP    ] every kernel of this architecture runs anywhere\n");
		skip();
	}
	unsupported = hz_clear_kernel_name((unsigned)i);
	setenv("HUGEZERO_CLEAR", unsupported, 1);
	capture_stderr(reload, out, sizeof(out));
	unsetenv("HUGEZERO_CLEAR");
	hz_cpu_test_mask(0);
	assert_non_null(strstr(out, "cannot run here"));
	assert_non_null(strstr(out, why));
	assert_string_not_equal(hz_clear_kernel_for(1u << 30), unsupported);
	reload();
	assert_int_equal(hz_clear_kernel_supported((unsigned)i, NULL), hidden != 0);
}

static void nt_min_moves_the_switch_point(void **state)
{
	(void)state;
	setenv("HUGEZERO_CLEAR_NT_MIN", "1M", 1);
	reload();
	unsetenv("HUGEZERO_CLEAR_NT_MIN");
	assert_string_equal(hz_clear_kernel_for((1u << 20) - 1), hz_clear_kernel_for(1));
	assert_string_equal(hz_clear_kernel_for(1u << 20), hz_clear_kernel_for(1u << 30));
	reload();
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long len;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)len + 1);
	if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void options_table_matches_readme(void **state)
{
	const char *root = getenv("HZ_SOURCE_ROOT");
	char path[4096], *readme, *table;
	size_t len;

	(void)state;
	assert_non_null(root);
	snprintf(path, sizeof(path), "%s/README.md", root);
	readme = read_file(path);
	assert_non_null(readme);
	len = hz_options_markdown(NULL, 0);
	table = malloc(len + 1);
	assert_non_null(table);
	hz_options_markdown(table, len + 1);
	if (strstr(readme, table) == NULL)
		fail_msg("README.md's option table differs from src/options.def; "
			 "regenerate it with the options-doc program in the build directory. Expected:\n%s", table);
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		assert_non_null(strstr(readme, hz_option_desc((enum hz_option_id)id)->env));
	free(table);
	free(readme);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_snapshot_is_read_once_by_racing_threads),
		cmocka_unit_test(sizes_accept_suffixes_and_reject_garbage),
		cmocka_unit_test(ints_respect_their_range),
		cmocka_unit_test(enums_bools_and_paths_parse),
		cmocka_unit_test(every_default_in_the_table_is_valid),
		cmocka_unit_test(enum_constants_agree_with_the_choices),
		cmocka_unit_test(config_members_are_named_after_their_variables),
		cmocka_unit_test(reload_replaces_the_snapshot_as_a_whole),
		cmocka_unit_test(reload_alone_refreshes_derived_values),
		cmocka_unit_test(bad_enum_value_warns_with_its_choices),
		cmocka_unit_test(bad_value_warns_once_and_uses_default),
		cmocka_unit_test(bad_value_is_shown_escaped_and_cut),
		cmocka_unit_test(clear_override_forces_a_valid_kernel),
		cmocka_unit_test(clear_override_unknown_name_warns_and_uses_auto),
		cmocka_unit_test(clear_override_unsupported_kernel_warns_and_uses_auto),
		cmocka_unit_test(nt_min_moves_the_switch_point),
		cmocka_unit_test(options_table_matches_readme),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
