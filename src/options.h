/* The options table (options.def) read from the environment.
 *
 * Options are read once, lazily, with secure_getenv (so setuid programs
 * ignore them). A bad value produces one warning naming the variable, the
 * value and the default used, and the default applies. */
#ifndef HZ_OPTIONS_H
#define HZ_OPTIONS_H

#include <stdint.h>

/* Longest NAME or PATH value, with its NUL. */
#define HZ_OPTION_TEXT_MAX 256

enum hz_option_type { HZ_OPT_SIZE, HZ_OPT_INT, HZ_OPT_BOOL, HZ_OPT_ENUM, HZ_OPT_NAME, HZ_OPT_PATH };

enum hz_option_id {
#define HZ_OPTION(id, type, def, min, max, choices, doc) HZ_OPT_##id,
#include "options.def"
#undef HZ_OPTION
	HZ_OPT_COUNT
};

enum hz_option_source { HZ_SRC_DEFAULT, HZ_SRC_ENV, HZ_SRC_INVALID_ENV };

struct hz_option_desc {
	const char *env;     /* "HUGEZERO_CLEAR" */
	enum hz_option_type type;
	const char *def;     /* default as written */
	uint64_t min, max;
	const char *choices;
	const char *doc;
};

const struct hz_option_desc *hz_option_desc(enum hz_option_id id);

/* The value of an option: SIZE/INT/BOOL/ENUM as a number, NAME/PATH as
 * text. */
uint64_t hz_option_u64(enum hz_option_id id);
const char *hz_option_str(enum hz_option_id id);
enum hz_option_source hz_option_source(enum hz_option_id id);

/* Read the environment again (tests only: not safe while other threads read
 * options). */
void hz_options_reload(void);

/* Parse text as an option of desc's type into *out. Returns 0 or -EINVAL
 * (bad syntax, unknown choice) or -ERANGE (outside min..max). NAME options
 * and PATH options are copied into text_out (HZ_OPTION_TEXT_MAX bytes) when
 * not NULL. */
int hz_option_parse(const struct hz_option_desc *desc, const char *text,
		    uint64_t *out, char *text_out);

#endif /* HZ_OPTIONS_H */
