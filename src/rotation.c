/* The two-block rotation. See rotation.h.
 *
 * Measured on the AMD EPYC VM (bench/RESULTS.md, "The two-block rotation"): a
 * 64 MiB calloc + write-all + free loop took 4.0-4.9 ms a cycle with the
 * clear taken over, 3.3-3.7 ms when the program's free order kept a second
 * block (the rotation emulated from outside), against 2.6-3.0 ms for the
 * write alone; a clear on the other core slowed that write by 6-13% then,
 * by up to 50% at other times (bench-limits pair). Hence a trial per
 * class, with the program's own cycle as the measure, rather than a rule. */
#include "rotation.h"

#include <string.h>

#include "stats.h"
#include "times.h"

/* Periods in each sample. */
#define RUN HZ_ROTATION_RUN
/* Callocs in a row that had to clear before a class's first trial. A
 * spare costs what a fresh block costs to fault in, 20-35 clears of it
 * here (fresh memory faults at about 1.3 GB/s on this VM, kept memory
 * clears at 25-50 GB/s): a loop that has cleared 32 times is likely to
 * run as long again, which repays it. Later trials wait RUN. */
#define FIRST_RUN 32
/* The spare stays when its median period is below this share of the one
 * without it, in percent: 5% pays a fresh block's faults back within a few
 * hundred cycles, and below it the two medians are within noise. */
#define WIN_PERCENT 95
/* Callocs before a won trial is checked again, and after a lost one
 * before the next: doubled each time, up to MAX_WAIT. 256: a check (or a
 * new trial) costs a fresh spare, 20-35 clears, so it adds at most 14% to
 * the first 256 callocs and half as much to each later wait. */
#define FIRST_WAIT 256
#define MAX_WAIT 65536

/* A row's state (struct hz_class_rotation's state); WATCHING is 0, the
 * state of a row the ledger has just set up. */
enum state {
	WATCHING, /* one block: counting callocs in a row that clear */
	TRIAL,    /* the spare is out: sampling */
	ON,       /* the spare won: kept until the recheck */
	DROPPING, /* the spare goes back at the next free */
};

static uint32_t median(const uint32_t *v, unsigned n)
{
	uint32_t s[RUN];

	memcpy(s, v, n * sizeof(*s));
	for (unsigned i = 1; i < n; i++) /* insertion sort: n <= RUN */
		for (unsigned j = i; j > 0 && s[j - 1] > s[j]; j--) {
			uint32_t t = s[j];

			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	return s[n / 2];
}

static uint32_t doubled(uint32_t wait, uint32_t first)
{
	return wait == 0 ? first : wait >= MAX_WAIT / 2 ? MAX_WAIT : wait * 2;
}

static void enter(struct hz_class_rotation *k, enum state s)
{
	k->state = (uint8_t)s;
	k->n = 0;
	k->run = 0;
	k->cycles = 0;
}

/* A calloc that would clear: whether its class starts a trial with it. */
static bool wants_spare(struct hz_class_rotation *k)
{
	if (k->state != WATCHING || k->n < RUN || k->run < (k->tried ? RUN : FIRST_RUN) ||
	    k->cycles < k->retry)
		return false;
	k->without = median(k->sample, RUN);
	k->tried = true;
	enter(k, TRIAL);
	k->skip = true;
	hz_stats_add(rotation_trials, 1);
	return true;
}

/* A trial's sample is full: keep the spare, or give it back. */
static void decide(struct hz_class_rotation *k)
{
	uint32_t with = median(k->sample, RUN);

	if ((uint64_t)with * 100 < (uint64_t)k->without * WIN_PERCENT) {
		k->recheck = doubled(k->recheck, FIRST_WAIT);
		k->retry = 0;
		enter(k, ON);
		return;
	}
	k->retry = doubled(k->retry, FIRST_WAIT);
	k->recheck = 0;
	hz_stats_add(rotation_lost, 1);
	enter(k, DROPPING);
}

/* "At once" is counted from the end of the program's last free, not from
 * the class's time of free: that free's wake of the thread is no time
 * the thread could clear in, and it cost up to 50 us on a VM where a wake
 * crosses to the other vCPU (the Xeon AMX VM), so counted from the free
 * no calloc ever came at once there, and every free woke the thread. */
static void served(struct hz_class_rotation *k, uint64_t now, enum hz_rotation_served how,
		   uint64_t after_free_ns)
{
	uint64_t period = k->last != 0 && now > k->last ? (now - k->last) / 1000 : 0;
	bool freed = k->freed_at > k->last;
	bool at_once = freed && after_free_ns < HZ_THREAD_WAKE_NS;

	if (freed && !at_once)
		hz_stats_add(callocs_late, 1);
	k->at_once = at_once ? k->at_once + (k->at_once < UINT32_MAX) : 0;
	k->last = now;
	if (k->cycles < UINT32_MAX)
		k->cycles++;
	switch ((enum state)k->state) {
	case WATCHING:
		if (how != HZ_ROT_CLEARS || period == 0 || period > UINT32_MAX) {
			k->n = 0; /* the run is broken */
			k->run = 0;
			return;
		}
		if (k->run < UINT32_MAX)
			k->run++;
		if (k->n == RUN) { /* the last RUN */
			for (unsigned i = 1; i < RUN; i++)
				k->sample[i - 1] = k->sample[i];
			k->n--;
		}
		k->sample[k->n++] = (uint32_t)period;
		return;
	case TRIAL:
		if (k->skip || period == 0 || period > UINT32_MAX) {
			k->skip = how == HZ_ROT_OTHER && k->skip; /* the spare itself */
			return;
		}
		k->sample[k->n++] = (uint32_t)period;
		if (k->n == RUN)
			decide(k);
		return;
	case ON:
		if (k->cycles >= k->recheck) {
			k->retry = 0;
			enter(k, DROPPING); /* without the spare again, then a new trial */
		}
		return;
	case DROPPING:
		return;
	}
}

bool hz_rotation_calloc(struct hz_class_rotation *k, uint64_t now, enum hz_rotation_served how,
			uintptr_t start, uint64_t after_free_ns, bool thread)
{
	bool spare;

	if (how == HZ_ROT_DIRTY)
		how = k->freed == start ? HZ_ROT_CLEARS : HZ_ROT_OTHER;
	/* Only a thread clears the span left behind. */
	spare = how == HZ_ROT_CLEARS && thread && wants_spare(k);

	served(k, now, spare ? HZ_ROT_OTHER : how, after_free_ns);
	return spare;
}

enum hz_rotation_free hz_rotation_freed(struct hz_class_rotation *k, uintptr_t start, uint64_t now,
					bool program_at_once)
{
	k->freed = start;
	k->freed_at = now;
	if (k->state == DROPPING) {
		enter(k, WATCHING);
		return HZ_ROT_FREE_DROP;
	}
	return k->state == WATCHING && (k->at_once >= RUN || program_at_once) ? HZ_ROT_FREE_AT_ONCE
									     : HZ_ROT_FREE_KEEP;
}
