/* The options table: descriptors generated from options.def, and the
 * parsers of its types. Stateless: the values in effect are config.c's. */
#include "options.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Per ENUM option, its words in the order of their constants, and the
 * choices string "a|b|c" made from the same list (the leading '|' of
 * "|a|b|c" skipped). */
#define CHOICE_WORD(id, constant, word) word,
#define CHOICE_BAR_WORD(id, constant, word) "|" word
#define WORDS_ENUM(id, list) static const char *const id##_words[] = { list(CHOICE_WORD) };
#define WORDS_SIZE(id, choices)
#define WORDS_INT(id, choices)
#define WORDS_BOOL(id, choices)
#define WORDS_NAME(id, choices)
#define WORDS_PATH(id, choices)
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) WORDS_##type(id, choices)
#include "options.def"
#undef HZ_OPTION

#define CHOICES_ENUM(id, list) \
	.choices = &(list(CHOICE_BAR_WORD))[1], .words = id##_words, .word_count = HZ_##id##_OPT_COUNT
#define CHOICES_SIZE(id, text) .choices = text
#define CHOICES_INT(id, text) .choices = text
#define CHOICES_BOOL(id, text) .choices = text
#define CHOICES_NAME(id, text) .choices = text
#define CHOICES_PATH(id, text) .choices = text

static const struct hz_option_desc descs[HZ_OPT_COUNT] = {
#define HZ_OPTION(id, field, type_, def_, min_, max_, choices_, doc_) \
	[HZ_OPT_##id] = { .env = "HUGEZERO_" #id, .type = HZ_OPT_##type_, .def = (def_), \
			  .min = (min_), .max = (max_), CHOICES_##type_(id, choices_), .doc = (doc_) },
#include "options.def"
#undef HZ_OPTION
};

const struct hz_option_desc *hz_option_desc(enum hz_option_id id)
{
	return (unsigned)id < HZ_OPT_COUNT ? &descs[id] : NULL;
}

static int parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	default: break;
	}
	if (shift && (*p == 'i' || *p == 'I') && (p[1] == 'b' || p[1] == 'B'))
		p += 2;
	else if (*p == 'b' || *p == 'B')
		p++;
	if (*p != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

static int parse_int(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

static int parse_bool(const char *s, uint64_t *out)
{
	static const char *const yes[] = { "1", "yes", "on", "true" };
	static const char *const no[] = { "0", "no", "off", "false" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* The value is the index of the matching word, any case. */
static int parse_enum(const char *s, const struct hz_option_desc *desc, uint64_t *out)
{
	for (unsigned i = 0; i < desc->word_count; i++) {
		if (strcasecmp(desc->words[i], s) == 0) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* A kernel or mode name: letters, digits, '_' and '-'. */
static int parse_name(const char *s, char *text_out)
{
	size_t len = strlen(s);

	if (len == 0 || len >= HZ_OPTION_TEXT_MAX)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
		if (!ok)
			return -EINVAL;
	}
	if (text_out)
		memcpy(text_out, s, len + 1);
	return 0;
}

/* A file path: any printable text; empty means "none". */
static int parse_path(const char *s, char *text_out)
{
	size_t len = strlen(s);

	if (len >= HZ_OPTION_TEXT_MAX)
		return -ERANGE;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return -EINVAL;
	if (text_out)
		memcpy(text_out, s, len + 1);
	return 0;
}

int hz_option_parse(const struct hz_option_desc *desc, const char *text,
		    uint64_t *out, char *text_out)
{
	uint64_t v = 0;
	int ret;

	switch (desc->type) {
	case HZ_OPT_SIZE:
		ret = parse_size(text, &v);
		break;
	case HZ_OPT_INT:
		ret = parse_int(text, &v);
		break;
	case HZ_OPT_BOOL:
		ret = parse_bool(text, &v);
		break;
	case HZ_OPT_ENUM:
		ret = parse_enum(text, desc, &v);
		break;
	case HZ_OPT_NAME:
		ret = parse_name(text, text_out);
		break;
	case HZ_OPT_PATH:
		ret = parse_path(text, text_out);
		break;
	default:
		ret = -EINVAL;
		break;
	}
	if (ret == 0 && (desc->type == HZ_OPT_SIZE || desc->type == HZ_OPT_INT) &&
	    (v < desc->min || v > desc->max))
		ret = -ERANGE;
	if (ret == 0)
		*out = v;
	return ret;
}

/* The first 64 bytes of a value from the environment or the command line,
 * printable: anything else (control characters, bytes of a mangled
 * encoding) as \xNN, so a bad value cannot write terminal escapes into the
 * program's stderr. */
static const char *printable(const char *value, char *out, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < 64 && value[i] != '\0' && o + 5 <= size; i++) {
		unsigned char c = (unsigned char)value[i];

		if (c >= 0x20 && c < 0x7f)
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
	}
	out[o] = '\0';
	return out;
}

void hz_option_explain(const struct hz_option_desc *desc, const char *text,
		       int ret, char *out, size_t size)
{
	char shown[64 * 4 + 1];

	snprintf(out, size, "%s=%s is %s (valid: %s)", desc->env,
		 printable(text, shown, sizeof(shown)),
		 ret == -ERANGE ? "out of range" : "not valid", desc->choices);
}
