/* The executable PT_LOAD segments of the loaded objects, matched with
 * /proc/self/maps (segments.c). */
#ifndef HZ_EXEC_SEGMENTS_H
#define HZ_EXEC_SEGMENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../range.h"

struct hz_exec_segment {
	struct hz_range map;   /* the PT_LOAD, rounded out to pages */
	uint64_t file_off;     /* file offset of map.start */
	uint64_t file_len;     /* bytes of the file in the segment (p_filesz) */
	uintptr_t base;        /* the object's load bias (dlpi_addr) */
	const char *name;      /* dlpi_name: "" for the main program */
	unsigned object;       /* index of the object in dl_iterate_phdr order */
	bool readable;         /* PF_R: not execute-only */
	bool main_program;
	bool vdso;
	bool mover;            /* holds hugezero's remap code: never moved */
	/* From /proc/self/maps (hz_exec_segments_match_maps): */
	struct hz_range vma;   /* the mapping holding map.start; empty if none */
	int vma_prot;
	bool vma_private_file; /* private mapping of a file */
};

/* Collect the executable segments of objects first_object.. (0: all) into
 * out[0..max). *count gets the number stored; *objects the number of
 * objects seen. Returns 0, or -E2BIG when some did not fit (those are left
 * out). */
int hz_exec_segments(struct hz_exec_segment *out, unsigned max,
		     unsigned first_object, unsigned *count, unsigned *objects);

/* Fill each segment's vma fields from one pass over /proc/self/maps. The
 * array is sorted by address on return. */
int hz_exec_segments_match_maps(struct hz_exec_segment *segs, unsigned count);

/* Objects loaded so far, and the loader's add/remove counters. */
void hz_exec_objects(unsigned *objects, uint64_t *adds, uint64_t *subs);

/* The file behind a segment for open(): the process's own executable
 * (hz_prim_self_exe_path) for the main program. */
const char *hz_exec_segment_path(const struct hz_exec_segment *s);

/* Whether the virtual address of a file mapping is congruent to its file
 * offset modulo align: page cache folios of that size can then be mapped
 * aligned (and PMD-mapped, for 2 MiB). */
static inline bool hz_exec_congruent(const struct hz_exec_segment *s, size_t align)
{
	return ((s->map.start - s->file_off) & (align - 1)) == 0;
}

#endif /* HZ_EXEC_SEGMENTS_H */
