/* malloc's own introspection and tuning, for the blocks too (issue 25):
 * a program that calls malloc_trim, reads mallinfo2 (profilers, memory
 * monitors) or sets M_PERTURB (test suites) gets what glibc would give it
 * if glibc had served its large requests itself. glibc serves them with
 * mmap, so each answer is what glibc does for its mmapped chunks, the
 * nearest thing to a block: they are counted in hblks and hblkhd, handed
 * out perturbed, and freed at once (malloc_trim gives back the cache that
 * glibc would not have kept). */
#include "introspect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../blocks.h"
#include "../recycle.h"
#include "heap.h"

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

/* ---- the perturb byte ----
 * glibc fills what malloc hands out with the byte's complement (never
 * calloc's), mmapped chunks included, and freed memory it keeps with the
 * byte itself, but not a freed mmapped chunk, which it unmaps. A freed
 * block is not filled either: it may be one the program made read-only
 * (foreign, blocks.h), which the write would fault on; and the cache
 * zeroes or releases it soon. Set while glibc's is set: an int, nonzero
 * when filling, of which memset uses the low byte. */
static int perturb;

HZ_PRIVATE_API void hz_preload_mallopt(int param, int value, int ret)
{
	hz_heap_program_tunes(param);
	if (param == M_PERTURB && ret != 0)
		__atomic_store_n(&perturb, value, __ATOMIC_RELAXED);
}

/* A value of the tunable glibc.malloc.perturb: glibc takes a number in
 * C's notation (decimal, 0x hex, 0 octal) and ignores one outside
 * [0, 255]. */
static void perturb_from(const char *text)
{
	unsigned long v;

	if (text == NULL || *text == '\0')
		return;
	v = strtoul(text, NULL, 0);
	if (v <= 0xff)
		__atomic_store_n(&perturb, (int)v, __ATOMIC_RELAXED);
}

/* glibc.malloc.perturb=N in GLIBC_TUNABLES (name=value pairs separated by
 * colons), or NULL. */
static const char *tunable_value(const char *tunables)
{
	static const char name[] = "glibc.malloc.perturb=";

	for (const char *s = tunables; s != NULL && *s != '\0';) {
		if (strncmp(s, name, sizeof(name) - 1) == 0)
			return s + sizeof(name) - 1;
		s = strchr(s, ':');
		if (s != NULL)
			s++;
	}
	return NULL;
}

/* glibc reads both as it starts, ignoring them in a setuid program
 * (SXID_IGNORE), as secure_getenv does. It applies them in the order of
 * the environment; here the tunable wins when both are set. */
void hz_preload_perturb_start(void)
{
	perturb_from(secure_getenv("MALLOC_PERTURB_"));
	perturb_from(tunable_value(secure_getenv("GLIBC_TUNABLES")));
}

void hz_preload_perturb(void *p, size_t size)
{
	int byte = __atomic_load_n(&perturb, __ATOMIC_RELAXED);

	if (__builtin_expect(byte != 0, 0))
		memset(p, byte ^ 0xff, size);
}
