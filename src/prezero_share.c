/* A calloc's own clear of a large dirty block, shared with the pre-zero
 * thread chunk by chunk: two cores for one clear; and what zeroing a span
 * teaches about its backing. See prezero.h (and prezero.c for the hand-off
 * as a whole).
 *
 * The caller opens one shared clear at a time; the thread joins it when
 * it comes by (hz_prezero_share_help). The caller never waits for a chunk
 * the thread has not started, and waits for the one it is in with a
 * deadline; when late it leaves the block to the thread (see
 * finish_share). */
#include "prezero.h"

#include <errno.h>
#include <sys/mman.h>

#include "backing.h"
#include "classes.h"
#include "prim/prim.h"
#include "range.h"
#include "stats.h"

/* 8 MiB: each side takes this much at a time. A 256 MiB clear is 32
 * chunks, and the caller's last wait for the thread is at most one chunk
 * (0.4 ms at 20 GB/s). */
#define SHARE_CHUNK ((size_t)8 << 20)

/* A phase, and SHARE_HELPER while the thread is in its chunk loop. The
 * caller opens (IDLE -> OPEN) and closes (-> CLOSED, then IDLE once the
 * thread is out); when the thread is late it leaves the block to the
 * thread (CLOSED -> LEFT), and the thread sets IDLE once out. */
enum { SHARE_IDLE, SHARE_OPEN, SHARE_CLOSED, SHARE_LEFT, SHARE_PHASE = 3, SHARE_HELPER = 4 };

struct share {
	int state;
	struct hz_range body; /* whole chunks, shared */
	size_t chunks;        /* in body */
	enum hz_zero_method method;
	enum hz_zero_how how;
	size_t next;         /* next chunk index, counted from the top */
	size_t helped;       /* bytes the thread wrote */
	bool lost;           /* fork child: the thread's chunk never finished */
	struct hz_span span; /* the caller's block */
};

static struct share share;
/* A block a late caller left to the thread, until it is in a job. */
static struct hz_span kept;
static int keeping;

static size_t zero_part(struct hz_range r, uintptr_t hint, enum hz_zero_method m,
			enum hz_zero_how how)
{
	return hz_zero_with(r.start, hz_range_len(r), hint, m, how);
}

/* Chunks are handed out by one counter, so no chunk is cleared twice or
 * missed; once it passes the last chunk, a late taker takes nothing. From
 * the top down, so the caller's last chunks are nearest the block start. */
static size_t take_chunks(bool thread)
{
	size_t written = 0;

	for (;;) {
		size_t i = __atomic_fetch_add(&share.next, 1, __ATOMIC_SEQ_CST);

		if (i >= share.chunks)
			return written;
		uintptr_t at = share.body.end - (i + 1) * SHARE_CHUNK;

		if (thread)
			HZ_PREZERO_HOOK(HZ_PREZERO_AT_CHUNK);
		written += hz_zero_with(at, SHARE_CHUNK, 0, share.method, share.how);
	}
}

