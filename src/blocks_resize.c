/* Realloc of a block, and a kept block grown at a miss (recycle.c): grow
 * or shrink in place, move the page tables, or (realloc only) copy; and
 * a kept span taken in as a block's tail or moved onto
 * (recycle_resize.c). See blocks.h for hz_blocks_resize, hz_blocks_grow,
 * hz_blocks_move_into and hz_blocks_absorb. */
#include "blocks.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "backing.h"
#include "blocks_impl.h"
#include "classes.h"
#include "prim/memory.h"
#include "prim/prim.h"
#include "promote_density.h"
#include "stats.h"

/* How a grown tail is mapped: as a fresh block starts (lazy, or huge
 * pages on its class's evidence), not advised MADV_NOHUGEPAGE, which no
 * collapse would undo. But where blocks start lazily (4 KiB pages,
 * backing.c), a block's front tells how realloc's tail will be used: a
 * vector grown when full, or numpy's resize, which fills the new part
 * with zeros, writes it densely from its start. So a realloc'd tail after
 * a front on huge pages, or on 4 KiB pages written densely (as the
 * promoter judges a range the program moved on from, promote_density.h),
 * takes THP at once: pandas' reallocs of 16-128 MiB faulted 65 k 4 KiB
 * pages before the first touches advised their tails. Only a tail of at
 * most HZ_GUESS_MAX (64 MiB), the most a guess may cost: a larger one
 * written sparsely would cost more. Not a kept block grown at a miss
 * (recycle.c): its front is an earlier block's, and a tail there is
 * mostly the last, partly used 2 MiB of a request a little larger than
 * the block (ld's, 6.1 MiB on 6 MiB: 17 MiB more at its peak, and 2.6%
 * slower, with THP at once). */
struct tail {
	enum hz_backing backing;
	bool lazy;
};

static struct tail tail_of(uintptr_t front, size_t old_g, size_t new_g, enum hz_backing backing,
			   bool by_realloc)
{
	/* The front's first 64 MiB speak for it, counted on the stack. */
	uint16_t resident[HZ_GUESS_MAX / HZ_SZ_2M];

	if (!hz_backing_lazy() || (backing != HZ_BACKING_SMALL && backing != HZ_BACKING_THP))
		return (struct tail){ backing, true };
	if (by_realloc && (new_g - old_g) * HZ_GRANULE <= HZ_GUESS_MAX &&
	    (backing == HZ_BACKING_THP ||
	     hz_promote_used(front, old_g * HZ_GRANULE, resident,
			     sizeof(resident) / sizeof(resident[0])) == HZ_FRONT_DENSE))
		return (struct tail){ HZ_BACKING_THP, false };
	return (struct tail){ HZ_BACKING_THP, true };
}

/* Back the tail of a block of new_g granules whose first old_g are there,
 * the tail starting at start. */
static int map_tail(uintptr_t start, size_t old_g, size_t new_g, struct tail t)
{
	size_t len = (new_g - old_g) * HZ_GRANULE;
	enum hz_backing got;

	return hz_backing_map(start, len, t.backing,
			      t.lazy ? &(struct hz_lazy_block){ len, new_g * HZ_GRANULE } : NULL,
			      &got);
}

/* Claim the granules right after the block, in its region, and back them. */
static int grow_in_place(struct hz_block_region *r, size_t first, size_t old_g, size_t new_g,
			 struct tail t)
{
	int ret = hz_blocks_claim_after(r, first, old_g, new_g);

	if (ret != 0)
		return ret;
	ret = map_tail(hz_region_addr(r, first + old_g), old_g, new_g, t);
	if (ret != 0)
		hz_blocks_unclaim_after(ret, r, first + old_g, new_g - old_g);
	return ret;
}

/* The moved block's old place stops being live before its granules go
 * back: once they are unclaimed, another thread may make a block there, and
 * clearing the flag after that would clear the new block's (its free would
 * then stop the program as a double free). */
static void retire_old_place(struct block_meta *old)
{
	__atomic_store_n(&old->live, 0, __ATOMIC_RELEASE);
}

/* Where a block is, or goes: its region and first granule. */
struct place {
	struct hz_block_region *r;
	size_t first;
};

static uintptr_t place_addr(struct place p)
{
	return hz_region_addr(p.r, p.first);
}

