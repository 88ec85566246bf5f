/* The snapshot of the options in effect, read from the environment. See
 * config.h.
 *
 * Two static slots hold the current snapshot and the one a reload fills:
 * no allocation, and a reload never writes into the snapshot readers hold
 * (only into the one before it, which nobody may still be reading). */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/relax.h"
#include "log.h"

const struct hz_config *hz_config_current;
size_t hz_config_threshold = SIZE_MAX;
void (*hz_config_on_reload)(void);

static struct hz_config slots[2];
static uint64_t last_generation;
/* Set by the one thread that reads the environment first; the others wait
 * for hz_config_current. */
static int claimed;
/* The snapshot this thread is filling, so a re-entrant read gets it
 * (defaults already in) instead of waiting for itself. */
static __thread struct hz_config *filling_here;

/* Not a generation: marks the snapshot being filled, so a module deriving
 * values from a re-entrant read does not keep them past the fill. */
#define GENERATION_FILLING UINT64_MAX

static void store_text(char *member, const char *text)
{
	size_t n = strnlen(text, HZ_OPTION_TEXT_MAX - 1);

	memcpy(member, text, n);
	member[n] = '\0';
}

/* Put a parsed value into c's typed member for id. */
static void store(struct hz_config *c, enum hz_option_id id, uint64_t num,
		  const char *text)
{
#define STORE_SIZE(field) c->field = (size_t)num;
#define STORE_INT(field) c->field = num;
#define STORE_BOOL(field) c->field = num != 0;
#define STORE_ENUM(field) c->field = (enum hz_##field##_opt)num;
#define STORE_NAME(field) store_text(c->field, text);
#define STORE_PATH(field) store_text(c->field, text);
	switch (id) {
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) \
	case HZ_OPT_##id: STORE_##type(field) break;
#include "options.def"
#undef HZ_OPTION
	default:
		break;
	}
}

/* The table's defaults are valid by construction (tests check it). */
static void store_default(struct hz_config *c, enum hz_option_id id)
{
	const struct hz_option_desc *d = hz_option_desc(id);
	char text[HZ_OPTION_TEXT_MAX] = "";
	uint64_t num = 0;

	hz_option_parse(d, d->def, &num, text);
	store(c, id, num, text);
	c->source[id] = HZ_SRC_DEFAULT;
}

static void store_env(struct hz_config *c, enum hz_option_id id)
{
	const struct hz_option_desc *d = hz_option_desc(id);
	const char *env = secure_getenv(d->env);
	char text[HZ_OPTION_TEXT_MAX] = "", why[512];
	uint64_t num = 0;
	int ret;

	if (env == NULL)
		return;
	ret = hz_option_parse(d, env, &num, text);
	if (ret == 0) {
		store(c, id, num, text);
		c->source[id] = HZ_SRC_ENV;
		return;
	}
	c->source[id] = HZ_SRC_INVALID_ENV;
	hz_option_explain(d, env, ret, why, sizeof(why));
	hz_warn("%s; using the default %s", why, d->def);
}

/* Fill c from the environment and make it the current snapshot. */
static void load_into(struct hz_config *c)
{
	filling_here = c;
	memset(c, 0, sizeof(*c));
	c->generation = GENERATION_FILLING;
	/* All defaults first: a re-entrant read sees a whole snapshot. */
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		store_default(c, (enum hz_option_id)id);
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++)
		store_env(c, (enum hz_option_id)id);
	c->generation = ++last_generation;
	hz_log_set_level((int)c->verbose);
	__atomic_store_n(&hz_config_threshold, c->threshold, __ATOMIC_RELAXED);
	__atomic_store_n(&hz_config_current, c, __ATOMIC_RELEASE);
	filling_here = NULL;
}

const struct hz_config *hz_config_load(void)
{
	const struct hz_config *c;
	int expected = 0;

	if (filling_here)
		return filling_here;
	if (__atomic_compare_exchange_n(&claimed, &expected, 1, false,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		load_into(&slots[0]);
		return &slots[0];
	}
	/* Another thread is reading the environment: a few microseconds. */
	while ((c = __atomic_load_n(&hz_config_current, __ATOMIC_ACQUIRE)) == NULL)
		hz_cpu_relax();
	return c;
}

void hz_options_reload(void)
{
	const struct hz_config *old = __atomic_load_n(&hz_config_current, __ATOMIC_ACQUIRE);
	void (*on_reload)(void);

	__atomic_store_n(&claimed, 1, __ATOMIC_RELAXED);
	load_into(old == &slots[0] ? &slots[1] : &slots[0]);
	on_reload = __atomic_load_n(&hz_config_on_reload, __ATOMIC_ACQUIRE);
	if (on_reload)
		on_reload();
}

uint64_t hz_option_u64(enum hz_option_id id)
{
	const struct hz_config *c = hz_config();

#define U64_SIZE(field) return c->field;
#define U64_INT(field) return c->field;
#define U64_BOOL(field) return c->field;
#define U64_ENUM(field) return (uint64_t)c->field;
#define U64_NAME(field) return 0;
#define U64_PATH(field) return 0;
	switch (id) {
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) \
	case HZ_OPT_##id: U64_##type(field)
#include "options.def"
#undef HZ_OPTION
	default:
		return 0;
	}
}

/* Where each NAME or PATH option's text sits in the snapshot; 0 (the
 * generation's place) for the others. */
#define TEXT_AT_SIZE(id, field)
#define TEXT_AT_INT(id, field)
#define TEXT_AT_BOOL(id, field)
#define TEXT_AT_ENUM(id, field)
#define TEXT_AT_NAME(id, field) [HZ_OPT_##id] = offsetof(struct hz_config, field),
#define TEXT_AT_PATH(id, field) [HZ_OPT_##id] = offsetof(struct hz_config, field),
static const size_t text_at[HZ_OPT_COUNT] = {
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) TEXT_AT_##type(id, field)
#include "options.def"
#undef HZ_OPTION
};

const char *hz_option_str(enum hz_option_id id)
{
	size_t at = (unsigned)id < HZ_OPT_COUNT ? text_at[id] : 0;

	return at ? (const char *)hz_config() + at : "";
}

enum hz_option_source hz_option_source(enum hz_option_id id)
{
	return (unsigned)id < HZ_OPT_COUNT ? hz_config()->source[id] : HZ_SRC_DEFAULT;
}
