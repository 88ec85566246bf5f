/* A program that brings its own allocator (jemalloc, linked like Debian's
 * redis-server): under the preload its small requests must still reach
 * jemalloc through RTLD_NEXT untouched, and its large ones come from a
 * jemalloc arena with hugezero's extent hooks, so every pointer stays
 * jemalloc's. */
#include <jemalloc/jemalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	enum { N = 64 };
	unsigned char *small[N], *large[4];
	size_t allocated = 0, len = sizeof(allocated);

	for (int i = 0; i < N; i++) {
		small[i] = malloc(16u << (i % 12));
		if (!small[i])
			return 1;
		memset(small[i], i, 16u << (i % 12));
	}
	for (int i = 0; i < 4; i++) {
		large[i] = calloc(1, (size_t)(3 + i) << 20);
		if (!large[i] || large[i][12345] != 0)
			return 2;
		memset(large[i], 0x77, (size_t)(3 + i) << 20);
	}
	/* The small allocations went through jemalloc: it counts them. */
	if (mallctl("stats.allocated", &allocated, &len, NULL, 0) != 0 ||
	    allocated < 16 * 4096)
		return 5;
	for (int i = 0; i < 4; i++) {
		large[i] = realloc(large[i], (size_t)(9 + i) << 20);
		if (!large[i] || large[i][100] != 0x77)
			return 3;
	}
	for (int i = 0; i < N; i++) {
		small[i] = realloc(small[i], 32u << (i % 12));
		if (!small[i] || small[i][0] != (unsigned char)i)
			return 4;
		free(small[i]);
	}
	for (int i = 0; i < 4; i++)
		free(large[i]);
	puts("ok");
	return 0;
}
