/* Option parsing with arbitrary bytes: every HUGEZERO_* variable of
 * src/options.def, through hz_option_parse directly and through the
 * environment and hz_options_reload (with its warnings).
 *
 * The input is split at NUL bytes into values; the first byte rotates which
 * option takes the first value, and options left without one are unset.
 * Every value is also parsed as every option. Invariants: the result is in
 * the option's range (or its choices), NAME and PATH values come back
 * verbatim, a size or integer prints and parses back to itself, case does
 * not matter for words, and after a reload each option holds its parsed
 * value (source ENV) or its default (INVALID_ENV, DEFAULT). Warnings are
 * written to /dev/null unless HZ_FUZZ_VERBOSE is set. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <hugezero.h>

#include "clear/policy.h"
#include "fuzz.h"
#include "options.h"

/* Longer values are cut here: four times the longest valid one. */
#define VALUE_MAX (4 * HZ_OPTION_TEXT_MAX)
#define NAME_MAX_LEN 40

/* The environment entries, "HUGEZERO_X=value", owned here and handed to
 * putenv: rewriting one in place changes the variable without the copy
 * setenv would leak on every input. */
static char entries[HZ_OPT_COUNT][NAME_MAX_LEN + VALUE_MAX + 1];
static bool in_environ[HZ_OPT_COUNT];
static int devnull = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (getenv("HZ_FUZZ_VERBOSE") == NULL)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		unsetenv(hz_option_desc((enum hz_option_id)id)->env);
	return 0;
}

/* Number of words in "a|b|c", and whether word i equals text (any case). */
static unsigned choice_count(const char *choices)
{
	unsigned n = 1;

	for (const char *c = choices; *c; c++)
		n += *c == '|';
	return n;
}

static bool choice_is(const char *choices, uint64_t index, const char *text)
{
	const char *c = choices;

	for (uint64_t i = 0; i < index; i++) {
		c = strchr(c, '|');
		if (c == NULL)
			return false;
		c++;
	}
	return strncasecmp(c, text, strcspn(c, "|")) == 0 &&
	       strlen(text) == strcspn(c, "|");
}

static bool is_name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
}

/* What a successful parse of text must satisfy, by type. */
static void check_parsed(const struct hz_option_desc *d, const char *text,
			 uint64_t v, const char *text_out)
{
	char again[32], upper[VALUE_MAX + 1];
	uint64_t w = 0;

	switch (d->type) {
	case HZ_OPT_SIZE:
	case HZ_OPT_INT:
		FUZZ_CHECK(v >= d->min && v <= d->max, "%s=%s gave %" PRIu64, d->env, text, v);
		snprintf(again, sizeof(again), "%" PRIu64, v);
		FUZZ_CHECK(hz_option_parse(d, again, &w, NULL) == 0 && w == v,
			   "%s: %" PRIu64 " does not parse back", d->env, v);
		break;
	case HZ_OPT_BOOL:
	case HZ_OPT_ENUM:
		if (d->type == HZ_OPT_BOOL)
			FUZZ_CHECK(v <= 1, "%s=%s gave %" PRIu64, d->env, text, v);
		else
			FUZZ_CHECK(v < choice_count(d->choices) && choice_is(d->choices, v, text),
				   "%s=%s gave choice %" PRIu64, d->env, text, v);
		/* Words are case-insensitive. */
		for (size_t i = 0; i <= strlen(text); i++)
			upper[i] = (char)(text[i] >= 'a' && text[i] <= 'z' ? text[i] - 32 : text[i]);
		FUZZ_CHECK(hz_option_parse(d, upper, &w, NULL) == 0 && w == v,
			   "%s=%s parses but its capitals do not", d->env, text);
		break;
	case HZ_OPT_NAME:
		FUZZ_CHECK(text[0] != '\0', "%s: an empty name was accepted", d->env);
		for (const char *p = text; *p; p++)
			FUZZ_CHECK(is_name_char(*p), "%s: name with %#x accepted", d->env,
				   (unsigned char)*p);
		/* and the text comes back verbatim, as for a path */
		__attribute__((fallthrough));
	case HZ_OPT_PATH:
		FUZZ_CHECK(strlen(text) < HZ_OPTION_TEXT_MAX && strcmp(text, text_out) == 0,
			   "%s: text not copied verbatim", d->env);
		for (const char *p = text; *p; p++)
			FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f,
				   "%s: control byte %#x accepted", d->env, (unsigned char)*p);
		break;
	}
}

