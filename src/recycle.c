/* Recycling and pre-zeroing of large blocks. See recycle.h.
 *
 * The cache is a small array of spans (freed blocks, still mapped and
 * claimed in the reservation) under one lock; a request scans it for the
 * smallest fitting span. System calls (releasing spans) happen outside the
 * lock.
 *
 * The pre-zero thread takes one dirty span out of the cache at a time
 * ("in flight") and zeroes it from the end down, one unit at a time. A
 * calloc that wants that span claims it; the thread stops at the next unit
 * boundary and tells the claimer how much is still dirty, and the claimer
 * zeroes that part itself, the block start last so it is in the cache. */
#include "recycle.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "assist.h"
#include "blocks.h"
#include "check.h"
#include "cpu/relax.h"
#include "lock.h"
#include "log.h"
#include "options.h"
#include "prezero.h"
#include "prim/prim.h"
#include "range.h"
#include "stats.h"
#include "zero.h"

/* 1024 spans: the default 1 GiB cache holds at most 512 blocks of 2 MiB. */
#define MAX_ENTRIES 1024
/* Spans released per pass outside the lock. */
#define RELEASE_BATCH 8
/* How often the idle pre-zero thread wakes to apply the decay. */
#define TICK_NS 250000000ull
/* A unit cleared slower than 1 byte/ns (1 GB/s) means the thread is
 * starved of CPU: on a free core it clears at 8-19 GB/s here, and at nice
 * 19 beside two busy threads a 32 MiB unit took 0.1-1 s, while a calloc
 * waited for it (bench/RESULTS.md, "pre-zero thread under load"). */
#define STARVED_NS_PER_BYTE 1
/* A starved thread stops for this long (ns), and calloc zeroes meanwhile. */
#define STARVED_PAUSE_NS 1000000000ull
/* A calloc waiting for the thread spins this many times, then sleeps
 * (giving its CPU to the thread, if they share one) this long (ns). */
#define CLAIM_SPINS 1024
#define CLAIM_SLEEP_NS 20000
/* It waits at most as long as a unit takes at 4 GB/s (0.25 ns a byte; the
 * thread clears at 8-19 GB/s on a free core), then gives up the claim and
 * takes another block: a starved thread must not stall the program. */
#define CLAIM_WAIT_NS_PER_4_BYTES 1

enum { PREZERO_THREAD, PREZERO_SYNC, PREZERO_OFF };

struct entry {
	struct hz_span span;
	uint64_t idle_since; /* ns, when it entered the cache */
	bool clean;
};

/* A calloc waiting for the span the thread is zeroing. */
struct claim {
	struct hz_span span; /* as the thread leaves it (it may change backing) */
	size_t remaining; /* bytes from the start still dirty */
	int done;         /* set (release) once remaining is valid */
};

struct in_flight {
	struct hz_span span;
	bool busy;
	struct claim *claim; /* set by a calloc under the lock */
};

struct config {
	size_t cache_max;
	uint64_t decay_ns;
	int prezero;
	size_t unit;
	size_t split_min;
	bool zero_on_free;
};

static struct config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static struct hz_lock lock = HZ_LOCK_INIT;
static bool fork_skipped;
static struct entry entries[MAX_ENTRIES];
static unsigned entry_count;
static size_t cached_bytes, clean_bytes;
static struct in_flight flight;
/* Bytes of recent large callocs: the thread keeps about this much clean,
 * so it does not steal memory bandwidth for blocks nobody will calloc. */
static size_t calloc_demand;

#ifdef HZ_TEST_CORE
void (*hz_prezero_test_hook)(enum hz_prezero_point point);
#endif

static pthread_mutex_t wake_mutex = PTHREAD_MUTEX_INITIALIZER;
/* Statically initialised (CLOCK_REALTIME): a free racing the thread's
 * start may signal it before the thread exists. The timed wait is only a
 * tick for the decay, so a clock jump costs one early or late tick. */
static pthread_cond_t wake_cond = PTHREAD_COND_INITIALIZER;
static int thread_started;
static int wake_pending;
/* Until when (ns) the thread rests after finding itself starved. */
static uint64_t paused_until;

