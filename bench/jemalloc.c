/* bench-jemalloc: the cost of a zeroed large allocation in a jemalloc
 * arena with hugezero's extent hooks, against jemalloc's default arena.
 *
 * One cycle is mallocx(--size, MALLOCX_ZERO) + writing every byte +
 * dallocx, as a program that takes a fresh zeroed buffer, fills it and
 * drops it does. Arenas, all with MALLOCX_TCACHE_NONE:
 *   hugezero  hz_jemalloc_create_arena(): hugezero's hooks
 *   default   no MALLOCX_ARENA: jemalloc's automatic choice (for sizes over
 *             opt.oversize_threshold, its dedicated huge arena)
 *   created   arenas.create with jemalloc's default hooks
 * Each round runs --cycles cycles on each arena, in an order rotated every
 * round (ABC, BCA, CAB ...), after one untimed warm-up round. Every round
 * also checks, untimed, that one MALLOCX_ZERO allocation per arena is all
 * zero. Times are wall-clock per cycle; the summary gives min, median and
 * max over all cycles and the ratio of medians.
 *
 * Huge pages: afterwards one --size allocation per arena is written and
 * the share of its bytes on huge pages is counted, page by page from
 * /proc/self/pagemap and /proc/kpageflags when readable (root), else from
 * the AnonHugePages of the smaps entries covering it.
 *
 * Output: one CSV row per cycle (--csv) and a summary on stdout. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <hugezero/jemalloc.h>

#include "util.h"

#define MAX_ROUNDS 1000
#define MAX_CYCLES 1000
#define PAGE 4096u

enum { HUGEZERO, DEFAULT, CREATED, ARENAS };

static const char *const arena_name[ARENAS] = { "hugezero", "default", "created" };

struct config {
	size_t size;
	unsigned rounds, cycles;
	const char *csv;
	int cpu;
};

static int flags_of(int a, unsigned ind[ARENAS])
{
	return (a == DEFAULT ? 0 : MALLOCX_ARENA(ind[a])) | MALLOCX_TCACHE_NONE;
}

static void die(const char *what)
{
	fprintf(stderr, "bench-jemalloc: %s\n", what);
	exit(1);
}

/* One cycle; returns its wall time in ns. */
static uint64_t cycle(size_t size, int flags)
{
	uint64_t t0 = bench_now_ns();
	char *p = mallocx(size, flags | MALLOCX_ZERO);

	if (!p)
		die("mallocx failed");
	memset(p, 0x5a, size);
	__asm__ __volatile__("" : : "r"(p) : "memory");
	dallocx(p, flags);
	return bench_now_ns() - t0;
}

static void check_zero(size_t size, int flags, const char *name)
{
	const uint64_t *p = mallocx(size, flags | MALLOCX_ZERO);

	if (!p)
		die("mallocx failed");
	for (size_t i = 0; i < size / 8; i++)
		if (p[i] != 0) {
			fprintf(stderr, "bench-jemalloc: %s: MALLOCX_ZERO byte %zu not zero\n",
				name, i * 8);
			exit(2);
		}
	memset((void *)p, 0x5a, size);
	dallocx((void *)p, flags);
}

/* Bytes of [p, p + len) on huge pages (THP or hugetlb), page by page. -1
 * when pagemap or kpageflags cannot be read (not root). */
static long long huge_bytes_exact(const char *p, size_t len)
{
	int pm = open("/proc/self/pagemap", O_RDONLY), kf = open("/proc/kpageflags", O_RDONLY);
	long long huge = 0;

	if (pm < 0 || kf < 0)
		goto fail;
	for (size_t off = 0; off < len; off += PAGE) {
		uint64_t entry, flags, pfn;
		off_t at = (off_t)(((uintptr_t)p + off) / PAGE * 8);

		if (pread(pm, &entry, 8, at) != 8)
			goto fail;
		pfn = entry & ((1ull << 55) - 1);
		if (!(entry >> 63) || pfn == 0)
			goto fail; /* not present, or no PFN without CAP_SYS_ADMIN */
		if (pread(kf, &flags, 8, (off_t)(pfn * 8)) != 8)
			goto fail;
		/* KPF_HUGE (17): hugetlb; KPF_THP (22): transparent huge page. */
		if (flags & ((1ull << 17) | (1ull << 22)))
			huge += PAGE;
	}
	close(pm);
	close(kf);
	return huge;
fail:
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	return -1;
}

/* smaps: (AnonHugePages + Private_Hugetlb) / (Rss + Private_Hugetlb) of
 * the entries covering [p, p + len) (Rss leaves hugetlb pages out): the
 * share for the mappings, not exactly for the range. */
static double huge_share_smaps(const char *p, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	unsigned long a, b;
	size_t rss = 0, anon_huge = 0, hugetlb = 0, kb;
	int in = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2)
			in = a < (uintptr_t)p + len && b > (uintptr_t)p;
		else if (!in)
			continue;
		else if (sscanf(line, "Rss: %zu kB", &kb) == 1)
			rss += kb;
		else if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
			anon_huge += kb;
		else if (sscanf(line, "Private_Hugetlb: %zu kB", &kb) == 1)
			hugetlb += kb;
	}
	fclose(f);
	return rss + hugetlb ? (double)(anon_huge + hugetlb) / (double)(rss + hugetlb) : -1;
}

