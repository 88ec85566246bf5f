/* remap: move executable text onto anonymous THP memory.
 *
 * Steps for one segment, never leaving a mapping writable and executable:
 *   1. map anonymous read+write memory at an address congruent to the text
 *      modulo 2 MiB (so its huge pages line up with the destination and
 *      mremap can move whole PMDs), MADV_HUGEPAGE;
 *   2. copy the text's aligned interior into it;
 *   3. make it read+exec (it is never executable while writable);
 *   4. mremap(MREMAP_FIXED) it over the original: one system call replaces
 *      the file pages with the copy, at the same addresses, byte for byte.
 *
 * The system call of step 4 is made from libhugezero.so (inline in
 * hz_prim_move_mapping), and the object holding this code is never moved.
 * Callers further up the stack may return into moved text: they find the
 * same bytes at the same addresses. Another thread executing in the moved
 * range would fault on the brief gap and wait for mremap to finish (the
 * kernel holds mmap_lock for writing), then run the copy; still, start-up
 * remaps only while the process has one thread, and the dlopen path only
 * objects that call just loaded. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "../log.h"
#include "../prim/memory.h"
#include "../prim/os.h"
#include "../prim/prim.h"
#include "../stats.h"
#include "folios.h"
#include "remap.h"

void (*hz_exec_remap_hook)(enum hz_exec_remap_step step, void *addr, size_t len);

static void hook(enum hz_exec_remap_step step, void *addr, size_t len)
{
	if (hz_exec_remap_hook != NULL)
		hz_exec_remap_hook(step, addr, len);
}

size_t hz_exec_anon_thp_unit(void)
{
	struct hz_os_thp thp;

	/* Read now, not hz_os()'s copy from start-up: remap is rare (once per
	 * start or dlopen), and an administrator (or a test) may have enabled
	 * a size since. */
	hz_os_read_thp(&thp);
	/* 64 KiB is the unit the iTLB can coalesce (arm64 contpte, AMD); the
	 * smallest enabled size from there up decides the aligned interior. */
	for (size_t kib = 64; kib <= 2048; kib *= 2)
		if (hz_os_thp_size_on(&thp, kib << 10))
			return kib << 10;
	return 0;
}

/* Anonymous read+write memory of len bytes at an address congruent to
 * target modulo 2 MiB. */
static int map_staging(uintptr_t target, size_t len, void **out)
{
	return hz_prim_map_aligned(len, HZ_SZ_2M, target, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, HZ_TRIM_BEST_EFFORT, out);
}

static const char *refusal(const struct hz_exec_segment *s)
{
	if (s->vdso)
		return "the vDSO is the kernel's";
	if (s->mover)
		return "it holds hugezero's own remap code";
	if (!s->readable)
		return "execute-only text cannot be copied";
	if (hz_range_empty(s->vma) || !s->vma_private_file ||
	    s->vma_prot != (PROT_READ | PROT_EXEC))
		return "not a private read+exec file mapping (already remapped?)";
	return NULL;
}

int hz_exec_remap_segment(const struct hz_exec_segment *s, size_t unit,
			  struct hz_range *moved)
{
	const char *why = refusal(s);
	struct hz_range interior;
	void *stage;
	size_t len;
	int ret;

	*moved = (struct hz_range){ 0, 0 };
	if (why != NULL) {
		hz_debug("exec: remap of %s skipped: %s", hz_exec_segment_path(s), why);
		return -EPERM;
	}
	/* Only whole folios of the unit gain anything: the edges stay on the
	 * file, shared and 4 KiB. */
	interior = hz_range_align_in(hz_range_clamp(s->map, s->vma), unit);
	if (hz_range_empty(interior)) {
		hz_debug("exec: remap of %s skipped: no aligned %zu KiB chunk",
			 hz_exec_segment_path(s), unit >> 10);
		return 0;
	}
	len = hz_range_len(interior);
	ret = map_staging(interior.start, len, &stage);
	if (ret != 0)
		return ret;
	/* Without THP the copy would be 4 KiB pages, private: worse than the
	 * file. */
	ret = hz_prim_madvise(stage, len, MADV_HUGEPAGE);
	if (ret != 0)
		goto fail;
	memcpy(stage, (const void *)interior.start, len);
	/* arm64 needs the instruction cache to see the copy; no-op on x86. */
	__builtin___clear_cache((char *)stage, (char *)stage + len);
	hook(HZ_REMAP_STAGED, stage, len);
	ret = hz_prim_mprotect(stage, len, PROT_READ | PROT_EXEC);
	if (ret != 0) /* e.g. SELinux execmem, PaX MPROTECT */
		goto fail;
	hook(HZ_REMAP_SEALED, stage, len);
	ret = hz_prim_move_mapping(stage, len, (void *)interior.start);
	if (ret != 0)
		goto fail;
	hook(HZ_REMAP_MOVED, (void *)interior.start, len);
	/* Best effort: kernels without CONFIG_ANON_VMA_NAME refuse. */
	hz_prim_name_mapping((void *)interior.start, len, "hugezero-text");
	*moved = interior;
	return 0;
fail:
	hz_prim_munmap(stage, len);
	hz_debug("exec: remap of %s failed (error %d); the text stays on the file",
		 hz_exec_segment_path(s), -ret);
	return ret;
}
