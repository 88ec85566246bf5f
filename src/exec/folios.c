/* Folio coverage from pagemap and kpageflags. See folios.h. */
#include "folios.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "../prim/prim.h"

/* /proc/PID/pagemap: one 64-bit entry per virtual page
 * (Documentation/admin-guide/mm/pagemap.rst). */
#define PM_PRESENT (1ull << 63)
#define PM_PFN_MASK ((1ull << 55) - 1)

/* /proc/kpageflags bits (include/uapi/linux/kernel-page-flags.h). */
#define KPF_COMPOUND_HEAD 15
#define KPF_COMPOUND_TAIL 16
#define KPF_HUGE 17

#define WINDOW 512u /* entries per pread: 4 KiB; a PMD folio's PFNs fit one */
#define EMPTY UINT64_MAX

static void window_reset(struct hz_folios_window *w)
{
	w->first = EMPTY;
}

int hz_folios_open(struct hz_folios *f, pid_t pid)
{
	int fd = hz_prim_open_pagemap(pid);

	if (fd < 0)
		return fd;
	f->pagemap_fd = fd;
	f->kpageflags_fd = hz_prim_open_kpageflags();
	if (f->kpageflags_fd < 0)
		f->kpageflags_fd = -1;
	f->pfn_hidden = false;
	f->pm_next = 0;
	window_reset(&f->pm[0]);
	window_reset(&f->pm[1]);
	window_reset(&f->kf);
	return 0;
}

void hz_folios_close(struct hz_folios *f)
{
	if (f->pagemap_fd >= 0)
		hz_prim_close(f->pagemap_fd);
	if (f->kpageflags_fd >= 0)
		hz_prim_close(f->kpageflags_fd);
	f->pagemap_fd = f->kpageflags_fd = -1;
}

bool hz_folios_precise(const struct hz_folios *f)
{
	return f->kpageflags_fd >= 0 && !f->pfn_hidden;
}

/* Fill w with the WINDOW entries of fd starting at index first; a short
 * read (end of the address space) leaves zeros. */
static int window_fill(struct hz_folios_window *w, int fd, uint64_t first)
{
	ssize_t n = hz_prim_pread(fd, w->v, sizeof(w->v), first * 8);

	if (n < 0) {
		window_reset(w);
		return (int)n;
	}
	memset((char *)w->v + n, 0, sizeof(w->v) - (size_t)n);
	w->first = first;
	return 0;
}

static int pagemap_entry(struct hz_folios *f, uint64_t vpn, uint64_t *out)
{
	uint64_t first = vpn & ~(uint64_t)(WINDOW - 1);
	struct hz_folios_window *w;
	int ret;

	for (unsigned i = 0; i < 2; i++) {
		if (f->pm[i].first == first) {
			*out = f->pm[i].v[vpn - first];
			return 0;
		}
	}
	/* Two windows: a folio mapped across a window boundary is read
	 * alternately from both without re-reading. */
	w = &f->pm[f->pm_next];
	f->pm_next ^= 1;
	ret = window_fill(w, f->pagemap_fd, first);
	if (ret != 0)
		return ret;
	*out = w->v[vpn - first];
	return 0;
}

static int page_flags(struct hz_folios *f, uint64_t pfn, uint64_t *out)
{
	uint64_t first = pfn & ~(uint64_t)(WINDOW - 1);

	if (f->kf.first != first) {
		int ret = window_fill(&f->kf, f->kpageflags_fd, first);

		if (ret != 0)
			return ret;
	}
	*out = f->kf.v[pfn - first];
	return 0;
}

/* The flags of one page, from the window when it holds pfn, else with an
 * 8-byte read: most text pages are order-0 folios at scattered PFNs, and a
 * window read makes the kernel look up 512 pages for the one wanted (a
 * census of clang's 175 MiB of text took 1.3 s of system time that way).
 * Only a compound page's neighbours are read by window (folio_of). */
static int page_flags_one(struct hz_folios *f, uint64_t pfn, uint64_t *out)
{
	uint64_t first = pfn & ~(uint64_t)(WINDOW - 1);
	ssize_t n;

	if (f->kf.first == first) {
		*out = f->kf.v[pfn - first];
		return 0;
	}
	n = hz_prim_pread(f->kpageflags_fd, out, sizeof(*out), pfn * 8);
	if (n < 0)
		return (int)n;
	if (n != sizeof(*out))
		*out = 0;
	return 0;
}

