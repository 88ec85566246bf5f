/* malloc's own introspection and tuning, for the blocks too (issue 25):
 * a program that calls malloc_trim or reads mallinfo2 (profilers, memory
 * monitors) gets what glibc would give it if glibc had served its large
 * requests itself. glibc serves them with mmap, so each answer is what
 * glibc does for its mmapped chunks, the nearest thing to a block: they
 * are counted in hblks and hblkhd, and freed at once (malloc_trim gives
 * back the cache that glibc would not have kept). */
#include "introspect.h"

#include <errno.h>

#include "../blocks.h"
#include "../recycle.h"

HZ_PRIVATE_API int hz_preload_malloc_trim(int (*real)(size_t), size_t pad)
{
	int released = real != NULL ? real(pad) : 0, saved = errno;

	/* pad is about the heap's top, which is the next allocator's: blocks
	 * have no top to keep. Regions without blocks hold address space,
	 * not memory: they go too (a program trims to look small), but do
	 * not count as memory given back. */
	if (__atomic_load_n(&hz_preload_active, __ATOMIC_ACQUIRE)) {
		if (hz_recycle_trim() > 0)
			released = 1;
		hz_blocks_release_unused();
	}
	errno = saved;
	return released != 0;
}

/* glibc counts an mmapped chunk in hblks (one) and hblkhd (its bytes)
 * only: arena, uordblks and fordblks are its heaps', and a program adds
 * hblkhd to uordblks for the total in use. A block is counted the same,
 * with its usable bytes. Cached blocks are not counted: glibc keeps no
 * freed mmapped chunk, and fordblks (free bytes inside arena) has no
 * place for memory outside its heaps. */
HZ_PRIVATE_API void hz_preload_mallinfo2(struct mallinfo2 *m)
{
	size_t blocks, bytes;

	hz_blocks_live_totals(&blocks, &bytes);
	m->hblks += blocks;
	m->hblkhd += bytes;
}

/* glibc's mallinfo is its mallinfo2 with each field converted to int:
 * the sum wraps the same way when added in unsigned int, then converted
 * (GCC and Clang convert modulo 2^32). */
HZ_PRIVATE_API void hz_preload_mallinfo(struct mallinfo *m)
{
	size_t blocks, bytes;

	hz_blocks_live_totals(&blocks, &bytes);
	m->hblks = (int)((unsigned int)m->hblks + (unsigned int)blocks);
	m->hblkhd = (int)((unsigned int)m->hblkhd + (unsigned int)bytes);
}
