/* Half-open address ranges [start, end) and the arithmetic on them.
 *
 * Every piece of index arithmetic that clamps, aligns or splits a range
 * (neighbourhood-last clearing, chunk alignment, mapping clamps) goes through
 * these helpers, so the edge cases are solved and tested once. */
#ifndef HZ_RANGE_H
#define HZ_RANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hz_range {
	uintptr_t start;
	uintptr_t end; /* one past the last byte; start <= end */
};

static inline struct hz_range hz_range_make(uintptr_t start, size_t len)
{
	return (struct hz_range){ start, start + len };
}

static inline size_t hz_range_len(struct hz_range r)
{
	return r.end - r.start;
}

static inline bool hz_range_empty(struct hz_range r)
{
	return r.end <= r.start;
}

static inline bool hz_range_contains(struct hz_range r, uintptr_t addr)
{
	return addr >= r.start && addr < r.end;
}

/* The part of r inside limit; empty (start == end) when they do not meet. */
static inline struct hz_range hz_range_clamp(struct hz_range r,
					     struct hz_range limit)
{
	uintptr_t start = r.start > limit.start ? r.start : limit.start;
	uintptr_t end = r.end < limit.end ? r.end : limit.end;

	if (end < start)
		end = start;
	return (struct hz_range){ start, end };
}

/* Whether a and b share a byte. */
static inline bool hz_range_overlaps(struct hz_range a, struct hz_range b)
{
	return a.start < b.end && b.start < a.end;
}

/* Whether a and b meet, one's end the other's start. */
static inline bool hz_range_adjacent(struct hz_range a, struct hz_range b)
{
	return a.end == b.start || b.end == a.start;
}

/* The smallest range holding a and b: for adjacent ones, the two as one. */
static inline struct hz_range hz_range_join(struct hz_range a, struct hz_range b)
{
	return (struct hz_range){ a.start < b.start ? a.start : b.start,
				  a.end > b.end ? a.end : b.end };
}

/* r cut at at (clamped into r): lo = [r.start, at), hi = [at, r.end). */
static inline void hz_range_split_at(struct hz_range r, uintptr_t at, struct hz_range *lo,
				     struct hz_range *hi)
{
	if (at < r.start)
		at = r.start;
	if (at > r.end)
		at = r.end;
	*lo = (struct hz_range){ r.start, at };
	*hi = (struct hz_range){ at, r.end };
}

/* Whole chunks of chunk bytes r holds. */
static inline size_t hz_range_chunks(struct hz_range r, size_t chunk)
{
	return hz_range_len(r) / chunk;
}

/* align must be a power of two. */
static inline uintptr_t hz_align_down(uintptr_t x, size_t align)
{
	return x & ~(uintptr_t)(align - 1);
}

/* align must be a power of two; x + align - 1 must not overflow. */
static inline uintptr_t hz_align_up(uintptr_t x, size_t align)
{
	return hz_align_down(x + align - 1, align);
}

static inline bool hz_is_pow2(size_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

/* The aligned interior of r: start rounded up and end rounded down to align
 * (a power of two); empty (start == end) when no aligned block fits. */
static inline struct hz_range hz_range_align_in(struct hz_range r, size_t align)
{
	uintptr_t start = hz_align_up(r.start, align);
	uintptr_t end = hz_align_down(r.end, align);

	if (end < start)
		end = start;
	return (struct hz_range){ start, end };
}

/* r grown to align (start rounded down, end rounded up), then clamped to
 * limit: the exec-folio chunking of the kernel's readahead, which never
 * reaches past the mapping. */
static inline struct hz_range hz_range_align_out(struct hz_range r, size_t align,
						 struct hz_range limit)
{
	struct hz_range out = { hz_align_down(r.start, align),
				hz_align_up(r.end, align) };

	return hz_range_clamp(out, limit);
}

#endif /* HZ_RANGE_H */
