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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../range.h"
#include "../stats.h"
#include "folios.h"

/* ---- entry points for the preload (src/preload) ---- */

/* Exported from libhugezero.so like the hz_preload_* functions: the shim
 * (libhugezero-preload.so) calls hz_exec_dlopen, and the tests' helper
 * programs call both. Not a public API. */
#define HZ_EXEC_API __attribute__((visibility("default")))

/* Apply HUGEZERO_EXEC to every executable PT_LOAD segment of the process.
 * Call once from the preload's start-up, before the program starts threads
 * (remap refuses to run once there are several). Later calls do nothing.
 * Never fails: what cannot be done is skipped, with the reason at
 * HUGEZERO_VERBOSE=2. */
HZ_EXEC_API void hz_exec_start(void);

/* dlopen through hugezero: when the library is mostly not in the page
 * cache, prewarm its text before the real dlopen maps it, then apply the
 * mode to the segments of every object the call loaded. caller is the
 * return address of the program's dlopen call (the shim passes
 * __builtin_return_address(0)): the real dlopen, called from here, would
 * otherwise search hugezero's DT_RUNPATH instead of the caller's, so bare
 * names found through the caller's directories are passed on as paths.
 * NULL is fine for paths. Returns what real_dlopen returns; errno and
 * dlerror() are the real call's. */
HZ_EXEC_API void *hz_exec_dlopen(void *(*real_dlopen)(const char *, int),
				 const char *file, int flags, const void *caller);

/* ---- options (HUGEZERO_EXEC, HUGEZERO_EXEC_PERFMAP) ---- */

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

/* ---- segments (segments.c) ---- */

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

/* ---- advise (advise.c) ---- */

/* Advise one segment: prewarm when its file range is mostly uncached,
 * MADV_HUGEPAGE when its alignment allows large folios, MADV_COLLAPSE on
 * the 2 MiB interior where the kernel supports it. fd is the object's file
 * (or -1 when it could not be opened: no prewarm). */
void hz_exec_advise_segment(const struct hz_exec_segment *s, int fd);

/* MADV_COLLAPSE on file text: 1 works, 0 fails with EINVAL (no
 * CONFIG_READ_ONLY_THP_FOR_FS), -1 not probed yet. */
int hz_exec_collapse_state(void);

/* ---- prewarm (prewarm.c) ---- */

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

/* Prewarm the cold windows of the executable segments of the ELF file at
 * path (of the whole file if it is not ELF); with force, read all of them
 * through the advised mapping, cached or not. */
int hz_exec_prewarm_file(const char *path, bool force, struct hz_prewarm_result *res);

/* ---- remap (remap.c) ---- */

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

/* ---- perf map (perfmap.c) ---- */

/* Append /tmp/perf-PID.map lines for the functions of the ELF file at path
 * (load bias base) inside the moved ranges; a range without any symbol gets
 * one line naming the file. */
int hz_exec_perfmap_write(const char *path, uintptr_t base,
			  const struct hz_range *moved, unsigned count);

/* ---- applying a mode (exec.c) ---- */

/* Apply mode to objects first_object.. . remap_ok false turns remap into
 * advise (with why_not logged). Serialised internally. */
void hz_exec_apply(enum hz_exec_mode mode, unsigned first_object, bool remap_ok,
		   const char *why_not);

/* A copy of the counters (struct hz_exec_stats, stats.def). */
void hz_exec_stats_get(struct hz_exec_stats *out);

/* The text's folios at start-up, measured when stats were asked for:
 * returns 0 and fills *out, or -ENODATA when they were not measured. */
int hz_exec_folios_at_start(struct hz_folio_counts *out);

#endif /* HZ_EXEC_H */
