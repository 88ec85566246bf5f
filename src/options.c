/* Reading the options table from the environment. See options.h. */
#include "options.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu/relax.h"
#include "log.h"

static const struct hz_option_desc descs[HZ_OPT_COUNT] = {
#define HZ_OPTION(id, type, def, min, max, choices, doc) \
	[HZ_OPT_##id] = { "HUGEZERO_" #id, HZ_OPT_##type, def, min, max, choices, doc },
#include "options.def"
#undef HZ_OPTION
};

struct option_value {
	uint64_t num;
	char text[HZ_OPTION_TEXT_MAX];
	enum hz_option_source source;
};

static struct option_value values[HZ_OPT_COUNT];

enum { UNLOADED, LOADING, LOADED };
static int load_state = UNLOADED;
/* Set while this thread loads, so a re-entrant read gets the defaults
 * instead of waiting for itself. */
static __thread bool loading_here;

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

/* choices is "a|b|c"; the value is the index of the matching word. */
static int parse_enum(const char *s, const char *choices, uint64_t *out)
{
	size_t len = strlen(s);
	uint64_t index = 0;

	for (const char *c = choices; *c; index++) {
		size_t wlen = strcspn(c, "|");

		if (wlen == len && strncasecmp(c, s, len) == 0) {
			*out = index;
			return 0;
		}
		c += wlen;
		if (*c == '|')
			c++;
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
		ret = parse_enum(text, desc->choices, &v);
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

/* The first 64 bytes of an environment value, printable: anything else
 * (control characters, bytes of a mangled encoding) as \xNN, so a bad
 * value cannot write terminal escapes into the program's stderr. */
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

static void load_one(enum hz_option_id id)
{
	const struct hz_option_desc *d = &descs[id];
	struct option_value *val = &values[id];
	const char *env = secure_getenv(d->env);
	char shown[64 * 4 + 1];
	int ret;

	/* Defaults in the table are valid by construction (tests check it). */
	hz_option_parse(d, d->def, &val->num, val->text);
	val->source = HZ_SRC_DEFAULT;
	if (env == NULL)
		return;
	ret = hz_option_parse(d, env, &val->num, val->text);
	if (ret == 0) {
		val->source = HZ_SRC_ENV;
		return;
	}
	hz_option_parse(d, d->def, &val->num, val->text);
	val->source = HZ_SRC_INVALID_ENV;
	hz_warn("%s=%s is %s (valid: %s); using the default %s", d->env,
		printable(env, shown, sizeof(shown)), ret == -ERANGE ? "out of range" : "not valid", d->choices, d->def);
}

static void load_all(void)
{
	loading_here = true;
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		load_one((enum hz_option_id)id);
	hz_log_set_level((int)values[HZ_OPT_VERBOSE].num);
	loading_here = false;
}

static void ensure_loaded(void)
{
	int expected = UNLOADED;

	if (__atomic_load_n(&load_state, __ATOMIC_ACQUIRE) == LOADED ||
	    loading_here)
		return;
	if (__atomic_compare_exchange_n(&load_state, &expected, LOADING, false,
					__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
		load_all();
		__atomic_store_n(&load_state, LOADED, __ATOMIC_RELEASE);
		return;
	}
	/* Another thread is reading the environment: a few microseconds. */
	while (__atomic_load_n(&load_state, __ATOMIC_ACQUIRE) != LOADED)
		hz_cpu_relax();
}

uint64_t hz_option_u64(enum hz_option_id id)
{
	ensure_loaded();
	return values[id].num;
}

const char *hz_option_str(enum hz_option_id id)
{
	ensure_loaded();
	return values[id].text;
}

enum hz_option_source hz_option_source(enum hz_option_id id)
{
	ensure_loaded();
	return values[id].source;
}

void hz_options_reload(void)
{
	__atomic_store_n(&load_state, LOADING, __ATOMIC_RELAXED);
	load_all();
	__atomic_store_n(&load_state, LOADED, __ATOMIC_RELEASE);
}