static void load_config(void)
{
	uint64_t ram = 0, swap = 0;

	cfg.cache_max = (size_t)hz_option_u64(HZ_OPT_CACHE_MAX);
	/* Never more than a quarter of RAM, whatever the option says. */
	if (hz_prim_memory(&ram, &swap) == 0 && cfg.cache_max > ram / 4)
		cfg.cache_max = (size_t)(ram / 4);
	cfg.decay_ns = hz_option_u64(HZ_OPT_DECAY_MS) * 1000000ull;
	cfg.prezero = (int)hz_option_u64(HZ_OPT_PREZERO);
	cfg.unit = (size_t)hz_option_u64(HZ_OPT_PREZERO_UNIT);
	cfg.split_min = (size_t)hz_option_u64(HZ_OPT_PREZERO_SPLIT_MIN);
	cfg.zero_on_free = hz_option_u64(HZ_OPT_ZERO_ON_FREE);
}

static const struct config *config(void)
{
	pthread_once(&cfg_once, load_config);
	return &cfg;
}

/* ---- the cache (callers hold the lock) ---- */

static void account(const struct entry *e, bool add)
{
	size_t bytes = hz_span_bytes(&e->span);

	if (add) {
		cached_bytes += bytes;
		clean_bytes += e->clean ? bytes : 0;
	} else {
		cached_bytes -= bytes;
		clean_bytes -= e->clean ? bytes : 0;
	}
	__atomic_store_n(&hz_stats.cache_bytes, cached_bytes, __ATOMIC_RELAXED);
}

static struct entry take_entry(unsigned i)
{
	struct entry e = entries[i];

	account(&e, false);
	entries[i] = entries[--entry_count];
	return e;
}

struct batch {
	struct hz_span spans[RELEASE_BATCH];
	unsigned count;
};

static void release_later(struct batch *b, const struct hz_span *s)
{
	if (b->count < RELEASE_BATCH) {
		b->spans[b->count++] = *s;
		return;
	}
	hz_stats_add(cache_released_bytes, hz_span_bytes(s));
	hz_blocks_release_span(s); /* rare: a full batch, do it now */
}

static void release_batch(struct batch *b)
{
	for (unsigned i = 0; i < b->count; i++) {
		hz_stats_add(cache_released_bytes, hz_span_bytes(&b->spans[i]));
		hz_blocks_release_span(&b->spans[i]);
	}
	b->count = 0;
}

static void evict_oldest(struct batch *b)
{
	unsigned oldest = 0;

	for (unsigned i = 1; i < entry_count; i++)
		if (entries[i].idle_since < entries[oldest].idle_since)
			oldest = i;
	struct entry e = take_entry(oldest);
	release_later(b, &e.span);
}

static void decay(struct batch *b, uint64_t now)
{
	for (unsigned i = 0; i < entry_count && b->count < RELEASE_BATCH;) {
		if (now - entries[i].idle_since >= cfg.decay_ns) {
			struct entry e = take_entry(i);

			release_later(b, &e.span);
			continue; /* slot i now holds another entry */
		}
		i++;
	}
}

/* Merge into a neighbour of the same backing and state, or append. Adjacent
 * spans sit in one contiguous stretch of the reservation, so merging is
 * only arithmetic; hugetlb spans merge only in whole pages, which they are. */
static void add_entry(struct entry e, struct batch *b)
{
	for (unsigned i = 0; i < entry_count; i++) {
		struct entry *n = &entries[i];

		if (n->span.backing != e.span.backing || n->clean != e.clean ||
		    hz_span_bytes(&n->span) + hz_span_bytes(&e.span) > cfg.cache_max)
			continue;
		if (n->span.start + hz_span_bytes(&n->span) == e.span.start ||
		    e.span.start + hz_span_bytes(&e.span) == n->span.start) {
			struct entry merged = take_entry(i);

			merged.span.start = merged.span.start < e.span.start ? merged.span.start
									     : e.span.start;
			merged.span.granules += e.span.granules;
			if (e.idle_since > merged.idle_since)
				merged.idle_since = e.idle_since;
			add_entry(merged, b); /* it may now touch another one */
			return;
		}
	}
	while (entry_count > 0 && (entry_count == MAX_ENTRIES ||
				   cached_bytes + hz_span_bytes(&e.span) > cfg.cache_max))
		evict_oldest(b);
	entries[entry_count++] = e;
	account(&e, true);
}