static void parse_as_every_option(const char *text)
{
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		const struct hz_option_desc *d = hz_option_desc((enum hz_option_id)id);
		char text_out[HZ_OPTION_TEXT_MAX] = "";
		uint64_t v = 0;
		int ret = hz_option_parse(d, text, &v, text_out);

		FUZZ_CHECK(ret == 0 || ret == -EINVAL || ret == -ERANGE,
			   "%s: returned %d", d->env, ret);
		if (ret == 0)
			check_parsed(d, text, v, text_out);
	}
}

static void set_option(unsigned id, const char *value)
{
	const char *name = hz_option_desc((enum hz_option_id)id)->env;

	if (value == NULL) {
		if (in_environ[id])
			unsetenv(name);
		in_environ[id] = false;
		return;
	}
	snprintf(entries[id], sizeof(entries[id]), "%s=%s", name, value);
	if (!in_environ[id])
		putenv(entries[id]);
	in_environ[id] = true;
}

/* After hz_options_reload: each option holds what the environment says, or
 * its default. */
static void check_loaded(unsigned id, const char *value)
{
	const struct hz_option_desc *d = hz_option_desc((enum hz_option_id)id);
	char want_text[HZ_OPTION_TEXT_MAX] = "", def_text[HZ_OPTION_TEXT_MAX] = "";
	uint64_t want = 0, def = 0;
	enum hz_option_source src = hz_option_source((enum hz_option_id)id);
	int ret = value ? hz_option_parse(d, value, &want, want_text) : -ENOENT;

	FUZZ_CHECK(hz_option_parse(d, d->def, &def, def_text) == 0,
		   "%s: the default %s is not valid", d->env, d->def);
	if (ret == 0) {
		FUZZ_CHECK(src == HZ_SRC_ENV, "%s=%s: valid but source %d", d->env, value, src);
	} else {
		FUZZ_CHECK(src == (value ? HZ_SRC_INVALID_ENV : HZ_SRC_DEFAULT),
			   "%s: source %d", d->env, src);
		want = def;
		memcpy(want_text, def_text, sizeof(want_text));
	}
	if (d->type == HZ_OPT_NAME || d->type == HZ_OPT_PATH)
		FUZZ_CHECK(strcmp(hz_option_str((enum hz_option_id)id), want_text) == 0,
			   "%s: holds \"%s\", not \"%s\"", d->env,
			   hz_option_str((enum hz_option_id)id), want_text);
	else
		FUZZ_CHECK(hz_option_u64((enum hz_option_id)id) == want,
			   "%s: holds %" PRIu64 ", not %" PRIu64, d->env,
			   hz_option_u64((enum hz_option_id)id), want);
}

/* Reload with warnings (and HUGEZERO_VERBOSE's debug lines) discarded:
 * they are still formatted, only not shown. The clearing policy re-reads
 * HUGEZERO_CLEAR and warns for a bad kernel name. */
static void reload_quietly(void)
{
	int saved = devnull >= 0 ? dup(2) : -1;

	if (saved >= 0)
		dup2(devnull, 2);
	hz_options_reload();
	hz_clear_policy_reset();
	if (saved >= 0) {
		dup2(saved, 2);
		close(saved);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *values[HZ_OPT_COUNT] = { NULL };
	char text[VALUE_MAX + 1];
	unsigned first = size > 0 ? data[0] % HZ_OPT_COUNT : 0;
	size_t at = size > 0 ? 1 : 0;
	static char pieces[HZ_OPT_COUNT][VALUE_MAX + 1];

	for (unsigned k = 0; k < HZ_OPT_COUNT && at < size; k++) {
		const uint8_t *end = memchr(data + at, 0, size - at);
		size_t len = end ? (size_t)(end - (data + at)) : size - at;
		size_t n = len < VALUE_MAX ? len : VALUE_MAX;

		memcpy(text, data + at, n);
		text[n] = '\0';
		parse_as_every_option(text);
		memcpy(pieces[k], text, n + 1);
		values[(first + k) % HZ_OPT_COUNT] = pieces[k];
		at += len + 1;
	}
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		set_option(id, values[id]);
	reload_quietly();
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		check_loaded(id, values[id]);
	FUZZ_CHECK(hz_clear_kernel_for(4096) != NULL, "no kernel for 4 KiB");
	return 0;
}
