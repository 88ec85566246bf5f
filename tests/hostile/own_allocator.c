/* A program linked with its own allocator (bump.c: the malloc family,
 * no malloc_usable_size): realloc across any size keeps the block's
 * bytes, and free takes every pointer realloc returned. */
#include "hostile.h"

int main(void)
{
	for (int round = 0; round < 4; round++) {
		size_t small = 1000 + (size_t)round * 4000, large = (4 + (size_t)round) * MiB;
		char *p = malloc(small), *q;

		CHECK(p != NULL, "malloc");
		hz_test_fill(p, small, 1);
		q = realloc(p, large); /* small to large */
		CHECK(q != NULL && hz_test_check(q, small, 1) == small,
		      "realloc to %zu lost the bytes", large);
		hz_test_fill(q, large, 2);
		p = realloc(q, small); /* and back */
		CHECK(p != NULL && hz_test_check(p, small, 2) == small,
		      "realloc to %zu lost the bytes", small);
		q = realloc(p, 2 * large);
		CHECK(q != NULL && hz_test_check(q, small, 2) == small, "realloc grow");
		free(q);
	}
	puts("realloc kept every byte");
	return 0;
}
