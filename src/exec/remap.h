/* HUGEZERO_EXEC=remap for one segment: its text moved onto anonymous THP
 * (remap.c). */
#ifndef HZ_EXEC_REMAP_H
#define HZ_EXEC_REMAP_H

#include <stddef.h>

#include "../range.h"
#include "segments.h"

/* The smallest anonymous THP size that MADV_HUGEPAGE memory gets here,
 * from sysfs (64 KiB when an administrator enabled hugepages-64kB, else
 * 2 MiB), or 0 when anonymous THP is off. */
size_t hz_exec_anon_thp_unit(void);

/* Copy the unit-aligned interior of a segment into anonymous THP memory and
 * move it over the original (W^X all along). *moved gets the range moved
 * (empty when nothing was). Returns 0 or a negative errno value; -EPERM
 * for segments that must not move (vdso, hugezero's own code,
 * execute-only, not a private file mapping any more). */
int hz_exec_remap_segment(const struct hz_exec_segment *s, size_t unit,
			  struct hz_range *moved);

/* Test hook: called at each step of a remap with the staging range. */
enum hz_exec_remap_step { HZ_REMAP_STAGED, HZ_REMAP_SEALED, HZ_REMAP_MOVED };
extern void (*hz_exec_remap_hook)(enum hz_exec_remap_step step, void *addr, size_t len);

#endif /* HZ_EXEC_REMAP_H */
