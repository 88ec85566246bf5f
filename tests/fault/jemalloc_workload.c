/* The jemalloc extent hooks' workload for the fault walk: the hooks called
 * directly, as jemalloc calls them (alloc with *commit true, as its
 * exact-size path does), on an arena index jemalloc never reaches. Every
 * answer is checked against the hooks' contract (include/hugezero/
 * jemalloc.h): an extent handed out with *zero set reads zero; a purge or
 * decommit that succeeds leaves its range reading zero and the rest of the
 * extent untouched; split always succeeds inside a region. Failures may
 * only make the hooks refuse (NULL, or true: "opt out"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../include/hugezero/jemalloc.h"
#include "harness.h"

#define PAGE ((size_t)4096)
#define ARENA 4000u

struct ctx {
	struct workload_result *r;
	extent_hooks_t *h;
};

static void wrong(struct ctx *c, int line, const char *what, const void *p)
{
	c->r->wrong++;
	fprintf(stderr, "jemalloc_workload.c:%d: %s (%p)\n", line, what, p);
}

static bool uniform(const unsigned char *p, size_t n, unsigned char v)
{
	return n == 0 || (p[0] == v && memcmp(p, p + 1, n - 1) == 0);
}

static bool all(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t off = 0; off < n; off += 64 * KiB)
		if (!uniform(p + off, n - off < 64 * KiB ? n - off : 64 * KiB, v))
			return false;
	return true;
}

struct extent {
	unsigned char *p;
	size_t size;
	unsigned char fill;
};

static void alloc(struct ctx *c, int line, struct extent *e, size_t size, size_t align,
		  unsigned char fill)
{
	bool zero = true, commit = true; /* asked for zeroed: it must read zero */
	int saved = errno = EDOM;

	e->p = c->h->alloc(c->h, NULL, size, align, &zero, &commit, ARENA);
	e->size = size;
	e->fill = fill;
	c->r->ops++;
	if (errno != saved)
		wrong(c, line, "alloc changed errno", e->p);
	if (e->p == NULL) {
		c->r->failed++;
		return;
	}
	if (!commit || (uintptr_t)e->p % align != 0)
		wrong(c, line, "extent not committed or misaligned", e->p);
	/* Asked for zeroed memory: the extent reads zero, and says so. */
	if (!zero)
		wrong(c, line, "extent not marked zero", e->p);
	else if (!all(e->p, size, 0))
		wrong(c, line, "extent marked zero is not", e->p);
	memset(e->p, fill, size);
}

static void dalloc(struct ctx *c, int line, struct extent *e)
{
	if (e->p == NULL)
		return;
	if (!all(e->p, e->size, e->fill))
		wrong(c, line, "extent contents changed", e->p);
	/* An opt-out would make jemalloc retain it, and destroy it later. */
	if (c->h->dalloc(c->h, e->p, e->size, true, ARENA))
		c->h->destroy(c->h, e->p, e->size, true, ARENA);
	e->p = NULL;
}

/* purge_forced or decommit of [off, off + len): on success that range
 * reads zero; the rest of the extent keeps its contents either way. */
static void purge(struct ctx *c, int line, struct extent *e, size_t off, size_t len,
		  bool decommit)
{
	bool opt_out;

	if (e->p == NULL)
		return;
	c->r->ops++;
	opt_out = decommit ? c->h->decommit(c->h, e->p, e->size, off, len, ARENA)
			   : c->h->purge_forced(c->h, e->p, e->size, off, len, ARENA);
	if (opt_out) {
		c->r->failed++;
		if (!all(e->p + off, len, e->fill))
			wrong(c, line, "refused purge changed the range", e->p);
	} else if (!all(e->p + off, len, 0)) {
		wrong(c, line, "purged range does not read zero", e->p + off);
	}
	if (!all(e->p, off, e->fill) || !all(e->p + off + len, e->size - off - len, e->fill))
		wrong(c, line, "purge touched the rest of the extent", e->p);
	if (decommit && !opt_out && c->h->commit(c->h, e->p, e->size, off, len, ARENA))
		wrong(c, line, "commit after decommit refused", e->p);
	/* Back to one fill, whatever happened. */
	memset(e->p + off, e->fill, len);
}

void jemalloc_workload_run(bool strict, struct workload_result *r)
{
	struct ctx ctx = { r, hz_jemalloc_hooks() }, *c = &ctx;
	struct extent e[6];
	struct hz_jemalloc_stats st;

	(void)strict;
	*r = (struct workload_result){ 0, 0, 0, 0 };
	/* Odd sizes from the first region; one larger than a region; a 1 GiB
	 * alignment, which needs a region of its own. */
	alloc(c, __LINE__, &e[0], 2 * MiB + 512 * KiB, PAGE, 1);
	alloc(c, __LINE__, &e[1], PAGE, PAGE, 2);
	alloc(c, __LINE__, &e[2], 6 * MiB + PAGE, 2 * MiB, 3);
	alloc(c, __LINE__, &e[3], 70 * MiB, PAGE, 4);
	alloc(c, __LINE__, &e[4], 8 * KiB, GiB, 5);
	/* Partial and whole huge pages purged and decommitted; MADV_FREE. */
	purge(c, __LINE__, &e[2], PAGE, 4 * MiB, false);
	purge(c, __LINE__, &e[0], 64 * KiB, 2 * MiB, true);
	purge(c, __LINE__, &e[3], 2 * MiB, 8 * MiB + PAGE, false);
	if (e[3].p)
		c->h->purge_lazy(c->h, e[3].p, e[3].size, 20 * MiB, 4 * MiB, ARENA);
	/* Split is bookkeeping: it must succeed; merging it back too. */
	if (e[3].p) {
		if (c->h->split(c->h, e[3].p, e[3].size, 64 * MiB, 6 * MiB, true, ARENA))
			wrong(c, __LINE__, "split inside a region refused", e[3].p);
		else if (c->h->merge(c->h, e[3].p, 64 * MiB, e[3].p + 64 * MiB, 6 * MiB, true, ARENA))
			wrong(c, __LINE__, "merge inside a region refused", e[3].p);
	}
	/* Freed extents come back zeroed. */
	dalloc(c, __LINE__, &e[0]);
	dalloc(c, __LINE__, &e[2]);
	alloc(c, __LINE__, &e[5], 5 * MiB, PAGE, 6);
	for (int i = 0; i < 6; i++)
		dalloc(c, __LINE__, &e[i]);
	/* The arena holds nothing: its regions went back. */
	if (hz_jemalloc_stats(ARENA, &st) != 0 || st.active_bytes != 0 || st.regions != 0) {
		wrong(c, __LINE__, "regions or active bytes left with every extent freed", NULL);
		fprintf(stderr, "  %zu regions, %zu bytes active\n", st.regions, st.active_bytes);
	}
}
