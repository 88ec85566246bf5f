/* malloc's own introspection and tuning (issue 25): malloc_trim gives
 * freed memory back, mallinfo2 and mallinfo count what is allocated (the
 * figures profilers read). glibc serves these sizes with mmap, so a freed
 * block is gone at once and a live one counts in hblks and hblkhd. */
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

#define INFO_BLOCKS 4
#define INFO_BLOCK (32 * MiB)

/* Live large blocks count in hblks and hblkhd, and leave them when freed.
 * The fields of mallinfo2 and of mallinfo, read through one macro. */
#define CHECK_COUNTS_LIVE_BLOCKS(info, type)                                             \
	do {                                                                             \
		struct type before = info(), live, after;                                \
		char *p[INFO_BLOCKS];                                                    \
                                                                                         \
		for (int i = 0; i < INFO_BLOCKS; i++) {                                  \
			p[i] = malloc(INFO_BLOCK);                                       \
			CHECK(p[i] != NULL, "malloc: %s", strerror(errno));              \
			memset(p[i], 1, INFO_BLOCK);                                     \
		}                                                                        \
		live = info();                                                           \
		for (int i = 0; i < INFO_BLOCKS; i++)                                    \
			free(p[i]);                                                      \
		after = info();                                                          \
		CHECK((size_t)(live.hblks - before.hblks) >= INFO_BLOCKS,                \
		      #info ": hblks %zu -> %zu with %d large blocks live",              \
		      (size_t)before.hblks, (size_t)live.hblks, INFO_BLOCKS);            \
		CHECK((size_t)(live.hblkhd - before.hblkhd) >= INFO_BLOCKS * INFO_BLOCK, \
		      #info ": hblkhd %zu -> %zu MiB with %zu MiB in large blocks live", \
		      (size_t)before.hblkhd >> 20, (size_t)live.hblkhd >> 20,            \
		      INFO_BLOCKS * INFO_BLOCK >> 20);                                   \
		CHECK(after.hblks == before.hblks && after.hblkhd == before.hblkhd,      \
		      #info ": after free hblks %zu, hblkhd %zu; before %zu, %zu",       \
		      (size_t)after.hblks, (size_t)after.hblkhd, (size_t)before.hblks,   \
		      (size_t)before.hblkhd);                                            \
	} while (0)

static int mallinfo2_counts(void)
{
	CHECK_COUNTS_LIVE_BLOCKS(mallinfo2, mallinfo2);
	return 0;
}

/* mallinfo is deprecated (its int fields overflow at 2 GiB), and still
 * called by older profilers; these figures fit. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int mallinfo_counts(void)
{
	CHECK_COUNTS_LIVE_BLOCKS(mallinfo, mallinfo);
	return 0;
}
#pragma GCC diagnostic warning "-Wdeprecated-declarations"

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "trim", trim_after_free },
		{ "mallinfo2", mallinfo2_counts },
		{ "mallinfo", mallinfo_counts },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
