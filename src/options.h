/* The options table (options.def): one descriptor per option, the
 * constants of its ENUM options, and parsing.
 *
 * The values in effect are one snapshot, struct hz_config (config.h), read
 * once, lazily, with secure_getenv (so setuid programs ignore them). A bad
 * value produces one warning naming the variable, the value and the default
 * used, and the default applies. hz_option_u64/str/source below read that
 * snapshot by id, for code that walks the table. */
#ifndef HZ_OPTIONS_H
#define HZ_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

/* Longest NAME or PATH value, with its NUL. */
#define HZ_OPTION_TEXT_MAX 256

enum hz_option_type { HZ_OPT_SIZE, HZ_OPT_INT, HZ_OPT_BOOL, HZ_OPT_ENUM, HZ_OPT_NAME, HZ_OPT_PATH };

enum hz_option_id {
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) HZ_OPT_##id,
#include "options.def"
#undef HZ_OPTION
	HZ_OPT_COUNT
};

/* Each ENUM option's words as constants, in the order of its list:
 * enum hz_backing_opt { HZ_BACKING_OPT_AUTO, ..., HZ_BACKING_OPT_COUNT }. */
#define HZ_CHOICE_CONSTANT(id, constant, word) HZ_##id##_OPT_##constant,
#define HZ_OPTION_CONSTANTS_ENUM(id, field, list) \
	enum hz_##field##_opt { list(HZ_CHOICE_CONSTANT) HZ_##id##_OPT_COUNT };
#define HZ_OPTION_CONSTANTS_SIZE(id, field, choices)
#define HZ_OPTION_CONSTANTS_INT(id, field, choices)
#define HZ_OPTION_CONSTANTS_BOOL(id, field, choices)
#define HZ_OPTION_CONSTANTS_NAME(id, field, choices)
#define HZ_OPTION_CONSTANTS_PATH(id, field, choices)
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) \
	HZ_OPTION_CONSTANTS_##type(id, field, choices)
#include "options.def"
#undef HZ_OPTION

enum hz_option_source { HZ_SRC_DEFAULT, HZ_SRC_ENV, HZ_SRC_INVALID_ENV };

struct hz_option_desc {
	const char *env;     /* "HUGEZERO_CLEAR" */
	const char *def;     /* default as written */
	uint64_t min, max;
	const char *choices; /* ENUM: "a|b|c", made from words */
	const char *doc;
	/* ENUM: the words, words[HZ_<id>_OPT_<X>] being X's; else NULL, 0. */
	const char *const *words;
	unsigned word_count;
	enum hz_option_type type;
};

const struct hz_option_desc *hz_option_desc(enum hz_option_id id);

/* Parse text as an option of desc's type into *out. Returns 0 or -EINVAL
 * (bad syntax, unknown choice) or -ERANGE (outside min..max). NAME options
 * and PATH options are copied into text_out (HZ_OPTION_TEXT_MAX bytes) when
 * not NULL. */
int hz_option_parse(const struct hz_option_desc *desc, const char *text,
		    uint64_t *out, char *text_out);

/* Why hz_option_parse refused text with ret, as one line without a newline:
 * "HUGEZERO_EXEC=fast is not valid (valid: off|advise|remap)". The value is
 * shown printable (control bytes as \xNN, so it cannot write terminal
 * escapes) and cut at 64 bytes. The environment's warning and the hugezero
 * command both say it, so a bad value reads the same from either. */
void hz_option_explain(const struct hz_option_desc *desc, const char *text,
		       int ret, char *out, size_t size);

/* ---- the values in effect (config.c) ---- */

/* The value of an option in the current snapshot: SIZE/INT/BOOL/ENUM as a
 * number, NAME/PATH as text ("" for the others). Code that knows which
 * option it wants reads hz_config()'s typed member instead. */
uint64_t hz_option_u64(enum hz_option_id id);
const char *hz_option_str(enum hz_option_id id);
enum hz_option_source hz_option_source(enum hz_option_id id);

/* Read the environment again into a new snapshot that replaces the current
 * one as a whole (tests only: a reader still holding the snapshot before
 * last must not be running). */
void hz_options_reload(void);

#endif /* HZ_OPTIONS_H */