/* Granules a span of this backing must give for size bytes. */
static size_t granules_for(size_t size, enum hz_backing backing)
{
	size_t unit = hz_backing_page(backing) > HZ_GRANULE ? hz_backing_page(backing)
							    : HZ_GRANULE;

	return hz_align_up(size, unit) / HZ_GRANULE;
}

static bool fits(const struct hz_span *s, size_t size, size_t align)
{
	return granules_for(size, s->backing) <= s->granules &&
	       (align == 0 || s->start % align == 0);
}

/* Bounded waste: a span more than 12.5% larger than needed is split. */
static bool wasteful(size_t have, size_t need)
{
	return have > need + need / 8;
}

/* The best span for a request: the preferred state first, then the
 * smallest. Returns an index or -1. */
static int pick(size_t size, size_t align, bool want_clean, bool dirty_allowed)
{
	int best = -1;

	for (unsigned i = 0; i < entry_count; i++) {
		const struct entry *e = &entries[i];

		if (!fits(&e->span, size, align) || (!e->clean && !dirty_allowed))
			continue;
		if (best < 0) {
			best = (int)i;
			continue;
		}
		const struct entry *b = &entries[best];
		bool e_pref = e->clean == want_clean, b_pref = b->clean == want_clean;

		if (e_pref != b_pref ? e_pref : e->span.granules < b->span.granules)
			best = (int)i;
	}
	return best;
}

/* Take entry i for a request of size bytes, splitting off what is not
 * needed back into the cache. */
static struct entry take_for(unsigned i, size_t size, struct batch *b)
{
	struct entry e = take_entry(i);
	size_t need = granules_for(size, e.span.backing);

	if (wasteful(e.span.granules, need)) {
		struct entry rest = e;

		rest.span.start += need * HZ_GRANULE;
		rest.span.granules -= need;
		e.span.granules = need;
		add_entry(rest, b);
	}
	return e;
}

/* hugetlb pages are only ever cleared: dropping them would hand them back
 * to the pool, and MADV_DONTNEED there rounds up to whole huge pages. */
static enum hz_zero_how zero_how(const struct hz_span *s)
{
	return s->backing <= HZ_BACKING_HUGETLB2M ? HZ_ZERO_WRITE_ONLY : HZ_ZERO_ANY;
}

/* Sparse use earns 4 KiB pages: a block whose last user touched under half
 * of it is dropped (hz_zero_choose) and gets MADV_NOHUGEPAGE, so the next
 * sparse user faults 4 KiB pages instead of zeroing 2 MiB per touch and the
 * RSS stays what glibc's would be. Dense use earns THP back. */
static void adapt_backing(struct hz_span *s, enum hz_zero_method m)
{
	if (m == HZ_ZERO_DROP && s->backing == HZ_BACKING_THP &&
	    hz_prim_madvise((void *)s->start, hz_span_bytes(s), MADV_NOHUGEPAGE) == 0) {
		s->backing = HZ_BACKING_SMALL;
		hz_stats_add(thp_demoted, 1);
	} else if (m == HZ_ZERO_CLEAR && s->backing == HZ_BACKING_SMALL &&
		   hz_backing_first(hz_span_bytes(s)) <= HZ_BACKING_THP &&
		   hz_backing_thp_usable() &&
		   hz_prim_madvise((void *)s->start, hz_span_bytes(s), MADV_HUGEPAGE) == 0) {
		s->backing = HZ_BACKING_THP;
		hz_stats_add(thp_promoted, 1);
	}
}

/* ---- the pre-zero thread ---- */

static void wake_thread(void);

/* Did clearing bytes take so long (ns) that the thread is starved? */
static bool starved(size_t bytes, uint64_t ns)
{
	return bytes > 0 && ns > (uint64_t)bytes * STARVED_NS_PER_BYTE;
}

/* Zero the in-flight span from the end down, unit by unit, until done,
 * claimed, or starved (a sparse span is dropped at once). Returns the
 * bytes from the start still dirty. */
