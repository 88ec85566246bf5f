/* Size arithmetic at the edges: every allocation function, called with an
 * exhaustive matrix of boundary sizes (0, 1, 2, powers of two around
 * sqrt(SIZE_MAX), SIZE_MAX/k +- 1, PTRDIFF_MAX +- d, SIZE_MAX - d) and
 * alignments, must either fail the way glibc fails (NULL and the same errno)
 * or return a block that really holds the size asked for: never a small
 * block because a multiplication or a rounding wrapped around.
 *
 * glibc is the reference in the same process: its own functions, looked up
 * in libc.so.6, are called with the same arguments just before the ones the
 * program links (hugezero's under LD_PRELOAD, glibc's otherwise, which keeps
 * the assertions honest). Under the preload (HZ_EXPECT_PRELOAD=1) each test
 * first leaves freed blocks in hugezero's cache, so a wrapped size would be
 * served from a cached span instead of failing in the fresh-block path. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "../util.h"

/* No process holds 2^47 bytes (128 TiB, the x86_64 and 48-bit arm64 user
 * address space): a request at least this large, or aligned this much, can
 * only fail, and must fail exactly as glibc does. */
#define IMPOSSIBLE ((size_t)1 << 47)
/* Requests up to 64 MiB (aligned up to 1 GiB) must succeed when glibc's do. */
#define SMALL (64 * MiB)

struct fns {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void (*free)(void *);
	size_t (*usable)(void *);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
};

/* Read through volatile pointers: compilers warn about (and may fold) the
 * impossible requests made here on purpose. */
static struct fns tested_fns, glibc_fns;
static const struct fns *volatile tested = &tested_fns;
static const struct fns *volatile glibc = &glibc_fns;
static bool expect_preload;

struct outcome {
	void *p;
	int err; /* errno, or posix_memalign's result */
};

/* ---- the boundary values ---- */

#define MAX_VALUES 256
static size_t values[MAX_VALUES];
static unsigned value_count;

static void add(size_t v)
{
	for (unsigned i = 0; i < value_count; i++)
		if (values[i] == v)
			return;
	assert_true(value_count < MAX_VALUES);
	values[value_count++] = v;
}

static void add_around(size_t v)
{
	add(v - 1);
	add(v);
	add(v + 1);
}

static void build_values(void)
{
	static const size_t small[] = { 0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 255, 256,
					4095, 4096, 4097, 65536, MiB };
	static const unsigned pow2[] = { 16, 21, 30, 31, 32, 33, 47, 48, 62, 63 };
	static const size_t divisors[] = { 1, 2, 3, 4, 5, 7, 8, 16, 255, 256, 4096,
					   65536, 2 * MiB, GiB, (size_t)1 << 31,
					   (size_t)1 << 32, (size_t)1 << 33 };
	static const size_t deltas[] = { 0, 1, 15, 16, 4095, 4096, 4097, 2 * MiB - 1,
					 2 * MiB, 2 * MiB + 1, GiB - 1, GiB, GiB + 1 };

	value_count = 0;
	for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
		add(small[i]);
	/* Powers of two around sqrt(SIZE_MAX) = 2^32 and the page sizes. */
	for (size_t i = 0; i < sizeof(pow2) / sizeof(pow2[0]); i++)
		add_around((size_t)1 << pow2[i]);
	/* a * b wraps exactly when a > SIZE_MAX / b. */
	for (size_t i = 0; i < sizeof(divisors) / sizeof(divisors[0]); i++)
		add_around(SIZE_MAX / divisors[i]);
	/* Rounding up to a page, a huge page or an alignment wraps here. */
	for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
		add(SIZE_MAX - deltas[i]);
		add((size_t)PTRDIFF_MAX - deltas[i]);
		add((size_t)PTRDIFF_MAX + 1 + deltas[i]);
	}
}

static const size_t alignments[] = {
	0, 1, 2, 3, 8, 16, 24, 4096, 2 * MiB, GiB, 2 * GiB, (size_t)1 << 46,
	(size_t)1 << 47, (size_t)1 << 62, (size_t)1 << 63, SIZE_MAX / 2, SIZE_MAX,
};
#define ALIGNMENT_COUNT (sizeof(alignments) / sizeof(alignments[0]))

/* ---- checking one call ---- */

static unsigned long calls, successes;

