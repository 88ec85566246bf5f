/* HUGEZERO_EXEC and HUGEZERO_EXEC_PERFMAP, from the options table, and the
 * architecture's default mode. */

#include "../log.h"
#include "../options.h"
#include "../prim/os.h"
#include "exec.h"

enum { UNREAD = -1 };

static int mode_value = UNREAD;
static int perfmap_value = UNREAD;

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

/* arm64 with Linux 6.16+ reads exec text in 64 KiB folios on its own. */
static enum hz_exec_mode default_mode(void)
{
#if defined(__aarch64__)
	const struct hz_os *os = hz_os(); /* 0.0 when uname failed */

	if (os->kernel_major > 6 || (os->kernel_major == 6 && os->kernel_minor >= 16))
		return HZ_EXEC_REPORT;
#endif
	return HZ_EXEC_ADVISE;
}

static int read_mode(void)
{
	/* HUGEZERO_DISABLE=1 makes all of hugezero a pass-through. */
	if (hz_option_u64(HZ_OPT_DISABLE))
		return HZ_EXEC_OFF;
	/* Unset or invalid (the table warned): the architecture's default,
	 * which is report-only on arm64 kernels that do this themselves. */
	if (hz_option_source(HZ_OPT_EXEC) != HZ_SRC_ENV)
		return default_mode();
	return (int)hz_option_u64(HZ_OPT_EXEC);
}

static int read_perfmap(void)
{
	return (int)hz_option_u64(HZ_OPT_EXEC_PERFMAP);
}

enum hz_exec_mode hz_exec_mode(void)
{
	int v = __atomic_load_n(&mode_value, __ATOMIC_ACQUIRE);

	if (v == UNREAD) {
		/* Two threads may both read: same answer, one extra warning
		 * at worst, and only before start-up finished. */
		v = read_mode();
		__atomic_store_n(&mode_value, v, __ATOMIC_RELEASE);
	}
	return (enum hz_exec_mode)v;
}

bool hz_exec_perfmap_enabled(void)
{
	int v = __atomic_load_n(&perfmap_value, __ATOMIC_ACQUIRE);

	if (v == UNREAD) {
		v = read_perfmap();
		__atomic_store_n(&perfmap_value, v, __ATOMIC_RELEASE);
	}
	return v != 0;
}

void hz_exec_options_reload(void)
{
	hz_options_reload();
	__atomic_store_n(&mode_value, UNREAD, __ATOMIC_RELEASE);
	__atomic_store_n(&perfmap_value, UNREAD, __ATOMIC_RELEASE);
}
