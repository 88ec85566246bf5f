/* malloc's own introspection and tuning (issue 25): malloc_trim gives
 * freed memory back, mallinfo2 and mallinfo count what is allocated (the
 * figures profilers read), and mallopt(M_PERTURB) or MALLOC_PERTURB_ fill
 * what malloc hands out. glibc serves these sizes with mmap, so a freed
 * block is gone at once, a live one counts in hblks and hblkhd, and a
 * fresh one is filled with the perturb byte's complement. */
#include "hostile.h"

#include <malloc.h>
#include <unistd.h>

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
			p[i] = hostile_keep(malloc(TRIM_BLOCK));
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
 * The fields of mallinfo2 and of mallinfo, read through one macro. The
 * blocks pass through hostile_keep: clang drops a malloc whose block is
 * only written and freed. */
#define CHECK_COUNTS_LIVE_BLOCKS(info, type)                                             \
	do {                                                                             \
		struct type before = info(), live, after;                                \
		char *p[INFO_BLOCKS];                                                    \
                                                                                         \
		for (int i = 0; i < INFO_BLOCKS; i++) {                                  \
			p[i] = hostile_keep(malloc(INFO_BLOCK));                         \
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
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int mallinfo_counts(void)
{
	CHECK_COUNTS_LIVE_BLOCKS(mallinfo, mallinfo);
	return 0;
}
#pragma GCC diagnostic pop

#define PERTURB 0x5a
#define PERTURB_BLOCK (16 * MiB)

/* Whether the bytes at a few offsets across the block are all byte. */
static void check_sampled(const unsigned char *p, size_t len, unsigned char byte,
			  const char *what)
{
	const size_t offsets[] = { 0, 1, 4095, 4096, len / 2, len - 4097, len - 1 };

	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++)
		CHECK(p[offsets[i]] == byte, "%s: byte %#x at offset %zu, not %#x", what,
		      p[offsets[i]], offsets[i], byte);
}

/* With a perturb byte set: a fresh malloc, and one that follows a free of
 * the same size, read its complement; calloc still reads zero. */
static void check_perturbed(void)
{
	unsigned char *p = malloc(PERTURB_BLOCK), *z;

	CHECK(p != NULL, "malloc: %s", strerror(errno));
	/* hostile_keep: reading what malloc left is the point here. */
	check_sampled(hostile_keep(p), PERTURB_BLOCK, PERTURB ^ 0xff, "fresh malloc");
	memset(p, 7, PERTURB_BLOCK);
	free(p);
	p = malloc(PERTURB_BLOCK);
	CHECK(p != NULL, "malloc: %s", strerror(errno));
	check_sampled(hostile_keep(p), PERTURB_BLOCK, PERTURB ^ 0xff, "malloc after free");
	memset(p, 7, PERTURB_BLOCK);
	free(p);
	z = calloc(1, PERTURB_BLOCK);
	CHECK(z != NULL, "calloc: %s", strerror(errno));
	CHECK(hz_test_first_nonzero((const char *)z, PERTURB_BLOCK) == PERTURB_BLOCK,
	      "calloc with a perturb byte set is not zero");
	free(z);
}

static int perturb_mallopt(void)
{
	CHECK(mallopt(M_PERTURB, PERTURB) == 1, "mallopt(M_PERTURB) refused");
	check_perturbed();
	return 0;
}

/* glibc reads MALLOC_PERTURB_ once, as it starts: the case runs itself
 * again with it set. */
static int perturb_env(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	CHECK(setenv("MALLOC_PERTURB_", "90", 1) == 0, "setenv"); /* 90 is 0x5a */
	execl(self, self, "perturb_env_child", (char *)NULL);
	CHECK(0, "exec %s: %s", self, strerror(errno));
	return 1;
}

static int perturb_env_child(void)
{
	check_perturbed();
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "trim", trim_after_free },
		{ "mallinfo2", mallinfo2_counts },
		{ "mallinfo", mallinfo_counts },
		{ "perturb", perturb_mallopt },
		{ "perturb_env", perturb_env },
		{ "perturb_env_child", perturb_env_child },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
