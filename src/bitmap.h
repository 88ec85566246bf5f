/* Bitmaps in 64-bit words, handled a word at a time: a 64 MiB extent of
 * 4 KiB pages is 256 words, not 16384 bit tests. The one bitmap of the
 * tree: the granules of blocks.c and the pages of jemalloc/regions.c. */
#ifndef HZ_BITMAP_H
#define HZ_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bits of word w that fall in [first, end), as a mask. */
static inline uint64_t hz_bits_mask(size_t w, size_t first, size_t end)
{
	size_t lo = first > w * 64 ? first - w * 64 : 0;
	size_t hi = end < (w + 1) * 64 ? end - w * 64 : 64;
	uint64_t upto = hi == 64 ? ~0ull : (1ull << hi) - 1;

	return upto & ~((1ull << lo) - 1);
}

static inline void hz_bits_set(uint64_t *map, size_t first, size_t n, bool value)
{
	size_t end = first + n;

	for (size_t w = first / 64; w * 64 < end; w++) {
		uint64_t m = hz_bits_mask(w, first, end);

		map[w] = value ? map[w] | m : map[w] & ~m;
	}
}

static inline size_t hz_bits_count(const uint64_t *map, size_t first, size_t n)
{
	size_t end = first + n, count = 0;

	for (size_t w = first / 64; w * 64 < end; w++)
		count += (size_t)__builtin_popcountll(map[w] & hz_bits_mask(w, first, end));
	return count;
}

/* First index in [from, to) whose bit is value, or to. */
static inline size_t hz_bits_find(const uint64_t *map, size_t from, size_t to,
				  bool value)
{
	while (from < to) {
		uint64_t w = value ? map[from / 64] : ~map[from / 64];

		w >>= from % 64;
		if (w) {
			size_t i = from + (size_t)__builtin_ctzll(w);

			return i < to ? i : to;
		}
		from = (from / 64 + 1) * 64;
	}
	return to;
}

/* Whether bit i is set. */
static inline bool hz_bits_get(const uint64_t *map, size_t i)
{
	return (map[i / 64] >> (i % 64)) & 1;
}

#endif /* HZ_BITMAP_H */
