/* The floor of any malloc interposer: an LD_PRELOAD library whose malloc
 * and free only jump to the next allocator's. With -DCHECKED_FREE its free
 * first makes the two checks libhugezero-preload.so's fast path makes (a
 * bootstrap range, then a byte per GiB of address space), on a table that
 * is all zeros, so every pointer still goes to the next free. Comparing
 * the two against glibc and the preload on bench/alloc.c's tcache-hot
 * churn shows what forwarding costs and what checking a free costs
 * (bench/RESULTS.md, "The shim's small path"). With -DALIGNED_FREE its
 * free first tests the pointer's alignment: a block starts on a 2 MiB
 * boundary, so only such pointers (and the bootstrap range's) would need
 * the table. With -DBRK_CHECK its malloc
 * first compares glibc's program break with the one it saw last, as a
 * preload that follows glibc's heap would.
 *
 *   cc -O2 -fPIC -shared -fno-plt -o forwarder.so bench/forwarder.c
 *   cc -O2 -fPIC -shared -fno-plt -DCHECKED_FREE -o forwarder-checked.so bench/forwarder.c
 *   cc -O2 -fPIC -shared -fno-plt -DALIGNED_FREE -o forwarder-aligned.so bench/forwarder.c
 *   cc -O2 -fPIC -shared -fno-plt -DBRK_CHECK -o forwarder-brk.so bench/forwarder.c
 *   LD_PRELOAD=./forwarder.so alloc small-churn 50000000 16 1K
 *
 * Not for real programs: it forwards only malloc, free, calloc and realloc
 * and resolves them in a constructor (dlsym then must not allocate, which
 * holds for glibc 2.36 when the lookups succeed). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);

__attribute__((constructor)) static void resolve(void)
{
	next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
}

#ifdef BRK_CHECK
/* glibc's program break (exported by libc.so.6) against the one seen
 * last: what it costs malloc's fast path to notice that glibc's heap
 * grew, a load and a compare before the jump. */
extern void *__curbrk;
static void *brk_seen;

__attribute__((noinline, cold)) static void brk_moved(void *brk)
{
	__atomic_store_n(&brk_seen, brk, __ATOMIC_RELAXED);
}

void *malloc(size_t size)
{
	void *brk = __atomic_load_n(&__curbrk, __ATOMIC_RELAXED);

	if (__builtin_expect(brk != __atomic_load_n(&brk_seen, __ATOMIC_RELAXED), 0))
		brk_moved(brk);
	return next_malloc(size);
}
#else
void *malloc(size_t size)
{
	return next_malloc(size);
}
#endif

#if defined(CHECKED_FREE) || defined(ALIGNED_FREE)
#define GIB_SHIFT 30
#define GIBS ((uintptr_t)1 << (47 - GIB_SHIFT))

/* The shape of the preload's struct hz_shim_fast: an empty bootstrap
 * range at a page no allocator hands out, and a table of no regions. */
static struct {
	uintptr_t boot_start;
	size_t boot_len;
	const uint8_t *owned;
} fast;
static uint8_t owned[GIBS];

__attribute__((constructor)) static void open_fast(void)
{
	fast.boot_start = 4096;
	fast.boot_len = 4096;
	fast.owned = owned;
}

/* Never taken: the table is empty. */
__attribute__((noinline, cold)) static void checked_slow(void *p)
{
	next_free(p);
}

#ifdef ALIGNED_FREE
/* A block starts on a 2 MiB boundary: any other pointer is the next
 * allocator's, unless it lies in the bootstrap range. */
void free(void *p)
{
	uintptr_t a = (uintptr_t)p, g = a >> GIB_SHIFT;

	size_t boot_len = __atomic_load_n(&fast.boot_len, __ATOMIC_ACQUIRE);

	if (__builtin_expect((a & ((2u << 20) - 1)) != 0, 1) &&
	    __builtin_expect(a - fast.boot_start >= boot_len, 1)) {
		next_free(p);
		return;
	}
	if (g >= GIBS || __atomic_load_n(&fast.owned[g], __ATOMIC_RELAXED) == 0) {
		next_free(p);
		return;
	}
	checked_slow(p);
}
#else
void free(void *p)
{
	uintptr_t a = (uintptr_t)p, g = a >> GIB_SHIFT;

	if (__builtin_expect(a - fast.boot_start >= __atomic_load_n(&fast.boot_len, __ATOMIC_ACQUIRE),
			     1) &&
	    (g >= GIBS || __atomic_load_n(&fast.owned[g], __ATOMIC_RELAXED) == 0)) {
		next_free(p);
		return;
	}
	checked_slow(p);
}
#endif
#else
void free(void *p)
{
	next_free(p);
}
#endif

void *calloc(size_t n, size_t size)
{
	return next_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	return next_realloc(p, size);
}