static bool is_pow2(size_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

/* A block of need bytes is really there: usable that far, aligned, the
 * first and last bytes writable, and zero first when it must be. */
static void check_block(const char *what, const struct fns *f, unsigned char *p,
			size_t need, size_t align, bool zero, bool usable_known)
{
	size_t usable = usable_known ? f->usable(p) : need;
	size_t sample = need < 64 * KiB ? need : 64 * KiB;

	if (usable < need)
		fail_msg("%s: block %p holds %zu bytes, %zu asked for", what, (void *)p,
			 usable, need);
	if (is_pow2(align) && (uintptr_t)p % align != 0)
		fail_msg("%s: block %p is not aligned to %zu", what, (void *)p, align);
	if (zero) {
		for (size_t i = 0; i < sample; i++)
			if (p[i] != 0 || p[need - 1 - i] != 0)
				fail_msg("%s: byte %zu (or %zu from the end) of %p is not zero",
					 what, i, i, (void *)p);
		for (size_t off = 64 * MiB; off < need; off += 64 * MiB)
			if (p[off] != 0)
				fail_msg("%s: byte %zu of %p is not zero", what, off, (void *)p);
	}
	if (need > 0) {
		p[0] = 0x5a;
		p[need - 1] = 0xa5;
	}
	successes++;
}

/* What tested did, given what glibc did with the same arguments. */
static void judge(const char *what, struct outcome ref, struct outcome got,
		  size_t need, bool wrapped, size_t align)
{
	calls++;
	if (wrapped || need >= IMPOSSIBLE || align >= IMPOSSIBLE) {
		if (ref.p != NULL)
			fail_msg("%s: glibc served an impossible request", what);
		if (got.p != NULL)
			fail_msg("%s: impossible request returned %p", what, got.p);
		if (got.err != ref.err)
			fail_msg("%s: error %d (%s), glibc gives %d (%s)", what, got.err,
				 strerror(got.err), ref.err, strerror(ref.err));
		return;
	}
	if (got.p != NULL)
		return;
	if (ref.p != NULL && need <= SMALL && align <= GiB)
		fail_msg("%s: failed with %d (%s) where glibc succeeds", what, got.err,
			 strerror(got.err));
	if (got.err != ENOMEM && got.err != ref.err)
		fail_msg("%s: error %d (%s), glibc gives %d (%s)", what, got.err,
			 strerror(got.err), ref.err, strerror(ref.err));
}

/* Under the preload: freed blocks of several sizes and one 1 GiB-aligned
 * block in the cache, dirty or clean as HUGEZERO_PREZERO leaves them. */
static void warm_cache(void)
{
	static const size_t sizes[] = { 2 * MiB, 4 * MiB + 1, 64 * MiB };
	void *p[4];

	if (!expect_preload)
		return;
	for (int i = 0; i < 3; i++) {
		p[i] = tested->malloc(sizes[i]);
		assert_non_null(p[i]);
		memset(p[i], 0xee, 4096);
	}
	assert_int_equal(tested->posix_memalign(&p[3], GiB, 2 * MiB), 0);
	memset(p[3], 0xee, 4096);
	for (int i = 0; i < 4; i++)
		tested->free(p[i]);
}

static void begin(void)
{
	calls = successes = 0;
	warm_cache();
}

static void report(const char *what)
{
	print_message("%s: %lu calls, %lu successes checked\n", what, calls, successes);
}

#define WHAT(...) (snprintf(what, sizeof(what), __VA_ARGS__), what)

/* ---- malloc, calloc, valloc, pvalloc ---- */

static struct outcome call1(void *(*fn)(size_t), size_t n)
{
	struct outcome o;

	errno = 0;
	o.p = fn(n);
	o.err = errno;
	return o;
}

static void check_one_size(const char *name, void *(*ref_fn)(size_t),
			   void *(*got_fn)(size_t), size_t n, size_t align)
{
	char what[128];
	struct outcome ref = call1(ref_fn, n), got;

	WHAT("%s(%#zx)", name, n);
	if (ref.p) {
		check_block(what, glibc, ref.p, n, align, false, true);
		glibc->free(ref.p);
	}
	got = call1(got_fn, n);
	judge(what, ref, got, n, false, align);
	if (got.p) {
		check_block(what, tested, got.p, n, align, false, true);
		tested->free(got.p);
	}
}

static void malloc_valloc_pvalloc_near_size_max_fail_with_enomem(void **state)
{
	(void)state;
	begin();
	for (unsigned i = 0; i < value_count; i++) {
		check_one_size("malloc", glibc->malloc, tested->malloc, values[i], 0);
		check_one_size("valloc", glibc->valloc, tested->valloc, values[i], 4096);
		check_one_size("pvalloc", glibc->pvalloc, tested->pvalloc, values[i], 4096);
	}
	report("malloc, valloc, pvalloc");
}

static void calloc_every_overflowing_product_fails_with_enomem(void **state)
{
	char what[128];

	(void)state;
	begin();
	for (unsigned i = 0; i < value_count; i++) {
		for (unsigned j = 0; j < value_count; j++) {
			size_t a = values[i], b = values[j], need;
			bool wrapped = __builtin_mul_overflow(a, b, &need);
			struct outcome ref, got;

			WHAT("calloc(%#zx, %#zx)", a, b);
			errno = 0;
			ref.p = glibc->calloc(a, b);
			ref.err = errno;
			if (ref.p) {
				check_block(what, glibc, ref.p, need, 0, true, true);
				glibc->free(ref.p);
			}
			errno = 0;
			got.p = tested->calloc(a, b);
			got.err = errno;
			judge(what, ref, got, need, wrapped, 0);
			if (got.p) {
				check_block(what, tested, got.p, need, 0, true, true);
				tested->free(got.p);
			}
		}
	}
	report("calloc");
}

/* ---- realloc and reallocarray: the old block survives a failure ---- */

enum start { START_NULL, START_SMALL, START_LARGE, START_COUNT };
static const size_t start_sizes[START_COUNT] = { 0, 100, 8 * MiB };

static void *new_block(const struct fns *f, enum start s)
{
	unsigned char *p;

	if (s == START_NULL)
		return NULL;
	p = f->malloc(start_sizes[s]);
	assert_non_null(p);
	memset(p, 0x3c, start_sizes[s] < 4096 ? start_sizes[s] : 4096);
	return p;
}

static void check_kept(const char *what, const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len && i < 4096; i++)
		if (p[i] != 0x3c)
			fail_msg("%s: byte %zu of the block changed", what, i);
}

