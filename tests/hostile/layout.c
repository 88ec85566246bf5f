/* Where large blocks lie, as a program or an attacker sees it: how much
 * their addresses vary from one run to the next (address-space layout
 * randomisation), and how many mappings a program that frees every other
 * block is left with (vm.max_map_count counts them). Both against what
 * glibc's mmap'ed chunks give. */
#include "hostile.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* 200 fresh processes per size. A bit counts as varying when its rarer
 * value comes in a tenth of them or more: a bit the kernel randomises
 * fails that with probability below 10^-20, while bit 40, which varies
 * only by a borrow out of bit 39 (1% of glibc's runs, 0.5% of hugezero's),
 * is not counted on either side by chance. */
#define RUNS 200
#define RARE_MIN (RUNS / 10)
/* Huge pages need a block on a 2 MiB boundary: its 21 low bits never vary
 * under the preload (glibc's chunk is a page plus 16 bytes in). */
#define GRANULE_BITS 21

/* In a child: the address of the first large block, on stdout. */
static int probe(const char *mib)
{
	size_t len = strtoul(mib, NULL, 10) * MiB;
	void *p = hostile_keep(malloc(len));

	CHECK(p != NULL, "malloc(%zu): %s", len, strerror(errno));
	printf("%lx\n", (unsigned long)(uintptr_t)p);
	free(hostile_keep(p));
	return 0;
}

/* The address a fresh process running "probe mib" prints. */
static uintptr_t first_block_of_a_new_process(const char *mib)
{
	char buf[64] = { 0 }, *end;
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "hostile_layout", "probe", mib, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the probe of %s MiB failed (status %#x)", mib, status);
	CHECK(n > 0, "the probe printed nothing");
	uintptr_t a = (uintptr_t)strtoull(buf, &end, 16);
	CHECK(end != buf && a != 0, "the probe printed '%s'", buf);
	return a;
}

/* How many bits at or above GRANULE_BITS of the first block's address
 * vary (above) between RUNS fresh processes; all of them in *all. */
static int varying_bits(const char *mib, int *all)
{
	int ones[64] = { 0 }, above = 0;

	for (int i = 0; i < RUNS; i++) {
		uintptr_t a = first_block_of_a_new_process(mib);

		for (int b = 0; b < 64; b++)
			ones[b] += (a >> b) & 1;
	}
	*all = 0;
	for (int b = 0; b < 64; b++) {
		if (ones[b] < RARE_MIN || RUNS - ones[b] < RARE_MIN)
			continue;
		++*all;
		above += b >= GRANULE_BITS;
	}
	return above;
}

/* The kernel randomises glibc's chunk in bits 12-39 (mmap_rnd_bits 28 on
 * x86-64). A block on a 2 MiB boundary can vary in bits 21 and up only,
 * and hugezero's regions keep bit 29 of a region's first block 0
 * (blocks_region.c, origin_of): so at least every bit but one that
 * glibc's address varies in at or above bit 21 (19 of them). Under
 * hugezero before this, the 1 GiB alignment of regions left 10. */
static int addresses_vary(void)
{
	static const char *const sizes[] = { "4", "64" };

	if (hostile_read_ll("/proc/sys/kernel/randomize_va_space") < 1)
		SKIP("address randomisation is off (kernel.randomize_va_space)");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char name[32];
		int all, bits = varying_bits(sizes[i], &all);
		long long glibc;

		snprintf(name, sizeof(name), "varying_bits_%s", sizes[i]);
		glibc = hostile_baseline(name);
		NOTE("%s MiB: %d address bits vary across %d runs, %d of them at or above bit %d",
		     sizes[i], all, RUNS, bits, GRANULE_BITS);
		if (glibc < 0) {
			CHECK(bits >= 16, "glibc's %s MiB chunks vary in %d bits above 2 MiB only",
			      sizes[i], bits);
			hostile_print_baseline(name, bits);
		} else {
			CHECK(bits >= glibc - 1,
			      "%s MiB blocks vary in %d address bits at or above bit %d, "
			      "glibc's in %lld", sizes[i], bits, GRANULE_BITS, glibc);
		}
		printf("%s MiB: the first block's address varies as glibc's does\n", sizes[i]);
	}
	return 0;
}

static long long map_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long long n = 0;
	int c;

	CHECK(f != NULL, "/proc/self/maps: %s", strerror(errno));
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

#define BLOCKS 64

/* Allocate BLOCKS blocks of size(i) bytes, touch each, free every other
 * one (the cache may keep them: default options), and compare the
 * mappings it added with glibc's. */
static int every_other(const char *name, size_t (*size)(int))
{
	void *blocks[BLOCKS];
	long long before, added, glibc = hostile_baseline(name);
	struct rlimit rl;

	/* Where read-write memory without pages is not free, hugezero gives a
	 * freed block's range back as PROT_NONE (blocks.c), a mapping of its
	 * own between two live blocks. */
	if (hostile_read_ll("/proc/sys/vm/overcommit_memory") == 2)
		SKIP("vm.overcommit_memory is 2: freed ranges are PROT_NONE there");
	if (getrlimit(RLIMIT_DATA, &rl) != 0 || rl.rlim_cur != RLIM_INFINITY)
		SKIP("RLIMIT_DATA is limited: freed ranges are PROT_NONE there");
	before = map_count();

	for (int i = 0; i < BLOCKS; i++) {
		blocks[i] = hostile_keep(malloc(size(i)));
		CHECK(blocks[i] != NULL, "malloc(%zu): %s", size(i), strerror(errno));
		memset(blocks[i], 1, 4096);
	}
	for (int i = 0; i < BLOCKS; i += 2)
		free(hostile_keep(blocks[i]));
	added = map_count() - before;
	NOTE("%d blocks, every other one freed: %lld mappings more", BLOCKS, added);
	if (glibc < 0) {
		CHECK(added >= BLOCKS / 4, "glibc added only %lld mappings", added);
		hostile_print_baseline(name, added);
	} else {
		CHECK(added * 2 <= glibc * 3, "%lld mappings more, 1.5 times glibc's %lld is %lld",
		      added, glibc, glibc * 3 / 2);
	}
	for (int i = 1; i < BLOCKS; i += 2)
		free(hostile_keep(blocks[i]));
	printf("every other block freed: mappings within 1.5 times glibc's\n");
	return 0;
}

static size_t four_mib(int i)
{
	(void)i;
	return 4 * MiB;
}

/* 2-30 MiB, in no order. */
static size_t mixed(int i)
{
	return (size_t)(2 + i * 7 % 29) * MiB + (size_t)(i % 3) * 4096;
}

static int every_other_4m(void)
{
	return every_other("maps_4m", four_mib);
}

static int every_other_mixed(void)
{
	return every_other("maps_mixed", mixed);
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "addresses", addresses_vary },
		{ "every_other_4m", every_other_4m },
		{ "every_other_mixed", every_other_mixed },
		{ NULL, NULL },
	};

	if (argc == 3 && strcmp(argv[1], "probe") == 0)
		return probe(argv[2]);
	return hostile_main(argc, argv, variants);
}
