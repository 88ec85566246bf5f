/* The scripted workload the fault tests run: every path from the malloc
 * family and anonymous mmap down to the prim calls, with each result
 * checked. See harness.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "blocks.h"
#include "preload/foreign.h"
#include "harness.h"
#include "preload/limits.h"

#define PAGE ((size_t)4096)

struct ctx {
	struct workload_result *r;
	bool strict;
};

static void wrong(struct ctx *c, int line, const char *what, const void *p)
{
	c->r->wrong++;
	fprintf(stderr, "workload.c:%d: %s (%p)\n", line, what, p);
}

#define WRONG(what, p) wrong(c, __LINE__, what, p)

/* The byte page i of a block filled with seed holds: never zero, and
 * different for neighbouring pages, so lost or shuffled pages show. */
static unsigned char byte_of(unsigned char seed, size_t page)
{
	return (unsigned char)(1 + (seed * 31u + page) % 255u);
}

static void fill(unsigned char *p, size_t size, unsigned char seed)
{
	for (size_t off = 0; off < size; off += PAGE)
		memset(p + off, byte_of(seed, off / PAGE), size - off < PAGE ? size - off : PAGE);
}

/* All bytes of [p, p + n) equal v. */
static bool uniform(const unsigned char *p, size_t n, unsigned char v)
{
	return n == 0 || (p[0] == v && memcmp(p, p + 1, n - 1) == 0);
}

static bool filled(const unsigned char *p, size_t size, unsigned char seed)
{
	for (size_t off = 0; off < size; off += PAGE)
		if (!uniform(p + off, size - off < PAGE ? size - off : PAGE, byte_of(seed, off / PAGE)))
			return false;
	return true;
}

static bool zero(const unsigned char *p, size_t size)
{
	for (size_t off = 0; off < size; off += PAGE)
		if (!uniform(p + off, size - off < PAGE ? size - off : PAGE, 0))
			return false;
	return true;
}

static bool active(void)
{
	return __atomic_load_n(&hz_preload_active, __ATOMIC_ACQUIRE);
}

/* Check an allocation's result. Returns whether there is a block. */
static bool check_result(struct ctx *c, int line, void *p, size_t size, size_t align)
{
	c->r->ops++;
	if (p == NULL) {
		c->r->failed++;
		if (errno != ENOMEM)
			wrong(c, line, "NULL without ENOMEM", p);
		return false;
	}
	if (align && (uintptr_t)p % align != 0)
		wrong(c, line, "misaligned", p);
	if (hz_preload_malloc_usable_size(p) < size)
		wrong(c, line, "usable size below the request", p);
	if (size >= 256 * KiB && active() && !hz_blocks_owns(p)) {
		c->r->next_served++;
		if (c->strict)
			wrong(c, line, "large request not served by hugezero", p);
	}
	return true;
}

static unsigned char *do_malloc(struct ctx *c, int line, size_t size, unsigned char seed)
{
	unsigned char *p;

	errno = 0;
	p = hz_preload_malloc(size);
	if (!check_result(c, line, p, size, 16))
		return NULL;
	fill(p, size, seed);
	return p;
}

static unsigned char *do_calloc(struct ctx *c, int line, size_t size, unsigned char seed)
{
	unsigned char *p;

	errno = 0;
	p = hz_preload_calloc(1, size);
	if (!check_result(c, line, p, size, 16))
		return NULL;
	if (!zero(p, size))
		wrong(c, line, "calloc memory not zero", p);
	fill(p, size, seed);
	return p;
}

/* A block the workload keeps across several reallocs. */
struct kept {
	unsigned char *p;
	size_t size;
	unsigned char seed;
};

/* realloc k->p to size; the result holds k's contents up to the smaller
 * size, and is then refilled with the next seed. On failure the block is
 * kept as it was, and must still hold its contents. */
static void do_realloc(struct ctx *c, int line, struct kept *k, size_t size)
{
	unsigned char *q;

	if (k->p == NULL)
		return;
	errno = 0;
	q = hz_preload_realloc(k->p, size);
	if (!check_result(c, line, q, size, 16)) {
		if (!filled(k->p, k->size, k->seed))
			wrong(c, line, "failed realloc lost the old block's contents", k->p);
		return;
	}
	if (!filled(q, k->size < size ? k->size : size, k->seed))
		wrong(c, line, "realloc lost contents", q);
	k->p = q;
	k->size = size;
	k->seed++;
	fill(q, size, k->seed);
}

