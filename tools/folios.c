/* hugezero-folios [PID|self] [--all] [--json]
 *
 * Folio coverage of a process's mappings (executable ones by default): the
 * share of each mapping's bytes in folios of each size, naturally aligned or
 * not, partly mapped, and in 64 KiB contiguous blocks. Categories follow the
 * kernel's tools/mm/thpmaps. Precise as root (pagemap + kpageflags);
 * otherwise a partial report from smaps, and it says so. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/folios.h"
#include "exec/maps.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: hugezero-folios [PID|self] [--all] [--json]\n"
		   "  Folio sizes backing a process's executable mappings (--all: every\n"
		   "  mapping). Folio sizes need root; otherwise only PMD-mapped bytes\n"
		   "  (smaps) are known and the report says it is partial.\n");
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_counts(const struct hz_folio_counts *c)
{
	printf("{\"mapped\": %llu, \"resident\": %llu, \"precise\": %s, \"base_page_4kB\": %llu",
	       (unsigned long long)c->mapped, (unsigned long long)c->resident,
	       c->precise ? "true" : "false", (unsigned long long)c->aligned[0]);
	printf(", \"thp_aligned\": {");
	for (unsigned o = 1; o < HZ_FOLIO_ORDERS; o++)
		printf("%s\"%ukB\": %llu", o > 1 ? ", " : "", 4u << o,
		       (unsigned long long)c->aligned[o]);
	printf("}, \"thp_unaligned\": {");
	for (unsigned o = 1; o < HZ_FOLIO_ORDERS; o++)
		printf("%s\"%ukB\": %llu", o > 1 ? ", " : "", 4u << o,
		       (unsigned long long)c->unaligned[o]);
	printf("}, \"thp_partial\": %llu, \"cont_aligned_64kB\": %llu, \"hugetlb\": %llu, "
	       "\"unknown\": %llu, \"pmd_mapped\": %llu}",
	       (unsigned long long)c->partial, (unsigned long long)c->cont64k,
	       (unsigned long long)c->hugetlb, (unsigned long long)c->unknown,
	       (unsigned long long)c->pmd_mapped);
}

/* One mapping, one line: the categories that are not zero. */
static void text_mapping(const struct hz_map *m, const struct hz_folio_counts *c)
{
	printf("%012llx-%012llx %c%c%c%c %9.1f MiB %s\n   ",
	       (unsigned long long)m->range.start, (unsigned long long)m->range.end,
	       m->prot & 1 ? 'r' : '-', m->prot & 2 ? 'w' : '-', m->prot & 4 ? 'x' : '-',
	       m->shared ? 's' : 'p', (double)hz_range_len(m->range) / (1 << 20),
	       m->path[0] ? m->path : "[anon]");
	printf(" resident %.1f%%", pct(c->resident, c->mapped));
	if (c->aligned[0])
		printf(", 4kB %.1f%%", pct(c->aligned[0], c->mapped));
	for (unsigned o = 1; o < HZ_FOLIO_ORDERS; o++) {
		if (c->aligned[o])
			printf(", %ukB %.1f%%", 4u << o, pct(c->aligned[o], c->mapped));
		if (c->unaligned[o])
			printf(", %ukB-unaligned %.1f%%", 4u << o, pct(c->unaligned[o], c->mapped));
	}
	if (c->partial)
		printf(", partial %.1f%%", pct(c->partial, c->mapped));
	if (c->cont64k)
		printf(", cont-64kB %.1f%%", pct(c->cont64k, c->mapped));
	if (c->hugetlb)
		printf(", hugetlb %.1f%%", pct(c->hugetlb, c->mapped));
	if (c->unknown)
		printf(", unknown %.1f%%", pct(c->unknown, c->mapped));
	if (c->pmd_mapped)
		printf(", pmd-mapped %.1f%%", pct(c->pmd_mapped, c->mapped));
	printf("\n");
}

/* The summary in the style of the exec-folio patch's table. */
static void text_summary(const struct hz_folio_counts *t, bool all)
{
	uint64_t nonres = t->mapped - t->resident;

	printf("\n%-24s %12s %7s\n", all ? "all mapped memory" : "all mapped text",
	       "KiB", "%");
	printf("%-24s %12llu %6.1f%%\n", "base-page-4kB",
	       (unsigned long long)(t->aligned[0] >> 10), pct(t->aligned[0], t->mapped));
	for (unsigned o = 1; o < HZ_FOLIO_ORDERS; o++) {
		char name[40];

		snprintf(name, sizeof(name), "thp-aligned-%ukB", 4u << o);
		printf("%-24s %12llu %6.1f%%\n", name,
		       (unsigned long long)(t->aligned[o] >> 10), pct(t->aligned[o], t->mapped));
	}
	for (unsigned o = 1; o < HZ_FOLIO_ORDERS; o++) {
		char name[40];

		if (!t->unaligned[o])
			continue;
		snprintf(name, sizeof(name), "thp-unaligned-%ukB", 4u << o);
		printf("%-24s %12llu %6.1f%%\n", name,
		       (unsigned long long)(t->unaligned[o] >> 10), pct(t->unaligned[o], t->mapped));
	}
	printf("%-24s %12llu %6.1f%%\n", "thp-partial",
	       (unsigned long long)(t->partial >> 10), pct(t->partial, t->mapped));
	if (t->hugetlb)
		printf("%-24s %12llu %6.1f%%\n", "hugetlb",
		       (unsigned long long)(t->hugetlb >> 10), pct(t->hugetlb, t->mapped));
	if (t->unknown)
		printf("%-24s %12llu %6.1f%%\n", "unknown (not root)",
		       (unsigned long long)(t->unknown >> 10), pct(t->unknown, t->mapped));
	printf("%-24s %12llu %6.1f%%\n", "not resident",
	       (unsigned long long)(nonres >> 10), pct(nonres, t->mapped));
	printf("%-24s %12llu %6.1f%%\n", "cont-aligned-64kB",
	       (unsigned long long)(t->cont64k >> 10), pct(t->cont64k, t->mapped));
	printf("%-24s %12llu %6.1f%%\n", "pmd-mapped (smaps)",
	       (unsigned long long)(t->pmd_mapped >> 10), pct(t->pmd_mapped, t->mapped));
	if (!t->precise)
		printf("\nPARTIAL REPORT: not root, so page frames and /proc/kpageflags are\n"
		       "hidden. Only resident bytes (pagemap) and PMD-mapped 2 MiB folios\n"
		       "(smaps) are known; every other resident byte is 'unknown'.\n");
}

