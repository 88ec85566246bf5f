/* Reading cold file windows into the page cache as 2 MiB folios
 * (prewarm.c), before the text mapping faults them in 4 KiB pieces. */
#ifndef HZ_EXEC_PREWARM_H
#define HZ_EXEC_PREWARM_H

#include <stdbool.h>
#include <stdint.h>

/* hz_exec_prewarm_file leaves a file alone when at least this share of it
 * is cached already: then most 2 MiB windows hold cached 4 KiB pages, which
 * keep them out of 2 MiB folios, and looking closer costs more than it
 * finds. */
#define HZ_EXEC_COLD_PERCENT 50

struct hz_prewarm_result {
	uint64_t file_size;
	uint64_t file_cached_before; /* bytes of the file cached beforehand */
	uint64_t text;          /* bytes of the file's executable segments (0:
				 * the file was mostly cached, not looked at) */
	uint64_t cached_before; /* ... of them cached once the header was read */
	uint64_t populated;     /* bytes this call brought into the page cache */
	uint64_t ns;
	bool elf;               /* false: not ELF, the whole file counted */
};

/* Bytes of [off, off + len) of fd in the page cache: cachestat(2), else
 * mincore(2) on a temporary mapping. */
int hz_exec_cached_bytes(int fd, uint64_t off, uint64_t len, uint64_t *cached);

/* Read the 2 MiB file windows of [off, off + len) that are not cached at
 * all into the page cache as 2 MiB folios: a throwaway mapping with
 * MADV_HUGEPAGE + MADV_RANDOM + MADV_POPULATE_READ, unmapped again. Windows
 * with a cached page stay as they are. *populated gets the bytes of the
 * range read that way. */
int hz_exec_prewarm_range(int fd, uint64_t off, uint64_t len, uint64_t *populated);

/* A read-only mapping of fd from offset 0 to size, advised for 2 MiB
 * reads (MADV_HUGEPAGE + MADV_RANDOM): its first touch of a cold window
 * reads the window into one 2 MiB folio. Unmap hz_align_up(size, 4 KiB). */
int hz_exec_map_for_prewarm(int fd, uint64_t size, void **map);

/* Prewarm the cold windows of the executable segments of the ELF file at
 * path (of the whole file if it is not ELF); with force, read all of them
 * through the advised mapping, cached or not. */
int hz_exec_prewarm_file(const char *path, bool force, struct hz_prewarm_result *res);

#endif /* HZ_EXEC_PREWARM_H */