static unsigned char *do_aligned(struct ctx *c, int line, int how, size_t align,
				 size_t size, unsigned char seed)
{
	void *p = NULL;
	int ret;

	errno = 0;
	switch (how) {
	case 0:
		ret = hz_preload_posix_memalign(&p, align, size);
		if (ret != 0) {
			if (ret != ENOMEM)
				wrong(c, line, "posix_memalign failed without ENOMEM", NULL);
			errno = ENOMEM;
			p = NULL;
		}
		break;
	case 1:
		p = hz_preload_aligned_alloc(align, size);
		break;
	case 2:
		p = hz_preload_memalign(align, size);
		break;
	case 3:
		p = hz_preload_valloc(size);
		break;
	default:
		p = hz_preload_pvalloc(size);
		break;
	}
	if (!check_result(c, line, p, size, align))
		return NULL;
	fill(p, size, seed);
	return p;
}

static void do_free(struct ctx *c, int line, unsigned char *p, size_t size, unsigned char seed)
{
	if (p == NULL)
		return;
	if (!filled(p, size, seed))
		wrong(c, line, "block contents changed while it was live", p);
	hz_preload_free(p);
}

/* A calloc of size checked for zero, its first 2 MiB written. */
static unsigned char *big_calloc(struct ctx *c, int line, size_t size)
{
	unsigned char *p;

	errno = 0;
	p = hz_preload_calloc(1, size);
	if (!check_result(c, line, p, size, 16))
		return NULL;
	if (!zero(p, size))
		wrong(c, line, "calloc memory not zero", p);
	memset(p, 0xa5, 2 * MiB);
	return p;
}

/* Touch one byte every 256 KiB: under 1/16 of the pages, so the block is
 * dropped rather than cleared when it comes back for a calloc. */
static void sparse_use(struct ctx *c, int line, size_t size)
{
	unsigned char *p = hz_preload_malloc(size);

	if (!check_result(c, line, p, size, 16))
		return;
	for (size_t off = 0; off < size; off += 256 * KiB)
		p[off] = 0x5a;
	hz_preload_free(p);
}

/* Anonymous mmap, grown with mremap, unmapped; and the reservation
 * refusing a munmap. */
static void mappings(struct ctx *c)
{
	size_t len = 3 * MiB;
	unsigned char *m, *n;

	errno = 0;
	m = hz_preload_mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	c->r->ops++;
	if (m == MAP_FAILED) {
		c->r->failed++;
		if (errno != ENOMEM)
			WRONG("mmap failed without ENOMEM", NULL);
		return;
	}
	/* Alignment is best effort: a failed trim falls back to a plain map. */
	if (c->strict && active() && (uintptr_t)m % (2 * MiB) != 0)
		WRONG("large anonymous mmap not 2 MiB aligned", m);
	fill(m, len, 7);
	errno = 0;
	n = hz_preload_mremap(m, len, 2 * len, MREMAP_MAYMOVE, NULL);
	c->r->ops++;
	if (n == MAP_FAILED) {
		c->r->failed++;
		n = m;
	} else {
		if (!filled(n, len, 7))
			WRONG("mremap lost contents", n);
		len *= 2;
		fill(n, len, 8);
	}
	if (hz_preload_munmap(n, len) != 0)
		WRONG("munmap of an anonymous mapping failed", n);
	/* Only once a region exists: a walk whose every mmap fails has none. */
	if (active() && hz_blocks_held() != 0) {
		errno = 0;
		if (hz_preload_munmap((void *)hz_reservation.start, 2 * MiB) != -1 ||
		    errno != EINVAL)
			WRONG("munmap inside a region not refused with EINVAL", NULL);
	}
}

/* A block the program changed (preload/foreign.h): its first 2 MiB made
 * read-only (through the wrapper's hook, then the real call), a mapping
 * of its own put over the next 2 MiB with mmap(MAP_FIXED) and unmapped
 * again (a reset, which may fail as mmap does); freed, it is released
 * reset, and the next block of that size is zero and writable. 2 MiB
 * pieces, so that a hugetlb block takes them too. */
