/* Fault injection at the system-call layer. See fault.h.
 *
 * Built only into the test copy of the core (tests/fault/meson.build), with
 * -DHZ_FAULT_INJECTION. Everything is lock-free: the pre-zero thread makes
 * prim calls while a test arms and disarms rules. */
#include "fault.h"

#ifdef HZ_FAULT_INJECTION

#include <errno.h>

struct slot {
	struct hz_prim_fault_rule rule;
	int armed;             /* published with release once rule is written */
	unsigned long seen;    /* matching calls */
	unsigned long fired;
};

static struct slot slots[HZ_PRIM_FAULT_RULES];
static unsigned long calls[HZ_CALL_COUNT];
static size_t failed_bytes[HZ_CALL_COUNT];
static uint64_t clock_skew;

static const char *const names[HZ_CALL_COUNT] = {
	[HZ_CALL_MMAP] = "mmap",
	[HZ_CALL_MUNMAP] = "munmap",
	[HZ_CALL_MREMAP] = "mremap",
	[HZ_CALL_MADVISE] = "madvise",
	[HZ_CALL_MPROTECT] = "mprotect",
	[HZ_CALL_MINCORE] = "mincore",
	[HZ_CALL_PRCTL] = "prctl",
	[HZ_CALL_SYSINFO] = "sysinfo",
	[HZ_CALL_SCHED] = "sched",
	[HZ_CALL_GETRLIMIT] = "getrlimit",
	[HZ_CALL_READ_FILE] = "read_file",
	[HZ_CALL_OPEN] = "open",
	[HZ_CALL_READ] = "read",
	[HZ_CALL_WRITE] = "write",
	[HZ_CALL_CLOSE] = "close",
	[HZ_CALL_DUP] = "dup",
	[HZ_CALL_FSTAT] = "fstat",
	[HZ_CALL_CACHESTAT] = "cachestat",
	[HZ_CALL_FADVISE] = "fadvise",
	[HZ_CALL_UNAME] = "uname",
	[HZ_CALL_MUNLOCK] = "munlock",
	[HZ_CALL_PAGEMAP] = "pagemap_scan",
	[HZ_CALL_UNSHARE] = "files_unshare",
};

const char *hz_prim_fault_call_name(enum hz_prim_call call)
{
	return (unsigned)call < HZ_CALL_COUNT ? names[call] : "?";
}

/* Does slot s make this call fail? Counts the call when it matches. */
static int check(struct slot *s, enum hz_prim_call call, long arg)
{
	unsigned long n;

	if (!__atomic_load_n(&s->armed, __ATOMIC_ACQUIRE) || s->rule.call != call ||
	    (s->rule.match_arg && s->rule.arg != arg))
		return 0;
	n = __atomic_add_fetch(&s->seen, 1, __ATOMIC_RELAXED);
	if (n != s->rule.nth && !(s->rule.every && n > s->rule.nth))
		return 0;
	__atomic_add_fetch(&s->fired, 1, __ATOMIC_RELAXED);
	return -s->rule.error;
}

int hz_prim_fault(enum hz_prim_call call, long arg, size_t len)
{
	int err = 0;

	if ((unsigned)call >= HZ_CALL_COUNT)
		return 0;
	__atomic_add_fetch(&calls[call], 1, __ATOMIC_RELAXED);
	/* Every matching rule counts the call, even once one has fired. */
	for (unsigned i = 0; i < HZ_PRIM_FAULT_RULES; i++) {
		int e = check(&slots[i], call, arg);

		if (err == 0)
			err = e;
	}
	if (err)
		__atomic_add_fetch(&failed_bytes[call], len, __ATOMIC_RELAXED);
	return err;
}

int hz_prim_fault_arm(const struct hz_prim_fault_rule *rule)
{
	if ((unsigned)rule->call >= HZ_CALL_COUNT || rule->error <= 0 || rule->nth == 0)
		return -EINVAL;
	for (int i = 0; i < HZ_PRIM_FAULT_RULES; i++) {
		struct slot *s = &slots[i];

		if (__atomic_load_n(&s->armed, __ATOMIC_ACQUIRE))
			continue;
		s->rule = *rule;
		__atomic_store_n(&s->seen, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->fired, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->armed, 1, __ATOMIC_RELEASE);
		return i;
	}
	return -ENOSPC;
}

void hz_prim_fault_disarm(void)
{
	for (int i = 0; i < HZ_PRIM_FAULT_RULES; i++)
		__atomic_store_n(&slots[i].armed, 0, __ATOMIC_RELEASE);
}

unsigned long hz_prim_fault_seen(int slot)
{
	if (slot < 0 || slot >= HZ_PRIM_FAULT_RULES)
		return 0;
	return __atomic_load_n(&slots[slot].seen, __ATOMIC_RELAXED);
}

unsigned long hz_prim_fault_fired(int slot)
{
	if (slot < 0 || slot >= HZ_PRIM_FAULT_RULES)
		return 0;
	return __atomic_load_n(&slots[slot].fired, __ATOMIC_RELAXED);
}

size_t hz_prim_fault_failed_bytes(enum hz_prim_call call)
{
	if ((unsigned)call >= HZ_CALL_COUNT)
		return 0;
	return __atomic_load_n(&failed_bytes[call], __ATOMIC_RELAXED);
}

unsigned long hz_prim_fault_calls(enum hz_prim_call call)
{
	if ((unsigned)call >= HZ_CALL_COUNT)
		return 0;
	return __atomic_load_n(&calls[call], __ATOMIC_RELAXED);
}

void hz_prim_fault_reset_counts(void)
{
	for (unsigned i = 0; i < HZ_CALL_COUNT; i++) {
		__atomic_store_n(&calls[i], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&failed_bytes[i], 0, __ATOMIC_RELAXED);
	}
}

void hz_prim_fault_advance_clock(uint64_t ns)
{
	__atomic_add_fetch(&clock_skew, ns, __ATOMIC_RELAXED);
}

uint64_t hz_prim_fault_clock_skew(void)
{
	return __atomic_load_n(&clock_skew, __ATOMIC_RELAXED);
}

void (*hz_prim_fault_put_back_hook)(uintptr_t start, size_t len);

void hz_prim_fault_before_put_back(uintptr_t start, size_t len)
{
	void (*hook)(uintptr_t, size_t) =
		__atomic_load_n(&hz_prim_fault_put_back_hook, __ATOMIC_ACQUIRE);

	if (hook != NULL)
		hook(start, len);
}

#endif /* HZ_FAULT_INJECTION */