struct options {
	pid_t pid;	/* 0: self */
	bool all;	/* every mapping, not only executable ones */
	bool json;
};

/* Returns -1 to go on, or the exit status: 0 after --help, 2 for an
 * argument that is neither an option nor a PID. */
static int parse_args(int argc, char **argv, struct options *o)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--all")) {
			o->all = true;
		} else if (!strcmp(argv[i], "--json")) {
			o->json = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "self")) {
			o->pid = 0;
		} else {
			char *end;
			long v = strtol(argv[i], &end, 10);

			if (*end != '\0' || v <= 0) {
				usage(stderr);
				return 2;
			}
			o->pid = (pid_t)v;
		}
	}
	return -1;
}

static void json_mapping(const struct hz_map *m, const struct hz_folio_counts *c, bool first)
{
	printf("%s\n  {\"start\": \"0x%llx\", \"end\": \"0x%llx\", \"perms\": \"%c%c%c%c\", \"path\": ",
	       first ? "" : ",", (unsigned long long)m->range.start,
	       (unsigned long long)m->range.end, m->prot & 1 ? 'r' : '-',
	       m->prot & 2 ? 'w' : '-', m->prot & 4 ? 'x' : '-', m->shared ? 's' : 'p');
	json_string(m->path);
	printf(", \"folios\": ");
	json_counts(c);
	printf("}");
}

/* Print each mapping in scope and add it to total. Returns 0 at the end of
 * the maps, or the negative errno value that stopped the walk. */
static int scan_mappings(struct hz_maps *maps, struct hz_folios *folios,
			 const struct options *o, struct hz_folio_counts *total)
{
	bool first = true;
	struct hz_map m;
	int ret;

	while ((ret = hz_maps_next(maps, &m)) == 1) {
		struct hz_folio_counts c = { .precise = true };

		if (!o->all && !hz_map_is_text(&m))
			continue;
		if (!strcmp(m.path, "[vsyscall]"))
			continue; /* not in the page tables pagemap walks */
		ret = hz_folios_scan_map(folios, &m, &c);
		if (ret != 0)
			break;
		c.precise = hz_folios_precise(folios);
		hz_folio_counts_add(total, &c);
		if (o->json)
			json_mapping(&m, &c, first);
		else
			text_mapping(&m, &c);
		first = false;
	}
	return ret;
}

static void print_header(const struct options *o)
{
	int pid = o->pid ? (int)o->pid : (int)getpid();

	if (o->json)
		printf("{\"pid\": %d, \"scope\": \"%s\", \"mappings\": [", pid,
		       o->all ? "all" : "text");
	else
		printf("hugezero-folios: pid %d, %s\n", pid,
		       o->all ? "all mappings" : "executable mappings");
}

static void print_total(const struct hz_folio_counts *total, const struct options *o)
{
	if (o->json) {
		printf("\n ],\n \"total\": ");
		json_counts(total);
		printf(",\n \"partial_report\": %s}\n", total->precise ? "false" : "true");
	} else {
		text_summary(total, o->all);
	}
}

int main(int argc, char **argv)
{
	static struct hz_maps maps;
	static struct hz_folios folios;
	struct hz_folio_counts total = { .precise = true };
	struct options o = { 0 };
	int ret = parse_args(argc, argv, &o);

	if (ret >= 0)
		return ret;
	ret = hz_maps_open(&maps, o.pid, true);
	if (ret == 0) {
		ret = hz_folios_open(&folios, o.pid);
		if (ret != 0)
			hz_maps_close(&maps);
	}
	if (ret != 0) {
		if (o.pid)
			fprintf(stderr, "hugezero-folios: cannot read /proc/%d: %s\n", (int)o.pid,
				strerror(-ret));
		else
			fprintf(stderr, "hugezero-folios: cannot read /proc/self: %s\n",
				strerror(-ret));
		return 1;
	}
	print_header(&o);
	ret = scan_mappings(&maps, &folios, &o, &total);
	total.precise = hz_folios_precise(&folios);
	print_total(&total, &o);
	hz_folios_close(&folios);
	hz_maps_close(&maps);
	if (ret < 0) {
		fprintf(stderr, "hugezero-folios: %s\n", strerror(-ret));
		return 1;
	}
	return 0;
}
