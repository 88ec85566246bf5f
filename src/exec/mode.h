/* HUGEZERO_EXEC and HUGEZERO_EXEC_PERFMAP: the mode in effect (mode.c). */
#ifndef HZ_EXEC_MODE_H
#define HZ_EXEC_MODE_H

#include <stdbool.h>

enum hz_exec_mode {
	HZ_EXEC_OFF,
	HZ_EXEC_ADVISE,
	HZ_EXEC_REMAP,
	/* Not a value of the option: the default on arm64 with Linux 6.16 or
	 * later, whose exec readahead already uses 64 KiB folios; MADV_HUGEPAGE
	 * would replace them with PMD-order reads, so it must be asked for. */
	HZ_EXEC_REPORT,
};

/* The mode in effect (option, architecture and kernel considered). */
enum hz_exec_mode hz_exec_mode(void);
/* HUGEZERO_EXEC_PERFMAP: write /tmp/perf-PID.map lines for remapped text. */
bool hz_exec_perfmap_enabled(void);
/* Read the two options again (tests only). */
void hz_exec_options_reload(void);
const char *hz_exec_mode_name(enum hz_exec_mode mode);

#endif /* HZ_EXEC_MODE_H */
