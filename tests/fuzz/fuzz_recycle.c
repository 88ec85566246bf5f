/* Recycler operation sequences: an interpreter of malloc, calloc, realloc,
 * free and the aligned entry points over hz_preload_* (the recycler as a
 * library, tests/library/libc_next.h), with a shadow of every live block.
 *
 * Each operation is 4 bytes: op (low nibble: what; high nibble: size
 * class), slot, and a 16-bit argument the size and alignment come from.
 * Blocks are stamped when handed out (one byte per 2 KiB and the last byte)
 * and filled with a dirty pattern before they are freed. Checked: calloc
 * is all zero, realloc keeps the common prefix, alignments hold, usable
 * sizes cover the request, large requests are hugezero blocks and small
 * ones are not, no two live blocks overlap, a stamp survives until its
 * block is freed, and requests beyond PTRDIFF_MAX fail with ENOMEM. Live blocks total at most LIVE_MAX, so the RSS stays
 * bounded; everything is freed at the end of each input. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "blocks.h"
#include "fuzz.h"
#include "libc_next.h"
#include "range.h"
#include "stats.h"
#include "../util.h"

#define THRESHOLD (256 * KiB)
#define SLOTS 16
/* 128 MiB live at most, plus the 64 MiB cache (HUGEZERO_CACHE_MAX below):
 * with ASan's shadow, well under scripts/fuzz.sh's RSS limit. */
#define LIVE_MAX (128 * MiB)
#define DIRTY 0xdb
/* 2 KiB between stamp bytes: two per 4 KiB page, so a page lost or
 * misplaced by realloc shows, at a cost that keeps the fuzzer fast. */
#define STRIDE 2048

struct slot {
	unsigned char *p;
	size_t size;
	unsigned char seed;
};

static struct slot slots[SLOTS];
static size_t live_bytes;

/* Under AddressSanitizer, its allocator (the next one here) must fail huge
 * requests as glibc does, with NULL and ENOMEM, instead of reporting them. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* THP only: whatever hugetlb pool another test left does not change
	 * what an input does. */
	setenv("HUGEZERO_BACKING", "thp", 0);
	setenv("HUGEZERO_CACHE_MAX", "64M", 0);
	setenv("HUGEZERO_RESERVE", "16G", 0);
	hz_test_library_options();
	return 0;
}

static size_t size_of(unsigned cls, unsigned arg)
{
	switch (cls % 6) {
	case 0: return arg % 4096;
	case 1: return THRESHOLD - 512 + arg % 1024;      /* the threshold's edge */
	case 2: return THRESHOLD + (size_t)arg * 64;      /* up to 4 MiB more */
	case 3: return (1 + arg % 8) * 2 * MiB + arg / 8 % 9 - 4; /* granule edges */
	case 4: return (size_t)arg * 256;                 /* up to 16 MiB */
	default: return 0;
	}
}

FUZZ_NO_COVERAGE static void stamp(const struct slot *s)
{
	if (s->size == 0)
		return;
	for (size_t i = 0; i < s->size - 1; i += STRIDE)
		s->p[i] = (unsigned char)(s->seed + i / STRIDE);
	s->p[s->size - 1] = s->seed;
}

/* First offset below upto where s's stamp is broken, or upto. */
FUZZ_NO_COVERAGE static size_t first_unstamped(const struct slot *s, size_t upto)
{
	if (s->size == 0)
		return upto;
	for (size_t i = 0; i < upto && i < s->size - 1; i += STRIDE)
		if (s->p[i] != (unsigned char)(s->seed + i / STRIDE))
			return i;
	if (upto >= s->size && s->p[s->size - 1] != s->seed)
		return s->size - 1;
	return upto;
}

static uint64_t fallbacks_before;

static uint64_t fallbacks(void)
{
	return __atomic_load_n(&hz_stats.fallbacks[HZ_FB_RESERVE_FULL], __ATOMIC_RELAXED);
}

static const unsigned char zero_page[4096];

FUZZ_NO_COVERAGE static size_t first_nonzero(const unsigned char *p, size_t n)
{
	for (size_t at = 0; at < n; at += sizeof(zero_page)) {
		size_t len = n - at < sizeof(zero_page) ? n - at : sizeof(zero_page);

		if (memcmp(p + at, zero_page, len) != 0)
			for (size_t i = at; i < at + len; i++)
				if (p[i])
					return i;
	}
	return n;
}

