/* The configuration in effect: one snapshot of every option in the table
 * (options.def), with its typed value, read from the environment once.
 *
 *   const struct hz_config *c = hz_config();
 *   if (len >= c->clear_nt_min) ...
 *
 * The first call reads the environment (secure_getenv, one warning per bad
 * value): lazily, from any thread, without allocating, so it runs inside
 * the first malloc before main. The snapshot never changes afterwards;
 * hz_options_reload (tests only) replaces it as a whole by a new one with
 * the next generation number, so a module that derives values from it
 * (the clear policy's kernels) keeps them with the generation they came
 * from and recomputes when hz_config()->generation differs. */
#ifndef HZ_CONFIG_H
#define HZ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"

#define HZ_CONFIG_MEMBER_SIZE(field) size_t field;
#define HZ_CONFIG_MEMBER_INT(field) uint64_t field;
#define HZ_CONFIG_MEMBER_BOOL(field) bool field;
#define HZ_CONFIG_MEMBER_ENUM(field) enum hz_##field##_opt field;
#define HZ_CONFIG_MEMBER_NAME(field) char field[HZ_OPTION_TEXT_MAX];
#define HZ_CONFIG_MEMBER_PATH(field) char field[HZ_OPTION_TEXT_MAX];

/* The members follow the table's order, so the struct reads like
 * options.def; the bools between them cost 25 bytes of padding in a struct
 * that exists twice. */
struct hz_config { /* NOLINT(clang-analyzer-optin.performance.Padding) */
	/* 1 for the first snapshot, one more for each reload; never 0, so 0
	 * can mean "derived from no snapshot yet". */
	uint64_t generation;
	/* One member per option, named by the table's field column, in the
	 * table's order: size_t threshold, bool populate, enum hz_backing_opt
	 * backing, char clear[HZ_OPTION_TEXT_MAX], ... */
#define HZ_OPTION(id, field, type, def, min, max, choices, doc) HZ_CONFIG_MEMBER_##type(field)
#include "options.def"
#undef HZ_OPTION
	/* Where each value came from, by option id. */
	enum hz_option_source source[HZ_OPT_COUNT];
};

/* The current snapshot, NULL until the first hz_config(). Read it through
 * hz_config(). */
extern const struct hz_config *hz_config_current;

/* HUGEZERO_THRESHOLD of the current snapshot as a plain variable, so the
 * preload's small-request path stays one load and a compare. SIZE_MAX
 * until the first snapshot; replaced with every snapshot. */
extern size_t hz_config_threshold;

/* Called, when set, after hz_options_reload made a new snapshot current:
 * the preload copies the threshold into the shim (src/preload/start.c). */
extern void (*hz_config_on_reload)(void);

/* Read the environment into the first snapshot (out of line: once). */
const struct hz_config *hz_config_load(void);

/* The current snapshot; reads the environment on the first call. */
static inline const struct hz_config *hz_config(void)
{
	const struct hz_config *c = __atomic_load_n(&hz_config_current, __ATOMIC_ACQUIRE);

	return c ? c : hz_config_load();
}

#endif /* HZ_CONFIG_H */