/* Move the pages of [start, start + len) to new_addr: with
 * MREMAP_DONTUNMAP, which leaves the old range mapped and empty (*hole
 * false); where that is refused (kernels before 5.7, Valgrind), a plain
 * move of the same length, which leaves a hole there (*hole true). The
 * tail is mapped apart in both (map_tail): a plain mremap that grows the
 * mapping would give it the old range's advice, and Valgrind would not
 * count its growth as memory. */
static int move_pages(uintptr_t start, size_t len, uintptr_t new_addr, bool *hole)
{
	void *moved;
	int ret = hz_prim_mremap((void *)start, len, len,
				 MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
				 (void *)new_addr, &moved);

	*hole = ret == -EINVAL; /* no MREMAP_DONTUNMAP (or not for this memory) */
	if (*hole)
		ret = hz_prim_mremap((void *)start, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				     (void *)new_addr, &moved);
	return ret;
}

/* Move the pages of the block old at from, old_g granules, onto the
 * claimed place to, whose granules past old_g are mapped already (with
 * MREMAP_DONTUNMAP no step opens a hole in a region: the kernel could
 * place another mapping in one, and we would take the pointers into it
 * for ours, and free would stop the program), and give the old place
 * back. Returns 0, or the error with nothing moved. */
static int move_onto(struct place from, size_t old_g, struct place to, struct block_meta *old)
{
	uintptr_t start = place_addr(from);
	size_t old_len = old_g * HZ_GRANULE;
	bool foreign = hz_blocks_foreign_range(start, old_len);
	bool hole;
	int ret = move_pages(start, old_len, place_addr(to), &hole);

	if (ret != 0)
		return ret;
	retire_old_place(old);
	if (!hole) {
		hz_blocks_release_range(start, old_len);
	} else {
		/* Reserved again, never over what another thread mapped in
		 * the hole meanwhile (its granules then stay claimed). */
		ret = hz_prim_reserve_hole(start, old_len);
		if (ret == 0 || ret == -EEXIST)
			hz_blocks_unclaim_after(ret, from.r, from.first, old_g);
	}
	/* The pages moved with their mappings' properties (mremap), so the
	 * mark moves too: claiming the new place cleared it. */
	if (foreign)
		hz_blocks_mark_foreign(place_addr(to), old_len);
	return 0;
}

/* Move the block's page tables to a new, larger place (in any region):
 * claim it, map the new tail there, then move the pages onto its front. */
static int move_block(struct place from, size_t old_g, size_t new_g, size_t unit, struct tail t,
		      struct block_meta *old, struct place *out)
{
	size_t old_len = old_g * HZ_GRANULE;
	struct place to;
	int ret;

	ret = hz_blocks_claim(new_g, unit / HZ_GRANULE, &to.r, &to.first);
	if (ret != 0)
		return ret;
	ret = map_tail(place_addr(to) + old_len, old_g, new_g, t);
	if (ret != 0) {
		hz_blocks_unclaim(to.r, to.first, old_g);
		hz_blocks_unclaim_after(ret, to.r, to.first + old_g, new_g - old_g);
		return ret;
	}
	ret = move_onto(from, old_g, to, old);
	if (ret != 0) {
		hz_blocks_release_range(place_addr(to) + old_len, (new_g - old_g) * HZ_GRANULE);
		hz_blocks_unclaim(to.r, to.first, old_g);
		return ret;
	}
	*out = to;
	return 0;
}

int hz_blocks_move_into(void *p, const struct hz_span *span, void **out)
{
	struct hz_block_region *r;
	struct block_meta *m = hz_blocks_live(p, "realloc", &r);
	struct place from = { r, hz_region_index(r, (uintptr_t)p) }, to;
	size_t old_g = m->granules, new_g = hz_span_granules(span);
	enum hz_backing backing = (enum hz_backing)m->backing;

	if (new_g <= old_g || span->backing != backing)
		return -EINVAL;
	to.r = hz_blocks_check_hand_out(span);
	to.first = hz_region_index(to.r, span->range.start);
	/* The span's front pages go (mremap unmaps what it moves onto), its
	 * tail keeps its own: only the front is the block's. */
	if (move_onto(from, old_g, to, m) != 0)
		return -ENOMEM;
	m = &to.r->meta[to.first];
	m->granules = (uint32_t)new_g;
	m->backing = (uint8_t)backing;
	__atomic_store_n(&m->live, 1, __ATOMIC_RELEASE);
	hz_blocks_count_live((int64_t)((new_g - old_g) * HZ_GRANULE));
	hz_stats_add(realloc_moved, 1);
	*out = (void *)span->range.start;
	return 0;
}

