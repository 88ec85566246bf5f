/* The size-class ledger. See classes.h.
 *
 * ---- stays from observed reuse ----
 *
 * A program that allocates a few huge blocks once (a compressor's tables,
 * sort's buffers) gains nothing from a block kept after its free, and pays
 * for it in RSS: its next fresh block faults in beside the cached one,
 * where glibc had unmapped. A program that cycles (numpy's temporaries, a
 * frame buffer per iteration) gains the fault-free reuse. So each size
 * class counts frees, hits and misses, and the time from a free to its
 * reuse; a block's stay comes from its class when it enters the cache:
 *  - warm (hits at least a quarter of the frees): STAY_MULT times the
 *    class's free-to-reuse time, at least a tick (HZ_STAY_TICK_NS), at
 *    most the decay;
 *  - cold (no reuse seen yet, or too little): a probe, kept HZ_UNREUSED_NS at
 *    most (cache.c gives probes a small room of their own).
 * A miss in a class that gave a block back unused, and had a free within
 * the decay, is a reuse the cache let go: it counts as a hit (once per
 * block given back), so the class turns warm and its next frees are kept,
 * and its time since the free raises the stay. The cost of learning is one
 * fresh block per class. */
#include "classes.h"

#include "sizes.h"
#include "times.h"

/* A warm block stays 8 times its class's free-to-reuse time: reuse times
 * vary, and a late one costs a fresh block where an early release saves
 * only idle RSS. A miss that a released block would have served raises
 * the average. */
#define STAY_MULT 8
/* Counts are halved when one reaches 64: about the last hundred events. */
#define COUNT_HALVE_AT 64

static struct hz_class classes[HZ_CLASSES];

struct hz_class *hz_class_at(unsigned k)
{
	return &classes[k < HZ_CLASSES ? k : HZ_CLASSES - 1];
}

struct hz_class *hz_class_of(size_t bytes)
{
	return hz_class_at(hz_size_class(bytes));
}

/* ---- reuse ---- */

static void count(struct hz_class_reuse *r, uint32_t *n)
{
	if (++*n < COUNT_HALVE_AT)
		return;
	r->frees /= 2;
	r->hits /= 2;
	r->misses /= 2;
}

static void sample_reuse(struct hz_class_reuse *r, uint64_t ns)
{
	r->reuse_ns = r->reuse_ns ? r->reuse_ns - r->reuse_ns / 4 + ns / 4 : ns;
}

static bool warm(const struct hz_class_reuse *r)
{
	return r->hits > 0 && (uint64_t)r->hits * 4 >= r->frees;
}

static uint64_t stay_of(const struct hz_class_reuse *r, uint64_t decay_ns, bool *probe)
{
	uint64_t stay = HZ_UNREUSED_NS;

	*probe = !warm(r);
	if (!*probe) {
		stay = r->reuse_ns > UINT64_MAX / STAY_MULT ? UINT64_MAX : r->reuse_ns * STAY_MULT;
		stay = stay < HZ_STAY_TICK_NS ? HZ_STAY_TICK_NS : stay;
	}
	return stay < decay_ns ? stay : decay_ns;
}

uint64_t hz_class_stay(size_t bytes, uint64_t decay_ns, bool *probe)
{
	return stay_of(&hz_class_of(bytes)->reuse, decay_ns, probe);
}

bool hz_class_warm(size_t bytes)
{
	return warm(&hz_class_of(bytes)->reuse);
}

void hz_class_freed(size_t bytes, uint64_t now)
{
	struct hz_class_reuse *r = &hz_class_of(bytes)->reuse;

	count(r, &r->frees);
	r->last_free = now;
}

void hz_class_hit(size_t bytes, uint64_t now, uint64_t idle_since)
{
	struct hz_class_reuse *r = &hz_class_of(bytes)->reuse;

	count(r, &r->hits);
	if (idle_since != 0 && now >= idle_since)
		sample_reuse(r, now - idle_since);
}

bool hz_class_missed(size_t bytes, uint64_t now, uint64_t decay_ns)
{
	struct hz_class_reuse *r = &hz_class_of(bytes)->reuse;

	count(r, &r->misses);
	if (r->unreused == 0 || now < r->last_free || now - r->last_free >= decay_ns)
		return false;
	count(r, &r->hits);
	sample_reuse(r, now - r->last_free);
	r->unreused--;
	return true;
}

