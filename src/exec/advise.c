/* advise: ask the kernel for large folios without changing what backs the
 * text. See exec.h for what works on which kernel. */
#include <errno.h>
#include <sys/mman.h>

#include "../log.h"
#include "../prim/prim.h"
#include "../stats.h"
#include "folios.h"
#include "advise.h"
#include "prewarm.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static int collapse_state = -1;

int hz_exec_collapse_state(void)
{
	return __atomic_load_n(&collapse_state, __ATOMIC_RELAXED);
}

/* MADV_COLLAPSE of file text needs CONFIG_READ_ONLY_THP_FOR_FS; without it
 * (Debian's 6.18 kernel here) it fails with EINVAL at once. The first call
 * is the probe; EINVAL turns it off for the process. Other errors (EAGAIN,
 * ENOMEM: no free 2 MiB page right now) say nothing about support. */
static void collapse(const struct hz_exec_segment *s)
{
	struct hz_range interior = hz_range_align_in(s->map, HZ_SZ_2M);
	int state = hz_exec_collapse_state();
	int ret;

	if (state == 0 || hz_range_empty(interior))
		return;
	ret = hz_prim_madvise((void *)interior.start, hz_range_len(interior),
			      MADV_COLLAPSE);
	if (ret == 0) {
		hz_exec_stat_add(collapsed_bytes, hz_range_len(interior));
		if (state < 0)
			hz_info("exec: MADV_COLLAPSE works on file text here: used");
		state = 1;
	} else if (ret == -EINVAL && state < 0) {
		hz_debug("exec: MADV_COLLAPSE refused for file text (EINVAL: no "
			 "CONFIG_READ_ONLY_THP_FOR_FS); not tried again");
		state = 0;
	}
	__atomic_store_n(&collapse_state, state, __ATOMIC_RELAXED);
}

/* Cold 2 MiB windows of the segment are read as 2 MiB folios before the
 * program faults them in 4 KiB pieces. Windows inside the text map with
 * PMDs (address congruent to the offset modulo 2 MiB); the edge windows,
 * shared with the neighbouring segments, map as 64 KiB-aligned runs of
 * PTEs. Segments under 2 MiB are left out: reading whole 2 MiB windows for
 * them would read more around the text than the text itself.
 *
 * At start-up much of the text is usually cached already, in 4 KiB
 * folios: the loader's relocation fault on a library's data page reads
 * read_ahead_kb around it (8 MiB on this project's virtio disks), and the
 * first instruction fetch of the main program reads that much text. Those
 * windows stay small; hugezero-prewarm, run before the program, avoids it. */
static void prewarm(const struct hz_exec_segment *s, int fd)
{
	struct hz_range file = hz_range_make(s->file_off, s->file_len);
	uint64_t start, populated = 0;
	int ret;

	if (fd < 0 || hz_range_len(file) < HZ_SZ_2M)
		return;
	start = hz_prim_now_ns();
	ret = hz_exec_prewarm_range(fd, file.start, hz_range_len(file), &populated);
	if (ret != 0) {
		hz_debug("exec: prewarm of %s failed (error %d)", hz_exec_segment_path(s), -ret);
		return;
	}
	if (populated) {
		hz_exec_stat_add(prewarmed_bytes, populated);
		hz_exec_stat_add(prewarm_ns, hz_prim_now_ns() - start);
	}
}

void hz_exec_advise_segment(const struct hz_exec_segment *s, int fd)
{
	size_t len = hz_range_len(s->map);
	int ret;

	if (len < HZ_SZ_64K) {
		hz_debug("exec: %s: %zu KiB of text, less than one 64 KiB chunk: left alone",
			 hz_exec_segment_path(s), len >> 10);
		return;
	}
	/* A file folio maps large only where virtual address and file offset
	 * agree modulo its size; elsewhere large folios would cost readahead
	 * and reclaim granularity and give the TLB nothing. */
	if (!hz_exec_congruent(s, HZ_SZ_64K)) {
		hz_exec_stat_add(unaligned_bytes, len);
		hz_debug("exec: %s: address not congruent to file offset modulo 64 KiB: left alone",
			 hz_exec_segment_path(s));
		return;
	}
	prewarm(s, fd);
	/* The whole mapping: a sub-range would split the VMA. */
	ret = hz_prim_madvise((void *)s->map.start, len, MADV_HUGEPAGE);
	if (ret != 0) {
		hz_debug("exec: MADV_HUGEPAGE on %s failed (error %d)",
			 hz_exec_segment_path(s), -ret);
		return;
	}
	hz_exec_stat_add(advised_bytes, len);
	if (hz_exec_congruent(s, HZ_SZ_2M))
		collapse(s);
}
