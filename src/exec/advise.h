/* HUGEZERO_EXEC=advise for one segment (advise.c). */
#ifndef HZ_EXEC_ADVISE_H
#define HZ_EXEC_ADVISE_H

#include "segments.h"

/* Advise one segment: prewarm when its file range is mostly uncached,
 * MADV_HUGEPAGE when its alignment allows large folios, MADV_COLLAPSE on
 * the 2 MiB interior where the kernel supports it. fd is the object's file
 * (or -1 when it could not be opened: no prewarm). */
void hz_exec_advise_segment(const struct hz_exec_segment *s, int fd);

/* MADV_COLLAPSE on file text: 1 works, 0 fails with EINVAL (no
 * CONFIG_READ_ONLY_THP_FOR_FS), -1 not probed yet. */
int hz_exec_collapse_state(void);

#endif /* HZ_EXEC_ADVISE_H */
