/* /tmp/perf-PID.map lines for remapped text (perfmap.c). */
#ifndef HZ_EXEC_PERFMAP_H
#define HZ_EXEC_PERFMAP_H

#include <stdint.h>

#include "../range.h"

/* Append /tmp/perf-PID.map lines for the functions of the ELF file at path
 * (load bias base) inside the moved ranges; a range without any symbol gets
 * one line naming the file. */
int hz_exec_perfmap_write(const char *path, uintptr_t base,
			  const struct hz_range *moved, unsigned count);

#endif /* HZ_EXEC_PERFMAP_H */