void hz_prezero_share_help(void)
{
	int w = SHARE_OPEN;
	size_t written;

	/* One kept block at a time: one left while another waits for a job
	 * slot would take its place, and the first would be lost for good. */
	if (__atomic_load_n(&keeping, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&share.state, __ATOMIC_ACQUIRE) != SHARE_OPEN ||
	    !__atomic_compare_exchange_n(&share.state, &w, SHARE_OPEN | SHARE_HELPER, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	written = take_chunks(true);
	__atomic_add_fetch(&share.helped, written, __ATOMIC_RELAXED);
	w = __atomic_load_n(&share.state, __ATOMIC_ACQUIRE);
	for (;;) {
		bool left = (w & SHARE_PHASE) == SHARE_LEFT;
		/* share.span stays until the phase is IDLE, which only the
		 * thread sets once left. */
		struct hz_span block = share.span;

		if (__atomic_compare_exchange_n(&share.state, &w,
						left ? SHARE_IDLE : w & ~SHARE_HELPER, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			if (left) {
				kept = block;
				__atomic_store_n(&keeping, 1, __ATOMIC_RELEASE);
			}
			return;
		}
	}
}

static bool open_share(const struct hz_span *s, struct hz_range body, enum hz_zero_method m,
		       enum hz_zero_how how)
{
	int idle = SHARE_IDLE;

	/* CLOSED while it is being filled in: the thread joins OPEN only. */
	if (!__atomic_compare_exchange_n(&share.state, &idle, SHARE_CLOSED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return false;
	share.body = body;
	share.chunks = hz_range_chunks(body, SHARE_CHUNK);
	share.method = m;
	share.how = how;
	share.helped = 0;
	share.lost = false;
	share.span = *s;
	__atomic_store_n(&share.next, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&share.state, SHARE_OPEN, __ATOMIC_SEQ_CST);
	return true;
}

/* The caller's share: take chunks until none is left, close, and wait for
 * the chunk the thread is in. Returns -EAGAIN when it left the block to the
 * thread, else 0 with the bytes it and the thread wrote. */
static int finish_share(size_t *mine, size_t *helped)
{
	int w = __atomic_load_n(&share.state, __ATOMIC_ACQUIRE);

	*mine = take_chunks(false);
	while (!__atomic_compare_exchange_n(&share.state, &w, (w & SHARE_HELPER) | SHARE_CLOSED,
					    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	if (!hz_prezero_wait(&share.state, SHARE_HELPER, 0,
			     hz_prezero_patience_ns(SHARE_CHUNK))) {
		w = SHARE_CLOSED | SHARE_HELPER;
		if (__atomic_compare_exchange_n(&share.state, &w, SHARE_LEFT | SHARE_HELPER, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			hz_stats_add(takeovers_abandoned, 1);
			return -EAGAIN;
		}
	}
	*helped = __atomic_load_n(&share.helped, __ATOMIC_RELAXED);
	if (share.lost) /* a fork child: redo what the thread had */
		*mine += zero_part(share.body, 0, share.method, share.how);
	__atomic_store_n(&share.state, SHARE_IDLE, __ATOMIC_RELEASE);
	return 0;
}

/* At split_min and above, with the thread awake and not starved, the
 * thread takes chunks too: two cores clear 256 MiB 1.8x faster than one
 * here (37 against 20 GB/s, bench/RESULTS.md, "two cores for one big
 * clear"). The caller clears the tail first and the first chunk, where the
 * program writes first, last. */
int hz_prezero_zero_for_calloc(const struct hz_span *s, size_t dirty, enum hz_zero_method m,
			       size_t *written)
{
	const struct hz_cache_policy *p = hz_cache_policy();
	enum hz_zero_how how = hz_span_zero_how(s);
	struct hz_range block = hz_range_make(s->range.start, dirty), head, body, tail;
	size_t mine, helped = 0;

	if (m == HZ_ZERO_DROP || p->split_min == 0 || dirty < p->split_min ||
	    dirty < 2 * SHARE_CHUNK || !hz_prezero_can_help()) {
		*written = zero_part(block, block.start, m, how);
		return 0;
	}
	/* The first chunk, the whole chunks after it, and the rest. */
	hz_range_split_at(block, block.start + SHARE_CHUNK, &head, &body);
	hz_range_split_at(body, body.start + hz_range_chunks(body, SHARE_CHUNK) * SHARE_CHUNK,
			  &body, &tail);
	if (!open_share(s, body, m, how)) {
		*written = zero_part(block, block.start, m, how);
		return 0;
	}
	hz_prezero_wake();
	*written = hz_range_empty(tail) ? 0 : zero_part(tail, 0, m, how);
	if (finish_share(&mine, &helped) != 0)
		return -EAGAIN;
	*written += mine + zero_part(head, head.start, m, how);
	hz_stats_add(assisted_bytes, helped);
	*written += helped;
	return 0;
}

bool hz_prezero_share_kept(struct hz_span *span, bool take)
{
	if (!__atomic_load_n(&keeping, __ATOMIC_ACQUIRE))
		return false;
	*span = kept;
	if (take)
		__atomic_store_n(&keeping, 0, __ATOMIC_RELEASE);
	return true;
}

/* The child has no pre-zero thread: a clear it was helping with is the
 * caller's alone (a caller in the child exists only when fork ran in a
 * signal handler; it redoes the thread's chunks), and a block left to it
 * is the child's to put back. */
bool hz_prezero_share_fork_child(struct hz_span *left)
{
	int w = share.state;
	bool had = hz_prezero_share_kept(left, true);

	if ((w & SHARE_PHASE) == SHARE_LEFT) {
		*left = share.span;
		had = true;
		share.state = SHARE_IDLE;
	} else if (w & SHARE_HELPER) {
		share.lost = true;
		share.state = w & ~SHARE_HELPER;
	}
	return had;
}

/* Sparse use earns 4 KiB pages: a block whose last user touched under 1/16
 * of it is dropped (hz_zero_choose) and gets MADV_NOHUGEPAGE, so the next
 * sparse user faults 4 KiB pages instead of zeroing 2 MiB per touch and the
 * RSS stays what glibc's would be. Dense use (zero.c: a prefix, or half
 * or more) earns THP back, and so does a lazy block's (it starts on 4 KiB
 * pages, backing.c): the next user's faults beyond what is resident are
 * then one per 2 MiB, not 512. Scattered use in between changes nothing.
 * Sparse and dense use are the evidence for the next fresh block of the
 * size (the ledger, classes.h). */
void hz_prezero_adapt_backing(struct hz_span *s, enum hz_zero_method m)
{
	/* Evidence only where the choice reflects residency: hugetlb spans are
	 * always cleared, and so is every span where mincore cannot be
	 * trusted (emulators). */
	if (hz_span_zero_how(s) == HZ_ZERO_ANY && hz_zero_residency_trusted() &&
	    m != HZ_ZERO_CLEAR_PART)
		hz_class_note_dense(hz_span_bytes(s), m == HZ_ZERO_CLEAR);
	if (m == HZ_ZERO_DROP && s->backing == HZ_BACKING_THP &&
	    hz_prim_madvise((void *)s->range.start, hz_span_bytes(s), MADV_NOHUGEPAGE) == 0) {
		s->backing = HZ_BACKING_SMALL;
		hz_stats_add(thp_demoted, 1);
	} else if (m == HZ_ZERO_CLEAR && s->backing == HZ_BACKING_SMALL &&
		   hz_backing_thp_allowed() &&
		   hz_prim_madvise((void *)s->range.start, hz_span_bytes(s), MADV_HUGEPAGE) == 0) {
		s->backing = HZ_BACKING_THP;
		hz_stats_add(thp_promoted, 1);
	}
}
