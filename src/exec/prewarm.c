/* Prewarm: read a cold file's text into the page cache as 2 MiB folios.
 *
 * Measured on Linux 6.18 / ext4 (issue 6): a fault in a mapping with
 * MADV_HUGEPAGE reads the surrounding PMD-aligned 2 MiB of the file as one
 * folio (mm/filemap.c, do_sync_mmap_readahead: VM_HUGEPAGE), where none of
 * it is cached yet. MADV_RANDOM keeps that window at one PMD instead of two,
 * so one cached 4 KiB page (the ELF header the loader read) spoils one 2 MiB
 * window, not two, and MADV_POPULATE_READ takes every fault in one call.
 * The mapping is unmapped at once: the folios stay in the page cache, where
 * the real mapping finds them and maps them with PMDs when its address is
 * congruent to the file offset modulo 2 MiB. Cost measured: 70-130 ms per
 * 100 MB of cold text, mostly the read itself. */
#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "../log.h"
#include "../prim/prim.h"
#include "../stats.h"
#include "folios.h"
#include "prewarm.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static int mincore_bytes(int fd, uint64_t off, uint64_t len, uint64_t *cached)
{
	unsigned char vec[1024];
	uint64_t start = hz_align_down(off, HZ_SZ_4K);
	uint64_t end = hz_align_up(off + len, HZ_SZ_4K);
	uint64_t sum = 0;
	void *map;
	int ret;

	/* mincore on a file mapping reports page cache residency, also for
	 * pages this process never touched (for files it owns or could
	 * write; others report only their mapped pages: they look cold). */
	ret = hz_prim_mmap(NULL, end - start, PROT_READ, MAP_PRIVATE, fd,
			   (off_t)start, &map);
	if (ret != 0)
		return ret;
	for (uint64_t done = 0; done < end - start; done += sizeof(vec) * HZ_SZ_4K) {
		uint64_t chunk = end - start - done;

		if (chunk > sizeof(vec) * HZ_SZ_4K)
			chunk = sizeof(vec) * HZ_SZ_4K;
		ret = hz_prim_mincore((char *)map + done, chunk, vec);
		if (ret != 0)
			break;
		for (uint64_t i = 0; i < chunk / HZ_SZ_4K; i++)
			sum += (uint64_t)(vec[i] & 1) * HZ_SZ_4K;
	}
	hz_prim_munmap(map, end - start);
	*cached = sum;
	return ret;
}

int hz_exec_cached_bytes(int fd, uint64_t off, uint64_t len, uint64_t *cached)
{
	static int have_cachestat = 1;
	int ret;

	if (__atomic_load_n(&have_cachestat, __ATOMIC_RELAXED)) {
		ret = hz_prim_cachestat(fd, off, len, cached);
		if (ret != -ENOSYS)
			return ret;
		/* Linux before 6.5 (or a seccomp filter that does not know
		 * it): mincore from now on. */
		__atomic_store_n(&have_cachestat, 0, __ATOMIC_RELAXED);
	}
	return mincore_bytes(fd, off, len, cached);
}

/* Populate, through map (a mapping of the whole file from offset 0, with
 * hugepage and random advice), the 2 MiB file windows of r that have no
 * page cached at all: a window holding even one cached page cannot become
 * one folio (the readahead falls back to 4 KiB pages for all of it). */
static int populate_cold_windows(int fd, char *map, uint64_t file_size,
				 struct hz_range r, uint64_t *populated)
{
	struct hz_range run = { 0, 0 };
	int ret = 0;

	for (uint64_t w = hz_align_down(r.start, HZ_SZ_2M); w < r.end && ret == 0;
	     w += HZ_SZ_2M) {
		struct hz_range win = hz_range_clamp(hz_range_make(w, HZ_SZ_2M),
						     (struct hz_range){ 0, file_size });
		uint64_t cached = 1;
		bool cold = hz_exec_cached_bytes(fd, win.start, hz_range_len(win), &cached) == 0 &&
			    cached == 0;

		if (cold && hz_range_empty(run))
			run = win;
		else if (cold)
			run.end = win.end;
		if ((!cold || w + HZ_SZ_2M >= r.end) && !hz_range_empty(run)) {
			/* One call per run of cold windows; only the range's
			 * own pages are touched, each fault reads its whole
			 * window. */
			struct hz_range part = hz_range_clamp(run, r);
			uintptr_t from = hz_align_down(part.start, HZ_SZ_4K);
			uintptr_t to = hz_align_up(part.end, HZ_SZ_4K);

			ret = hz_prim_madvise(map + from, to - from, MADV_POPULATE_READ);
			if (ret == 0)
				*populated += hz_range_len(part);
			run = (struct hz_range){ 0, 0 };
		}
	}
	return ret;
}