static bool has(uint64_t flags, int bit)
{
	return (flags >> bit) & 1;
}

/* The folio holding pfn: its first PFN and its page count. Folios of these
 * orders are naturally aligned, so the walk never leaves pfn's window. */
static int folio_of(struct hz_folios *f, uint64_t pfn, uint64_t flags,
		    uint64_t *head, uint64_t *pages)
{
	uint64_t h = pfn, n = 1, fl = flags;
	int ret;

	while (has(fl, KPF_COMPOUND_TAIL) && !has(fl, KPF_COMPOUND_HEAD)) {
		if (h == 0 || pfn - h >= WINDOW - 1)
			return -ERANGE;
		h--;
		ret = page_flags(f, h, &fl);
		if (ret != 0)
			return ret;
	}
	if (!has(fl, KPF_COMPOUND_HEAD))
		return -ERANGE;
	for (;;) {
		if (n >= WINDOW || ((h + n) & (WINDOW - 1)) == 0)
			break;
		ret = page_flags(f, h + n, &fl);
		if (ret != 0)
			return ret;
		if (!has(fl, KPF_COMPOUND_TAIL) || has(fl, KPF_COMPOUND_HEAD))
			break;
		n++;
	}
	*head = h;
	*pages = n;
	return 0;
}

static unsigned order_of(uint64_t pages)
{
	unsigned o = 0;

	while (o + 1 < HZ_FOLIO_ORDERS && (2ull << o) <= pages)
		o++;
	return o;
}

/* Aligned 16-page blocks inside [vpn, vpn + len) that map physically
 * aligned PFNs; the run maps pfn, pfn + 1, ... in order. */
static uint64_t cont_blocks(uint64_t vpn, uint64_t pfn, uint64_t len)
{
	const uint64_t per = HZ_SZ_64K / HZ_SZ_4K;
	uint64_t first, last;

	if ((vpn - pfn) % per != 0)
		return 0;
	first = (vpn + per - 1) / per * per;
	last = (vpn + len) / per * per;
	return last > first ? (last - first) / per : 0;
}

/* Page vpn is present with pfn inside folio [head, head + pages): how many
 * pages from vpn on map the same folio in order (at most up to end). */
static int run_length(struct hz_folios *f, uint64_t vpn, uint64_t pfn,
		      uint64_t head, uint64_t pages, uint64_t end, uint64_t *out)
{
	uint64_t k = 1;

	while (vpn + k < end && pfn + k < head + pages) {
		uint64_t pm;
		int ret = pagemap_entry(f, vpn + k, &pm);

		if (ret != 0)
			return ret;
		if (!(pm & PM_PRESENT) || (pm & PM_PFN_MASK) != pfn + k)
			break;
		k++;
	}
	*out = k;
	return 0;
}

/* One resident 4 KiB page counted in bucket: *step is 1. */
static int one_page(struct hz_folio_counts *c, uint64_t *bucket, uint64_t *step)
{
	c->resident += HZ_SZ_4K;
	*bucket += HZ_SZ_4K;
	*step = 1;
	return 0;
}

/* Count the present page at vpn (pagemap entry pm) and, when it starts or
 * continues a folio, the rest of the folio's run in the range: *step is
 * the pages counted. */
static int count_present(struct hz_folios *f, uint64_t vpn, uint64_t end, uint64_t pm,
			 struct hz_folio_counts *c, uint64_t *step)
{
	uint64_t pfn = pm & PM_PFN_MASK, flags, head, pages, run;
	int ret;

