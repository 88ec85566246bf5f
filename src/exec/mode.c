/* HUGEZERO_EXEC and HUGEZERO_EXEC_PERFMAP, from the configuration snapshot,
 * and the architecture's default mode. */

#include "../config.h"
#include "../log.h"
#include "../prim/os.h"
#include "mode.h"

static const char *const mode_names[] = {
	[HZ_EXEC_OFF] = "off",
	[HZ_EXEC_ADVISE] = "advise",
	[HZ_EXEC_REMAP] = "remap",
	[HZ_EXEC_REPORT] = "report",
};

const char *hz_exec_mode_name(enum hz_exec_mode mode)
{
	return (unsigned)mode < sizeof(mode_names) / sizeof(mode_names[0])
		       ? mode_names[mode] : "?";
}

/* arm64 with Linux 6.16+ reads exec text in 64 KiB folios on its own. A
 * fact of the running kernel, not of the options: asked once. */
static enum hz_exec_mode default_mode(void)
{
#if defined(__aarch64__)
	const struct hz_os *os = hz_os(); /* 0.0 when uname failed */

	if (os->kernel_major > 6 || (os->kernel_major == 6 && os->kernel_minor >= 16))
		return HZ_EXEC_REPORT;
#endif
	return HZ_EXEC_ADVISE;
}

enum hz_exec_mode hz_exec_mode(void)
{
	const struct hz_config *c = hz_config();

	/* HUGEZERO_DISABLE=1 makes all of hugezero a pass-through. */
	if (c->disable)
		return HZ_EXEC_OFF;
	/* Unset or invalid (the table warned): the architecture's default,
	 * which is report-only on arm64 kernels that do this themselves. */
	if (c->source[HZ_OPT_EXEC] != HZ_SRC_ENV)
		return default_mode();
	switch (c->exec) {
	case HZ_EXEC_OPT_OFF:
		return HZ_EXEC_OFF;
	case HZ_EXEC_OPT_REMAP:
		return HZ_EXEC_REMAP;
	case HZ_EXEC_OPT_ADVISE:
	default:
		return HZ_EXEC_ADVISE;
	}
}

bool hz_exec_perfmap_enabled(void)
{
	return hz_config()->exec_perfmap;
}

void hz_exec_options_reload(void)
{
	hz_options_reload();
}