/* One realloc(p, need) as reallocarray(p, a, b) (or realloc when not
 * array) on both sides. */
static void check_resize(enum start s, size_t a, size_t b, bool array)
{
	char what[128];
	size_t need, keep = start_sizes[s] < 4096 ? start_sizes[s] : 4096;
	bool wrapped = array ? __builtin_mul_overflow(a, b, &need) : (need = a, false);
	const struct fns *sides[2] = { glibc, tested };
	struct outcome o[2];

	if (array)
		WHAT("reallocarray(%zu-byte block, %#zx, %#zx)", start_sizes[s], a, b);
	else
		WHAT("realloc(%zu-byte block, %#zx)", start_sizes[s], a);
	for (int k = 0; k < 2; k++) {
		const struct fns *f = sides[k];
		unsigned char *p = new_block(f, s);

		errno = 0;
		o[k].p = array ? f->reallocarray(p, a, b) : f->realloc(p, a);
		o[k].err = errno;
		if (k == 1)
			judge(what, o[0], o[1], need, wrapped, 0);
		if (o[k].p) {
			check_kept(what, o[k].p, need < keep ? need : keep);
			check_block(what, f, o[k].p, need, 0, false, true);
			f->free(o[k].p);
		} else if (p && !(need == 0 && !wrapped)) {
			/* Failed: the old block is untouched and still ours to
			 * free. (realloc(p, 0) frees p and returns NULL.) */
			check_kept(what, p, keep);
			f->free(p);
		}
	}
}

static void reallocarray_every_overflowing_product_fails_and_keeps_block(void **state)
{
	(void)state;
	begin();
	for (int s = 0; s < START_COUNT; s++)
		for (unsigned i = 0; i < value_count; i++)
			for (unsigned j = 0; j < value_count; j++)
				check_resize((enum start)s, values[i], values[j], true);
	report("reallocarray");
}

static void realloc_near_size_max_fails_and_keeps_block(void **state)
{
	(void)state;
	begin();
	for (int s = 0; s < START_COUNT; s++)
		for (unsigned i = 0; i < value_count; i++)
			check_resize((enum start)s, values[i], 0, false);
	report("realloc");
}

/* ---- the aligned family ---- */

enum aligned_fn { POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, ALIGNED_COUNT };
static const char *const aligned_names[] = { "posix_memalign", "aligned_alloc", "memalign" };

static struct outcome call_aligned(const struct fns *f, enum aligned_fn fn, size_t align,
				   size_t size)
{
	struct outcome o = { NULL, 0 };

	errno = 0;
	switch (fn) {
	case POSIX_MEMALIGN:
		o.err = f->posix_memalign(&o.p, align, size);
		if (o.err)
			o.p = NULL;
		break;
	case ALIGNED_ALLOC:
		o.p = f->aligned_alloc(align, size);
		o.err = errno;
		break;
	default:
		o.p = f->memalign(align, size);
		o.err = errno;
		break;
	}
	return o;
}

static void aligned_family_near_size_max_fails_like_glibc(void **state)
{
	char what[128];

	(void)state;
	begin();
	for (int fn = 0; fn < ALIGNED_COUNT; fn++) {
		for (size_t a = 0; a < ALIGNMENT_COUNT; a++) {
			for (unsigned i = 0; i < value_count; i++) {
				size_t align = alignments[a], n = values[i];
				struct outcome ref, got;

				WHAT("%s(%#zx, %#zx)", aligned_names[fn], align, n);
				ref = call_aligned(glibc, (enum aligned_fn)fn, align, n);
				if (ref.p) {
					check_block(what, glibc, ref.p, n, align, false, true);
					glibc->free(ref.p);
				}
				got = call_aligned(tested, (enum aligned_fn)fn, align, n);
				judge(what, ref, got, n, false, align);
				if (got.p) {
					check_block(what, tested, got.p, n, align, false, true);
					tested->free(got.p);
				}
			}
		}
	}
	report("posix_memalign, aligned_alloc, memalign");
}