static void check_block(const struct slot *s, const char *what, size_t align)
{
	size_t usable = hz_preload_malloc_usable_size(s->p);

	FUZZ_CHECK(usable >= s->size, "%s(%zu): usable size %zu", what, s->size, usable);
	FUZZ_CHECK(align == 0 || (uintptr_t)s->p % align == 0, "%s(%zu) = %p, not %zu-aligned",
		   what, s->size, (void *)s->p, align);
	/* A large request may go to the next allocator only when the
	 * reservation is full: 1 GiB alignments can use up its boundaries. */
	FUZZ_CHECK(hz_blocks_owns(s->p) == (s->size >= THRESHOLD) ||
		   (s->size >= THRESHOLD && fallbacks() > fallbacks_before),
		   "%s(%zu) = %p: owned by hugezero %d", what, s->size, (void *)s->p,
		   hz_blocks_owns(s->p));
	for (unsigned i = 0; i < SLOTS; i++) {
		const struct slot *o = &slots[i];

		FUZZ_CHECK(o == s || o->p == NULL ||
			   (uintptr_t)s->p + s->size <= (uintptr_t)o->p ||
			   (uintptr_t)o->p + o->size <= (uintptr_t)s->p ||
			   s->size == 0 || o->size == 0,
			   "%s(%zu) = %p overlaps live %p (%zu bytes)", what, s->size,
			   (void *)s->p, (void *)o->p, o->size);
	}
}

static void release(struct slot *s)
{
	size_t bad = first_unstamped(s, s->size);

	FUZZ_CHECK(bad == s->size, "block %p (%zu bytes) changed at %zu while live",
		   (void *)s->p, s->size, bad);
	memset(s->p, DIRTY, s->size);
	hz_preload_free(s->p);
	live_bytes -= s->size;
	s->p = NULL;
	s->size = 0;
}

static void *aligned(unsigned what, size_t align, size_t size)
{
	void *p = NULL;

	switch (what) {
	case 5:
		return hz_preload_aligned_alloc(align, size);
	case 6:
		return hz_preload_memalign(align, size);
	case 7:
		return hz_preload_valloc(size);
	case 8:
		return hz_preload_pvalloc(size);
	default:
		FUZZ_CHECK(hz_preload_posix_memalign(&p, align, size) == 0 ||
			   p == NULL, "posix_memalign failed yet set its pointer");
		return p;
	}
}

/* posix_memalign with an alignment that is not a power of two times
 * sizeof(void *) fails with EINVAL and leaves *out alone. */
static void bad_alignment(size_t align, size_t size)
{
	void *p = &p;
	int ret = hz_preload_posix_memalign(&p, align, size);

	if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *) != 0)
		FUZZ_CHECK(ret == EINVAL && p == &p, "posix_memalign(%zu): %d", align, ret);
	else if (ret == 0)
		hz_preload_free(p);
}

static void alloc_op(struct slot *s, unsigned what, size_t size, unsigned arg)
{
	/* 8 B .. 1 GiB for large blocks; the next allocator gets at most
	 * 64 KiB, as its alignment costs it address space. */
	unsigned shift = 3 + arg % (size >= THRESHOLD ? 28 : 14);
	size_t align = (size_t)1 << shift;
	const char *name = "malloc";

	/* aligned_alloc takes whole multiples of align (as ISO C and the
	 * sanitizers' allocators want), pvalloc whole pages. */
	if (what == 5)
		size = hz_align_up(size, align);
	if (what == 8)
		size = hz_align_up(size, 4096);
	if (live_bytes + size > LIVE_MAX)
		return;
	if (what == 1) {
		name = "calloc";
		s->p = hz_preload_calloc(1, size);
		FUZZ_CHECK(s->p != NULL, "calloc(%zu) failed", size);
		FUZZ_CHECK(first_nonzero(s->p, size) == size, "calloc(%zu) = %p: byte %zu is %#x",
			   size, (void *)s->p, first_nonzero(s->p, size),
			   s->p[first_nonzero(s->p, size)]);
		align = 0;
	} else if (what >= 4) {
		name = "aligned";
		if (what == 7 || what == 8)
			align = 4096;
		s->p = aligned(what, align, size);
	} else {
		s->p = hz_preload_malloc(size);
		align = 0;
	}
	FUZZ_CHECK(s->p != NULL, "%s(%zu) failed", name, size);
	s->size = size;
	s->seed = (unsigned char)(arg ^ (arg >> 8));
	live_bytes += size;
	check_block(s, name, align);
	stamp(s);
}