void hz_class_let_go(size_t bytes)
{
	struct hz_class_reuse *r = &hz_class_of(bytes)->reuse;

	if (r->unreused < COUNT_HALVE_AT)
		r->unreused++;
}

void hz_class_cached(size_t bytes, bool add)
{
	struct hz_class_reuse *r = &hz_class_of(bytes)->reuse;

	r->bytes = add ? r->bytes + bytes : r->bytes - bytes;
	r->low = r->bytes < r->low ? r->bytes : r->low;
}

size_t hz_class_spare(unsigned k, uint64_t now, uint64_t decay_ns)
{
	struct hz_class_reuse *r = &hz_class_at(k)->reuse;
	size_t spare = r->low;
	bool probe;

	if (now < r->low_since || now - r->low_since < stay_of(r, decay_ns, &probe))
		return 0;
	/* What leaves now lowers low to what stays (hz_class_cached). */
	r->low = r->bytes;
	r->low_since = now;
	return spare;
}

void hz_classes_forget_reuse(void)
{
	for (unsigned k = 0; k < HZ_CLASSES; k++)
		classes[k].reuse = (struct hz_class_reuse){ 0 };
}

/* ---- clean blocks ----
 *
 * The thread keeps this many of the largest recent calloc's worth of
 * blocks clean. 8, not 2: in the mixed workload (2000 callocs of 5-25 MiB,
 * 16 live) two left calloc clearing 18.7 of the 30 GB zeroed on its
 * critical path, beside the thread's clear on the other core; with eight
 * the thread cleared all but 0.2 GB, the same bytes in all, and the run
 * took 0.70x the time (4 rounds, bench/RESULTS.md, "The thread keeps eight
 * callocs' worth clean, not two"). The 64 and 256 MiB cycles and numpy's
 * loop were unchanged. */
#define DEMAND_CALLOCS 8

static size_t clean_target;

void hz_classes_calloc_seen(size_t size)
{
	if (size <= SIZE_MAX / DEMAND_CALLOCS && clean_target < DEMAND_CALLOCS * size)
		clean_target = DEMAND_CALLOCS * size;
}

size_t hz_classes_clean_target(void)
{
	return clean_target;
}

void hz_classes_clean_enough(void)
{
	clean_target -= clean_target / 8;
}

bool hz_classes_clear_in_cache(size_t bytes)
{
	return hz_cycle_soon(&hz_class_of(bytes)->cycle);
}

/* ---- the program's rhythm ----
 *
 * Whether the program's callocs come right after its frees, each of a
 * size the block just freed could serve, whatever their classes. A block
 * rounded up from a larger kept one and then grown (calloc 4 MiB from a
 * kept 8 MiB block, realloc to 8 MiB one time in three) is freed in one
 * class and asked for in another, so no class's own run (cycle.h,
 * HZ_CYCLE_AT_ONCE) saw the cycle. Each free woke the thread, whose
 * non-temporal clear pushed the block the program had just written out
 * of the cache, and the next calloc took a block so cleared, or the
 * clear over: the program's writes then fetched from memory what glibc's
 * found in the cache (`grow 4M`: 1.9x glibc's time, 1.1x with the rhythm;
 * bench/RESULTS.md, "a calloc right after a free, and realloc into the
 * kept span"). Whether the calloc took that very block does not count:
 * once the thread runs, it takes the one the thread cleared. */
static struct {
	size_t freed;     /* bytes of the last block freed */
	uint32_t at_once; /* callocs in a row it could serve, within HZ_THREAD_WAKE_NS */
} rhythm;

static void rhythm_calloc(size_t size, uint64_t after_free_ns)
{
	bool at_once = size <= rhythm.freed && after_free_ns < HZ_THREAD_WAKE_NS;

	rhythm.at_once = hz_cycle_run(rhythm.at_once, at_once);
}

/* ---- one event per request ---- */

struct hz_class_answer hz_classes_request(const struct hz_class_request *r)
{
	struct hz_class_answer a = { .reuse_missed = false };

	if (r->adapt && r->hit)
		hz_class_hit(r->size, r->now, r->idle_since);
	else if (r->adapt)
		a.reuse_missed = hz_class_missed(r->size, r->now, r->decay_ns);
	if (r->zero) {
		hz_classes_calloc_seen(r->size);
		rhythm_calloc(r->size, r->after_free_ns);
		hz_cycle_calloc(&hz_class_of(r->size)->cycle, r->now, r->start, r->after_free_ns);
	}
	return a;
}