static size_t zero_in_flight(struct hz_span *s)
{
	enum hz_zero_how how = zero_how(s);
	enum hz_zero_method m = hz_zero_choose(s->start, hz_span_bytes(s), how);
	size_t top = hz_span_bytes(s);
	uint64_t t0 = hz_prim_now_ns();
	size_t written = 0;

	if (m == HZ_ZERO_DROP) {
		hz_zero_with(s->start, top, 0, m, how);
		top = 0;
	}
	while (top > 0 && !__atomic_load_n(&flight.claim, __ATOMIC_ACQUIRE)) {
		size_t unit = top < cfg.unit ? top : cfg.unit;
		uint64_t u0 = hz_prim_now_ns();
		size_t w;

		top -= unit;
		w = hz_zero_with(s->start + top, unit, 0, m, how);
		written += w;
		if (top > 0 && starved(w, hz_prim_now_ns() - u0)) {
			__atomic_store_n(&paused_until, hz_prim_now_ns() + STARVED_PAUSE_NS,
					 __ATOMIC_RELAXED);
			hz_stats_add(prezero_starved, 1);
			break;
		}
		HZ_PREZERO_HOOK(HZ_PREZERO_AT_UNIT);
		hz_assist_help(); /* a calloc waiting on its own clear comes first */
	}
	adapt_backing(s, m);
	hz_stats_add(prezeroed_bytes, written);
	hz_stats_add(prezero_ns, hz_prim_now_ns() - t0);
	return top;
}

static bool pick_work(void)
{
	for (unsigned i = 0; i < entry_count; i++) {
		if (entries[i].clean)
			continue;
		struct entry e = take_entry(i);

		flight = (struct in_flight){ e.span, true, NULL };
		return true;
	}
	return false;
}

/* A span left partly dirty (the thread stopped, starved) goes back dirty
 * as a whole: splitting off its clean top is not worth the bookkeeping for
 * the one unit a starved thread clears. */
static void finish_flight(size_t remaining, struct batch *b)
{
	struct claim *c = flight.claim;

	if (c) {
		c->span = flight.span;
		c->remaining = remaining;
		__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	} else {
		add_entry((struct entry){ flight.span, hz_prim_now_ns(), remaining == 0 }, b);
	}
	flight.busy = false;
}

static void wait_for_work(void)
{
	struct timespec until;

	pthread_mutex_lock(&wake_mutex);
	HZ_PREZERO_HOOK(HZ_PREZERO_AT_SLEEP);
	if (!wake_pending) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += TICK_NS;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&wake_cond, &wake_mutex, &until);
	}
	wake_pending = 0;
	pthread_mutex_unlock(&wake_mutex);
}

static void *prezero_main(void *arg)
{
	(void)arg;
	hz_prim_lower_thread_priority();
	for (;;) {
		struct batch b = { .count = 0 };
		bool work = false;

		hz_assist_help();

		uint64_t now = hz_prim_now_ns();

		hz_lock(&lock);
		decay(&b, now);
		if (now < __atomic_load_n(&paused_until, __ATOMIC_RELAXED))
			work = false;
		else if (clean_bytes < calloc_demand)
			work = pick_work();
		else
			calloc_demand -= calloc_demand / 8; /* demand fades when idle */
		HZ_PREZERO_HOOK(HZ_PREZERO_AT_SECTION);
		hz_unlock(&lock);
		release_batch(&b);
		if (!work) {
			wait_for_work();
			continue;
		}
		/* flight.span is only read while the lock is free: work on a
		 * copy, publish it with the lock. */
		struct hz_span span = flight.span;
		size_t remaining = zero_in_flight(&span);

		hz_lock(&lock);
		flight.span = span;
		finish_flight(remaining, &b);
		hz_unlock(&lock);
		release_batch(&b);
	}
	return NULL;
}

/* Start the thread on the first free that could use it. Its signals are
 * blocked (they belong to the program), it is detached and never joined:
 * exit() ends it wherever it is, so it never delays exit. */
static void start_thread(void)
{
	if (__atomic_exchange_n(&thread_started, 1, __ATOMIC_ACQ_REL))
		return;
	if (hz_prim_thread_start(prezero_main, NULL, 256 << 10) != 0) {
		hz_info("could not start the pre-zero thread; calloc zeroes instead");
		cfg.prezero = PREZERO_SYNC;
	}
}

