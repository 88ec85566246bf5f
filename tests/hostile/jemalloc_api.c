/* A program linked with jemalloc (built like tests/jemalloc's) that uses
 * jemalloc's extended API on blocks from plain malloc, as folly's
 * fbvector and fbstring do: every jemalloc call must work on every
 * pointer malloc returned. */
#include <jemalloc/jemalloc.h>

#include "hostile.h"

#define BLOCK (4 * MiB)

int main(void)
{
	char *p = malloc(BLOCK), *q;
	size_t usable, grown;

	CHECK(p != NULL, "malloc");
	hz_test_fill(p, BLOCK, 1);
	usable = sallocx(p, 0);
	CHECK(usable >= BLOCK, "sallocx says %zu bytes", usable);
	CHECK(malloc_usable_size(p) == usable, "malloc_usable_size differs from sallocx");
	CHECK(nallocx(BLOCK, 0) == usable, "nallocx differs from sallocx");
	/* Grow in place if jemalloc can; either way the size it reports is
	 * the block's real size, and the bytes stay. */
	grown = xallocx(p, 2 * BLOCK, 0, 0);
	CHECK(grown >= usable && grown == sallocx(p, 0), "xallocx says %zu, sallocx %zu", grown,
	      sallocx(p, 0));
	CHECK(hz_test_check(p, BLOCK, 1) == BLOCK, "xallocx changed the bytes");
	q = rallocx(p, 3 * BLOCK, 0);
	CHECK(q != NULL && hz_test_check(q, BLOCK, 1) == BLOCK, "rallocx");
	CHECK(sallocx(q, 0) >= 3 * BLOCK, "sallocx after rallocx");
	sdallocx(q, sallocx(q, 0), 0);
	p = malloc(BLOCK);
	CHECK(p != NULL, "malloc");
	CHECK(xallocx(p, BLOCK / 2, 0, 0) >= BLOCK / 2, "xallocx shrink");
	dallocx(p, 0);
	p = calloc(1, BLOCK);
	CHECK(p != NULL && hz_test_first_nonzero(p, BLOCK) == BLOCK, "calloc");
	dallocx(p, MALLOCX_TCACHE_NONE);
	return 0;
}
