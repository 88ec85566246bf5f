/* A jemalloc arena backed by hugezero: huge pages and honest zeroing.
 *   cc jemalloc.c $(pkg-config --cflags --libs hugezero jemalloc) */
#include <stdio.h>
#include <string.h>

#include <jemalloc/jemalloc.h>
#include <hugezero/jemalloc.h>

int main(void)
{
	unsigned ind;
	int ret = hz_jemalloc_create_arena(&ind);

	if (ret != 0) {
		fprintf(stderr, "hz_jemalloc_create_arena: %s\n", strerror(ret));
		return 1;
	}
	/* No thread cache: it would hand this arena's objects to others. */
	int flags = (int)MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;

	for (int round = 0; round < 8; round++) {
		unsigned char *p = mallocx(64u << 20, flags | MALLOCX_ZERO);

		if (p == NULL)
			return 2;
		for (size_t i = 0; i < 64u << 20; i += 4096)
			if (p[i] != 0)
				return 3; /* MALLOCX_ZERO after reuse must be zero */
		memset(p, 0xa5, 64u << 20);
		dallocx(p, flags);
	}
	printf("arena %u: 8 rounds of 64 MiB, zeroed every time\n", ind);
	return 0;
}