int hz_exec_map_for_prewarm(int fd, uint64_t size, void **map)
{
	int ret = hz_prim_mmap(NULL, hz_align_up(size, HZ_SZ_4K), PROT_READ,
			       MAP_PRIVATE, fd, 0, map);

	if (ret != 0)
		return ret;
	ret = hz_prim_madvise(*map, hz_align_up(size, HZ_SZ_4K), MADV_HUGEPAGE);
	if (ret == 0)
		ret = hz_prim_madvise(*map, hz_align_up(size, HZ_SZ_4K), MADV_RANDOM);
	if (ret != 0)
		hz_prim_munmap(*map, hz_align_up(size, HZ_SZ_4K));
	return ret;
}

int hz_exec_prewarm_range(int fd, uint64_t off, uint64_t len, uint64_t *populated)
{
	uint64_t size = 0;
	void *map;
	int ret;

	*populated = 0;
	ret = hz_prim_file_size(fd, &size);
	if (ret != 0 || off >= size)
		return ret;
	if (len > size - off)
		len = size - off;
	ret = hz_exec_map_for_prewarm(fd, size, &map);
	if (ret != 0)
		return ret;
	ret = populate_cold_windows(fd, map, size, hz_range_make(off, len), populated);
	hz_prim_munmap(map, hz_align_up(size, HZ_SZ_4K));
	return ret;
}

/* The executable PT_LOADs' file ranges of the ELF image in map. Returns
 * how many it stored (at most max), or -ENOEXEC for anything but a 64-bit
 * ELF file with sane program headers. */
static int exec_ranges(const unsigned char *map, uint64_t size,
		       struct hz_range *out, unsigned max)
{
	const Elf64_Ehdr *eh = (const void *)map;
	unsigned n = 0;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > size ||
	    (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > size - eh->e_phoff)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh->e_phnum && n < max; i++) {
		const Elf64_Phdr *ph = (const void *)(map + eh->e_phoff + i * sizeof(*ph));

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) ||
		    ph->p_offset >= size || ph->p_filesz == 0)
			continue;
		out[n].start = ph->p_offset;
		out[n].end = ph->p_filesz > size - ph->p_offset ? size
								: ph->p_offset + ph->p_filesz;
		n++;
	}
	return (int)n;
}

static int prewarm_mapped(int fd, void *map, uint64_t size, bool force,
			  struct hz_prewarm_result *res)
{
	struct hz_range ranges[8];
	int n, ret = 0;

	/* The header is read through this mapping, so even the loader's
	 * first page lands in a 2 MiB folio rather than in a 4 KiB one that
	 * would spoil the first window. */
	n = exec_ranges(map, size, ranges, 8);
	if (n < 0) {
		ranges[0] = (struct hz_range){ 0, size };
		n = 1;
	} else {
		res->elf = true;
	}
	for (int i = 0; i < n && ret == 0; i++) {
		uint64_t len = hz_range_len(ranges[i]), cached = 0, done = 0;

		res->text += len;
		if (hz_exec_cached_bytes(fd, ranges[i].start, len, &cached) == 0)
			res->cached_before += cached;
		if (force) {
			ret = hz_prim_madvise((char *)map + hz_align_down(ranges[i].start, HZ_SZ_4K),
					      hz_align_up(ranges[i].end, HZ_SZ_4K) -
						      hz_align_down(ranges[i].start, HZ_SZ_4K),
					      MADV_POPULATE_READ);
			done = ret == 0 ? len - cached : 0;
		} else {
			ret = populate_cold_windows(fd, map, size, ranges[i], &done);
		}
		(void)done;
	}
	return ret;
}

int hz_exec_prewarm_file(const char *path, bool force, struct hz_prewarm_result *res)
{
	uint64_t start = hz_prim_now_ns(), size = 0, cached = 0, after = 0;
	void *map;
	int fd, ret;

	memset(res, 0, sizeof(*res));
	fd = hz_prim_open_read(path);
	if (fd < 0)
		return fd;
	ret = hz_prim_file_size(fd, &size);
	if (ret == 0 && size == 0)
		ret = -ENOEXEC;
	if (ret != 0)
		goto out;
	if (hz_exec_cached_bytes(fd, 0, size, &cached) != 0)
		cached = 0;
	res->file_size = size;
	res->file_cached_before = cached;
	/* Mostly cached already: nothing to gain, and no page to touch. */
	if (!force && cached * 100 >= size * HZ_EXEC_COLD_PERCENT)
		goto out;
	ret = hz_exec_map_for_prewarm(fd, size, &map);
	if (ret != 0)
		goto out;
	ret = prewarm_mapped(fd, map, size, force, res);
	hz_prim_munmap(map, hz_align_up(size, HZ_SZ_4K));
	/* What this call read into the cache, headers and the edges of the
	 * 2 MiB windows included: the I/O it cost. */
	res->populated = 0;
	if (hz_exec_cached_bytes(fd, 0, size, &after) == 0 && after > cached)
		res->populated = after - cached;
out:
	hz_prim_close(fd);
	res->ns = hz_prim_now_ns() - start;
	if (res->populated)
		hz_debug("exec: prewarmed %s: %llu KiB of text in %llu us", path,
			 (unsigned long long)(res->populated >> 10),
			 (unsigned long long)(res->ns / 1000));
	return ret;
}
