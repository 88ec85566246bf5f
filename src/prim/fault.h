/* Fault injection at the system-call layer, for tests.
 *
 * Every function in prim/ that talks to the kernel starts with
 *
 *	int err = hz_prim_fault(HZ_CALL_MMAP, flags, len);
 *	if (err)
 *		return err;
 *
 * In the shipped library hz_prim_fault is a constant 0 and the check
 * compiles away. Built with -DHZ_FAULT_INJECTION (tests/fault builds a
 * second copy of the core that way), a test can arm rules that make the n-th
 * matching call, or every one from the n-th on, fail with a chosen errno
 * value, as if the kernel had refused it; errno is left alone, as prim
 * functions promise. The layer also counts the calls of each kind, so a test
 * can walk every call site of a workload one failure at a time, and it can
 * move the library's clock forward (hz_prim_now_ns) so time-based decisions
 * (cache decay) need no sleeping.
 *
 * The memory operations of memory.h (reserve, commit, map aligned...) are
 * built on these calls and fail through them, one step at a time: a rule
 * on munmap fails the trim of a map-aligned, one on mmap the put-back after
 * a failed commit. Rules on whole operations would reach fewer failures. */
#ifndef HZ_PRIM_FAULT_H
#define HZ_PRIM_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kinds of kernel call, one per system call (or /proc and /sys read)
 * that prim/ makes. Functions built on others (hz_prim_read_u64, the
 * hz_os() fill, hz_prim_open_maps...) fail through the call they make. */
enum hz_prim_call {
	HZ_CALL_MMAP,      /* arg: the mmap flags */
	HZ_CALL_MUNMAP,
	HZ_CALL_MREMAP,    /* hz_prim_mremap and hz_prim_move_mapping */
	HZ_CALL_MADVISE,   /* arg: the advice */
	HZ_CALL_MPROTECT,
	HZ_CALL_MINCORE,
	HZ_CALL_PRCTL,     /* arg: PR_SET_VMA_ANON_NAME (naming; -EINVAL is "no
			    * CONFIG_ANON_VMA_NAME") or PR_GET_THP_DISABLE */
	HZ_CALL_SYSINFO,   /* hz_prim_memory */
	HZ_CALL_SCHED,     /* hz_prim_lower_thread_priority */
	HZ_CALL_GETRLIMIT, /* a failure reads as "unlimited", as a real one would */
	HZ_CALL_READ_FILE, /* hz_prim_read_file: small /proc and /sys files */
	HZ_CALL_OPEN,      /* open_read, create_file, open_append */
	HZ_CALL_READ,      /* read and pread */
	HZ_CALL_WRITE,
	HZ_CALL_CLOSE,
	HZ_CALL_DUP,
	HZ_CALL_FSTAT,
	HZ_CALL_CACHESTAT, /* hz_prim_cachestat and the feature probe; -ENOSYS is "before 6.5" */
	HZ_CALL_FADVISE,
	HZ_CALL_UNAME,
	HZ_CALL_MUNLOCK,   /* hz_prim_reset_reservation, freeing a block the program changed */
	HZ_CALL_PAGEMAP,   /* the PAGEMAP_SCAN ioctl (pagemap.h); a failure falls back to mincore */
	HZ_CALL_UNSHARE,   /* hz_prim_files_unshare; a failure keeps the file table shared */
	HZ_CALL_COUNT
};

#ifdef HZ_FAULT_INJECTION

/* A rule: the nth call of kind call (counting from 1, and only calls whose
 * arg equals arg when match_arg is set) fails with -error; with every, so
 * does each matching call after it. */
struct hz_prim_fault_rule {
	enum hz_prim_call call;
	unsigned long nth;
	int error;   /* a positive errno value */
	bool every;
	bool match_arg;
	long arg;
};

/* At most this many rules are armed at once. */
#define HZ_PRIM_FAULT_RULES 8

/* The hooks prim/ calls: 0, or the negative errno value of an armed rule
 * that fires; and how far the clock was moved (ns). */
int hz_prim_fault(enum hz_prim_call call, long arg, size_t len);
uint64_t hz_prim_fault_clock_skew(void);

/* Arm a rule; returns its slot (for the counters below), -EINVAL for a bad
 * rule or -ENOSPC. Rules may be armed while other threads make calls. */
int hz_prim_fault_arm(const struct hz_prim_fault_rule *rule);

/* Disarm every rule. Their counters stay readable until their slot is
 * armed again; the per-kind call counters and the clock are kept. */
void hz_prim_fault_disarm(void);

/* Calls a rule matched so far (fired or not), and calls it made fail. */
unsigned long hz_prim_fault_seen(int slot);
unsigned long hz_prim_fault_fired(int slot);

/* Sum of the len arguments of the calls made to fail, per kind: what a
 * failed munmap left mapped. */
size_t hz_prim_fault_failed_bytes(enum hz_prim_call call);

/* Calls of each kind made since the start (or the last reset), failed or
 * not. */
unsigned long hz_prim_fault_calls(enum hz_prim_call call);
void hz_prim_fault_reset_counts(void);

/* Move hz_prim_now_ns forward by ns. */
void hz_prim_fault_advance_clock(uint64_t ns);

/* "mmap", "madvise"...: for messages. */
const char *hz_prim_fault_call_name(enum hz_prim_call call);

/* Called, when set, right before prim puts a reservation back over a range
 * that may be a hole (src/prim/memory.c: after memory was moved away, or
 * after a commit failed): a test maps something there, as another thread
 * could at that moment, or unmaps the range first, as kernels before 6.12
 * do when an mmap over it fails. */
extern void (*hz_prim_fault_put_back_hook)(uintptr_t start, size_t len);
void hz_prim_fault_before_put_back(uintptr_t start, size_t len);

#else

static inline void hz_prim_fault_before_put_back(uintptr_t start, size_t len)
{
	(void)start;
	(void)len;
}

static inline int hz_prim_fault(enum hz_prim_call call, long arg, size_t len)
{
	(void)call;
	(void)arg;
	(void)len;
	return 0;
}

static inline uint64_t hz_prim_fault_clock_skew(void)
{
	return 0;
}

#endif /* HZ_FAULT_INJECTION */

#endif /* HZ_PRIM_FAULT_H */