	if (pfn == 0)
		f->pfn_hidden = true; /* not CAP_SYS_ADMIN */
	if (!hz_folios_precise(f) || page_flags_one(f, pfn, &flags) != 0)
		return one_page(c, &c->unknown, step);
	if (has(flags, KPF_HUGE))
		return one_page(c, &c->hugetlb, step);
	if (!has(flags, KPF_COMPOUND_HEAD) && !has(flags, KPF_COMPOUND_TAIL))
		return one_page(c, &c->aligned[0], step);
	if (folio_of(f, pfn, flags, &head, &pages) != 0)
		return one_page(c, &c->unknown, step);
	ret = run_length(f, vpn, pfn, head, pages, end, &run);
	if (ret != 0)
		return ret;
	c->resident += run * HZ_SZ_4K;
	c->cont64k += cont_blocks(vpn, pfn, run) * HZ_SZ_64K;
	if (pfn == head && run == pages) {
		unsigned o = order_of(pages);

		if (vpn % pages == 0)
			c->aligned[o] += run * HZ_SZ_4K;
		else
			c->unaligned[o] += run * HZ_SZ_4K;
	} else {
		c->partial += run * HZ_SZ_4K;
	}
	*step = run;
	return 0;
}

int hz_folios_scan(struct hz_folios *f, struct hz_range r, struct hz_folio_counts *c)
{
	uint64_t vpn = r.start / HZ_SZ_4K, end = r.end / HZ_SZ_4K;

	c->mapped += hz_range_len(r);
	while (vpn < end) {
		uint64_t pm, step = 1;
		int ret = pagemap_entry(f, vpn, &pm);

		if (ret == 0 && (pm & PM_PRESENT))
			ret = count_present(f, vpn, end, pm, c, &step);
		if (ret != 0)
			return ret;
		vpn += step;
	}
	c->precise = hz_folios_precise(f);
	return 0;
}

int hz_folios_scan_map(struct hz_folios *f, const struct hz_map *m,
		       struct hz_folio_counts *c)
{
	c->pmd_mapped += m->anon_huge + m->file_pmd + m->shmem_pmd;
	return hz_folios_scan(f, m->range, c);
}

void hz_folio_counts_add(struct hz_folio_counts *sum, const struct hz_folio_counts *c)
{
	bool precise = (sum->mapped == 0 || sum->precise) && c->precise;

	sum->mapped += c->mapped;
	sum->resident += c->resident;
	for (unsigned o = 0; o < HZ_FOLIO_ORDERS; o++) {
		sum->aligned[o] += c->aligned[o];
		sum->unaligned[o] += c->unaligned[o];
	}
	sum->partial += c->partial;
	sum->cont64k += c->cont64k;
	sum->hugetlb += c->hugetlb;
	sum->unknown += c->unknown;
	sum->pmd_mapped += c->pmd_mapped;
	sum->precise = precise;
}

uint64_t hz_folio_counts_aligned_from(const struct hz_folio_counts *c, unsigned order)
{
	uint64_t sum = 0;

	for (unsigned o = order; o < HZ_FOLIO_ORDERS; o++)
		sum += c->aligned[o];
	return sum;
}

bool hz_map_is_text(const struct hz_map *m)
{
	return (m->prot & PROT_EXEC) && strcmp(m->path, "[vdso]") != 0 &&
	       strcmp(m->path, "[vsyscall]") != 0;
}

int hz_folios_text(pid_t pid, struct hz_folio_counts *c)
{
	/* 20 KiB of buffers: static, off small thread stacks, so one caller
	 * at a time. */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct hz_maps maps;
	static struct hz_folios folios;
	struct hz_folio_counts one;
	struct hz_map m;
	int ret;

	/* Never waits: a caller that finds it busy (or a fork child that
	 * inherited it held) gets -EBUSY and reports nothing. */
	if (pthread_mutex_trylock(&lock) != 0)
		return -EBUSY;
	ret = hz_maps_open(&maps, pid, false);
	if (ret != 0) {
		pthread_mutex_unlock(&lock);
		return ret;
	}
	ret = hz_folios_open(&folios, pid);
	if (ret != 0) {
		hz_maps_close(&maps);
		pthread_mutex_unlock(&lock);
		return ret;
	}
	memset(&one, 0, sizeof(one));
	one.precise = true;
	while ((ret = hz_maps_next(&maps, &m)) == 1) {
		if (hz_map_is_text(&m))
			ret = hz_folios_scan(&folios, m.range, &one);
		if (ret < 0)
			break;
	}
	one.precise = hz_folios_precise(&folios);
	hz_folio_counts_add(c, &one);
	hz_folios_close(&folios);
	hz_maps_close(&maps);
	pthread_mutex_unlock(&lock);
	return ret < 0 ? ret : 0;
}