static void realloc_op(struct slot *s, size_t size)
{
	size_t keep = size < s->size ? size : s->size;
	unsigned char *q;

	if (live_bytes - s->size + size > LIVE_MAX)
		return;
	q = hz_preload_realloc(s->p, size);
	if (q == NULL && size == 0) { /* realloc(p, 0) freed it */
		live_bytes -= s->size;
		s->p = NULL;
		s->size = 0;
		return;
	}
	FUZZ_CHECK(q != NULL, "realloc(%p, %zu) failed", (void *)s->p, size);
	s->p = q;
	FUZZ_CHECK(first_unstamped(s, keep) == keep, "realloc %zu -> %zu lost byte %zu",
		   s->size, size, first_unstamped(s, keep));
	live_bytes = live_bytes - s->size + size;
	s->size = size;
	check_block(s, "realloc", 0);
	stamp(s);
}

/* Requests larger than PTRDIFF_MAX, which every allocator refuses: each
 * entry point fails with ENOMEM (a block being resized stays as it was),
 * and nothing in hugezero's size rounding wraps around to a small block. */
static void huge_op(struct slot *s, unsigned what, unsigned arg)
{
	size_t size = arg % 2 ? SIZE_MAX - arg / 2 : ((size_t)1 << 63) + arg / 2;
	void *p = NULL;
	int ret = 0;

	errno = 0;
	switch (what % 6) {
	case 0: p = hz_preload_malloc(size); break;
	case 1: p = hz_preload_calloc(1, size); break;
	case 2: ret = hz_preload_posix_memalign(&p, 4096, size); break;
	case 3: p = hz_preload_memalign((size_t)1 << 21, size); break;
	case 4: p = hz_preload_pvalloc(size); break;
	default:
		if (s->p == NULL)
			return;
		p = hz_preload_realloc(s->p, size);
		FUZZ_CHECK(first_unstamped(s, s->size) == s->size,
			   "failed realloc(%p, %zu) changed the block", (void *)s->p, size);
		break;
	}
	FUZZ_CHECK(p == NULL, "%zu bytes allocated at %p (entry point %u)", size, p, what % 6);
	FUZZ_CHECK(what % 6 == 2 ? ret == ENOMEM : errno == ENOMEM,
		   "entry point %u, %zu bytes: errno %d, returned %d", what % 6, size, errno, ret);
}

static void one_op(const uint8_t *op)
{
	struct slot *s = &slots[op[1] % SLOTS];
	unsigned what = op[0] & 15, arg = (unsigned)op[2] | (unsigned)op[3] << 8;
	size_t size = size_of(op[0] >> 4, arg);

	fallbacks_before = fallbacks();

	if (what == 2 && s->p) {
		realloc_op(s, size);
	} else if (what == 3 || what == 2) {
		if (s->p)
			release(s);
		else if (what == 2) /* realloc(NULL, size) is malloc */
			alloc_op(s, 0, size, arg);
	} else if (what == 9) {
		bad_alignment(arg, size);
	} else if (what == 10) {
		size_t m = 2 + arg % 100, n = SIZE_MAX / m + 1 + (arg >> 8) % 16;

		errno = 0;
		FUZZ_CHECK(hz_preload_calloc(n, m) == NULL && errno == ENOMEM,
			   "calloc(%zu, %zu) overflowed", n, m);
	} else if (what == 11) {
		huge_op(s, op[0] >> 4, arg);
	} else if (!s->p && what <= 8) {
		alloc_op(s, what, size, arg);
	} else if (s->p) {
		release(s);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (size_t at = 0; at + 4 <= size; at += 4)
		one_op(data + at);
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].p)
			release(&slots[i]);
	FUZZ_CHECK(live_bytes == 0, "%zu live bytes left", live_bytes);
	return 0;
}
