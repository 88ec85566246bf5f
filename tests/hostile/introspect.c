/* malloc's own introspection and tuning (issue 25): malloc_trim gives
 * freed memory back. glibc serves these sizes with mmap, so a freed block
 * is gone at once. */
#include "hostile.h"

#include <malloc.h>

/* glibc serves each of these with mmap (above M_MMAP_THRESHOLD's 32 MiB
 * ceiling), and there are enough for a cache to hold hundreds of MiB. */
#define TRIM_BLOCKS 8
#define TRIM_BLOCK (64 * MiB)
/* The process's own pages (code, libraries, stacks) stay far below this. */
#define TRIM_RSS_MAX (64 * MiB)

/* Allocate, write and free TRIM_BLOCKS blocks, several rounds: reuse that
 * a cache of freed blocks keeps them for. */
static void churn_large_blocks(void)
{
	char *p[TRIM_BLOCKS];

	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < TRIM_BLOCKS; i++) {
			p[i] = malloc(TRIM_BLOCK);
			CHECK(p[i] != NULL, "malloc(%zu): %s", TRIM_BLOCK, strerror(errno));
			memset(p[i], i + 1, TRIM_BLOCK);
		}
		for (int i = 0; i < TRIM_BLOCKS; i++)
			free(p[i]);
	}
}

/* After malloc_trim(0), what the freed blocks held is no longer resident
 * (a program calls it before going idle, or to measure its own use). */
static int trim_after_free(void)
{
	long long before, after;

	churn_large_blocks();
	before = hostile_status_bytes("VmRSS:");
	malloc_trim(0);
	after = hostile_status_bytes("VmRSS:");
	CHECK(after >= 0, "VmRSS not in /proc/self/status");
	NOTE("VmRSS %lld MiB before malloc_trim, %lld MiB after", before >> 20, after >> 20);
	CHECK(after < (long long)TRIM_RSS_MAX,
	      "%lld MiB resident after freeing %d x %zu MiB and malloc_trim(0)", after >> 20,
	      TRIM_BLOCKS, TRIM_BLOCK >> 20);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "trim", trim_after_free },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