static void huge_page_share(const struct config *c, unsigned ind[ARENAS])
{
	printf("\nhuge pages: share of a written %zu MiB allocation on huge pages\n",
	       c->size >> 20);
	for (int a = 0; a < ARENAS; a++) {
		char *p = mallocx(c->size, flags_of(a, ind) | MALLOCX_ZERO);
		long long exact;

		if (!p)
			die("mallocx failed");
		memset(p, 0x33, c->size);
		exact = huge_bytes_exact(p, c->size);
		if (exact >= 0)
			printf("  %-9s %6.1f %% (pagemap/kpageflags, page by page)\n", arena_name[a],
			       100.0 * (double)exact / (double)c->size);
		else
			printf("  %-9s %6.1f %% (smaps AnonHugePages/Rss of its mappings)\n",
			       arena_name[a], 100.0 * huge_share_smaps(p, c->size));
		dallocx(p, flags_of(a, ind));
	}
	struct hz_jemalloc_stats s;

	hz_jemalloc_stats(ind[HUGEZERO], &s);
	printf("  hugezero arena regions: %zu MiB mapped: %zu MiB THP, %zu MiB hugetlb, "
	       "%zu MiB 4 KiB pages -> %.1f %% of extent bytes huge-page backed\n",
	       s.mapped_bytes >> 20, s.thp_bytes >> 20, s.hugetlb_bytes >> 20,
	       s.small_bytes >> 20,
	       s.mapped_bytes ? 100.0 * (double)(s.thp_bytes + s.hugetlb_bytes) /
				(double)s.mapped_bytes : 0.0);
}

static void usage(void)
{
	fprintf(stderr, "usage: bench-jemalloc [--size 64M] [--rounds 15] [--cycles 10] "
			"[--csv FILE] [--cpu N|none]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct config *c)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "cycles", required_argument, NULL, 'n' },
		{ "csv", required_argument, NULL, 'o' },
		{ "cpu", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	*c = (struct config){ 64u << 20, 15, 10, NULL, -1 };
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': c->size = bench_parse_size(optarg); break;
		case 'r': c->rounds = (unsigned)atoi(optarg); break;
		case 'n': c->cycles = (unsigned)atoi(optarg); break;
		case 'o': c->csv = optarg; break;
		case 'c': c->cpu = strcmp(optarg, "none") == 0 ? -2 : atoi(optarg); break;
		default: usage();
		}
	}
	if (c->size < PAGE || c->rounds == 0 || c->rounds > MAX_ROUNDS || c->cycles == 0 ||
	    c->cycles > MAX_CYCLES)
		usage();
}

int main(int argc, char **argv)
{
	static double t[ARENAS][MAX_ROUNDS * MAX_CYCLES];
	struct bench_stat s[ARENAS];
	struct config c;
	unsigned ind[ARENAS] = { 0, 0, 0 };
	size_t n = 0, len = sizeof(unsigned);
	FILE *csv = NULL;
	char model[128];
	struct utsname u;
	int cpu = -1;

	parse(argc, argv, &c);
	if (c.cpu != -2)
		cpu = bench_pin(c.cpu);
	if (hz_jemalloc_create_arena(&ind[HUGEZERO]) != 0)
		die("hz_jemalloc_create_arena failed");
	if (mallctl("arenas.create", &ind[CREATED], &len, NULL, 0) != 0)
		die("arenas.create failed");
	if (c.csv) {
		bench_mkdir_for(c.csv);
		csv = fopen(c.csv, "w");
		if (!csv)
			die("cannot write the CSV file");
		fprintf(csv, "arena,round,cycle,size,ns\n");
	}
	uname(&u);
	printf("bench-jemalloc: %s, kernel %s, %s, cpu %d\n", bench_cpu_model(model, sizeof(model)),
	       u.release, JEMALLOC_VERSION, cpu);
	printf("cycle: mallocx(%zu MiB, MALLOCX_ZERO) + write all + dallocx; %u rounds x %u "
	       "cycles per arena, interleaved\n", c.size >> 20, c.rounds, c.cycles);
	for (int a = 0; a < ARENAS; a++) /* warm-up round, untimed */
		for (unsigned k = 0; k < c.cycles; k++)
			cycle(c.size, flags_of(a, ind));
	for (unsigned r = 0; r < c.rounds; r++) {
		for (int i = 0; i < ARENAS; i++) {
			int a = (int)((r + (unsigned)i) % ARENAS);

			check_zero(c.size, flags_of(a, ind), arena_name[a]);
			for (unsigned k = 0; k < c.cycles; k++) {
				uint64_t ns = cycle(c.size, flags_of(a, ind));

				t[a][r * c.cycles + k] = (double)ns / 1e6;
				if (csv)
					fprintf(csv, "%s,%u,%u,%zu,%llu\n", arena_name[a], r, k, c.size,
						(unsigned long long)ns);
			}
		}
		n += c.cycles;
	}
	if (csv)
		fclose(csv);
	printf("\n%-9s %10s %10s %10s %12s\n", "arena", "min ms", "median ms", "max ms",
	       "median GB/s");
	for (int a = 0; a < ARENAS; a++) {
		s[a] = bench_stat_of(t[a], n);
		printf("%-9s %10.2f %10.2f %10.2f %12.1f\n", arena_name[a], s[a].min, s[a].median,
		       s[a].max, (double)c.size / (s[a].median * 1e6));
	}
	huge_page_share(&c, ind);
	printf("\nsummary: hugezero %.2f ms vs default %.2f ms per cycle (median of %zu): "
	       "%.2fx (target >= 5x); vs created arena %.2fx\n", s[HUGEZERO].median,
	       s[DEFAULT].median, n, s[DEFAULT].median / s[HUGEZERO].median,
	       s[CREATED].median / s[HUGEZERO].median);
	return 0;
}