/* ---- anonymous mmap (the preload rounds large ones up to 2 MiB) ---- */

static struct outcome call_mmap(const struct fns *f, size_t len)
{
	struct outcome o;

	errno = 0;
	o.p = f->mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	o.err = errno;
	if (o.p == MAP_FAILED)
		o.p = NULL;
	return o;
}

static void anonymous_mmap_near_size_max_fails_like_glibc(void **state)
{
	char what[128];

	(void)state;
	begin();
	for (unsigned i = 0; i < value_count; i++) {
		size_t len = values[i];
		struct outcome ref = call_mmap(glibc, len), got;

		WHAT("mmap(NULL, %#zx)", len);
		if (ref.p) {
			check_block(what, glibc, ref.p, len, 4096, true, false);
			assert_int_equal(glibc->munmap(ref.p, len), 0);
		}
		got = call_mmap(tested, len);
		judge(what, ref, got, len, false, 0);
		if (got.p) {
			check_block(what, tested, got.p, len, 4096, true, false);
			assert_int_equal(tested->munmap(got.p, len), 0);
		}
	}
	report("mmap");
}

/* ---- set-up ---- */

/* glibc's reallocarray calls realloc through the symbol table, which is the
 * preload's: the reference is glibc's code for it with glibc's realloc. */
static void *glibc_reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return glibc->realloc(p, total);
}

static void *libc_symbol(void *libc, const char *name)
{
	void *sym = dlsym(libc, name);

	if (sym == NULL) {
		fprintf(stderr, "libc.so.6 has no %s\n", name);
		exit(1);
	}
	return sym;
}

static void find_functions(void)
{
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);

	if (libc == NULL) {
		fprintf(stderr, "cannot find libc.so.6: %s\n", dlerror());
		exit(1);
	}
	tested_fns = (struct fns){ malloc, calloc, realloc, reallocarray, posix_memalign,
				   aligned_alloc, memalign, valloc, pvalloc, free,
				   malloc_usable_size, mmap, munmap };
	/* dlsym on libc's handle finds libc's own definitions, not the
	 * preload's that the program's references bind to. */
	*(void **)&glibc_fns.malloc = libc_symbol(libc, "malloc");
	*(void **)&glibc_fns.calloc = libc_symbol(libc, "calloc");
	*(void **)&glibc_fns.realloc = libc_symbol(libc, "realloc");
	glibc_fns.reallocarray = glibc_reallocarray;
	*(void **)&glibc_fns.posix_memalign = libc_symbol(libc, "posix_memalign");
	*(void **)&glibc_fns.aligned_alloc = libc_symbol(libc, "aligned_alloc");
	*(void **)&glibc_fns.memalign = libc_symbol(libc, "memalign");
	*(void **)&glibc_fns.valloc = libc_symbol(libc, "valloc");
	*(void **)&glibc_fns.pvalloc = libc_symbol(libc, "pvalloc");
	*(void **)&glibc_fns.free = libc_symbol(libc, "free");
	*(void **)&glibc_fns.usable = libc_symbol(libc, "malloc_usable_size");
	*(void **)&glibc_fns.mmap = libc_symbol(libc, "mmap");
	*(void **)&glibc_fns.munmap = libc_symbol(libc, "munmap");
	if (expect_preload && glibc_fns.malloc == tested_fns.malloc) {
		fprintf(stderr, "HZ_EXPECT_PRELOAD=1 but malloc is libc's: "
				"libhugezero-preload.so is not loaded\n");
		exit(1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(malloc_valloc_pvalloc_near_size_max_fail_with_enomem),
		cmocka_unit_test(calloc_every_overflowing_product_fails_with_enomem),
		cmocka_unit_test(reallocarray_every_overflowing_product_fails_and_keeps_block),
		cmocka_unit_test(realloc_near_size_max_fails_and_keeps_block),
		cmocka_unit_test(aligned_family_near_size_max_fails_like_glibc),
		cmocka_unit_test(anonymous_mmap_near_size_max_fails_like_glibc),
	};
	const char *env = getenv("HZ_EXPECT_PRELOAD");

	expect_preload = env && strcmp(env, "1") == 0;
	find_functions();
	build_values();
	print_message("%u boundary sizes, %zu alignments\n", value_count, ALIGNMENT_COUNT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
