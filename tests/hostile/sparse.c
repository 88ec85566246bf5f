/* Sparse use of a large anonymous mapping or malloc block (hash tables,
 * sparse arrays, reserved-then-grown buffers): one byte written every
 * 4 MiB of 1 GiB. The resident memory it costs may be at most twice what
 * it costs under glibc (256 pages there, with THP in its default
 * "madvise" mode). */
#include "hostile.h"

#include <sys/mman.h>

#define LEN GiB
#define STRIDE (4 * MiB)

static void touch(char *p)
{
	for (size_t off = 0; off < LEN; off += STRIDE)
		p[off] = 1;
}

static int compare(const char *name, uint64_t rss)
{
	long long glibc = hostile_baseline(name);

	if (glibc < 0) {
		hostile_print_baseline(name, (long long)rss);
		return 0;
	}
	CHECK(rss <= 2 * (uint64_t)glibc, "resident %llu KiB, glibc's %lld KiB",
	      (unsigned long long)rss >> 10, glibc >> 10);
	return 0;
}

static int anonymous_mmap(void)
{
	char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t rss;

	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	touch(p);
	rss = hostile_smaps_sum(p, LEN, "Rss:");
	CHECK(munmap(p, LEN) == 0, "munmap");
	return compare("mmap_rss", rss);
}

static int malloc_block(void)
{
	char *p = malloc(LEN);
	uint64_t rss;

	CHECK(p != NULL, "malloc");
	touch(p);
	rss = hostile_smaps_sum(p, LEN, "Rss:");
	free(p);
	return compare("malloc_rss", rss);
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "mmap", anonymous_mmap },
		{ "malloc", malloc_block },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
