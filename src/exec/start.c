/* HUGEZERO_EXEC at the preload's start-up: the text's folios measured for
 * the report, then the mode applied to every object. See start.h. */
#include "start.h"

#include <stdbool.h>
#include <stdio.h>

#include "../log.h"
#include "../options.h"
#include "../prim/prim.h"
#include "apply.h"
#include "folios.h"
#include "mode.h"
#include "report.h"

static bool stats_wanted(void)
{
	return hz_option_u64(HZ_OPT_STATS) != 0 || hz_option_str(HZ_OPT_STATS_FILE)[0] != '\0';
}

void hz_exec_start(void)
{
	static int started;
	enum hz_exec_mode mode;
	unsigned threads = 0;
	char why[64] = "";
	/* Zero: hz_folios_text adds to what it is given. */
	struct hz_folio_counts text_at_start = { 0 };

	if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL))
		return;
	mode = hz_exec_mode();
	if (mode == HZ_EXEC_OFF)
		return;
	if (hz_prim_page_size() != HZ_SZ_4K) {
		hz_info("exec: pages are not 4 KiB here; executable text left alone");
		return;
	}
	if (stats_wanted() && hz_folios_text(0, &text_at_start) == 0)
		hz_exec_keep_folios_at_start(&text_at_start);
	if (mode == HZ_EXEC_REMAP && hz_prim_thread_count(&threads) == 0 && threads > 1)
		snprintf(why, sizeof(why), "%u threads already run", threads);
	hz_exec_apply(mode, 0, why[0] == '\0', why);
}