static void wake_thread(void)
{
	if (!__atomic_load_n(&thread_started, __ATOMIC_ACQUIRE)) {
		start_thread();
		return;
	}
	pthread_mutex_lock(&wake_mutex);
	wake_pending = 1;
	pthread_cond_signal(&wake_cond);
	pthread_mutex_unlock(&wake_mutex);
}

/* ---- the entry points ---- */

/* Zero the dirty start of a span for calloc, the block start last (it is
 * where the program writes first). At split_min and above, with the
 * thread awake and not starved, the thread takes chunks of it too: two
 * cores clear 256 MiB 1.8x faster than one here (37 against 20 GB/s,
 * bench/RESULTS.md, "two cores for one big clear"). */
static size_t zero_for_calloc(const struct hz_span *s, size_t dirty, enum hz_zero_method m)
{
	enum hz_zero_how how = zero_how(s);
	uintptr_t lo = s->start + HZ_ASSIST_CHUNK, end = s->start + dirty, tail;
	size_t chunks, written, helped = 0;

	if (m != HZ_ZERO_CLEAR || cfg.prezero != PREZERO_THREAD || cfg.split_min == 0 ||
	    dirty < cfg.split_min || dirty < 2 * HZ_ASSIST_CHUNK ||
	    !__atomic_load_n(&thread_started, __ATOMIC_ACQUIRE) ||
	    hz_prim_now_ns() < __atomic_load_n(&paused_until, __ATOMIC_RELAXED))
		return hz_zero_with(s->start, dirty, s->start, m, how);
	chunks = (dirty - HZ_ASSIST_CHUNK) / HZ_ASSIST_CHUNK;
	tail = lo + chunks * HZ_ASSIST_CHUNK;
	if (!hz_assist_open(lo, chunks, m, how))
		return hz_zero_with(s->start, dirty, s->start, m, how);
	wake_thread();
	written = tail < end ? hz_zero_with(tail, end - tail, 0, m, how) : 0;
	written += hz_assist_finish(&helped);
	written += hz_zero_with(s->start, HZ_ASSIST_CHUNK, s->start, m, how);
	hz_stats_add(assisted_bytes, helped);
	return written + helped;
}

static bool claimable(size_t size, size_t align)
{
	return flight.busy && !flight.claim && fits(&flight.span, size, align) &&
	       !wasteful(flight.span.granules, granules_for(size, flight.span.backing));
}

static void wait_for_claim(const struct claim *c)
{
	uint64_t deadline = hz_prim_now_ns() + cfg.unit / 4 * CLAIM_WAIT_NS_PER_4_BYTES;
	unsigned spins = 0;

	while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
		if (++spins <= CLAIM_SPINS) {
			hz_cpu_relax();
			continue;
		}
		if (hz_prim_now_ns() > deadline)
			return;
		hz_prim_sleep_ns(CLAIM_SLEEP_NS);
	}
}

/* Claim the in-flight span (called with the lock held; returns with it
 * free) and wait for the thread to stop at its next unit boundary. The wait
 * sleeps after a short spin: the thread runs at the lowest priority, and a
 * spinning caller on its CPU would keep it from finishing. Returns 0 with
 * the span and its dirty bytes from the start, or -EAGAIN when the thread
 * was too slow: the claim is then withdrawn under the lock (the thread
 * reads the claim only under it when it finishes, so it never writes to
 * this stack frame afterwards) and the span stays the thread's. */
static int claim_in_flight(struct hz_span *span, size_t *dirty)
{
	struct claim c = { .done = 0 };
	bool done;

	__atomic_store_n(&flight.claim, &c, __ATOMIC_RELEASE);
	hz_unlock(&lock);
	wait_for_claim(&c);
	hz_lock(&lock);
	done = __atomic_load_n(&c.done, __ATOMIC_ACQUIRE);
	if (!done)
		__atomic_store_n(&flight.claim, NULL, __ATOMIC_RELAXED);
	hz_unlock(&lock);
	if (!done) {
		hz_stats_add(takeovers_abandoned, 1);
		return -EAGAIN;
	}
	hz_stats_add(takeovers, 1);
	*span = c.span;
	*dirty = c.remaining;
	return 0;
}