struct hz_class_kept hz_classes_free(size_t size, uintptr_t start, uint64_t now, bool adapt)
{
	struct hz_class_kept k = {
		.cycle = hz_cycle_freed(&hz_class_of(size)->cycle, start, now,
					rhythm.at_once >= HZ_CYCLE_RUN),
		.warm = true,
	};

	rhythm.freed = size;
	if (adapt) {
		hz_class_freed(size, now);
		k.warm = hz_class_warm(size);
	}
	return k;
}

/* ---- page size ---- */

bool hz_class_dense(size_t bytes)
{
	return __atomic_load_n(&hz_class_of(bytes)->dense, __ATOMIC_RELAXED) != 0;
}

void hz_class_note_dense(size_t bytes, bool dense)
{
	uint8_t *d = &hz_class_of(bytes)->dense;

	/* Read first: every recycled block notes, and a store to a line the
	 * other threads read would bounce it for nothing. */
	if (__atomic_load_n(d, __ATOMIC_RELAXED) != dense)
		__atomic_store_n(d, dense, __ATOMIC_RELAXED);
}

bool hz_class_mmap_thp(size_t bytes)
{
	struct hz_class *c = hz_class_of(bytes);

	if (!__atomic_load_n(&c->mmap_dense, __ATOMIC_RELAXED))
		return false;
	/* At 0 the sample; below, more of them until a verdict comes. */
	return __atomic_sub_fetch(&c->mmaps_trusted, 1, __ATOMIC_RELAXED) > 0;
}

/* The distance from one sample to the next after confirmed dense verdicts
 * in a row (classes.h); and whether a further one would lengthen it. */
static size_t sample_most(size_t bytes)
{
	size_t most = HZ_GUESS_MAX / (bytes ? bytes : 1);

	return most > 1 ? most : 1;
}

static int32_t sample_distance(size_t bytes, unsigned confirmed)
{
	size_t d = (size_t)2 << confirmed;

	return (int32_t)(d < sample_most(bytes) ? d : sample_most(bytes));
}

static bool sample_may_grow(size_t bytes, unsigned confirmed)
{
	return ((size_t)2 << confirmed) < sample_most(bytes);
}

void hz_class_note_mmap(size_t bytes, bool dense)
{
	struct hz_class *c = hz_class_of(bytes);
	unsigned confirmed = 0;

	if (dense && __atomic_load_n(&c->mmap_dense, __ATOMIC_RELAXED)) {
		confirmed = __atomic_load_n(&c->mmap_confirmed, __ATOMIC_RELAXED);
		confirmed += sample_may_grow(bytes, confirmed);
	}
	__atomic_store_n(&c->mmap_confirmed, (uint8_t)confirmed, __ATOMIC_RELAXED);
	if (dense)
		__atomic_store_n(&c->mmaps_trusted, sample_distance(bytes, confirmed),
				 __ATOMIC_RELAXED);
	__atomic_store_n(&c->mmap_dense, dense, __ATOMIC_RELAXED);
}

/* Packed: the start, and the 64 KiB units in its low 12 bits (up to 256
 * MiB, past HZ_GUESS_MAX). */
#define LAZY_UNIT ((size_t)64 << 10)

void hz_class_keep_lazy_mmap(size_t bytes, uintptr_t start, size_t len)
{
	if (len == 0 || len > HZ_GUESS_MAX)
		return;
	__atomic_store_n(&hz_class_of(bytes)->mmap_lazy, start | (len / LAZY_UNIT),
			 __ATOMIC_RELAXED);
}

bool hz_class_take_lazy_mmap(size_t bytes, uintptr_t *start, size_t *len)
{
	uintptr_t packed = __atomic_exchange_n(&hz_class_of(bytes)->mmap_lazy, 0, __ATOMIC_RELAXED);

	*start = packed & ~(uintptr_t)(HZ_SZ_4K - 1);
	*len = (packed & (HZ_SZ_4K - 1)) * LAZY_UNIT;
	return packed != 0;
}

#ifdef HZ_TEST_CORE
void hz_classes_test_reset(void)
{
	for (unsigned k = 0; k < HZ_CLASSES; k++)
		classes[k] = (struct hz_class){ 0 };
	clean_target = 0;
	rhythm.freed = 0;
	rhythm.at_once = 0;
}
#endif
