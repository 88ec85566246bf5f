/* malloc's own introspection and tuning, for the blocks too (issue 25):
 * a program that calls malloc_trim gets what glibc would give it if glibc
 * had served its large requests itself. glibc serves them with mmap, so
 * each answer is what glibc does for its mmapped chunks, the nearest
 * thing to a block: they are freed at once (malloc_trim gives back the
 * cache that glibc would not have kept). */
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
