/* malloc's introspection and tuning (introspect.c): the next library's
 * answer first, then the blocks'. glibc's are found even when the next
 * allocator is a program's own without them (jemalloc has no malloc_trim):
 * they then answer for glibc's idle heap, as they would without the
 * preload. */
#include <malloc.h>
#include <stdio.h>

#include "introspect.h"
#include "shim.h"

EXPORT int malloc_trim(size_t pad)
{
	hz_shim_ready();
	return hz_preload_malloc_trim(NEXT(int (*)(size_t), "malloc_trim"), pad);
}

/* mallinfo2 and mallinfo repeat one body on purpose: it differs only in
 * the struct type, which C cannot share short of a macro. */
EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 (*fn)(void) = NEXT(struct mallinfo2 (*)(void), "mallinfo2");
	struct mallinfo2 m = { 0 };

	if (fn != NULL)
		m = fn();
	hz_shim_ready();
	hz_preload_mallinfo2(&m);
	return m;
}

EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo (*fn)(void) = NEXT(struct mallinfo (*)(void), "mallinfo");
	struct mallinfo m = { 0 };

	if (fn != NULL)
		m = fn();
	hz_shim_ready();
	hz_preload_mallinfo(&m);
	return m;
}

EXPORT void malloc_stats(void)
{
	hz_shim_ready();
	hz_preload_malloc_stats(NEXT(void (*)(void), "malloc_stats"));
}

EXPORT int malloc_info(int options, FILE *fp)
{
	hz_shim_ready();
	return hz_preload_malloc_info(NEXT(int (*)(int, FILE *), "malloc_info"), options, fp);
}

/* Start-up first: it reads MALLOC_PERTURB_, which a later mallopt
 * overrides, as in glibc. */
EXPORT int mallopt(int param, int value)
{
	int (*fn)(int, int) = NEXT(int (*)(int, int), "mallopt");
	int ret;

	hz_shim_ready();
	ret = fn != NULL ? fn(param, value) : 0;
	hz_preload_mallopt(param, value, ret);
	return ret;
}
