/* Folio coverage of mappings: how many bytes of a range sit in folios of
 * each size, naturally aligned or not, and in 64 KiB "contiguous" blocks.
 *
 * The categories are those of the kernel's tools/mm/thpmaps and of the
 * exec-folio patch's table: base pages (4 KiB), thp-aligned-NkB (a folio of
 * N KiB mapped whole, its virtual address a multiple of N), thp-unaligned-NkB
 * (mapped whole, virtual address not a multiple of N), thp-partial (a large
 * folio of which only part is mapped in the range) and cont-aligned-64kB (a
 * 64 KiB block aligned both virtually and physically, physically contiguous,
 * inside one folio: what arm64 contpte and AMD's PTE coalescing can map with
 * one TLB entry).
 *
 * Precise numbers need /proc/PID/pagemap with page frame numbers and
 * /proc/kpageflags, which only root (CAP_SYS_ADMIN) can read. Without them the
 * report is partial: resident bytes from pagemap and PMD-mapped bytes from
 * smaps, every other resident byte "unknown". */
#ifndef HZ_EXEC_FOLIOS_H
#define HZ_EXEC_FOLIOS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../range.h"
#include "../sizes.h"
#include "maps.h"

/* Orders 0 (4 KiB) to 9 (2 MiB, the x86_64 and arm64-4K PMD size): page
 * cache and THP folios are never larger on these targets. */
#define HZ_FOLIO_ORDERS 10

struct hz_folio_counts {
	uint64_t mapped;   /* bytes of the ranges scanned */
	uint64_t resident; /* bytes present in the page tables */
	uint64_t aligned[HZ_FOLIO_ORDERS];   /* [0]: base pages */
	uint64_t unaligned[HZ_FOLIO_ORDERS]; /* [0] unused */
	uint64_t partial;
	uint64_t cont64k;
	uint64_t hugetlb;
	uint64_t unknown;    /* resident, folio not readable (partial report) */
	uint64_t pmd_mapped; /* from smaps, when an smaps entry was given */
	bool precise;        /* false: partial report (not root) */
};

struct hz_folios_window {
	uint64_t first; /* index of v[0]; UINT64_MAX when empty */
	uint64_t v[512];
};

struct hz_folios {
	int pagemap_fd;
	int kpageflags_fd; /* -1 when not readable */
	bool pfn_hidden;   /* pagemap showed a present page with PFN 0 */
	unsigned pm_next;  /* which pagemap window to refill next */
	struct hz_folios_window pm[2];
	struct hz_folios_window kf;
};

/* Open pid's pagemap (0: this process) and, when readable, kpageflags.
 * Returns 0 or a negative errno value (pagemap itself unreadable). */
int hz_folios_open(struct hz_folios *f, pid_t pid);
void hz_folios_close(struct hz_folios *f);

/* Whether hz_folios_scan can see folios (root), as far as known so far. */
bool hz_folios_precise(const struct hz_folios *f);

/* Add the coverage of the page-aligned range r to *c. */
int hz_folios_scan(struct hz_folios *f, struct hz_range r, struct hz_folio_counts *c);

/* Scan one maps/smaps entry: its range, plus its smaps PMD fields. */
int hz_folios_scan_map(struct hz_folios *f, const struct hz_map *m,
		       struct hz_folio_counts *c);

void hz_folio_counts_add(struct hz_folio_counts *sum, const struct hz_folio_counts *c);

/* Bytes in fully mapped, naturally aligned folios of at least 4 KiB << order. */
uint64_t hz_folio_counts_aligned_from(const struct hz_folio_counts *c, unsigned order);

/* Whether a maps entry is executable text worth reporting: PROT_EXEC and
 * not the kernel's [vdso] / [vsyscall]. */
bool hz_map_is_text(const struct hz_map *m);

/* Add the coverage of every executable mapping of pid (0: self) to *c. */
int hz_folios_text(pid_t pid, struct hz_folio_counts *c);

#endif /* HZ_EXEC_FOLIOS_H */