int hz_recycle_alloc(size_t size, size_t align, bool zero, void **out)
{
	const struct config *c = config();
	bool dirty_ok = !zero || c->prezero != PREZERO_OFF;
	bool may_claim = true;
	struct batch b = { .count = 0 };
	struct hz_span span;
	size_t dirty = 0;
	int i;

	/* Larger than the reservation: nothing can serve it, and rounding it
	 * up to granules (granules_for) would wrap around to a small size
	 * that a cached span fits (malloc(SIZE_MAX) returned 0 bytes). */
	if (size > hz_reservation.end - hz_reservation.start)
		return -ENOMEM;
	if (c->cache_max == 0)
		return hz_blocks_alloc(size, align, out);
retry:
	hz_lock(&lock);
	/* Keep about two of the largest recent callocs clean. */
	if (zero && calloc_demand < 2 * size)
		calloc_demand = 2 * size;
	decay(&b, hz_prim_now_ns());
	i = pick(size, align, zero, dirty_ok);
	if (i >= 0 && (!zero || entries[i].clean || !may_claim ||
		       !fits(&flight.span, size, align) || !flight.busy)) {
		struct entry e = take_for((unsigned)i, size, &b);

		span = e.span;
		dirty = e.clean ? 0 : hz_span_bytes(&span);
		hz_unlock(&lock);
	} else if (zero && may_claim && claimable(size, align)) {
		if (claim_in_flight(&span, &dirty) != 0) { /* unlocks */
			may_claim = false;
			goto retry;
		}
	} else if (i >= 0) {
		span = take_for((unsigned)i, size, &b).span;
		dirty = hz_span_bytes(&span);
		hz_unlock(&lock);
	} else {
		hz_unlock(&lock);
		release_batch(&b);
		hz_stats_add(cache_misses, 1);
		return hz_blocks_alloc(size, align, out); /* fresh: zero */
	}
	release_batch(&b);
	hz_stats_add(cache_hits, 1);
	if (zero && dirty > 0) {
		uint64_t t0 = hz_prim_now_ns();
		enum hz_zero_method m = hz_zero_choose(span.start, dirty, zero_how(&span));

		hz_stats_add(cleared_bytes, zero_for_calloc(&span, dirty, m));
		hz_stats_add(clear_ns, hz_prim_now_ns() - t0);
		adapt_backing(&span, m);
	}
	hz_blocks_revive(&span);
	*out = (void *)span.start;
	return 0;
}

void hz_recycle_free(void *p)
{
	const struct config *c = config();
	struct batch b = { .count = 0 };
	struct entry e = { .clean = false };

	hz_blocks_retire(p, &e.span);
	if (hz_span_bytes(&e.span) > c->cache_max) {
		hz_blocks_release_span(&e.span);
		return;
	}
	if (c->zero_on_free) {
		hz_zero_range(e.span.start, hz_span_bytes(&e.span), 0, zero_how(&e.span));
		e.clean = true;
	}
	e.idle_since = hz_prim_now_ns();
	hz_lock(&lock);
	decay(&b, e.idle_since);
	add_entry(e, &b);
	hz_unlock(&lock);
	release_batch(&b);
	if (c->prezero == PREZERO_THREAD && !e.clean)
		wake_thread();
}

void hz_recycle_fork_prepare(void)
{
	fork_skipped = hz_lock_held_here(&lock);
	if (!fork_skipped)
		hz_lock(&lock);
}

void hz_recycle_fork_parent(void)
{
	if (!fork_skipped)
		hz_unlock(&lock);
}

/* The child has no pre-zero thread: what it had in flight goes back to the
 * cache as dirty (a claimer in the child, possible only when fork ran in a
 * signal handler, is told to zero all of it), and the thread is re-created
 * on the next free. */