/* Last resort when the page tables cannot move (mremap of hugetlb memory
 * fails on older kernels): a new block and a copy. */
static int copy_block(void *p, size_t size, size_t old_g, void **out)
{
	void *q;

	if (hz_blocks_alloc(size, HZ_GRANULE, &q) != 0)
		return -ENOMEM;
	memcpy(q, p, old_g * HZ_GRANULE);
	hz_blocks_free(p);
	hz_stats_add(realloc_copied, 1);
	*out = q;
	return 0;
}

/* Grow the live block m at *at from old_g to new_g granules, in place or
 * by moving its page tables (*at then says where). Returns 0, or -ENOMEM
 * with the block unchanged. */
static int grow(struct block_meta **m, struct place *at, size_t old_g, size_t new_g,
		bool by_realloc, bool *moved)
{
	enum hz_backing backing = (enum hz_backing)(*m)->backing;
	size_t unit = hz_blocks_unit(backing);
	struct tail t = tail_of(place_addr(*at), old_g, new_g, backing, by_realloc);

	*moved = false;
	if (grow_in_place(at->r, at->first, old_g, new_g, t) != 0) {
		if (move_block(*at, old_g, new_g, unit, t, *m, at) != 0)
			return -ENOMEM;
		/* m stopped being live inside the move (retire_old_place). */
		*m = &at->r->meta[at->first];
		(*m)->backing = (uint8_t)backing;
		__atomic_store_n(&(*m)->live, 1, __ATOMIC_RELEASE);
		*moved = true;
	}
	(*m)->granules = (uint32_t)new_g;
	hz_blocks_count_live((int64_t)((new_g - old_g) * HZ_GRANULE));
	return 0;
}

int hz_blocks_grow(void *p, size_t size, void **out)
{
	struct hz_block_region *r;
	struct block_meta *m = hz_blocks_live(p, "grow", &r);
	struct place at = { r, hz_region_index(r, (uintptr_t)p) };
	size_t len;
	bool moved;

	if (hz_blocks_len(size, hz_blocks_unit((enum hz_backing)m->backing), &len) != 0)
		return -ENOMEM;
	if (len / HZ_GRANULE > m->granules &&
	    grow(&m, &at, m->granules, len / HZ_GRANULE, false, &moved) != 0)
		return -ENOMEM;
	*out = (void *)place_addr(at);
	return 0;
}

int hz_blocks_resize(void *p, size_t size, void **out)
{
	struct hz_block_region *r;
	struct block_meta *m = hz_blocks_live(p, "realloc", &r);
	enum hz_backing backing = (enum hz_backing)m->backing;
	size_t unit = hz_blocks_unit(backing);
	struct place at = { r, hz_region_index(r, (uintptr_t)p) };
	size_t old_g = m->granules, new_g, len;
	uintptr_t start = (uintptr_t)p;
	bool moved;

	if (hz_blocks_len(size, unit, &len) != 0)
		return -ENOMEM;
	new_g = len / HZ_GRANULE;
	if (new_g < old_g) {
		/* Shrink: only the tail's memory goes back. */
		if (hz_blocks_drop_memory(start + len, (old_g - new_g) * HZ_GRANULE) == 0) {
			hz_blocks_unclaim(r, at.first + new_g, old_g - new_g);
			m->granules = (uint32_t)new_g;
			hz_blocks_count_live(-(int64_t)((old_g - new_g) * HZ_GRANULE));
		}
		hz_stats_add(realloc_in_place, 1);
	} else if (new_g > old_g) {
		if (grow(&m, &at, old_g, new_g, true, &moved) != 0)
			return copy_block(p, size, old_g, out);
		start = place_addr(at);
		if (moved)
			hz_stats_add(realloc_moved, 1);
		else
			hz_stats_add(realloc_in_place, 1);
	}
	*out = (void *)start;
	return 0;
}

int hz_blocks_absorb(void *p, const struct hz_span *span)
{
	struct hz_block_region *r;
	struct block_meta *m = hz_blocks_live(p, "realloc", &r);
	uintptr_t end = (uintptr_t)p + (size_t)m->granules * HZ_GRANULE;

	if (span->range.start != end || span->backing != (enum hz_backing)m->backing ||
	    hz_blocks_region_of(end) != r)
		return -EINVAL;
	hz_blocks_check_hand_out(span);
	m->granules += (uint32_t)hz_span_granules(span);
	hz_blocks_count_live((int64_t)hz_span_bytes(span));
	return 0;
}