static void foreign_block(struct ctx *c, int line)
{
	size_t size = 4 * MiB;
	unsigned char *p = hz_preload_malloc(size), *v;

	if (!check_result(c, line, p, size, 16))
		return;
	if (hz_blocks_owns(p)) {
		hz_foreign_changed(p, 2 * MiB);
		if (mprotect(p, 2 * MiB, PROT_READ) != 0)
			wrong(c, line, "mprotect of a block failed", p);
		v = hz_preload_mmap(p + 2 * MiB, 2 * MiB, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		errno = 0;
		if (v == MAP_FAILED)
			wrong(c, line, "mmap(MAP_FIXED) over a block failed", p);
		else if (hz_preload_munmap(v, 2 * MiB) != 0 && errno != ENOMEM)
			wrong(c, line, "munmap of the program's own mapping in a block refused", v);
	}
	hz_preload_free(p);
	do_free(c, line, do_calloc(c, line, size, 10), size, 10);
}

/* A program lowering RLIMIT_AS far below what hugezero holds: the
 * interposed setrlimit (here without the real call, so the limit stays)
 * drops the cache and gives back every region without a live block; the
 * next block needs a new region. */
static void lowered_limit(struct ctx *c)
{
	struct rlimit rl = { 64 * MiB, RLIM_INFINITY };
	unsigned char *p = do_malloc(c, __LINE__, 4 * MiB, 10);

	do_free(c, __LINE__, p, 4 * MiB, 10); /* cached */
	/* Regions with granules kept after a failed release stay (orphans). */
	hz_preload_setrlimit(RLIMIT_AS, &rl);
	do_free(c, __LINE__, do_calloc(c, __LINE__, 4 * MiB, 11), 4 * MiB, 11);
}

void workload_run(bool strict, struct workload_result *r)
{
	struct ctx ctx = { r, strict }, *c = &ctx;
	unsigned char *b, *al[5], *h, *i, *big;
	struct kept a = { NULL, 300 * KiB, 1 };
	static const size_t aligns[5][2] = {
		{ GiB, 3 * MiB }, { 2 * MiB, 600 * KiB }, { 64 * KiB, 700 * KiB },
		{ PAGE, 500 * KiB }, { PAGE, 300 * KiB + 1 },
	};

	*r = (struct workload_result){ 0, 0, 0, 0 };
	a.p = do_malloc(c, __LINE__, a.size, a.seed);
	b = do_calloc(c, __LINE__, 5 * MiB, 2);
	/* Grow past b (moved), grow in place, shrink, cross the threshold
	 * down and back up. */
	do_realloc(c, __LINE__, &a, 3 * MiB);
	do_realloc(c, __LINE__, &a, 9 * MiB);
	do_realloc(c, __LINE__, &a, 1 * MiB);
	do_realloc(c, __LINE__, &a, 100 * KiB);
	do_realloc(c, __LINE__, &a, 4 * MiB);
	for (int k = 0; k < 5; k++)
		al[k] = do_aligned(c, __LINE__, k, aligns[k][0], aligns[k][1],
				   (unsigned char)(20 + k));
	/* Reuse: b's dirty span comes back zeroed for calloc; the 1 GiB
	 * aligned block's comes back to malloc. */
	do_free(c, __LINE__, b, 5 * MiB, 2);
	h = do_calloc(c, __LINE__, 4 * MiB, 3);
	do_free(c, __LINE__, al[0], 3 * MiB, 20);
	i = do_malloc(c, __LINE__, 5 * MiB / 2, 4);
	/* Sparse use is dropped, dense use cleared. */
	sparse_use(c, __LINE__, 6 * MiB);
	do_free(c, __LINE__, do_calloc(c, __LINE__, 6 * MiB, 5), 6 * MiB, 5);
	do_free(c, __LINE__, do_calloc(c, __LINE__, 6 * MiB, 6), 6 * MiB, 6);
	/* 32 MiB: a fresh block gets the THP speed check. Only its start is
	 * written (its first huge page is populated by the check anyway), so
	 * it comes back sparse. */
	big = big_calloc(c, __LINE__, 32 * MiB);
	if (big)
		hz_preload_free(big);
	big = big_calloc(c, __LINE__, 30 * MiB);
	mappings(c);
	foreign_block(c, __LINE__);
	if (big)
		hz_preload_free(big);
	do_free(c, __LINE__, a.p, a.size, a.seed);
	for (int k = 1; k < 5; k++)
		do_free(c, __LINE__, al[k], aligns[k][1], (unsigned char)(20 + k));
	do_free(c, __LINE__, h, 4 * MiB, 3);
	do_free(c, __LINE__, i, 5 * MiB / 2, 4);
	/* Decay: everything cached is idle past HUGEZERO_DECAY_MS now, and
	 * the next large request releases it. */
	hz_prim_fault_advance_clock(2000000000ull);
	do_free(c, __LINE__, do_malloc(c, __LINE__, 300 * KiB, 9), 300 * KiB, 9);
	lowered_limit(c);
}