void hz_recycle_fork_child(void)
{
	struct batch b = { .count = 0 };

	hz_lock_reset(&lock);
	hz_assist_fork_child();
	pthread_mutex_init(&wake_mutex, NULL);
	pthread_cond_init(&wake_cond, NULL);
	thread_started = 0;
	wake_pending = 0;
	if (flight.busy) {
		if (flight.claim) {
			flight.claim->span = flight.span;
			flight.claim->remaining = hz_span_bytes(&flight.span);
			__atomic_store_n(&flight.claim->done, 1, __ATOMIC_RELEASE);
		} else {
			add_entry((struct entry){ flight.span, hz_prim_now_ns(), false }, &b);
		}
		flight.busy = false;
	}
	release_batch(&b);
}

#ifdef HZ_TEST_CORE
/* ---- draining and consistency checks (the test core only) ---- */

void hz_recycle_drain(void)
{
	for (;;) {
		struct batch b = { .count = 0 };
		bool busy;

		hz_lock(&lock);
		while (entry_count > 0 && b.count < RELEASE_BATCH) {
			struct entry e = take_entry(entry_count - 1);

			release_later(&b, &e.span);
		}
		busy = flight.busy;
		hz_unlock(&lock);
		release_batch(&b);
		if (!busy && __atomic_load_n(&entry_count, __ATOMIC_RELAXED) == 0)
			return;
		if (busy) /* the thread gives its span back within one unit */
			hz_prim_sleep_ns(CLAIM_SLEEP_NS);
	}
}

static int check_entry(unsigned i, struct hz_recycle_census *c)
{
	const struct hz_span *s = &entries[i].span;

	if (s->backing >= HZ_BACKING_COUNT || hz_blocks_check_span(s) != 0)
		return -EUCLEAN;
	for (unsigned j = 0; j < i; j++) {
		const struct hz_span *t = &entries[j].span;

		if (s->start < t->start + hz_span_bytes(t) && t->start < s->start + hz_span_bytes(s)) {
			hz_warn("check: cached spans %p and %p overlap", (void *)s->start,
				(void *)t->start);
			return -EUCLEAN;
		}
	}
	if (flight.busy && s->start < flight.span.start + hz_span_bytes(&flight.span) &&
	    flight.span.start < s->start + hz_span_bytes(s)) {
		hz_warn("check: cached span %p overlaps the one in flight", (void *)s->start);
		return -EUCLEAN;
	}
	c->spans++;
	c->cached_bytes += hz_span_bytes(s);
	c->clean_bytes += entries[i].clean ? hz_span_bytes(s) : 0;
	return 0;
}

static int check_totals(const struct hz_recycle_census *c)
{
	uint64_t stat = __atomic_load_n(&hz_stats.cache_bytes, __ATOMIC_RELAXED);

	if (c->cached_bytes != cached_bytes || c->clean_bytes != clean_bytes ||
	    stat != cached_bytes) {
		hz_warn("check: cache holds %zu bytes (%zu clean), counted %zu (%zu), stats %llu",
			c->cached_bytes, c->clean_bytes, cached_bytes, clean_bytes,
			(unsigned long long)stat);
		return -EUCLEAN;
	}
	if (entry_count > MAX_ENTRIES || (entry_count > 0 && cached_bytes > cfg.cache_max)) {
		hz_warn("check: %u spans, %zu bytes over a %zu-byte cache", entry_count,
			cached_bytes, cfg.cache_max);
		return -EUCLEAN;
	}
	return 0;
}

int hz_recycle_check(struct hz_recycle_census *c,
		     void (*visit)(const struct hz_span *span, bool clean, void *ctx),
		     void *ctx)
{
	int ret = 0;

	*c = (struct hz_recycle_census){ 0, 0, 0, 0 };
	hz_lock(&lock);
	if (flight.busy && hz_blocks_check_span(&flight.span) != 0)
		ret = -EUCLEAN;
	c->in_flight_bytes = flight.busy ? hz_span_bytes(&flight.span) : 0;
	for (unsigned i = 0; i < entry_count && ret == 0; i++)
		ret = check_entry(i, c);
	if (ret == 0)
		ret = check_totals(c);
	for (unsigned i = 0; i < entry_count && ret == 0 && visit; i++)
		visit(&entries[i].span, entries[i].clean, ctx);
	hz_unlock(&lock);
	return ret;
}
#endif /* HZ_TEST_CORE */
