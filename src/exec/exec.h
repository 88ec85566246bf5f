/* Executable text on large folios (HUGEZERO_EXEC=off|advise|remap).
 *
 * The kernel reads executable text of a file into 4 KiB folios on x86_64
 * (the exec-folio-order change of Linux 6.16 only asks for 64 KiB on arm64),
 * so the iTLB needs one entry per 4 KiB of hot code. What user space can do
 * on Linux 6.18 / ext4, as measured (issue 6):
 *
 *   advise  MADV_HUGEPAGE on a text mapping makes its faults read 2 MiB
 *           folios, but only where the file is not cached yet; so a cold
 *           file is first "prewarmed" through a throwaway mapping (hugepage +
 *           random + populate-read advice), which leaves 2 MiB folios in the
 *           page cache that the real mapping then maps with PMDs, shared by
 *           every process. MADV_COLLAPSE is probed once and used where the
 *           kernel supports it for files (CONFIG_READ_ONLY_THP_FOR_FS).
 *   remap   (opt-in) copy the aligned interior of each text segment into
 *           anonymous THP memory and move it over the original: 100% large
 *           folios, at the cost of private text (RSS grows by its size) and
 *           of the file attribution (a perf map replaces it).
 *
 * Chunks follow the kernel's exec readahead: 64 KiB chunk starts rounded
 * down and ends rounded up, clamped to the mapping; 2 MiB-aligned interiors
 * are treated separately because only they can be PMD-mapped. */
#ifndef HZ_EXEC_H
#define HZ_EXEC_H

/* Every part of the module, for code outside src/exec/ that wants the
 * whole view (the exit report, the tests). Inside src/exec/ each file
 * includes the headers of what it uses. */
#include "advise.h"
#include "apply.h"
#include "dlopen.h"
#include "folios.h"
#include "mode.h"
#include "perfmap.h"
#include "prewarm.h"
#include "remap.h"
#include "report.h"
#include "segments.h"
#include "start.h"

#endif /* HZ_EXEC_H */
